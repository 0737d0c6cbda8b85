//! InterPodAffinity: required pod affinity / anti-affinity as a filter (including the
//! existing pods' required anti-affinity, which is symmetric), preferred terms as a score.
//!
//! PreFilter and PreScore count pods per topology pair once per incoming pod; Filter and
//! Score then only look up the node's labels. The counts come from the cycle's snapshot
//! where it keeps them (the existing pods' terms with their declaring pods per domain,
//! and the matching pods per domain of each selection asked about before), shared rather
//! than copied; elsewhere (a selection asked about for the first time, a what-if fork)
//! they are counted node by node.

use crate::Plugin;

mod filter;
mod score;
mod terms;
#[cfg(test)]
mod tests;

pub const NAME: &str = "InterPodAffinity";
/// Where PreFilter keeps its counts.
pub const PRE_FILTER_STATE_KEY: &str = NAME;
/// Where PreScore keeps its topology scores.
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreInterPodAffinity";

pub const REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
pub const REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";
pub const REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

pub struct InterPodAffinity {
    /// Score given to a node for each required affinity term of an existing pod there
    /// that the incoming pod matches (upstream's `hardPodAffinityWeight`, default 1).
    pub hard_pod_affinity_weight: i64,
}

impl Default for InterPodAffinity {
    fn default() -> InterPodAffinity {
        InterPodAffinity {
            hard_pod_affinity_weight: 1,
        }
    }
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    /// A pod with (anti-)affinity terms counts the pods placed meanwhile: not signable.
    /// Otherwise its labels, which existing pods' terms may match.
    fn sign(&self, pod: &gantry_api::Pod, signature: &mut crate::Signature) -> bool {
        if pod.has_affinity() {
            return false;
        }
        signature.add(crate::signature::signer::LABELS, &pod.labels);
        true
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::ANY_POD_OR_NODE_ADD_OR_UPDATE
    }
}
