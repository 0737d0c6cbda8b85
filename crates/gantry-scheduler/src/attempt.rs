//! What one scheduling attempt decided, for the caller to act on (bind, evict, retry).

use std::sync::Arc;

use gantry_api::{Pod, Sym};
use gantry_framework::CycleState;

use crate::fit_error::FitError;
use crate::waiting::PermitWait;

/// What one scheduling attempt decided.
pub enum Attempt {
    /// The pod is assumed on `node` (as `pod`, which names the node) and reserved; run
    /// the binding cycle with `state` next, once Permit lets it through: with `wait`, it
    /// waits until allowed, rejected, or its wait runs out.
    Scheduled {
        pod: Arc<Pod>,
        node: Sym,
        state: Box<CycleState>,
        wait: Option<PermitWait>,
    },
    /// The pod fits nowhere now. If preemption found room, `nominated` names the node and
    /// the victims, which the caller evicts through the API; the pod is retried once
    /// they are gone.
    Unschedulable {
        fit_error: FitError,
        nominated: Option<(Sym, Vec<Arc<Pod>>)>,
    },
    /// Something other than the pod's fit went wrong (unknown profile, a plugin error, a
    /// Reserve or Permit plugin that refused the pod).
    Error(String),
    /// The pod's group was not scheduled (`pod group is unschedulable, ...`): the pod
    /// holds nothing and is retried on the next cluster event, as upstream retries a pod
    /// that no plugin in particular rejected. `nominated`: the node upstream nominates it
    /// to (a group waiting on preemption: the node it fitted); `preempted`: the node and
    /// victims of the pod's own preemption, which upstream evicts whatever becomes of the
    /// group.
    GroupRejected {
        message: String,
        nominated: Option<Sym>,
        preempted: Option<(Sym, Vec<Arc<Pod>>)>,
    },
}

impl std::fmt::Debug for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attempt::Scheduled { pod, node, .. } => write!(f, "Scheduled({} on {node})", pod.key()),
            Attempt::Unschedulable {
                fit_error,
                nominated,
            } => {
                write!(
                    f,
                    "Unschedulable({fit_error}, nominated: {:?})",
                    nominated.as_ref().map(|n| n.0)
                )
            }
            Attempt::Error(e) => write!(f, "Error({e})"),
            Attempt::GroupRejected {
                message, nominated, ..
            } => write!(f, "GroupRejected({message}, nominated: {nominated:?})"),
        }
    }
}
