//! A replay's recorded bindings, followed as the run goes: when the simulation places a
//! pod on another node than the recorded cluster did, how the pod's cycle judged the
//! recorded node (a tie, a lower score, a Filter refusal, never searched) is kept, so
//! that the divergence says why.

use std::collections::HashMap;

use gantry_api::{Pod, Sym};
use gantry_scheduler::OtherNode;

use super::Simulation;
use crate::replay::RecordedBinding;

/// The recorded node of each pod, and the judgement of it where the simulation chose
/// another.
#[derive(Default)]
pub(super) struct RecordedNodes {
    /// By `namespace/name`.
    expected: HashMap<String, Sym>,
    judged: HashMap<String, OtherNode>,
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

    /// After a cycle of `instance` placed `pod` on `node`: when the recorded cluster chose
    /// another node, how this cycle judged it.
    pub(super) fn judge_recorded_node(&mut self, instance: usize, pod: &Pod, node: Sym) {
        if self.recorded.expected.is_empty() {
            return;
        }
        let key = pod.key();
        let Some(&recorded) = self.recorded.expected.get(&key) else {
            return;
        };
        if recorded == node {
            // A judgement left from an earlier attempt is read only for pods placed
            // elsewhere in the end.
            return;
        }
        let scheduler = &self.instances[instance].scheduler;
        let judged = (scheduler.last_cycle()).map_or(OtherNode::Unknown, |c| c.judge(recorded));
        self.recorded.judged.insert(key, judged);
    }

    /// For each pod (`namespace/name`) last placed on another node than recorded, how its
    /// cycle judged the recorded node.
    pub fn recorded_nodes_judged(&self) -> &HashMap<String, OtherNode> {
        &self.recorded.judged
    }
}
