//! VolumeZone: a bound volume labelled with a zone or region can only be used from nodes
//! in that zone or region.

use std::sync::LazyLock;

use gantry_api::storage::VolumeBindingMode;
use gantry_api::{Pod, Sym};
use gantry_cache::NodeInfo;
use smallvec::SmallVec;

use super::volume_restrictions::claim_not_found;
use crate::events::{ActionType, ClusterEvent, EventResource};
use crate::{Cluster, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};

pub const NAME: &str = "VolumeZone";
pub const REASON_CONFLICT: &str = "node(s) had no available volume zone";

/// Upstream v1.28: new classes, new or relabelled nodes, new or changed claims and volumes.
const EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::StorageClass, ActionType::ADD),
    ClusterEvent::new(EventResource::Node, ActionType::ADD.or(ActionType::UPDATE)),
    ClusterEvent::new(
        EventResource::PersistentVolumeClaim,
        ActionType::ADD.or(ActionType::UPDATE),
    ),
    ClusterEvent::new(
        EventResource::PersistentVolume,
        ActionType::ADD.or(ActionType::UPDATE),
    ),
];

/// The topology labels upstream reads, in its order: beta zone, beta region, zone, region.
/// Each with the GA label a beta label falls back to on the node (v1.28).
static TOPOLOGY_LABELS: LazyLock<[(Sym, Sym); 4]> = LazyLock::new(|| {
    let zone = Sym::new("topology.kubernetes.io/zone");
    let region = Sym::new("topology.kubernetes.io/region");
    [
        (Sym::new("failure-domain.beta.kubernetes.io/zone"), zone),
        (Sym::new("failure-domain.beta.kubernetes.io/region"), region),
        (zone, zone),
        (region, region),
    ]
});

pub struct VolumeZone;

/// One topology label of one of the pod's volumes: the node must carry one of the values.
#[derive(Clone)]
struct VolumeTopology {
    key: Sym,
    ga_key: Sym,
    values: SmallVec<[Sym; 2]>,
}

#[derive(Clone)]
struct PreFilterState(Vec<VolumeTopology>);

impl Plugin for VolumeZone {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        signature.add_volumes(pod);
        true
    }

    fn events_to_register(&self) -> &'static [ClusterEvent] {
        EVENTS
    }
}

