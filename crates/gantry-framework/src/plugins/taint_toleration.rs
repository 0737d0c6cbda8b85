//! TaintToleration: a node's NoSchedule/NoExecute taints keep out pods that do not tolerate
//! them; PreferNoSchedule taints a pod does not tolerate lower the node's score.

use crate::NodeInfos;
use std::sync::{Arc, LazyLock};

use gantry_api::{Pod, TaintEffect, Toleration};
use gantry_cache::{NodeColumns, NodeFlags, NodeInfo};

use crate::{
    Cluster, CycleState, FilterPlugin, Plugin, PreScorePlugin, ScorePlugin, Status,
    default_normalize,
};

pub const NAME: &str = "TaintToleration";

/// v1.29 on, the Filter's reason no longer names the taint.
pub const REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

#[derive(Default)]
pub struct TaintToleration {
    /// Say [`REASON_UNTOLERATED`] (newer releases) rather than `node(s) had untolerated
    /// taint {key: value}` (v1.28).
    pub names_no_taint: bool,
}

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        signature.add_tolerations(pod);
        true
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::NODE_ADD_OR_UPDATE
    }
}

impl FilterPlugin for TaintToleration {
    fn filter_reads_only_the_node(&self, _state: &CycleState, _pod: &Pod) -> bool {
        true
    }

    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let Some(node) = node.node() else {
            return Status::unresolvable("node not found");
        };
        let untolerated = node.taints.iter().find(|taint| {
            matches!(
                taint.effect,
                TaintEffect::NoSchedule | TaintEffect::NoExecute
            ) && !pod.tolerations.iter().any(|t| t.tolerates(taint))
        });
        match untolerated {
            None => Status::success(),
            Some(_) if self.names_no_taint => Status::unresolvable(REASON_UNTOLERATED),
            Some(taint) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key, taint.value
            )),
        }
    }

    /// A node without NoSchedule and NoExecute taints has nothing to tolerate.
    fn filter_columns(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        columns: &NodeColumns,
        positions: &[usize],
        proven: &mut [bool],
    ) -> bool {
        super::prove_nodes_without(NodeFlags::HARD_TAINTS, columns, positions, proven)
    }
}

/// The pod's tolerations that can apply to PreferNoSchedule taints.
#[derive(Clone)]
struct PreferNoScheduleTolerations(Vec<Toleration>);

