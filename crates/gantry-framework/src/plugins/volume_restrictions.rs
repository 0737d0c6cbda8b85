//! VolumeRestrictions: an in-tree disk (GCE PD, AWS EBS, iSCSI, Ceph RBD) already mounted
//! by a pod on a node cannot be mounted there again (read-only mounts aside), and a claim
//! with the ReadWriteOncePod access mode may be used by one pod in the whole cluster.

use std::sync::Arc;

use gantry_api::storage::AccessMode;
use gantry_api::{Pod, Sym};
use gantry_cache::{NodeInfo, PvcKey};
use smallvec::SmallVec;

use crate::events::{ActionType, ClusterEvent, EventResource};
use crate::{Cluster, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};

pub const NAME: &str = "VolumeRestrictions";
pub const REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
/// Until v1.33; [`REASON_READ_WRITE_ONCE_POD_IN_USE`] from v1.34 (kubernetes#129145).
pub const REASON_READ_WRITE_ONCE_POD_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";
pub const REASON_READ_WRITE_ONCE_POD_IN_USE: &str = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

/// Upstream v1.28: a deleted pod frees its disks and claims, a new node may fit, a new
/// claim may let PreFilter find it.
const EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
    ClusterEvent::new(EventResource::Node, ActionType::ADD.or(ActionType::UPDATE)),
    ClusterEvent::new(
        EventResource::PersistentVolumeClaim,
        ActionType::ADD.or(ActionType::UPDATE),
    ),
];

#[derive(Default)]
pub struct VolumeRestrictions {
    /// Say [`REASON_READ_WRITE_ONCE_POD_IN_USE`] (v1.34 on).
    pub says_in_use: bool,
}

/// The pod's ReadWriteOncePod claims, and how many uses of them other pods make.
#[derive(Clone)]
struct PreFilterState {
    namespace: Sym,
    claims: SmallVec<[Sym; 2]>,
    conflicts: i64,
}

impl PreFilterState {
    fn uses(&self, pod: &Pod) -> i64 {
        if pod.namespace != self.namespace {
            return 0;
        }
        let uses = pod
            .volumes
            .iter()
            .filter_map(|v| v.persistent_claim())
            .filter(|c| Sym::get(c).is_some_and(|c| self.claims.contains(&c)))
            .count();
        i64::try_from(uses).unwrap_or(i64::MAX)
    }
}

/// Upstream's `satisfyVolumeConflicts`: none of the pod's disks is mounted in a
/// conflicting way by a pod already on the node.
fn disks_free(pod: &Pod, node: &NodeInfo) -> bool {
    pod.volumes
        .iter()
        .filter_map(|v| v.disk.as_ref())
        .all(|disk| {
            node.pods().iter().all(|existing| {
                existing
                    .volumes
                    .iter()
                    .filter_map(|v| v.disk.as_ref())
                    .all(|other| !disk.conflicts(other))
            })
        })
}

/// The message of upstream's lister NotFound error for a claim.
pub(crate) fn claim_not_found(name: &str) -> String {
    format!("persistentvolumeclaim {name:?} not found")
}

impl Plugin for VolumeRestrictions {
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

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let storage = cluster.objects.storage();
        let mut claims = SmallVec::new();
        for (name, claim) in storage.persistent_claims_of(pod) {
            let Some(claim) = claim else {
                return (None, Status::unresolvable(claim_not_found(name)));
            };
            if claim.access_modes.contains(&AccessMode::ReadWriteOncePod)
                && !claims.contains(&claim.name)
            {
                claims.push(claim.name);
            }
        }
        let used = claims.iter().filter(|&&claim| {
            cluster.nodes.is_pvc_used(PvcKey {
                namespace: pod.namespace,
                claim,
            })
        });
        let conflicts = i64::try_from(used.count()).unwrap_or(i64::MAX);
        let has_disks = pod.volumes.iter().any(|v| v.disk.is_some());
        if conflicts == 0 && !has_disks {
            return (None, Status::skip());
        }
        state.write(
            NAME,
            PreFilterState {
                namespace: pod.namespace,
                claims,
                conflicts,
            },
        );
        (None, Status::success())
    }

    fn update_for_pod(
        &self,
        state: &mut CycleState,
        _pod: &Pod,
        other: &Arc<Pod>,
        _node: &NodeInfo,
        delta: i64,
    ) {
        if let Some(s) = state.read_mut::<PreFilterState>(NAME) {
            s.conflicts += delta * s.uses(other);
        }
    }
}

