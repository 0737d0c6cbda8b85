//! NodeVolumeLimits (upstream's CSILimits): a node can attach only so many volumes of each
//! CSI driver, the `allocatable.count` its CSINode reports. Volumes are counted once per
//! node however many pods use them. Under VolumeLimitScaling, a pod's volume of a CSI
//! driver also needs the driver on the node (listed in its CSINode), where the driver
//! asks for that.
//!
//! Left out: limits from the node's `attachable-volumes-csi-*` allocatable (the pre-CSINode
//! source), in-tree volumes migrated to CSI, and generic ephemeral volumes.

use std::sync::Arc;

use gantry_api::{PersistentVolumeClaim, Pod, Sym};
use gantry_cache::{NodeInfo, PvcKey};
use smallvec::SmallVec;

use super::volume_restrictions::claim_not_found;
use crate::events::{ActionType, ClusterEvent, EventResource};
use crate::objects::{StorageObjects, ephemeral_claim_is_for_pod};
use crate::{
    Cluster, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status,
    StorageCapacities,
};

pub const NAME: &str = "NodeVolumeLimits";
pub const REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

/// Which CSI drivers a node must have (in its CSINode) for the pod's volumes of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MissingDrivers {
    /// VolumeLimitScaling off: none.
    #[default]
    Allowed,
    /// v1.35's VolumeLimitScaling: every driver a CSIDriver object exists for.
    RefusedIfDriverExists,
    /// v1.36's: drivers whose CSIDriver sets `preventPodSchedulingIfMissing`.
    RefusedIfDriverAsks,
}

impl MissingDrivers {
    /// As `release` has it (upstream's `checkCSIDriverOnNode`).
    pub fn for_release(release: gantry_api::Release) -> MissingDrivers {
        if !release.enabled(gantry_api::release::Gate::VolumeLimitScaling) {
            MissingDrivers::Allowed
        } else if release.at_least(36) {
            MissingDrivers::RefusedIfDriverAsks
        } else {
            MissingDrivers::RefusedIfDriverExists
        }
    }
}

/// Upstream v1.28: a CSINode appearing, or a pod going, may make room.
const EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::CsiNode, ActionType::ADD),
    ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
];

#[derive(Default)]
pub struct NodeVolumeLimits {
    pub missing_drivers: MissingDrivers,
}

#[derive(Clone)]
struct PreFilterState {
    /// For the claims of the pods already on a node.
    storage: Arc<StorageObjects>,
    /// The pod's claims that count against a driver's limit, with the driver; no repeats.
    volumes: SmallVec<[(Sym, PvcKey); 4]>,
    /// A claim of the pod that is missing or not the pod's: upstream finds it in Filter
    /// (its PreFilter looks nothing up), so every node fails with this status.
    unusable_claim: Option<Status>,
    /// The CSIDrivers, where some may have to be on the node ([`MissingDrivers`]).
    drivers: Option<Arc<StorageCapacities>>,
}