/// Upstream's `LabelZonesToSet`: values joined by "__"; a label with an empty part is
/// ignored (upstream logs and skips it).
fn zone_values(value: &str) -> Option<SmallVec<[Sym; 2]>> {
    value
        .split("__")
        .map(str::trim)
        .map(|zone| (!zone.is_empty()).then(|| Sym::new(zone)))
        .collect()
}

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let storage = cluster.objects.storage();
        let mut topologies = Vec::new();
        for (name, claim) in storage.persistent_claims_of(pod) {
            if name.is_empty() {
                return (
                    None,
                    Status::unresolvable("PersistentVolumeClaim had no name"),
                );
            }
            let Some(claim) = claim else {
                return (None, Status::unresolvable(claim_not_found(name)));
            };
            let Some(volume_name) = claim.volume_name else {
                let Some(class_name) = claim.storage_class else {
                    return (
                        None,
                        Status::unresolvable(
                            "PersistentVolumeClaim had no pv name and storageClass name",
                        ),
                    );
                };
                let Some(class) = storage.storage_class(class_name) else {
                    return (
                        None,
                        Status::unresolvable(format!(
                            "storageclass.storage.k8s.io {:?} not found",
                            class_name.as_str()
                        )),
                    );
                };
                // An unbound WaitForFirstConsumer claim gets a volume where the pod goes.
                if class.binding_mode == VolumeBindingMode::WaitForFirstConsumer {
                    continue;
                }
                return (None, Status::unresolvable("PersistentVolume had no name"));
            };
            let Some(pv) = storage.pv(volume_name) else {
                return (
                    None,
                    Status::unresolvable(format!(
                        "persistentvolume {:?} not found",
                        volume_name.as_str()
                    )),
                );
            };
            for &(key, ga_key) in TOPOLOGY_LABELS.iter() {
                if let Some(values) = pv.labels.get(key).and_then(|v| zone_values(v.as_str())) {
                    topologies.push(VolumeTopology {
                        key,
                        ga_key,
                        values,
                    });
                }
            }
        }
        if topologies.is_empty() {
            return (None, Status::skip());
        }
        state.write(NAME, PreFilterState(topologies));
        (None, Status::success())
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(PreFilterState(topologies)) = state.read::<PreFilterState>(NAME) else {
            return Status::error(format!("cannot read {NAME:?} PreFilter state"));
        };
        let Some(node) = node.node() else {
            return Status::unresolvable("node not found");
        };
        // A node with no topology labels at all (a single-zone cluster) fits any volume.
        if !TOPOLOGY_LABELS
            .iter()
            .any(|(key, _)| node.labels.contains_key(*key))
        {
            return Status::success();
        }
        for t in topologies {
            let value = node.labels.get(t.key).or_else(|| node.labels.get(t.ga_key));
            if !value.is_some_and(|v| t.values.contains(&v)) {
                return Status::unresolvable(REASON_CONFLICT);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::node_info;
    use crate::plugins::volume_binding::testing::{
        claim, class, pod_with_claims, snapshot, volume,
    };
    use crate::{ApiObjects, Code};
    use gantry_api::{Labels, Node, PersistentVolume, PersistentVolumeClaim, Resources};

    const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
    const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
    const ZONE: &str = "topology.kubernetes.io/zone";
    const REGION: &str = "topology.kubernetes.io/region";

    fn labelled(name: &str, labels: &[(&str, &str)]) -> PersistentVolume {
        PersistentVolume {
            labels: Labels::from_strs(labels.iter().copied()),
            ..volume(name, None)
        }
    }

    fn bound(name: &str, volume: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            volume_name: Some(Sym::new(volume)),
            ..claim(name, None)
        }
    }

    /// Runs PreFilter, then (unless it rejected or skipped) Filter on a node with `labels`;
    /// returns the deciding verdict (success after a Skip).
    fn verdict(objects: &ApiObjects, claim_name: &str, labels: &[(&str, &str)]) -> Status {
        let host = Node::new("host1", Resources::default()).with_labels(labels.iter().copied());
        let snapshot = snapshot(std::slice::from_ref(&host), &[]);
        let pod = pod_with_claims("pod_1", &[claim_name]);
        let mut state = CycleState::new();
        let cluster = Cluster {
            nodes: &snapshot,
            objects,
        };
        let (_, status) = VolumeZone.pre_filter(&mut state, &pod, cluster);
        if status.is_skip() {
            return Status::success();
        }
        if !status.is_success() {
            return status;
        }
        VolumeZone.filter(&state, &pod, &node_info(&host, &[]))
    }

    /// (name, the pod's claim, node labels, rejection message)
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Option<&'a str>);

    fn check(objects: &ApiObjects, cases: &[Case]) {
        for (name, claim_name, labels, want) in cases {
            let status = verdict(objects, claim_name, labels);
            match want {
                None => assert!(status.is_success(), "{name}: {status:?}"),
                Some(reason) => {
                    assert_eq!(status.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(status.message(), *reason, "{name}");
                }
            }
        }
    }

    /// Upstream's TestSingleZone (the pod without volumes is Skip, not checked here).
    #[test]
    fn single_zone() {
        let mut objects = ApiObjects::default();
        let volumes = [
            labelled("Vol_1", &[(BETA_ZONE, "us-west1-a")]),
            labelled(
                "Vol_2",
                &[(BETA_REGION, "us-west1"), ("uselessLabel", "none")],
            ),
            labelled("Vol_Stable_1", &[(ZONE, "us-west1-a")]),
            labelled(
                "Vol_Stable_2",
                &[(REGION, "us-west1"), ("uselessLabel", "none")],
            ),
            labelled(
                "Vol_Stable_3",
                &[(ZONE, "us-west1-a"), (REGION, "us-west1-a")],
            ),
        ];
        let claims = [
            bound("PVC_1", "Vol_1"),
            bound("PVC_2", "Vol_2"),
            bound("PVC_4", "Vol_not_exist"),
            bound("PVC_Stable_1", "Vol_Stable_1"),
            bound("PVC_Stable_2", "Vol_Stable_2"),
            bound("PVC_Stable_3", "Vol_Stable_3"),
        ];
        objects.set_storage(&volumes, &claims, &[], &[]);
        let conflict = Some(REASON_CONFLICT);
        check(
            &objects,
            &[
                ("node without labels", "PVC_1", &[], None),
                (
                    "beta zone label matched",
                    "PVC_1",
                    &[(BETA_ZONE, "us-west1-a"), ("uselessLabel", "none")],
                    None,
                ),
                (
                    "beta region label matched",
                    "PVC_2",
                    &[(BETA_REGION, "us-west1")],
                    None,
                ),
                (
                    "beta region label doesn't match",
                    "PVC_2",
                    &[(BETA_REGION, "no_us-west1")],
                    conflict,
                ),
                (
                    "beta zone label doesn't match",
                    "PVC_1",
                    &[(BETA_ZONE, "no_us-west1-a")],
                    conflict,
                ),
                (
                    "zone label matched",
                    "PVC_Stable_1",
                    &[(ZONE, "us-west1-a")],
                    None,
                ),
                (
                    "region label matched",
                    "PVC_Stable_2",
                    &[(REGION, "us-west1")],
                    None,
                ),
                (
                    "region label doesn't match",
                    "PVC_Stable_2",
                    &[(REGION, "no_us-west1")],
                    conflict,
                ),
                (
                    "zone label doesn't match",
                    "PVC_Stable_1",
                    &[(ZONE, "no_us-west1-a")],
                    conflict,
                ),
                (
                    "pv with zone and region, node with only zone",
                    "PVC_Stable_3",
                    &[(ZONE, "us-west1-a")],
                    conflict,
                ),
                (
                    "pv with zone, node with beta zone",
                    "PVC_Stable_1",
                    &[(BETA_ZONE, "us-west1-a")],
                    conflict,
                ),
                (
                    "pv with beta label, node with ga label, matched",
                    "PVC_1",
                    &[(ZONE, "us-west1-a")],
                    None,
                ),
                (
                    "pv with beta label, node with ga label, don't match",
                    "PVC_1",
                    &[(ZONE, "us-west1-b")],
                    conflict,
                ),
                (
                    "pv not found",
                    "PVC_4",
                    &[(ZONE, "us-west1-a")],
                    Some(r#"persistentvolume "Vol_not_exist" not found"#),
                ),
            ],
        );
    }

    /// Upstream's TestMultiZone: "__" separates the zones a volume spans.
    #[test]
    fn multi_zone() {
        let mut objects = ApiObjects::default();
        let volumes = [
            labelled("Vol_1", &[(BETA_ZONE, "us-west1-a")]),
            labelled("Vol_3", &[(BETA_ZONE, "us-west1-c__us-west1-a")]),
            labelled("Vol_Stable_1", &[(ZONE, "us-west1-a")]),
            labelled("Vol_Stable_2", &[(ZONE, "us-west1-c__us-west1-a")]),
        ];
        let claims = [
            bound("PVC_1", "Vol_1"),
            bound("PVC_3", "Vol_3"),
            bound("PVC_Stable_1", "Vol_Stable_1"),
            bound("PVC_Stable_2", "Vol_Stable_2"),
        ];
        objects.set_storage(&volumes, &claims, &[], &[]);
        let conflict = Some(REASON_CONFLICT);
        check(
            &objects,
            &[
                ("node without labels", "PVC_3", &[], None),
                (
                    "beta zone label matched",
                    "PVC_3",
                    &[(BETA_ZONE, "us-west1-a")],
                    None,
                ),
                (
                    "beta zone label doesn't match",
                    "PVC_1",
                    &[(BETA_ZONE, "us-west1-b")],
                    conflict,
                ),
                (
                    "zone label matched",
                    "PVC_Stable_2",
                    &[(ZONE, "us-west1-a")],
                    None,
                ),
                (
                    "zone label doesn't match",
                    "PVC_Stable_1",
                    &[(ZONE, "us-west1-b")],
                    conflict,
                ),
            ],
        );
    }

    /// Upstream's TestWithBinding: unbound claims, by their class's binding mode.
    #[test]
    fn with_binding() {
        let mut objects = ApiObjects::default();
        let classes = [
            class("Class_Immediate", VolumeBindingMode::Immediate, ""),
            class("Class_Wait", VolumeBindingMode::WaitForFirstConsumer, ""),
        ];
        let claims = [
            bound("PVC_1", "Vol_1"),
            claim("PVC_NoSC", Some("Class_0")),
            claim("PVC_EmptySC", None),
            claim("PVC_WaitSC", Some("Class_Wait")),
            claim("PVC_ImmediateSC", Some("Class_Immediate")),
        ];
        let volumes = [labelled("Vol_1", &[(BETA_ZONE, "us-west1-a")])];
        objects.set_storage(&volumes, &claims, &classes, &[]);
        let labels: &[(&str, &str)] = &[(BETA_ZONE, "us-west1-a"), ("uselessLabel", "none")];
        let unresolvable = |m| Some(m);
        check(
            &objects,
            &[
                ("label zone failure domain matched", "PVC_1", labels, None),
                (
                    "unbound volume empty storage class",
                    "PVC_EmptySC",
                    labels,
                    unresolvable("PersistentVolumeClaim had no pv name and storageClass name"),
                ),
                (
                    "unbound volume no storage class",
                    "PVC_NoSC",
                    labels,
                    unresolvable(r#"storageclass.storage.k8s.io "Class_0" not found"#),
                ),
                (
                    "unbound volume immediate binding mode",
                    "PVC_ImmediateSC",
                    labels,
                    unresolvable("PersistentVolume had no name"),
                ),
                (
                    "unbound volume wait binding mode",
                    "PVC_WaitSC",
                    labels,
                    None,
                ),
            ],
        );
    }
}
