//! Coscheduling, scheduler-plugins' gang plugin (`pkg/coscheduling`, as vendored in
//! openshift-kni/scheduler-plugins e0b47cde on kube-scheduler v1.35.4), enabled by name:
//! pods labelled `scheduling.x-k8s.io/pod-group` wait at Permit until `minMember` of their
//! PodGroup are assumed or bound, then all are let through. PreFilter refuses a member
//! while its group lacks pods or capacity (`minResources`); PostFilter rejects the
//! group's waiting pods when a member fits nowhere; Unreserve (a timeout, a rejection)
//! rejects the others. The queue sort (priority, then the group's age, then the name)
//! is the scheduler's ([`crate::QueueSort::Coscheduling`]). Messages are upstream's, word
//! for word.

use std::time::Duration;

use gantry_api::coscheduling::{CoschedulingGroup, GoQuantity};
use gantry_api::{Pod, QuantityFormat, Sym};
use gantry_cache::{ClusterState, GroupKey, NodeInfo, PodGroupStates};

use crate::events::{ActionType, ClusterEvent, EventResource};
use crate::handle::{self, Memory, Request};
use crate::interface::*;
use crate::{Code, CycleState, Status};

pub const NAME: &str = "Coscheduling";

/// `util.DefaultWaitTime`: the wait when neither the group nor the arguments give one.
const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// `CoschedulingArgs`, defaulted (`apis/config/v1/defaults.go`) and validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coscheduling {
    /// `permitWaitingTimeSeconds` (60): the wait at Permit when the group sets none, and
    /// how long a minResources check holds.
    pub permit_waiting_time: Duration,
    /// `podGroupBackoffSeconds` (0, off): how long a rejected group is refused.
    pub pod_group_backoff: Duration,
    /// `podGroupRejectPercentage` (10): PostFilter rejects the group only when more than
    /// this share of `minMember` is still unassigned.
    pub pod_group_reject_percentage: i32,
}

impl Default for Coscheduling {
    fn default() -> Coscheduling {
        Coscheduling {
            permit_waiting_time: Duration::from_secs(60),
            pod_group_backoff: Duration::ZERO,
            pod_group_reject_percentage: 10,
        }
    }
}

/// The pod's group, if its label names one, and the PodGroup if it exists.
fn group_of<'g>(
    pod: &Pod,
    groups: &'g PodGroupStates,
) -> Option<(GroupKey, Option<&'g CoschedulingGroup>)> {
    let key = GroupKey::labelled(pod)?;
    Some((key, groups.coscheduling_group(key).map(|g| &**g)))
}

/// `EventsToRegister`: Pod/Add (assigned or not) and PodGroup Add and Update.
const EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
    ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD),
    ClusterEvent::new(
        EventResource::PodGroup,
        ActionType::ADD.or(ActionType::UPDATE),
    ),
];

impl Plugin for Coscheduling {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A new pod (a member may complete the quorum) and PodGroup changes.
    fn events_to_register(&self) -> &'static [ClusterEvent] {
        EVENTS
    }
}

impl PreFilterPlugin for Coscheduling {
    /// `PodGroupManager.PreFilter`: refused (UnschedulableAndUnresolvable, so that
    /// preemption does not try) while the group is backed off, has fewer than `minMember`
    /// pods, too many of them gated, or the cluster lacks its `minResources`.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let groups = cluster.objects.pod_groups().lock();
        let Some((key, Some(group))) = group_of(pod, &groups) else {
            return (None, Status::success());
        };
        let memory = groups.coscheduling_memory(key);
        if memory.backed_off_until.is_some() {
            return (None, refuse(format!("podGroup {} failed recently", key)));
        }
        let pods = groups.labelled_counts(key).all();
        let min = group.min_member as usize;
        if pods < min {
            return (
                None,
                refuse(format!(
                    "pre-filter pod {} cannot find enough sibling pods, current pods number: {pods}, minMember of group: {min}",
                    pod.name
                )),
            );
        }
        let gated = groups
            .labelled_members(key)
            .filter(|member| member.node_name.is_none() && !member.scheduling_gates.is_empty())
            .count();
        if gated > pods - min {
            return (
                None,
                refuse(format!(
                    "pre-filter pod {} cannot proceed due to gated pods in the same PodGroup",
                    pod.name
                )),
            );
        }
        let Some(min_resources) = &group.min_resources else {
            return (None, Status::success());
        };
        if memory.permitted_until.is_some() {
            return (None, Status::success());
        }
        let mut wanted = min_resources.clone();
        wanted.retain(|(name, _)| name != "pods");
        wanted.push((
            "pods".to_string(),
            GoQuantity::whole(i64::from(group.min_member), QuantityFormat::DecimalSI),
        ));
        wanted.sort_by(|a, b| a.0.cmp(&b.0));
        if let Err(gap) = check_cluster_resource(cluster.nodes, key, &mut wanted) {
            return (None, refuse(gap));
        }
        handle::ask(
            state,
            Request::Remember {
                group: key,
                change: Memory::Permitted(self.permit_waiting_time),
            },
        );
        (None, Status::success())
    }
}

