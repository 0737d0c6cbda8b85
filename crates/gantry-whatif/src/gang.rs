//! Gang scheduling checks: all the pods fit at once, or none is placed (`check_gang`); or a
//! PodGroup as v1.36's pod-group cycle admits it (`check_pod_group`). The pods are placed
//! one after another in a fork (each sees the ones before it), and the fork is reverted
//! either way: the answer is where they would go.

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

/// One PodGroup checked as kube-scheduler v1.36's pod-group cycle decides it (GangScheduling
/// on): every pending member tried in turn on one fork, each seeing those placed before it,
/// a member that fits nowhere left out with its reason. The group is admitted when at least
/// `needed` members were placed (a gang's `minCount` less its members already bound; 0 for
/// the basic policy); a gang that is not admitted places none of them.
#[derive(Debug, Clone)]
pub struct GroupCheck {
    /// Where each member that fitted would go, in the order tried.
    pub placements: Vec<(Arc<Pod>, Sym)>,
    /// The members that fit nowhere, with kube-scheduler's message.
    pub left_out: Vec<(Arc<Pod>, String)>,
    pub admitted: bool,
}

/// Checks one group's pending `members` on a fork that is reverted either way. They are
/// tried higher priority first, then in the order given (upstream takes members never
/// tried before in Go map order, which no input can reproduce).
pub fn check_pod_group(
    snapshot: &mut ClusterSnapshot,
    members: &[Arc<Pod>],
    needed: usize,
) -> Result<GroupCheck, SchedulingError> {
    let mut order: Vec<&Arc<Pod>> = members.iter().collect();
    order.sort_by_key(|p| std::cmp::Reverse(p.priority));
    snapshot.fork();
    let outcome = place_each(snapshot, &order);
    snapshot.revert().expect("forked above");
    let (placements, left_out) = outcome?;
    Ok(GroupCheck {
        admitted: placements.len() >= needed,
        placements,
        left_out,
    })
}

type Placed = (Vec<(Arc<Pod>, Sym)>, Vec<(Arc<Pod>, String)>);

fn place_each(
    snapshot: &mut ClusterSnapshot,
    pods: &[&Arc<Pod>],
) -> Result<Placed, SchedulingError> {
    let (mut placements, mut left_out) = (Vec::new(), Vec::new());
    for &pod in pods {
        match snapshot.schedule_anywhere(pod, None, &crate::Destinations::ANY) {
            Ok(node) => placements.push((pod.clone(), node)),
            Err(SchedulingError::Unschedulable(fit)) => {
                left_out.push((pod.clone(), fit.to_string()))
            }
            Err(e) => return Err(e),
        }
    }
    Ok((placements, left_out))
}