impl FilterPlugin for VolumeRestrictions {
    /// Disks first, per node; then the claim conflict, which is cluster-wide, so every node
    /// gets the same verdict. Both Unschedulable: preempting the other user frees them.
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if !disks_free(pod, node) {
            return Status::unschedulable(REASON_DISK_CONFLICT);
        }
        match state.read::<PreFilterState>(NAME) {
            Some(s) if s.conflicts > 0 => Status::unschedulable(if self.says_in_use {
                REASON_READ_WRITE_ONCE_POD_IN_USE
            } else {
                REASON_READ_WRITE_ONCE_POD_CONFLICT
            }),
            Some(_) => Status::success(),
            None => Status::error(format!("cannot read {NAME:?} PreFilter state")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiObjects;
    use crate::Code;
    use crate::plugins::testing::{node, node_info};
    use crate::plugins::volume_binding::testing::{claim, pod_with_claims, snapshot};
    use gantry_api::PersistentVolumeClaim;

    fn rwop(name: &str) -> PersistentVolumeClaim {
        let mut c = claim(name, None);
        c.access_modes = smallvec::smallvec![AccessMode::ReadWriteOncePod];
        c
    }

    fn rwx(name: &str) -> PersistentVolumeClaim {
        let mut c = claim(name, None);
        c.access_modes = smallvec::smallvec![AccessMode::ReadWriteMany];
        c
    }

    /// (name, pod, pods on node-1, claims, PreFilter code, message of the deciding verdict)
    type Case<'a> = (
        &'a str,
        Pod,
        Vec<Pod>,
        Vec<PersistentVolumeClaim>,
        Code,
        &'a str,
    );

    /// Upstream's TestAccessModeConflicts; Filter runs when PreFilter succeeded.
    #[test]
    fn access_mode_conflicts() {
        let one = || pod_with_claims("pod-with-one-pvc", &["claim-with-rwop-1"]);
        let two = || {
            pod_with_claims(
                "pod-with-two-pvcs",
                &["claim-with-rwop-1", "claim-with-rwop-2"],
            )
        };
        let rwx_pod = || pod_with_claims("pod-with-rwx", &["claim-with-rwx"]);
        let not_found = claim_not_found("claim-with-rwop-1");
        let cases: Vec<Case> = vec![
            (
                "nothing",
                Pod::new("default", "p"),
                vec![],
                vec![],
                Code::Skip,
                "",
            ),
            (
                "failed to get PVC",
                one(),
                vec![],
                vec![],
                Code::UnschedulableAndUnresolvable,
                not_found.as_str(),
            ),
            (
                "no access mode conflict",
                one(),
                vec![rwx_pod()],
                vec![rwop("claim-with-rwop-1"), rwx("claim-with-rwx")],
                Code::Skip,
                "",
            ),
            (
                "access mode conflict, unschedulable",
                pod_with_claims("pod-with-one-conflict", &["claim-with-rwop-1"]),
                vec![one(), rwx_pod()],
                vec![rwop("claim-with-rwop-1"), rwx("claim-with-rwx")],
                Code::Success,
                REASON_READ_WRITE_ONCE_POD_CONFLICT,
            ),
            (
                "two conflicts, unschedulable",
                pod_with_claims(
                    "pod-with-two-conflicts",
                    &["claim-with-rwop-1", "claim-with-rwop-2"],
                ),
                vec![two(), rwx_pod()],
                vec![
                    rwop("claim-with-rwop-1"),
                    rwop("claim-with-rwop-2"),
                    rwx("claim-with-rwx"),
                ],
                Code::Success,
                REASON_READ_WRITE_ONCE_POD_CONFLICT,
            ),
        ];
        let n = node("node-1", 1000, 1 << 30);
        for (name, pod, existing, claims, pre_filter_code, message) in cases {
            let mut objects = ApiObjects::default();
            objects.set_storage(&[], &claims, &[], &[]);
            let snapshot = snapshot(std::slice::from_ref(&n), &existing);
            let mut state = CycleState::new();
            let cluster = Cluster {
                nodes: &snapshot,
                objects: &objects,
            };
            let (_, status) = VolumeRestrictions::default().pre_filter(&mut state, &pod, cluster);
            assert_eq!(status.code(), pre_filter_code, "{name}");
            let status = if status.is_success() {
                let node = node_info(&n, &existing);
                let v128 = VolumeRestrictions { says_in_use: false };
                let verdict = v128.filter(&state, &pod, &node);
                assert_eq!(verdict.code(), Code::Unschedulable, "{name}");
                let v134 = VolumeRestrictions { says_in_use: true };
                assert_eq!(
                    v134.filter(&state, &pod, &node).message(),
                    REASON_READ_WRITE_ONCE_POD_IN_USE,
                    "{name}"
                );
                verdict
            } else {
                status
            };
            assert_eq!(status.message(), message, "{name}");
        }
    }

    /// Upstream's TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts and
    /// TestISCSIDiskConflicts: (PreFilter code, Filter verdict) for a pod with no disk, and
    /// for pods with the same and another disk than the node's pod has.
    #[test]
    fn disk_conflicts() {
        use gantry_api::{Disk, Volume};
        let gce = |name: &str| Disk::GcePersistentDisk {
            pd_name: Arc::from(name),
            read_only: false,
        };
        let ebs = |id: &str| Disk::AwsElasticBlockStore {
            volume_id: Arc::from(id),
        };
        let rbd = |monitors: [&str; 2]| Disk::Rbd {
            monitors: monitors.iter().map(|m| Arc::from(*m)).collect(),
            pool: Arc::from("foo"),
            image: Arc::from("bar"),
            read_only: false,
        };
        let iscsi = |iqn: &str| Disk::Iscsi {
            iqn: Arc::from(iqn),
            read_only: false,
        };
        let kinds = [
            ("gce", gce("foo"), gce("bar")),
            ("aws", ebs("foo"), ebs("bar")),
            ("rbd", rbd(["a", "b"]), rbd(["c", "d"])),
            (
                "iscsi",
                iscsi("iqn.2016-12.server:storage.target01"),
                iscsi("iqn.2016-12.server:storage.target02"),
            ),
        ];
        let with_disk = |name: &str, disk: &Disk| {
            let mut pod = Pod::new("default", name);
            pod.volumes.push(Volume {
                disk: Some(disk.clone()),
                ..Volume::claim("v", "unused")
            });
            pod.volumes[0].claim_name = None;
            pod
        };
        let n = node("node-1", 1000, 1 << 30);
        for (kind, disk, other) in kinds {
            let existing = vec![with_disk("existing", &disk)];
            let snapshot = snapshot(std::slice::from_ref(&n), &existing);
            let objects = ApiObjects::default();
            let cluster = Cluster {
                nodes: &snapshot,
                objects: &objects,
            };
            let info = node_info(&n, &existing);
            let run = |pod: &Pod| {
                let mut state = CycleState::new();
                let (_, pre) = VolumeRestrictions::default().pre_filter(&mut state, pod, cluster);
                let verdict = VolumeRestrictions::default().filter(&state, pod, &info);
                (pre.code(), verdict.code(), verdict.message())
            };
            let nothing = Pod::new("default", "nothing");
            assert_eq!(run(&nothing).0, Code::Skip, "{kind}: nothing");
            assert_eq!(
                run(&with_disk("same", &disk)),
                (
                    Code::Success,
                    Code::Unschedulable,
                    REASON_DISK_CONFLICT.to_string()
                ),
                "{kind}: same state"
            );
            assert_eq!(
                run(&with_disk("different", &other)),
                (Code::Success, Code::Success, String::new()),
                "{kind}: different state"
            );
        }
    }

    #[test]
    fn preemption_what_if_tracks_the_claims_users() {
        let n = node("node-1", 1000, 1 << 30);
        let user = pod_with_claims("user", &["claim-with-rwop-1"]).on_node("node-1");
        let mut objects = ApiObjects::default();
        objects.set_storage(&[], &[rwop("claim-with-rwop-1")], &[], &[]);
        let snapshot = snapshot(std::slice::from_ref(&n), std::slice::from_ref(&user));
        let pod = pod_with_claims("incoming", &["claim-with-rwop-1"]);
        let mut state = CycleState::new();
        let cluster = Cluster {
            nodes: &snapshot,
            objects: &objects,
        };
        let (_, status) = VolumeRestrictions::default().pre_filter(&mut state, &pod, cluster);
        assert!(status.is_success());
        let info = node_info(&n, &[]);
        let user = Arc::new(user);
        VolumeRestrictions::default().remove_pod(&mut state, &pod, &user, &info);
        assert!(
            VolumeRestrictions::default()
                .filter(&state, &pod, &info)
                .is_success()
        );
        VolumeRestrictions::default().add_pod(&mut state, &pod, &user, &info);
        assert!(
            !VolumeRestrictions::default()
                .filter(&state, &pod, &info)
                .is_success()
        );
    }
}