fn refuse(message: String) -> Status {
    Status::unresolvable(message)
}

/// `CheckClusterResource`: takes each node's room (the group's own pods counted as gone)
/// off what is wanted, node by node, until nothing is; what is left is the gap, printed
/// as Go prints the ResourceList.
fn check_cluster_resource(
    nodes: &dyn ClusterState,
    group: GroupKey,
    wanted: &mut Vec<(String, GoQuantity)>,
) -> Result<(), String> {
    for position in 0..nodes.num_nodes() {
        let info = nodes.node_at(position);
        if info.node().is_none() {
            continue;
        }
        wanted.retain_mut(|(name, quantity)| {
            let room = node_room(info, group, name);
            // On overflow apimachinery goes on at arbitrary precision: the gap is then
            // certainly not closed by this node.
            quantity.sub(&room);
            quantity.value > 0
        });
        if wanted.is_empty() {
            return Ok(());
        }
    }
    let items: Vec<String> = wanted
        .iter()
        .map(|(name, quantity)| format!("{name}:{}", quantity.go_debug()))
        .collect();
    Err(format!("resource gap: map[{}]", items.join(" ")))
}

/// `getNodeResource` and `util.ResourceList`: the node's allocatable less what its pods
/// outside the group request, as the quantity apimachinery builds for `name`.
fn node_room(info: &NodeInfo, group: GroupKey, name: &str) -> GoQuantity {
    let outside = |usage: &dyn Fn(&Pod) -> i64| -> i64 {
        info.pods()
            .iter()
            .filter(|p| GroupKey::labelled(p) != Some(group))
            .map(|p| usage(p))
            .sum()
    };
    let allocatable = info.allocatable();
    match name {
        "cpu" => GoQuantity::milli(
            allocatable.milli_cpu - outside(&|p| p.usage().milli_cpu),
            QuantityFormat::DecimalSI,
        ),
        "memory" => GoQuantity::whole(
            allocatable.memory - outside(&|p| p.usage().memory),
            QuantityFormat::BinarySI,
        ),
        "ephemeral-storage" => GoQuantity::whole(
            allocatable.ephemeral_storage - outside(&|p| p.usage().ephemeral_storage),
            QuantityFormat::BinarySI,
        ),
        "pods" => GoQuantity::whole(allocatable.pods - outside(&|_| 1), QuantityFormat::BinarySI),
        scalar => {
            let format = if scalar.starts_with("hugepages-") {
                QuantityFormat::BinarySI
            } else {
                QuantityFormat::DecimalSI
            };
            // Only resources the node has count (the map is built from its allocatable).
            let room = Sym::get(scalar)
                .filter(|&sym| allocatable.scalars().any(|(s, _)| s == sym))
                .map_or(0, |sym| {
                    allocatable.scalar(sym) - outside(&|p| p.usage().scalar(sym))
                });
            GoQuantity::whole(room, format)
        }
    }
}

