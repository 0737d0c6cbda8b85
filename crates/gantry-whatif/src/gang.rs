//! Gang scheduling check: all the pods fit at once, or none is placed. The pods are
//! placed one after another in a fork (each sees the ones before it), and the fork is
//! reverted either way: the answer is where they would go.

use std::sync::Arc;

use gantry_api::{Pod, Sym};

use crate::snapshot::{ClusterSnapshot, SchedulingError};

#[derive(Debug, Clone)]
pub enum GangOutcome {
    /// Every pod, with its node, in order.
    Fits(Vec<(Arc<Pod>, Sym)>),
    /// The first pod that found no node, why, and how many were placed before it.
    DoesNotFit {
        pod: Arc<Pod>,
        reason: String,
        placed: usize,
    },
}

pub fn check_gang(
    snapshot: &mut ClusterSnapshot,
    pods: &[Arc<Pod>],
) -> Result<GangOutcome, SchedulingError> {
    snapshot.fork();
    let outcome = place_all(snapshot, pods);
    snapshot.revert().expect("forked above");
    outcome
}

fn place_all(
    snapshot: &mut ClusterSnapshot,
    pods: &[Arc<Pod>],
) -> Result<GangOutcome, SchedulingError> {
    let mut placements = Vec::with_capacity(pods.len());
    for pod in pods {
        match snapshot.schedule_anywhere(pod, None, &crate::Destinations::ANY) {
            Ok(node) => placements.push((pod.clone(), node)),
            Err(SchedulingError::Unschedulable(fit)) => {
                return Ok(GangOutcome::DoesNotFit {
                    pod: pod.clone(),
                    reason: fit.to_string(),
                    placed: placements.len(),
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(GangOutcome::Fits(placements))
}