fn prefer_no_schedule_tolerations(
    state: &CycleState,
) -> Result<&PreferNoScheduleTolerations, Status> {
    state
        .read::<PreferNoScheduleTolerations>(NAME)
        .ok_or_else(|| Status::error("TaintToleration PreScore state missing"))
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _nodes: &NodeInfos<'_>,
        _cluster: Cluster<'_>,
    ) -> Status {
        let tolerations = pod
            .tolerations
            .iter()
            .filter(|t| t.effect.is_none_or(|e| e == TaintEffect::PreferNoSchedule))
            .cloned()
            .collect::<Vec<_>>();
        if tolerations.is_empty() {
            // Most pods: one empty value shared, not allocated per pod.
            static NONE: LazyLock<Arc<PreferNoScheduleTolerations>> =
                LazyLock::new(|| Arc::new(PreferNoScheduleTolerations(Vec::new())));
            state.write_shared(NAME, Arc::clone(&NONE));
        } else {
            state.write(NAME, PreferNoScheduleTolerations(tolerations));
        }
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let tolerations = prefer_no_schedule_tolerations(state)?;
        let node = node.node().ok_or_else(|| Status::error("node not found"))?;
        Ok(node
            .taints
            .iter()
            .filter(|taint| {
                taint.effect == TaintEffect::PreferNoSchedule
                    && !tolerations.0.iter().any(|t| t.tolerates(taint))
            })
            .count() as i64)
    }

    /// Nodes without PreferNoSchedule taints score 0 without a look at their taints.
    fn score_columns(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        columns: &NodeColumns,
        positions: &[usize],
        scores: &mut [i64],
    ) -> Result<bool, Status> {
        prefer_no_schedule_tolerations(state)?;
        super::score_nodes_with(
            NodeFlags::SOFT_TAINTS,
            nodes,
            columns,
            positions,
            scores,
            |node| self.score(state, pod, node),
        )
    }

    /// No node with a PreferNoSchedule taint: every node scores 0.
    fn uniform_score(
        &self,
        state: &CycleState,
        _pod: &Pod,
        columns: &NodeColumns,
    ) -> Result<Option<i64>, Status> {
        prefer_no_schedule_tolerations(state)?;
        Ok((!columns.any(NodeFlags::SOFT_TAINTS)).then_some(0))
    }

    fn normalize(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        default_normalize(scores, true);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, node_info};
    use crate::{ApiObjects, Code};
    use gantry_api::{Sym, TolerationOp};
    use gantry_cache::Snapshot;

    fn toleration(
        key: &str,
        op: TolerationOp,
        value: &str,
        effect: Option<TaintEffect>,
    ) -> Toleration {
        Toleration {
            key: Some(Sym::new(key)),
            op,
            value: Sym::new(value),
            effect,
        }
    }

    #[test]
    fn filter_table() {
        // Re-derived from upstream's taint_toleration_test TestTaintTolerationFilter.
        let tainted =
            node("n", 1000, 1000).with_taint("dedicated", "user1", TaintEffect::NoSchedule);
        let mut tolerating = Pod::new("ns", "p");
        tolerating.tolerations.push(toleration(
            "dedicated",
            TolerationOp::Equal,
            "user1",
            Some(TaintEffect::NoSchedule),
        ));
        let mut wrong_value = Pod::new("ns", "p");
        wrong_value.tolerations.push(toleration(
            "dedicated",
            TolerationOp::Equal,
            "user2",
            Some(TaintEffect::NoSchedule),
        ));
        let mut exists = Pod::new("ns", "p");
        exists
            .tolerations
            .push(toleration("dedicated", TolerationOp::Exists, "", None));
        let prefer_only =
            node("n", 1000, 1000).with_taint("foo", "bar", TaintEffect::PreferNoSchedule);
        let v128 = TaintToleration {
            names_no_taint: false,
        };
        let check = |pod: &Pod, n: &gantry_api::Node| {
            v128.filter(&CycleState::new(), pod, &node_info(n, &[]))
        };
        let plain = Pod::new("ns", "p");
        let status = check(&plain, &tainted);
        assert_eq!(status.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            status.message(),
            "node(s) had untolerated taint {dedicated: user1}"
        );
        let newer = TaintToleration {
            names_no_taint: true,
        };
        let status = newer.filter(&CycleState::new(), &plain, &node_info(&tainted, &[]));
        assert_eq!(status.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(status.message(), "node(s) had untolerated taint(s)");
        assert!(check(&tolerating, &tainted).is_success());
        assert!(!check(&wrong_value, &tainted).is_success());
        assert!(check(&exists, &tainted).is_success());
        assert!(
            check(&plain, &prefer_only).is_success(),
            "PreferNoSchedule does not filter"
        );
    }

    #[test]
    fn score_counts_untolerated_prefer_no_schedule_taints() {
        // Upstream: "the more intolerable taints a node has, the lower its score".
        let mut pod = Pod::new("ns", "p");
        pod.tolerations.push(toleration(
            "foo",
            TolerationOp::Equal,
            "bar",
            Some(TaintEffect::PreferNoSchedule),
        ));
        let nodes = [
            node("a", 1000, 1000),
            node("b", 1000, 1000).with_taint("foo", "bar", TaintEffect::PreferNoSchedule),
            node("c", 1000, 1000).with_taint("cpu-type", "arm64", TaintEffect::PreferNoSchedule),
            node("d", 1000, 1000)
                .with_taint("cpu-type", "arm64", TaintEffect::PreferNoSchedule)
                .with_taint("disk", "hdd", TaintEffect::PreferNoSchedule),
        ];
        let infos: Vec<NodeInfo> = nodes.iter().map(|n| node_info(n, &[])).collect();
        let refs: Vec<&NodeInfo> = infos.iter().collect();
        let mut state = CycleState::new();
        let snapshot = Snapshot::new();
        let cluster = Cluster {
            nodes: &snapshot,
            objects: &ApiObjects::default(),
        };
        assert!(
            TaintToleration::default()
                .pre_score(&mut state, &pod, &NodeInfos::given(&refs), cluster)
                .is_success()
        );
        let mut scores: Vec<i64> = infos
            .iter()
            .map(|n| TaintToleration::default().score(&state, &pod, n).unwrap())
            .collect();
        assert_eq!(scores, [0, 0, 1, 2]);
        TaintToleration::default().normalize(&state, &pod, &mut scores);
        assert_eq!(scores, [100, 100, 50, 0]);
    }
}