impl PostFilterPlugin for Coscheduling {
    /// Rejects the group's waiting pods when a member fits nowhere, unless the quorum is
    /// assigned already or the gap to it is within `podGroupRejectPercentage`.
    fn post_filter(&self, state: &mut CycleState, pod: &Pod, groups: &PodGroupStates) -> Status {
        let Some((key, Some(group))) = group_of(pod, groups) else {
            return Status::unschedulable("can not find pod group");
        };
        let assigned = groups.labelled_counts(key).scheduled();
        let min = group.min_member as usize;
        if assigned >= min {
            return Status::without_reason(Code::Unschedulable);
        }
        let not_assigned = (min - assigned) as f64 / min as f64;
        if not_assigned <= f64::from(self.pod_group_reject_percentage) / 100.0 {
            return Status::without_reason(Code::Unschedulable);
        }
        handle::ask(
            state,
            Request::RejectWaiting {
                group: key,
                plugin: NAME,
                message: "optimistic rejection in PostFilter",
            },
        );
        if !self.pod_group_backoff.is_zero() && groups.labelled_counts(key).all() >= min {
            let change = Memory::BackOff(self.pod_group_backoff);
            handle::ask(state, Request::Remember { group: key, change });
        }
        for change in [Memory::Unpermitted, Memory::Failed] {
            handle::ask(state, Request::Remember { group: key, change });
        }
        Status::unschedulable(format!(
            "PodGroup {key} gets rejected due to Pod {} is unschedulable even after PostFilter",
            pod.name
        ))
    }
}

impl ReservePlugin for Coscheduling {
    fn reserve(&self, _state: &mut CycleState, _pod: &Pod, _node: &NodeInfo) -> Status {
        Status::success()
    }

    /// A member left (a timeout, a rejection, a failed bind): the group's other waiting
    /// pods are rejected, and the group counts as failed.
    fn unreserve(&self, state: &mut CycleState, pod: &Pod, _node: Sym) {
        let Some(key) = GroupKey::labelled(pod) else {
            return;
        };
        // Whether the PodGroup exists is settled by the scheduler, which holds the groups:
        // the requests name the group, and do nothing for one that does not exist.
        handle::ask(
            state,
            Request::RejectWaiting {
                group: key,
                plugin: NAME,
                message: "rejection in Unreserve",
            },
        );
        for change in [Memory::Unpermitted, Memory::Failed] {
            handle::ask(state, Request::Remember { group: key, change });
        }
    }
}

impl PermitPlugin for Coscheduling {
    /// Waits until `minMember` of the group are assumed or bound (this pod counts, being
    /// assumed); the one that completes it lets the waiting ones through. The first to
    /// wait asks for its pending siblings to be tried at once.
    fn permit(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _node: Sym,
        groups: &PodGroupStates,
    ) -> (Status, PermitTimeout) {
        let Some((key, group)) = group_of(pod, groups) else {
            return (Status::success(), PermitTimeout::ZERO);
        };
        let Some(group) = group else {
            return (
                Status::unschedulable("PodGroup not found"),
                PermitTimeout::ZERO,
            );
        };
        let assigned = groups.labelled_counts(key).scheduled();
        if assigned >= group.min_member as usize {
            handle::ask(
                state,
                Request::Remember {
                    group: key,
                    change: Memory::Succeeded,
                },
            );
            handle::ask(
                state,
                Request::AllowWaiting {
                    group: key,
                    plugin: NAME,
                },
            );
            return (Status::success(), PermitTimeout::ZERO);
        }
        if assigned == 1 {
            handle::ask(
                state,
                Request::ActivateSiblings {
                    group: key,
                    except: pod.uid.clone(),
                },
            );
        }
        (Status::without_reason(Code::Wait), self.wait_time(group))
    }
}