impl Plugin for NodeVolumeLimits {
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

/// Upstream's `getCSIDriverInfo`: the bound volume's CSI driver; for a claim not bound yet
/// (or bound to a missing volume), its class's provisioner, which will create it. `None`:
/// the volume does not count (not CSI, or no class to tell).
fn driver_of(storage: &StorageObjects, claim: &PersistentVolumeClaim) -> Option<Sym> {
    if let Some(pv) = claim.volume_name.and_then(|v| storage.pv(v)) {
        return pv.csi_driver;
    }
    let class = claim.storage_class.and_then(|c| storage.storage_class(c))?;
    Some(class.provisioner).filter(|p| !p.as_str().is_empty())
}

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let storage = cluster.objects.storage();
        let mut volumes = SmallVec::new();
        let mut unusable_claim = None;
        for (volume, claim) in storage.claims_of(pod) {
            let name = volume.claim_name.as_deref().unwrap_or_default();
            if name.is_empty() {
                unusable_claim = Some(Status::error("PersistentVolumeClaim had no name"));
                break;
            }
            // The pod cannot run without its claim: no node will do until it exists.
            let Some(claim) = claim else {
                unusable_claim = Some(Status::unresolvable(format!(
                    "looking up PVC {}/{name}: {}",
                    pod.namespace,
                    claim_not_found(name)
                )));
                break;
            };
            if volume.ephemeral
                && let Err(message) = ephemeral_claim_is_for_pod(claim, pod)
            {
                unusable_claim = Some(Status::error(message));
                break;
            }
            let key = PvcKey {
                namespace: claim.namespace,
                claim: claim.name,
            };
            if let Some(driver) = driver_of(storage, claim)
                && !volumes.contains(&(driver, key))
            {
                volumes.push((driver, key));
            }
        }
        if volumes.is_empty() && unusable_claim.is_none() {
            return (None, Status::skip());
        }
        state.write(
            NAME,
            PreFilterState {
                storage: storage.clone(),
                volumes,
                unusable_claim,
                drivers: (self.missing_drivers != MissingDrivers::Allowed)
                    .then(|| cluster.objects.storage_capacities().clone()),
            },
        );
        (None, Status::success())
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(NAME) else {
            return Status::error(format!("cannot read {NAME:?} PreFilter state"));
        };
        if let Some(status) = &s.unusable_claim {
            return status.clone();
        }
        let csi_node = node.node().and_then(|n| s.storage.csi_node(n.name));
        if let Some(missing) = self.missing_driver(s, csi_node) {
            return Status::unschedulable(format!(
                "{missing} CSI driver is not installed on the node"
            ));
        }
        let Some(csi_node) = csi_node else {
            return Status::success();
        };
        let on_node = |key: PvcKey| node.pvc_ref_counts().any(|(k, _)| k == key);
        for (i, &(driver, _)) in s.volumes.iter().enumerate() {
            if s.volumes[..i].iter().any(|(d, _)| *d == driver) {
                continue;
            }
            let Some(limit) = csi_node.limit(driver) else {
                continue;
            };
            // New volumes of this driver: those no pod on the node attached already.
            let new = s.volumes[i..]
                .iter()
                .filter(|&&(d, key)| d == driver && !on_node(key))
                .count();
            if new == 0 {
                continue;
            }
            let attached = node
                .pvc_ref_counts()
                .filter_map(|(key, _)| s.storage.pvc(key.namespace, key.claim))
                .filter(|claim| driver_of(&s.storage, claim) == Some(driver))
                .count();
            if attached + new > usize::try_from(limit).unwrap_or(0) {
                return Status::unschedulable(REASON_MAX_VOLUME_COUNT_EXCEEDED);
            }
        }
        Status::success()
    }
}

