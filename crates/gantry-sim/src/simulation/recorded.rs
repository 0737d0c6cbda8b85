//! A replay's recorded bindings, followed as the run goes: when the simulation places a
//! pod on another node than the recorded cluster did, how the pod's cycle judged the
//! recorded node (a tie, a lower score, a Filter refusal, never searched) is kept, so
//! that the divergence says why; in follow mode, each pod is then bound where the cluster
//! bound it.

use std::collections::HashMap;
use std::sync::Arc;

use gantry_api::{Pod, Sym};
use gantry_scheduler::queue::QueuedPod;
use gantry_scheduler::{Attempt, OtherNode};

use super::Simulation;
use crate::instance::WatchEvent;
use crate::replay::RecordedBinding;

/// The recorded node of each pod, and the judgement of it where the simulation chose
/// another.
#[derive(Default)]
pub(super) struct RecordedNodes {
    /// By `namespace/name`.
    expected: HashMap<String, Sym>,
    judged: HashMap<String, OtherNode>,
    /// Bind each pod where the cluster bound it, whatever the simulation decided.
    follow: bool,
    /// Nodes another run chose for some pods (a comparison's other configuration), and
    /// how this run's cycles judged them where it chose another.
    others: HashMap<String, Sym>,
    others_judged: HashMap<String, OtherNode>,
}

impl Simulation {
    /// Follows the bindings a trace recorded: every instance keeps what its last cycle
    /// saw, and a pod placed elsewhere keeps how its recorded node was judged (see
    /// [`Self::recorded_nodes_judged`]).
    pub fn expect_bindings(&mut self, recorded: &[RecordedBinding]) {
        for instance in &mut self.instances {
            instance.scheduler.keep_last_cycle();
        }
        self.recorded.expected = (recorded.iter())
            .map(|b| (b.pod.clone(), Sym::new(&b.node)))
            .collect();
    }

    /// Judges, for each pod named, the node another run chose for it (a comparison's
    /// other configuration), as recorded nodes are judged (see
    /// [`Self::other_nodes_judged`]); every instance keeps what its last cycle saw.
    pub fn judge_other_nodes(&mut self, others: HashMap<String, Sym>) {
        for instance in &mut self.instances {
            instance.scheduler.keep_last_cycle();
        }
        self.recorded.others = others;
    }

    /// For each pod named to [`Self::judge_other_nodes`] and last placed on another node
    /// than the other run's, how its cycle judged that node.
    pub fn other_nodes_judged(&self) -> &HashMap<String, OtherNode> {
        &self.recorded.others_judged
    }

    /// From now on, each pod the cluster bound is bound where it was, after the
    /// simulation decided it (and its decision recorded): the state follows the recording,
    /// so that one decision taken otherwise (a tie) does not change every later one, and
    /// the comparison counts decisions, as `gantry run --shadow` does. The invariants of
    /// [`Simulation::check_invariants`] then hold for the recording, not for the
    /// simulation's decisions.
    pub fn follow_recorded(&mut self) {
        self.recorded.follow = true;
    }

    /// In follow mode, the node the cluster bound `pod` to when the attempt decided
    /// otherwise (another node, or none); `None` when the attempt stands.
    pub(super) fn node_to_follow(&self, pod: &Pod, attempt: &Attempt) -> Option<Sym> {
        if !self.recorded.follow {
            return None;
        }
        let recorded = *self.recorded.expected.get(&pod.key())?;
        self.api.node(recorded)?;
        match attempt {
            Attempt::Scheduled { node, .. } if *node != recorded => Some(recorded),
            Attempt::Unschedulable { .. } => Some(recorded),
            _ => None,
        }
    }

    /// Follow mode: the attempt's decision is kept as the pod's placement (another node,
    /// or pending with its reason), what it reserved is given back, and the pod is bound
    /// where the cluster bound it.
    pub(super) fn bind_as_recorded(
        &mut self,
        instance: usize,
        index: usize,
        queued: &QueuedPod,
        attempt: Attempt,
        recorded: Sym,
    ) {
        let now = self.clock;
        match attempt {
            Attempt::Scheduled {
                pod, state, node, ..
            } => {
                let scheduler = &self.instances[instance].scheduler;
                if let Some(cycle) = scheduler.binding_cycle(pod, state) {
                    // Unreserved and forgotten: the pod is about to be bound elsewhere.
                    let _ = cycle.finish(Err("bound where the recorded cluster bound it".into()));
                }
                self.records.set_bound(index, node, now);
            }
            Attempt::Unschedulable { fit_error, .. } => {
                self.records.set_reason(index, fit_error.to_string());
            }
            _ => return,
        }
        self.instances[instance]
            .scheduler
            .clear_nomination(&queued.pod);
        let bound = Arc::new(queued.pod.bound_to(recorded));
        self.api.add_bound_pod(bound.clone());
        self.broadcast(WatchEvent::PodBound(bound));
    }

    /// After a cycle of `instance` placed `pod` on `node`: when the recorded cluster (or
    /// the other run of a comparison) chose another node, how this cycle judged it.
    pub(super) fn judge_recorded_node(&mut self, instance: usize, pod: &Pod, node: Sym) {
        let recorded = &mut self.recorded;
        if recorded.expected.is_empty() && recorded.others.is_empty() {
            return;
        }
        let key = pod.key();
        let cycle = self.instances[instance].scheduler.last_cycle();
        for (expected, judged) in [
            (&recorded.expected, &mut recorded.judged),
            (&recorded.others, &mut recorded.others_judged),
        ] {
            // A judgement left from an earlier attempt is read only for pods placed
            // elsewhere in the end.
            if let Some(&other) = expected.get(&key).filter(|&&other| other != node) {
                let why = cycle.map_or(OtherNode::Unknown, |c| c.judge(other));
                judged.insert(key.clone(), why);
            }
        }
    }

    /// For each pod (`namespace/name`) last placed on another node than recorded, how its
    /// cycle judged the recorded node.
    pub fn recorded_nodes_judged(&self) -> &HashMap<String, OtherNode> {
        &self.recorded.judged
    }
}
