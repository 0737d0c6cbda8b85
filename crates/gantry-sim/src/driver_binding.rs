//! How the simulated DRA drivers answer devices' binding conditions
//! (DRADeviceBindingConditions). A real driver (or its controller) sets a device's
//! conditions on the claim's `status.devices` once it has, say, attached the device to the
//! node; kube-scheduler's PreBind looks at once, then every five seconds, for at most the
//! binding timeout. A simulation has no driver: this model stands for them all, and the
//! binding takes the virtual time the polls would.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::Sym;
use gantry_api::dra::{BindingStatus, DeviceStatus, ResourceClaim, TrueCondition};
use gantry_api::dra_binding::BINDING_POLL_INTERVAL_SECONDS;

/// What every simulated driver does once a claim with binding conditions is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverBinding {
    /// Sets every binding condition True this many seconds after the allocation.
    Ready { after: u64 },
    /// Sets the first binding failure condition True this many seconds after it.
    Fails { after: u64 },
    /// Never answers: every binding waits out the timeout.
    Never,
}

/// What a simulated driver sets on a device's status in a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Every binding condition True.
    Ready,
    /// The first binding failure condition True.
    Failed,
}

/// The reason and message of the failure condition a failing simulated driver sets.
pub const FAILURE_REASON: &str = "SimulatedFailure";
pub const FAILURE_MESSAGE: &str = "the simulated driver failed the binding";

impl Default for DriverBinding {
    /// A driver that answers at once: the binding waits for PreBind's first look after
    /// its immediate one (five seconds).
    fn default() -> DriverBinding {
        DriverBinding::Ready { after: 0 }
    }
}

impl DriverBinding {
    /// Parses `ready[:SECONDS]`, `fail[:SECONDS]` or `never`.
    pub fn parse(text: &str) -> Result<DriverBinding, String> {
        let (kind, after) = match text.split_once(':') {
            Some((kind, seconds)) => {
                let after = seconds
                    .parse::<u64>()
                    .ok()
                    .filter(|s| *s <= 86_400)
                    .ok_or_else(|| {
                        format!("{seconds:?} is not a number of seconds from 0 to 86400")
                    })?;
                (kind, Some(after))
            }
            None => (text, None),
        };
        match (kind, after) {
            ("ready", after) => Ok(DriverBinding::Ready {
                after: after.unwrap_or(0),
            }),
            ("fail", after) => Ok(DriverBinding::Fails {
                after: after.unwrap_or(0),
            }),
            ("never", None) => Ok(DriverBinding::Never),
            _ => Err(format!(
                "{text:?} is not one of ready[:SECONDS], fail[:SECONDS] and never"
            )),
        }
    }

    /// The drivers' answer and how many seconds after the allocation they give it;
    /// `None` if they never answer.
    pub fn answer(&self) -> Option<(u64, Answer)> {
        match *self {
            DriverBinding::Ready { after } => Some((after, Answer::Ready)),
            DriverBinding::Fails { after } => Some((after, Answer::Failed)),
            DriverBinding::Never => None,
        }
    }

    /// How long PreBind waits with a timeout of `timeout` seconds: until its first look
    /// after the drivers' answer (never the immediate one, which comes before any driver
    /// could see the allocation), if that comes before the timeout; otherwise until the
    /// timeout.
    pub fn wait(&self, timeout: i64) -> Duration {
        let timeout = timeout.max(0) as u64;
        let poll = BINDING_POLL_INTERVAL_SECONDS as u64;
        let seen = self
            .answer()
            .map(|(after, _)| after.div_ceil(poll).max(1) * poll);
        Duration::from_secs(seen.filter(|&s| s < timeout).unwrap_or(timeout))
    }
}

/// The claim with the drivers' answer on its devices with binding conditions: each gets
/// its status in the claim, every condition True (`Ready`) or its first failure condition
/// (`Failed`). `None` when nothing changes (no allocation, or answered already).
pub(crate) fn answered(claim: &ResourceClaim, answer: Answer) -> Option<ResourceClaim> {
    let allocation = claim.allocation.as_deref()?;
    let mut updated = claim.device_status().to_vec();
    let condition = |kind: Sym, reason: &str, message: &str| TrueCondition {
        kind,
        reason: Arc::from(reason),
        message: Arc::from(message),
    };
    for result in &allocation.devices {
        let Some(binding) = &result.binding else {
            continue;
        };
        let true_conditions = match answer {
            Answer::Ready => (binding.conditions.iter())
                .map(|&c| condition(c, "Ready", ""))
                .collect(),
            Answer::Failed => (binding.failure_conditions.first())
                .map(|&c| condition(c, FAILURE_REASON, FAILURE_MESSAGE))
                .into_iter()
                .collect(),
        };
        updated.retain(|s| s.device != result.device);
        updated.push(DeviceStatus {
            device: result.device,
            true_conditions,
        });
    }
    if updated == claim.device_status() {
        return None;
    }
    Some(ResourceClaim {
        binding_status: Some(Arc::new(BindingStatus {
            allocated_at: claim.allocated_at(),
            device_status: updated,
        })),
        ..ResourceClaim::clone(claim)
    })
}

impl std::fmt::Display for DriverBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverBinding::Ready { after } => {
                write!(
                    f,
                    "drivers set binding conditions {after} s after allocation"
                )
            }
            DriverBinding::Fails { after } => {
                write!(f, "drivers fail bindings {after} s after allocation")
            }
            DriverBinding::Never => write!(f, "drivers never answer binding conditions"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_ends_at_the_first_look_after_the_answer_or_past_the_timeout() {
        let secs = Duration::from_secs;
        let ready = |after| DriverBinding::Ready { after }.wait(600);
        assert_eq!(ready(0), secs(5));
        assert_eq!(ready(5), secs(5));
        assert_eq!(ready(6), secs(10));
        assert_eq!(ready(594), secs(595));
        assert_eq!(ready(596), secs(600));
        assert_eq!(ready(5000), secs(600));
        assert_eq!(DriverBinding::Fails { after: 12 }.wait(600), secs(15));
        assert_eq!(DriverBinding::Never.wait(10), secs(10));
        assert_eq!(DriverBinding::Ready { after: 0 }.wait(5), secs(5));
    }

    #[test]
    fn parses_the_three_answers_and_refuses_anything_else() {
        assert_eq!(DriverBinding::parse("ready"), Ok(DriverBinding::default()));
        assert_eq!(
            DriverBinding::parse("ready:30"),
            Ok(DriverBinding::Ready { after: 30 })
        );
        assert_eq!(
            DriverBinding::parse("fail:7"),
            Ok(DriverBinding::Fails { after: 7 })
        );
        assert_eq!(DriverBinding::parse("never"), Ok(DriverBinding::Never));
        for bad in ["never:3", "ready:-1", "ready:x", "sometimes", "fail:86401"] {
            assert!(DriverBinding::parse(bad).is_err(), "{bad}");
        }
    }
}