impl NodeVolumeLimits {
    /// The first driver of the pod's volumes (in the pod's order; upstream takes Go's map
    /// order) that the node must have and lacks.
    fn missing_driver(
        &self,
        s: &PreFilterState,
        csi_node: Option<&gantry_api::CsiNode>,
    ) -> Option<Sym> {
        if self.missing_drivers == MissingDrivers::Allowed {
            return None;
        }
        let drivers = s.drivers.as_ref()?;
        s.volumes.iter().map(|&(driver, _)| driver).find(|&driver| {
            let needed = drivers.csi_driver(driver).is_some_and(|d| {
                self.missing_drivers == MissingDrivers::RefusedIfDriverExists
                    || d.prevent_pod_scheduling_if_missing
            });
            needed && csi_node.is_none_or(|n| n.drivers.iter().all(|d| d.name != driver))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, node_info};
    use crate::plugins::volume_binding::testing::{
        claim, class, pod_with_claims, snapshot, volume,
    };
    use crate::{ApiObjects, Code};
    use gantry_api::storage::VolumeBindingMode;
    use gantry_api::{CsiDriver, CsiNode, CsiNodeDriver, PersistentVolume, PersistentVolumeClaim};

    const EBS: &str = "ebs.csi.aws.com";
    const GCE: &str = "pd.csi.storage.gke.io";

    /// Upstream's fixtures: claims `csi-<driver>-<j>` bound to CSI volumes of the same name;
    /// `csi-4` pending in class `csi-sc` (provisioned by the first driver), `csi-5` with no
    /// class, `csi-6` bound to a missing volume in `csi-sc`.
    fn objects(drivers: &[&str], limit: Option<i32>) -> ApiObjects {
        objects_on(drivers, limit, drivers)
    }

    /// As [`objects`], with a CSINode listing `installed`.
    fn objects_on(drivers: &[&str], limit: Option<i32>, installed: &[&str]) -> ApiObjects {
        let mut pvs: Vec<PersistentVolume> = Vec::new();
        let mut pvcs: Vec<PersistentVolumeClaim> = Vec::new();
        for driver in drivers {
            for j in 0..4 {
                let name = format!("csi-{driver}-{j}");
                pvs.push(PersistentVolume {
                    csi_driver: Some(Sym::new(driver)),
                    ..volume(&name, None)
                });
                pvcs.push(PersistentVolumeClaim {
                    volume_name: Some(Sym::new(&name)),
                    ..claim(&name, None)
                });
            }
        }
        pvcs.push(claim("csi-4", Some("csi-sc")));
        pvcs.push(claim("csi-5", None));
        pvcs.push(PersistentVolumeClaim {
            volume_name: Some(Sym::new("missing-in-action")),
            ..claim("csi-6", Some("csi-sc"))
        });
        let classes = [class("csi-sc", VolumeBindingMode::Immediate, drivers[0])];
        let csi_node = CsiNode {
            node_name: Sym::new("node-for-max-pd-test-1"),
            drivers: installed
                .iter()
                .map(|d| CsiNodeDriver {
                    name: Sym::new(d),
                    allocatable_count: limit,
                })
                .collect(),
        };
        let mut objects = ApiObjects::default();
        objects.set_storage(&pvs, &pvcs, &classes, &[csi_node]);
        objects
    }

    fn pod(claims: &[&str]) -> Pod {
        let names: Vec<String> = claims
            .iter()
            .map(|c| match c.split_once(':') {
                Some((driver, j)) => format!("csi-{driver}-{j}"),
                None => format!("csi-{c}"),
            })
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        pod_with_claims("p", &names)
    }

    /// (name, new pod, existing pods, drivers, limit, rejected)
    type Case = (
        &'static str,
        Pod,
        Vec<Pod>,
        &'static [&'static str],
        Option<i32>,
        bool,
    );

    /// Upstream's TestCSILimits, CSINode-sourced cases.
    #[test]
    fn csi_limits() {
        let ebs0 = || pod(&["ebs.csi.aws.com:0"]);
        let ebs12 = || pod(&["ebs.csi.aws.com:1", "ebs.csi.aws.com:2"]);
        let running = || pod(&["ebs.csi.aws.com:3"]);
        let gce12 = || pod(&["pd.csi.storage.gke.io:1", "pd.csi.storage.gke.io:2"]);
        let cases: Vec<Case> = vec![
            (
                "fits when node volume limit >= new pods CSI volume",
                ebs0(),
                vec![running(), ebs12()],
                &[EBS],
                Some(4),
                false,
            ),
            (
                "doesn't when node volume limit <= pods CSI volume",
                ebs0(),
                vec![running(), ebs12()],
                &[EBS],
                Some(2),
                true,
            ),
            (
                "should when driver does not support volume limits",
                ebs0(),
                vec![running(), ebs12()],
                &[EBS],
                None,
                false,
            ),
            (
                "count pending PVCs towards volume limit <= pods CSI volume",
                ebs0(),
                vec![pod(&["4"]), ebs12()],
                &[EBS],
                Some(2),
                true,
            ),
            (
                "count multiple pending pvcs towards volume limit >= pods CSI volume",
                ebs0(),
                vec![pod(&["4"]), pod(&["4"]), ebs12()],
                &[EBS],
                Some(4),
                false,
            ),
            (
                "should count PVCs with invalid PV name but valid SC",
                ebs0(),
                vec![pod(&["6"]), ebs12()],
                &[EBS],
                Some(2),
                true,
            ),
            (
                "don't count pvcs with missing SC towards volume limit",
                ebs0(),
                vec![running(), pod(&["5"])],
                &[EBS],
                Some(2),
                false,
            ),
            (
                "count pvcs with the same type towards volume limit",
                ebs0(),
                vec![gce12(), ebs12()],
                &[EBS, GCE],
                Some(2),
                true,
            ),
            (
                "don't count pvcs with different type towards volume limit",
                gce12(),
                vec![ebs12(), running()],
                &[EBS, GCE],
                Some(2),
                false,
            ),
            (
                "a volume already attached counts once",
                ebs12(),
                vec![ebs12(), running()],
                &[EBS],
                Some(2),
                false,
            ),
        ];
        let n = node("node-for-max-pd-test-1", 1000, 1 << 30);
        for (name, new_pod, existing, drivers, limit, rejected) in cases {
            let objects = objects(drivers, limit);
            let snapshot = snapshot(std::slice::from_ref(&n), &[]);
            let mut state = CycleState::new();
            let cluster = Cluster {
                nodes: &snapshot,
                objects: &objects,
            };
            let (_, status) = NodeVolumeLimits::default().pre_filter(&mut state, &new_pod, cluster);
            assert!(status.is_success(), "{name}: {status:?}");
            let status =
                NodeVolumeLimits::default().filter(&state, &new_pod, &node_info(&n, &existing));
            if rejected {
                assert_eq!(status.code(), Code::Unschedulable, "{name}");
                assert_eq!(status.message(), REASON_MAX_VOLUME_COUNT_EXCEEDED, "{name}");
            } else {
                assert!(status.is_success(), "{name}: {status:?}");
            }
        }
    }

    #[test]
    fn pre_filter_skips_and_fails_like_upstream() {
        let objects = objects(&[EBS], Some(2));
        let n = node("node-for-max-pd-test-1", 1000, 1 << 30);
        let snapshot = snapshot(std::slice::from_ref(&n), &[]);
        let cluster = Cluster {
            nodes: &snapshot,
            objects: &objects,
        };
        let pre_filter = |pod: &Pod| {
            NodeVolumeLimits::default()
                .pre_filter(&mut CycleState::new(), pod, cluster)
                .1
        };
        assert!(pre_filter(&Pod::new("default", "no-volumes")).is_skip());
        assert!(
            pre_filter(&pod(&["5"])).is_skip(),
            "a claim with no class is not counted"
        );
        // A missing claim passes PreFilter (upstream's looks nothing up) and fails
        // Filter on every node, unresolvably.
        let missing = pod_with_claims("p", &["nope"]);
        let mut state = CycleState::new();
        assert!(
            NodeVolumeLimits::default()
                .pre_filter(&mut state, &missing, cluster)
                .1
                .is_success()
        );
        let status = NodeVolumeLimits::default().filter(&state, &missing, &node_info(&n, &[]));
        assert_eq!(status.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            status.message(),
            r#"looking up PVC default/nope: persistentvolumeclaim "nope" not found"#
        );
    }

    /// Upstream's `TestVolumeLimitScalingGate` (v1.36.2), and v1.35's rule: with the gate
    /// on, a pod's CSI volume needs its driver on the node where a CSIDriver asks for it
    /// (v1.35: where one exists); a node with no CSINode lacks every driver.
    #[test]
    fn volume_limit_scaling_refuses_nodes_without_the_driver() {
        let pod = pod(&["ebs.csi.aws.com:0"]);
        let missing = format!("{EBS} CSI driver is not installed on the node");
        // (rule, CSIDriver object: Some(preventPodSchedulingIfMissing), driver on the
        // node's CSINode, node with a CSINode at all, refused)
        use MissingDrivers::{
            Allowed, RefusedIfDriverAsks as Asks, RefusedIfDriverExists as Exists,
        };
        let cases = [
            (Asks, Some(false), false, true, false),
            (Asks, Some(true), false, true, true),
            (Allowed, Some(true), false, true, false),
            (Asks, Some(true), true, true, false),
            (Asks, None, false, true, false),
            (Asks, Some(true), false, false, true),
            (Exists, Some(false), false, true, true),
            (Exists, None, false, false, false),
        ];
        for (i, (rule, driver, installed, has_csi_node, refused)) in cases.into_iter().enumerate() {
            let installed: &[&str] = if installed { &[EBS] } else { &[GCE] };
            let mut objects = objects_on(&[EBS], Some(2), installed);
            let drivers: Vec<CsiDriver> = driver
                .map(|prevent| CsiDriver {
                    name: Sym::new(EBS),
                    storage_capacity: false,
                    prevent_pod_scheduling_if_missing: prevent,
                })
                .into_iter()
                .collect();
            objects.set_storage_capacities(&drivers, &[]);
            let name = if has_csi_node {
                "node-for-max-pd-test-1"
            } else {
                "no-csi-node"
            };
            let n = node(name, 1000, 1 << 30);
            let snapshot = snapshot(std::slice::from_ref(&n), &[]);
            let cluster = Cluster {
                nodes: &snapshot,
                objects: &objects,
            };
            let plugin = NodeVolumeLimits {
                missing_drivers: rule,
            };
            let mut state = CycleState::new();
            assert!(plugin.pre_filter(&mut state, &pod, cluster).1.is_success());
            let status = plugin.filter(&state, &pod, &node_info(&n, &[]));
            if refused {
                assert_eq!(status.code(), Code::Unschedulable, "case {i}");
                assert_eq!(status.message(), missing, "case {i}");
            } else {
                assert!(status.is_success(), "case {i}: {status:?}");
            }
        }
        let release = |v: &str| gantry_api::Release::parse(Some(v), None).unwrap();
        assert_eq!(
            MissingDrivers::for_release(release("1.36")),
            MissingDrivers::Allowed
        );
        assert_eq!(
            MissingDrivers::for_release(release("1.37")),
            MissingDrivers::RefusedIfDriverAsks
        );
        let v135 = gantry_api::Release::parse(Some("1.35"), Some("VolumeLimitScaling=true"));
        assert_eq!(
            MissingDrivers::for_release(v135.unwrap()),
            MissingDrivers::RefusedIfDriverExists
        );
    }
}
