//! GangScheduling (v1.36.3, `framework/plugins/gangscheduling/gangscheduling.go`): a pod
//! of a gang (a PodGroup with `schedulingPolicy.gang`) enters the queue only once
//! `minCount` members exist, and waits at Permit until `minCount` members are scheduled
//! (assumed or bound); the pod-group cycle lets the whole gang through at once.

use crate::PermitTimeout;

use gantry_api::{Pod, Sym};
use gantry_cache::{GroupKey, PodGroupStates};

use crate::events::{ActionType, ClusterEvent, EventResource};
use crate::{Code, CycleState, PermitPlugin, Plugin, PreEnqueuePlugin, PreEnqueueView, Status};

pub const NAME: &str = "GangScheduling";

/// How long gang pods wait at Permit for the quorum (`permitTimeoutDuration`).
pub const PERMIT_TIMEOUT: PermitTimeout = PermitTimeout::from_secs(5 * 60);

/// PreEnqueue's reason while fewer than `minCount` members exist.
pub const WAITING_FOR_MEMBERS: &str =
    "waiting for minCount pods from a gang to appear in scheduling queue";

/// Permit's reason while fewer than `minCount` members are scheduled.
pub const WAITING_FOR_QUORUM: &str = "waiting for minCount pods from a gang to be scheduled";

pub struct GangScheduling;

/// A new member may complete the quorum; a new PodGroup may be the one a pod waits for
/// (both are immutable, so updates never help).
const EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD),
    ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
    ClusterEvent::new(EventResource::PodGroup, ActionType::ADD),
];

impl Plugin for GangScheduling {
    fn name(&self) -> &'static str {
        NAME
    }

    fn events_to_register(&self) -> &'static [ClusterEvent] {
        EVENTS
    }
}

/// Upstream's queueing hints: an added pod or PodGroup requeues only the pods of its own
/// group (same namespace and name).
pub fn helps(waiting: &Pod, added: GroupKey) -> bool {
    GroupKey::of(waiting) == Some(added)
}

impl PreEnqueuePlugin for GangScheduling {
    fn pre_enqueue(&self, pod: &Pod, cluster: &PreEnqueueView<'_>) -> Status {
        let groups = cluster.groups;
        let Some(key) = GroupKey::of(pod) else {
            return Status::success();
        };
        let Some(group) = groups.group(key) else {
            return Status::unresolvable(format!(
                "waiting for pods's pod group {:?} to appear in scheduling queue",
                key.name.as_str()
            ));
        };
        let Some(min_count) = group.min_count() else {
            return Status::success();
        };
        if groups.counts(key).all() < min_count as usize {
            return Status::unresolvable(WAITING_FOR_MEMBERS);
        }
        Status::success()
    }
}

