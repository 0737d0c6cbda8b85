//! How long a bind takes in the simulation's virtual time.
//!
//! A real bind is a `pods/binding` POST: an API server round trip plus an etcd write (a
//! raft commit: a peer round trip and a WAL fsync on a quorum). etcd's own guidance puts the
//! WAL fsync p99 under 10 ms and the backend commit p99 under 25 ms on healthy disks, and
//! Kubernetes' API-call SLO bounds a mutating call's p99 at 1 s. The default model is a
//! log-normal with a median of 5 ms and a p99 of 25 ms, cut at 1 s: a few milliseconds
//! with a tail. It is a model, not a measurement; `--bind-latency-ms` fixes the latency
//! instead. Draws come from a seeded generator and are rounded to the microsecond, so a
//! seed gives the same latencies in every run.

use std::time::Duration;

use gantry_scheduler::Rng;

/// z-score of the 99th percentile of a standard normal distribution.
const Z_P99: f64 = 2.326_347_874;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BindLatency {
    /// Every bind takes this long.
    Fixed(Duration),
    /// Log-normal, given by its median and 99th percentile, never above `max`.
    LogNormal {
        median: Duration,
        p99: Duration,
        max: Duration,
    },
}

impl BindLatency {
    /// An API round trip plus an etcd write: median 5 ms, p99 25 ms, at most 1 s.
    pub const REALISTIC: BindLatency = BindLatency::LogNormal {
        median: Duration::from_millis(5),
        p99: Duration::from_millis(25),
        max: Duration::from_secs(1),
    };

    /// One bind's latency.
    pub fn sample(&self, rng: &mut Rng) -> Duration {
        match *self {
            BindLatency::Fixed(d) => d,
            BindLatency::LogNormal { median, p99, max } => {
                let median = median.as_secs_f64();
                let sigma = (p99.as_secs_f64() / median).ln() / Z_P99;
                let seconds = median * (sigma * standard_normal(rng)).exp();
                let micros = (seconds * 1e6).round().clamp(0.0, max.as_micros() as f64);
                Duration::from_micros(micros as u64)
            }
        }
    }
}

impl std::fmt::Display for BindLatency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindLatency::Fixed(d) => write!(f, "fixed {} ms", d.as_secs_f64() * 1e3),
            BindLatency::LogNormal { median, p99, max } => write!(
                f,
                "log-normal, median {} ms, p99 {} ms, at most {} ms",
                median.as_millis(),
                p99.as_millis(),
                max.as_millis()
            ),
        }
    }
}

/// A standard normal draw (Box–Muller).
fn standard_normal(rng: &mut Rng) -> f64 {
    // Uniform in (0, 1] and [0, 1), from the top 53 bits.
    let unit = |rng: &mut Rng| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let u1 = 1.0 - unit(rng);
    let u2 = unit(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_realistic_model_has_its_median_and_tail() {
        let mut rng = Rng::new(42);
        let mut draws: Vec<Duration> = (0..20_000)
            .map(|_| BindLatency::REALISTIC.sample(&mut rng))
            .collect();
        draws.sort_unstable();
        let at = |q: f64| draws[((draws.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
        assert!((4.7..5.3).contains(&at(0.5)), "median {} ms", at(0.5));
        assert!((22.0..28.0).contains(&at(0.99)), "p99 {} ms", at(0.99));
        assert!(draws.last().unwrap() <= &Duration::from_secs(1));
        assert!(draws[0] > Duration::ZERO);
    }

    #[test]
    fn a_seed_gives_the_same_latencies() {
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..100)
                .map(|_| BindLatency::REALISTIC.sample(&mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn fixed_is_fixed() {
        let mut rng = Rng::new(1);
        let fixed = BindLatency::Fixed(Duration::from_millis(3));
        assert_eq!(fixed.sample(&mut rng), Duration::from_millis(3));
    }
}