impl Coscheduling {
    /// `util.GetWaitTimeDuration` as Permit applies it: the group's
    /// `scheduleTimeoutSeconds` unless it is 0, else the arguments' wait, else 60 s.
    /// Negative: the wait ends at once.
    pub fn wait_time(&self, group: &CoschedulingGroup) -> PermitTimeout {
        let seconds = |d: Duration| PermitTimeout::from_secs(d.as_secs() as i64);
        match group.schedule_timeout_seconds {
            Some(timeout) if timeout != 0 => PermitTimeout::from_secs(i64::from(timeout)),
            _ if !self.permit_waiting_time.is_zero() => seconds(self.permit_waiting_time),
            _ => seconds(DEFAULT_WAIT),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gantry_api::coscheduling::POD_GROUP_LABEL;
    use gantry_cache::{Cache, Snapshot};

    use super::*;
    use crate::ApiObjects;
    use crate::plugins::testing::node;

    fn member(name: &str, group: &str) -> Pod {
        Pod::new("ns", name).with_labels([(POD_GROUP_LABEL, group)])
    }

    fn gated(pod: Pod) -> Pod {
        let mut pod = pod;
        pod.scheduling_gates = vec![Arc::from("example-gate")];
        pod
    }

    fn group(name: &str, min_member: u32) -> CoschedulingGroup {
        CoschedulingGroup::new("ns", name, min_member)
    }

    fn with_cpu(mut group: CoschedulingGroup, cpu: &str) -> CoschedulingGroup {
        group.min_resources = Some(vec![("cpu".into(), GoQuantity::parse(cpu).unwrap())]);
        group
    }

    /// Objects sharing PodGroup states that hold `groups` and the `pods` (pending, or
    /// bound when they name a node).
    fn objects(groups: &[CoschedulingGroup], pods: &[&Pod]) -> ApiObjects {
        let objects = ApiObjects::default();
        {
            let mut states = objects.pod_groups().lock();
            for g in groups {
                states.set_coscheduling_group(Arc::new(g.clone()), 0);
            }
            for pod in pods {
                states.add_member(Arc::new((*pod).clone()));
            }
        }
        objects
    }

    /// Two nodes of `cpu` millicores holding `bound`.
    fn snapshot(cpu: i64, bound: &[Pod]) -> Snapshot {
        let cache = Cache::new();
        for name in ["node-a", "node-b"] {
            cache.add_node(Arc::new(node(name, cpu, 64 << 30)));
        }
        for pod in bound {
            cache.add_pod(Arc::new(pod.clone())).unwrap();
        }
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        snapshot
    }

    /// A case: its name, the pod, its pending siblings, the groups, and the refusal.
    type PreFilterCase = (
        &'static str,
        Pod,
        Vec<Pod>,
        Vec<CoschedulingGroup>,
        Option<&'static str>,
    );

    /// Upstream's TestPreFilter (core_test.go): two nodes of 4 cpu.
    #[test]
    fn pre_filter_as_upstream_tables_it() {
        let (p1a, p1b, p1c) = (
            member("p1a", "pg1"),
            member("p1b", "pg1"),
            member("p1c", "pg1"),
        );
        let cases: Vec<PreFilterCase> = vec![
            (
                "pod does not belong to any pg",
                Pod::new("ns", "p"),
                vec![member("p1", "pg1"), member("p2", "pg2")],
                vec![group("pg1", 1), group("pg2", 1)],
                None,
            ),
            (
                "pod belongs to a non-existent pg",
                member("p", "pg-non-existent"),
                vec![],
                vec![group("pg1", 1)],
                None,
            ),
            (
                "pod count less than minMember",
                member("p", "pg1"),
                vec![member("pg2-1", "pg2")],
                vec![group("pg1", 2), group("pg2", 2)],
                Some(
                    "pre-filter pod p cannot find enough sibling pods, current pods number: 1, minMember of group: 2",
                ),
            ),
            (
                "pod count equal minMember",
                p1a.clone(),
                vec![p1b.clone(), p1c.clone()],
                vec![group("pg1", 2), group("pg2", 2)],
                None,
            ),
            (
                "gated pods but still meeting quorum (minMember < replicas)",
                p1a.clone(),
                vec![p1b.clone(), gated(p1c.clone())],
                vec![group("pg1", 2)],
                None,
            ),
            (
                "gated pods push group below quorum",
                p1a.clone(),
                vec![gated(p1b.clone()), p1c.clone()],
                vec![group("pg1", 3)],
                Some("pre-filter pod p1a cannot proceed due to gated pods in the same PodGroup"),
            ),
            (
                "all sibling pods are gated",
                p1a.clone(),
                vec![gated(p1b.clone()), gated(p1c.clone())],
                vec![group("pg1", 2)],
                Some("pre-filter pod p1a cannot proceed due to gated pods in the same PodGroup"),
            ),
            (
                "cluster's resource satisfies minResource",
                p1a.clone(),
                vec![p1b.clone(), p1c.clone()],
                vec![with_cpu(group("pg1", 2), "6")],
                None,
            ),
            (
                "cluster's resource cannot satisfy minResource",
                p1a.clone(),
                vec![p1b.clone(), p1c.clone()],
                vec![with_cpu(group("pg1", 2), "10")],
                Some("resource gap: map[cpu:{{2000 -3} {<nil>}  DecimalSI}]"),
            ),
        ];
        let snapshot = snapshot(4000, &[]);
        for (name, pod, pending, groups, refused) in cases {
            let mut pods: Vec<&Pod> = pending.iter().collect();
            pods.push(&pod);
            let objects = objects(&groups, &pods);
            let cluster = Cluster {
                nodes: &snapshot,
                objects: &objects,
            };
            let mut state = CycleState::new();
            let (_, status) = Coscheduling::default().pre_filter(&mut state, &pod, cluster);
            match refused {
                None => assert!(status.is_success(), "{name}: {status:?}"),
                Some(message) => {
                    assert_eq!(status.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(status.message(), message, "{name}");
                }
            }
        }
    }

    /// Upstream's TestCheckClusterResource: two nodes of 3 cpu; the group's own pods'
    /// requests count as free.
    #[test]
    fn cluster_resources_exclude_the_groups_own_pods() {
        let bound = |name: &str, node: &str, cpu: i64, group: Option<&str>| {
            let pod = Pod::new("ns", name).with_requests(cpu, 0);
            let pod = match group {
                Some(g) => pod.with_labels([(POD_GROUP_LABEL, g)]),
                None => pod,
            };
            pod.bound_to(Sym::new(node))
        };
        let key = GroupKey {
            namespace: Sym::new("ns"),
            name: Sym::new("pg1"),
        };
        let wanted = || {
            vec![(
                "cpu".to_string(),
                GoQuantity::whole(4, QuantityFormat::DecimalSI),
            )]
        };
        for (name, pods, enough) in [
            (
                "Cluster resource enough",
                vec![bound("p1", "node-a", 2000, None)],
                true,
            ),
            (
                "Cluster resource not enough",
                vec![
                    bound("p1", "node-a", 2000, None),
                    bound("p2", "node-b", 1000, None),
                ],
                false,
            ),
            (
                "Cluster resource enough as p1's resource needs to be excluded from minResources",
                vec![
                    bound("p1", "node-a", 2000, Some("pg1")),
                    bound("p2", "node-b", 1000, None),
                ],
                true,
            ),
        ] {
            let snapshot = snapshot(3000, &pods);
            let result = check_cluster_resource(&snapshot, key, &mut wanted());
            assert_eq!(result.is_ok(), enough, "{name}: {result:?}");
        }
        let snapshot = snapshot(
            3000,
            &[
                bound("p1", "node-a", 2000, None),
                bound("p2", "node-b", 1000, None),
            ],
        );
        assert_eq!(
            check_cluster_resource(&snapshot, key, &mut wanted()),
            Err("resource gap: map[cpu:{{1000 -3} {<nil>}  DecimalSI}]".into())
        );
    }

    /// Upstream's TestPostFilter and the podGroupRejectPercentage table.
    #[test]
    fn post_filter_rejects_the_group_unless_the_quorum_is_near() {
        let p = member("p", "pg1");
        let rejected =
            "PodGroup ns/pg1 gets rejected due to Pod p is unschedulable even after PostFilter";
        let states_with = |min: u32, assigned: usize| {
            let objects = objects(&[group("pg1", min)], &[]);
            {
                let mut states = objects.pod_groups().lock();
                for i in 0..assigned {
                    let pod = member(&format!("a{i}"), "pg1").bound_to(Sym::new("node"));
                    states.add_member(Arc::new(pod));
                }
            }
            objects
        };
        let plugin = |percentage| Coscheduling {
            pod_group_reject_percentage: percentage,
            ..Coscheduling::default()
        };
        let run = |plugin: Coscheduling, pod: &Pod, objects: &ApiObjects| {
            let mut state = CycleState::new();
            let status = plugin.post_filter(&mut state, pod, &objects.pod_groups().lock());
            (status, handle::take(&mut state))
        };
        let (status, asked) = run(plugin(10), &Pod::new("ns", "p"), &states_with(2, 0));
        assert_eq!(status.message(), "can not find pod group");
        assert!(asked.is_empty());
        let (status, asked) = run(plugin(10), &p, &states_with(1, 1));
        assert_eq!(
            (status.code(), status.message()),
            (Code::Unschedulable, String::new())
        );
        assert!(asked.is_empty());
        let (status, asked) = run(plugin(10), &p, &states_with(2, 1));
        assert_eq!(status.message(), rejected);
        let key = GroupKey::labelled(&p).unwrap();
        assert_eq!(
            asked,
            vec![
                Request::RejectWaiting {
                    group: key,
                    plugin: NAME,
                    message: "optimistic rejection in PostFilter"
                },
                Request::Remember {
                    group: key,
                    change: Memory::Unpermitted
                },
                Request::Remember {
                    group: key,
                    change: Memory::Failed
                },
            ]
        );
        for (name, percentage, assigned, rejects) in [
            ("default 10%: 9/10 assigned (10% gap)", 10, 9, false),
            ("default 10%: 8/10 assigned (20% gap)", 10, 8, true),
            ("0%: 9/10 assigned (10% gap)", 0, 9, true),
            ("100%: 0/10 assigned (100% gap)", 100, 0, false),
            ("50%: 6/10 assigned (40% gap)", 50, 6, false),
            ("50%: 4/10 assigned (60% gap)", 50, 4, true),
        ] {
            let (status, _) = run(plugin(percentage), &p, &states_with(10, assigned));
            assert_eq!(status.message() == rejected, rejects, "{name}");
        }
    }

    /// Upstream's TestPermit: no group, quorum not reached (the first to wait asks for its
    /// siblings), quorum reached (the waiting ones are allowed); a missing group refuses.
    #[test]
    fn permit_waits_for_the_quorum_and_then_lets_the_group_through() {
        let node = Sym::new("node");
        let (a, b) = (member("a", "pg1"), member("b", "pg1"));
        let objects = objects(&[group("pg1", 2)], &[&a, &b]);
        let plugin = Coscheduling::default();
        let mut state = CycleState::new();
        let (status, _) = plugin.permit(
            &mut state,
            &Pod::new("ns", "single"),
            node,
            &objects.pod_groups().lock(),
        );
        assert!(status.is_success());
        let (status, _) = plugin.permit(
            &mut state,
            &member("x", "missing"),
            node,
            &objects.pod_groups().lock(),
        );
        assert_eq!(
            (status.code(), status.message()),
            (Code::Unschedulable, "PodGroup not found".into())
        );
        let assumed_a = Arc::new(a.bound_to(node));
        objects.pod_groups().lock().assume(&assumed_a);
        let (status, timeout) =
            plugin.permit(&mut state, &assumed_a, node, &objects.pod_groups().lock());
        assert_eq!(status.code(), Code::Wait);
        assert_eq!(timeout, PermitTimeout::from_secs(60));
        let key = GroupKey::labelled(&a).unwrap();
        assert_eq!(
            handle::take(&mut state),
            vec![Request::ActivateSiblings {
                group: key,
                except: a.uid.clone()
            }]
        );
        let assumed_b = Arc::new(b.bound_to(node));
        objects.pod_groups().lock().assume(&assumed_b);
        let (status, _) = plugin.permit(&mut state, &assumed_b, node, &objects.pod_groups().lock());
        assert!(status.is_success());
        assert_eq!(
            handle::take(&mut state),
            vec![
                Request::Remember {
                    group: key,
                    change: Memory::Succeeded
                },
                Request::AllowWaiting {
                    group: key,
                    plugin: NAME
                },
            ]
        );
    }

    /// `GetWaitTimeDuration` as Permit applies it.
    #[test]
    fn the_wait_is_the_groups_then_the_arguments_then_a_minute() {
        let mut g = group("pg1", 2);
        let plugin = Coscheduling {
            permit_waiting_time: Duration::from_secs(10),
            ..Coscheduling::default()
        };
        let secs = PermitTimeout::from_secs;
        assert_eq!(plugin.wait_time(&g), secs(10));
        g.schedule_timeout_seconds = Some(4);
        assert_eq!(plugin.wait_time(&g), secs(4));
        g.schedule_timeout_seconds = Some(0);
        assert_eq!(plugin.wait_time(&g), secs(10));
        let unset = Coscheduling {
            permit_waiting_time: Duration::ZERO,
            ..Coscheduling::default()
        };
        assert_eq!(unset.wait_time(&g), secs(60));
        // Negative: the wait ends at once, and the rejection says `-5s`, as Go prints it.
        g.schedule_timeout_seconds = Some(-5);
        assert_eq!(plugin.wait_time(&g), secs(-5));
        assert_eq!(plugin.wait_time(&g).wait(), Duration::ZERO);
        assert_eq!(plugin.wait_time(&g).to_string(), "-5s");
    }
}