impl PermitPlugin for GangScheduling {
    fn permit(
        &self,
        _state: &mut CycleState,
        pod: &Pod,
        _node: Sym,
        groups: &PodGroupStates,
    ) -> (Status, PermitTimeout) {
        let Some(key) = GroupKey::of(pod) else {
            return (Status::success(), PermitTimeout::ZERO);
        };
        let Some(group) = groups.group(key) else {
            return (
                Status::error(format!(
                    "failed to get podGroup {key}: podgroup.scheduling.k8s.io {:?} not found",
                    key.name.as_str()
                )),
                PermitTimeout::ZERO,
            );
        };
        let Some(min_count) = group.min_count() else {
            return (Status::success(), PermitTimeout::ZERO);
        };
        if groups.counts(key).scheduled() < min_count as usize {
            return (Status::new(Code::Wait, WAITING_FOR_QUORUM), PERMIT_TIMEOUT);
        }
        (Status::success(), PermitTimeout::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gantry_api::PodGroup;

    use super::*;

    fn pod(namespace: &str, name: &str, group: Option<&str>) -> Arc<Pod> {
        let mut pod = Pod::new(namespace, name);
        pod.scheduling_group = group.map(Sym::new);
        Arc::new(pod)
    }

    fn states(groups: &[PodGroup], pods: &[&Arc<Pod>]) -> PodGroupStates {
        let mut states = PodGroupStates::default();
        for group in groups {
            states.set_group(Arc::new(group.clone()));
        }
        for pod in pods {
            states.add_member(Arc::clone(pod));
        }
        states
    }

    /// Upstream's TestPreEnqueue (the cases without composite pod groups): pg1 gang of 3,
    /// pg2 gang of 4, pg3 basic.
    #[test]
    fn pre_enqueue_waits_for_the_group_and_its_quorum() {
        let mut basic = PodGroup::gang("ns1", "pg3", 1);
        basic.policy = gantry_api::GroupPolicy::Basic;
        let all_groups = [
            PodGroup::gang("ns1", "pg1", 3),
            PodGroup::gang("ns1", "pg2", 4),
            basic,
        ];
        let p: Vec<Arc<Pod>> = ["p1", "p2", "p3"]
            .iter()
            .map(|n| pod("ns1", n, Some("pg1")))
            .collect();
        let (p4, p5) = (pod("ns1", "p4", Some("pg2")), pod("ns1", "p5", Some("pg2")));
        let basic_pod = pod("ns1", "basic-pod", Some("pg3"));
        let non_gang = pod("ns1", "non-gang", None);
        let wait_group = r#"waiting for pods's pod group "pg1" to appear in scheduling queue"#;
        /// Name, pod, the other members, the PodGroups, the rejection expected.
        type Case<'a> = (
            &'a str,
            &'a Arc<Pod>,
            Vec<&'a Arc<Pod>>,
            &'a [PodGroup],
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "non-gang pod succeeds immediately",
                &non_gang,
                vec![],
                &all_groups,
                None,
            ),
            (
                "basic policy pod succeeds immediately",
                &basic_pod,
                vec![],
                &all_groups,
                None,
            ),
            (
                "gang pod fails PreEnqueue when pod group is not yet created",
                &p[0],
                vec![&p[1], &p[2], &p4, &p5],
                &[],
                Some(wait_group),
            ),
            (
                "gang pod fails PreEnqueue when quorum is not met",
                &p[0],
                vec![&p[1], &p4, &p5],
                &all_groups[..2],
                Some(WAITING_FOR_MEMBERS),
            ),
            (
                "gang pod passes PreEnqueue",
                &p[0],
                vec![&p[1], &p[2], &p4, &p5],
                &all_groups[..2],
                None,
            ),
        ];
        for (name, pod, others, groups, want) in cases {
            let mut members = others;
            members.push(pod);
            let status = GangScheduling
                .pre_enqueue(pod, &PreEnqueueView::of_groups(&states(groups, &members)));
            match want {
                None => assert!(status.is_success(), "{name}: {}", status.message()),
                Some(message) => {
                    assert_eq!(status.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(status.message(), message, "{name}");
                }
            }
        }
    }

    /// Permit waits until minCount members are assumed or bound, then allows.
    #[test]
    fn permit_waits_until_the_quorum_is_scheduled() {
        let group = PodGroup::gang("ns1", "pg1", 2);
        let (a, b) = (pod("ns1", "a", Some("pg1")), pod("ns1", "b", Some("pg1")));
        let mut states = states(&[group], &[&a, &b]);
        let node = Sym::new("n1");
        let mut cycle = CycleState::new();
        let assumed_a = Arc::new(a.bound_to(node));
        states.assume(&assumed_a);
        let (status, timeout) = GangScheduling.permit(&mut cycle, &assumed_a, node, &states);
        assert_eq!(status.code(), Code::Wait);
        assert_eq!(status.message(), WAITING_FOR_QUORUM);
        assert_eq!(timeout, PERMIT_TIMEOUT);
        let assumed_b = Arc::new(b.bound_to(node));
        states.assume(&assumed_b);
        let (status, _) = GangScheduling.permit(&mut cycle, &assumed_b, node, &states);
        assert!(status.is_success());
        // A pod whose group is gone is an error (retried when it comes back).
        let empty = PodGroupStates::default();
        let (status, _) = GangScheduling.permit(&mut cycle, &assumed_b, node, &empty);
        assert_eq!(status.code(), Code::Error);
    }

    /// Upstream's Test_isSchedulableAfterPodAdded / PodGroupAdded: only the pod's own
    /// group, by namespace and name.
    #[test]
    fn events_requeue_only_the_pods_of_their_group() {
        let waiting = pod("ns1", "p", Some("pg"));
        let key = |ns: &str, name: &str| GroupKey {
            namespace: Sym::new(ns),
            name: Sym::new(name),
        };
        assert!(helps(&waiting, key("ns1", "pg")));
        assert!(!helps(&waiting, key("foo", "pg")));
        assert!(!helps(&waiting, key("ns1", "pg2")));
        assert!(!helps(&pod("ns1", "q", None), key("ns1", "pg")));
    }
}
