//! The simulated scheduler's API client rate limit: client-go's token bucket
//! (`flowcontrol.NewTokenBucketRateLimiter`, `golang.org/x/time/rate`), on the virtual
//! clock. kube-scheduler's binds, and its preemption's calls, wait for its tokens: at its
//! default 50 requests a second, bursts of 100, a burst of 1,000 pods takes 18 s to bind
//! however fast the scheduler decides (recorded with real kube-scheduler v1.36.2,
//! `testdata/burst-1.36`).

use std::time::Duration;

use gantry_framework::config::ClientRate;

/// A token bucket that starts full, as `rate.NewLimiter`'s.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    per_second: f64,
    burst: f64,
    tokens: f64,
    last: Duration,
}

impl TokenBucket {
    /// The bucket of `rate`; `None` when it sets no limit.
    pub fn new(rate: ClientRate) -> Option<TokenBucket> {
        rate.limits().then(|| TokenBucket {
            per_second: f64::from(rate.qps),
            burst: f64::from(rate.burst),
            tokens: f64::from(rate.burst),
            last: Duration::ZERO,
        })
    }

    /// When a request made at `now` may go out: takes its token, owing it if the bucket
    /// is empty (`rate.Limiter.reserveN`: requests are served in the order they ask).
    pub fn reserve(&mut self, now: Duration) -> Duration {
        let elapsed = now.saturating_sub(self.last).as_secs_f64();
        let tokens = (self.tokens + elapsed * self.per_second).min(self.burst) - 1.0;
        self.last = self.last.max(now);
        self.tokens = tokens;
        if tokens >= 0.0 {
            return now;
        }
        // As `durationFromTokens`: whole nanoseconds, truncated.
        let wait = 1e9 * (-tokens / self.per_second);
        now.saturating_add(Duration::from_nanos(wait as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(qps: f32, burst: u32) -> TokenBucket {
        TokenBucket::new(ClientRate { qps, burst }).unwrap()
    }

    /// `rate`'s own cases (`TestSimultaneousRequests`, `TestReserve`): a full bucket
    /// serves `burst` at once, then one per `1/qps`, in order; time refills it.
    #[test]
    fn a_full_bucket_serves_its_burst_then_its_rate() {
        let mut b = bucket(50.0, 100);
        let at: Vec<Duration> = (0..103).map(|_| b.reserve(Duration::ZERO)).collect();
        assert!(at[..100].iter().all(|t| t.is_zero()), "{at:?}");
        assert_eq!(
            at[100..],
            [
                Duration::from_millis(20),
                Duration::from_millis(40),
                Duration::from_millis(60)
            ]
        );
        // A second later, 50 tokens came back, three of them owed.
        let later: Vec<Duration> = (0..48).map(|_| b.reserve(Duration::from_secs(1))).collect();
        assert!(later[..47].iter().all(|t| *t == Duration::from_secs(1)));
        assert_eq!(later[47], Duration::from_millis(1020));
        // Refilled to the burst, never above it.
        let mut b = bucket(10.0, 2);
        let idle: Vec<Duration> = (0..3).map(|_| b.reserve(Duration::from_secs(60))).collect();
        assert_eq!(
            idle,
            [
                Duration::from_secs(60),
                Duration::from_secs(60),
                Duration::from_millis(60_100)
            ]
        );
    }

    #[test]
    fn a_negative_qps_sets_no_limit() {
        assert!(
            TokenBucket::new(ClientRate {
                qps: -1.0,
                burst: 100
            })
            .is_none()
        );
    }
}
