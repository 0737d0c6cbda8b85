//! The queue's table tests: ordering, backoff, events, gating, activation.

use super::*;
use gantry_framework::plugins::default_profile;

fn pod(name: &str, priority: i32) -> Arc<Pod> {
    Arc::new(Pod::new("ns", name).with_priority(priority))
}

fn queue() -> SchedulingQueue {
    SchedulingQueue::new(&[default_profile("default-scheduler")])
}

const T0: Duration = Duration::ZERO;

/// A pod that failed to bind (an error), then was found unschedulable (it preempted),
/// then failed to bind again: its backoff after each, by release. Before v1.34 every
/// attempt doubles it (1, 2, 4 s); from v1.34 the unschedulable attempts do, or the
/// errors in a row after an error (1, 1, 1 s), as upstream's `getBackoffTime` counts
/// `UnschedulableCount` and `ConsecutiveErrorsCount` (#128748). From v1.33 a backoff
/// ends after the whole second it ends in (SchedulerPopFromBackoffQ): a second more here.
#[test]
fn backoff_counts_attempts_before_v1_34_and_failures_of_the_last_kind_after() {
    for (minor, wanted) in [
        (32, [1, 2, 4]),
        (33, [2, 3, 5]),
        (34, [2, 2, 2]),
        (35, [2, 2, 2]),
    ] {
        let mut profile = default_profile("default-scheduler");
        profile.release = Release::at(minor);
        let mut q = SchedulingQueue::new(&[profile]);
        q.add(pod("p", 0), T0);
        let mut now = T0;
        let mut waited = Vec::new();
        for step in 0..3 {
            let popped = q.pop(now).expect("due");
            if step == 1 {
                q.add_unschedulable(popped, vec!["NodeResourcesFit"], now);
                q.on_event(
                    ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                    now,
                );
            } else {
                q.add_backoff(popped, now);
            }
            let due = q.next_backoff_expiry().expect("backing off");
            waited.push((due - now).as_secs());
            // From v1.33 an idle queue would pop the unschedulable one at once (below).
            if step != 1 || minor < 33 {
                let early = q.pop(due - Duration::from_millis(1));
                assert!(early.is_none(), "v1.{minor}");
            }
            now = due;
        }
        assert_eq!(waited, wanted, "v1.{minor}");
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn pops_by_priority_then_age() {
    let mut q = queue();
    q.add(pod("low", 0), secs(0));
    q.add(pod("high", 10), secs(2));
    q.add(pod("low-later", 0), secs(1));
    let order: Vec<String> = std::iter::from_fn(|| q.pop(secs(3)))
        .map(|p| p.pod.name.to_string())
        .collect();
    assert_eq!(order, ["high", "low", "low-later"]);
    assert!(q.is_empty());
}

#[test]
fn gated_pods_wait_until_their_gates_are_removed() {
    let mut q = queue();
    let mut gated = Pod::new("ns", "g");
    gated.scheduling_gates.push(Arc::from("example.com/wait"));
    q.add(Arc::new(gated.clone()), T0);
    assert_eq!(q.pending().gated, 1);
    assert!(q.pop(T0).is_none());
    gated.scheduling_gates.clear();
    q.update(Arc::new(gated), secs(1));
    assert_eq!(q.pop(secs(1)).unwrap().pod.name.as_ref(), "g");
}

#[test]
fn unschedulable_pods_move_only_on_events_their_plugins_registered() {
    let mut q = queue();
    q.add(pod("p", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.add_unschedulable(popped, vec!["NodeResourcesFit"], T0);
    assert_eq!(q.pending().unschedulable, 1);
    // A pod being added does not free resources.
    q.on_event(
        ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
        secs(1),
    );
    assert_eq!(q.pending().unschedulable, 1);
    // A pod being deleted does; the pod's 1 s backoff is over by now.
    q.on_event(
        ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
        secs(5),
    );
    assert_eq!(q.pending().active, 1);
    assert_eq!(q.pop(secs(5)).unwrap().attempts, 2);
}

/// Grouping pods by their rejecting plugins moves exactly the pods that asking each
/// pod's plugins would: every subset of five plugins, against every kind of event.
#[test]
fn an_event_moves_exactly_the_pods_a_rejecting_plugin_registered_it_for() {
    let profile = default_profile("default-scheduler");
    let plugins = [
        "NodeResourcesFit",
        "NodeAffinity",
        "TaintToleration",
        "InterPodAffinity",
        "VolumeBinding",
    ];
    let registered = |name: &str| -> Vec<ClusterEvent> {
        let filter = profile
            .filter
            .iter()
            .map(|p| (p.name(), p.events_to_register()));
        let pre_filter = profile
            .pre_filter
            .iter()
            .map(|p| (p.name(), p.events_to_register()));
        filter
            .chain(pre_filter)
            .filter(|(n, _)| *n == name)
            .flat_map(|(_, events)| events.iter().copied())
            .collect()
    };
    let resources = [
        EventResource::AssignedPod,
        EventResource::Node,
        EventResource::UnscheduledPod,
        EventResource::ResourceClaim,
    ];
    let actions = [ActionType::ADD, ActionType::UPDATE, ActionType::DELETE];
    for resource in resources {
        for action in actions {
            let event = ClusterEvent::new(resource, action);
            let mut q = queue();
            let mut expected = Vec::new();
            for subset in 0u32..32 {
                let rejecting: Vec<&'static str> = (0..5)
                    .filter(|i| subset & (1 << i) != 0)
                    .map(|i| plugins[i])
                    .collect();
                let name = format!("p{subset}");
                if rejecting.is_empty()
                    || rejecting
                        .iter()
                        .any(|p| registered(p).iter().any(|r| r.covers(&event)))
                {
                    expected.push(name.clone());
                }
                q.add(pod(&name, 0), T0);
                let popped = q.pop(T0).unwrap();
                q.add_unschedulable(popped, rejecting, T0);
            }
            q.on_event(event, secs(60));
            let moved: Vec<String> = std::iter::from_fn(|| q.pop(secs(60)))
                .map(|p| p.pod.name.to_string())
                .collect();
            assert_eq!(moved, expected, "{event:?}");
        }
    }
}

/// Before v1.33, where backoffs end when they end (no whole-second windows).
fn queue_v1_32() -> SchedulingQueue {
    let mut profile = default_profile("default-scheduler");
    profile.release = Release::at(32);
    SchedulingQueue::new(&[profile])
}

#[test]
fn backoff_doubles_up_to_the_maximum() {
    let mut q = queue_v1_32();
    q.add(pod("p", 0), T0);
    let mut now = T0;
    let mut waits = Vec::new();
    for _ in 0..6 {
        let popped = q.pop(now).expect("pod is ready");
        q.add_backoff(popped, now);
        let expiry = q.next_backoff_expiry().unwrap();
        waits.push((expiry - now).as_secs());
        assert!(
            q.pop(expiry - Duration::from_millis(1)).is_none(),
            "still backing off"
        );
        now = expiry;
    }
    assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
}

#[test]
fn a_backoff_past_the_end_of_time_saturates() {
    // podInitialBackoffSeconds = i64::MAX passes upstream's validation (> 0 only); the
    // expiry of a backoff that starts after two such waits is past Duration::MAX.
    let forever = secs(i64::MAX as u64);
    let mut profile = default_profile("default-scheduler");
    profile.release = Release::at(32);
    let mut q = SchedulingQueue::with_backoff(&[profile], forever, forever);
    q.add(pod("p", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.add_backoff(popped, T0);
    assert_eq!(q.next_backoff_expiry(), Some(forever));
    assert!(q.pop(secs(1 << 40)).is_none());
    let later = forever * 2;
    let popped = q.pop(later).unwrap();
    q.add_backoff(popped, later);
    assert_eq!(q.next_backoff_expiry(), Some(Duration::MAX));
    assert!(q.pop(Duration::MAX).is_some());
}

#[test]
fn an_event_during_the_attempt_sends_the_pod_to_backoff_not_unschedulable() {
    let mut q = queue();
    q.add(pod("p", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.on_event(ClusterEvent::new(EventResource::Node, ActionType::ADD), T0);
    q.add_unschedulable(popped, vec!["NodeResourcesFit"], T0);
    assert_eq!(q.pending().backoff, 1);
}

#[test]
fn leftover_unschedulable_pods_are_flushed_after_five_minutes() {
    let mut q = queue();
    q.add(pod("p", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.add_unschedulable(popped, vec!["NodeAffinity"], T0);
    q.flush_unschedulable_leftover(secs(299));
    assert_eq!(q.pending().unschedulable, 1);
    q.flush_unschedulable_leftover(secs(331));
    assert_eq!(q.pending().active, 1);
}

#[test]
fn leftover_pods_are_looked_for_every_thirty_seconds_only() {
    let mut q = queue();
    q.add(pod("p", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.add_unschedulable(popped, vec!["NodeAffinity"], T0);
    q.flush_unschedulable_leftover(secs(30));
    q.flush_unschedulable_leftover(Duration::from_millis(300_500));
    assert_eq!(
        q.pending().unschedulable,
        1,
        "stale since 300 s, but the next look is at 330 s"
    );
    q.flush_unschedulable_leftover(secs(329));
    assert_eq!(q.pending().unschedulable, 1);
    q.flush_unschedulable_leftover(secs(330));
    assert_eq!(q.pending().active, 1);
}

#[test]
fn a_forgotten_assumed_pod_moves_the_pods_it_kept_out() {
    let mut q = queue();
    q.add(pod("kept-out", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.add_unschedulable(popped, vec!["NodeResourcesFit"], T0);
    q.assumed_pod_forgotten(secs(5));
    assert_eq!(q.pop(secs(5)).unwrap().pod.name.as_ref(), "kept-out");
}

#[test]
fn deleted_pods_are_never_popped() {
    let mut q = queue();
    q.add(pod("a", 0), T0);
    q.add(pod("b", 0), secs(1));
    assert!(q.delete("ns/a"));
    assert!(!q.delete("ns/a"));
    assert_eq!(q.pop(secs(2)).unwrap().pod.name.as_ref(), "b");
    assert!(q.pop(secs(2)).is_none());
}

/// A queue sorting as Coscheduling does, its plugin registered (Pod Add, PodGroup).
fn coscheduling_queue() -> (SchedulingQueue, SharedPodGroups) {
    let mut profile = default_profile("default-scheduler");
    profile.queue_sort = QueueSort::Coscheduling;
    profile.pre_filter.push(Arc::new(
        gantry_framework::plugins::coscheduling::Coscheduling::default(),
    ));
    let mut q = SchedulingQueue::new(&[profile]);
    let groups = SharedPodGroups::default();
    q.share_pod_groups(groups.clone());
    (q, groups)
}

fn member(name: &str, group: &str) -> Arc<Pod> {
    let label = gantry_api::coscheduling::POD_GROUP_LABEL;
    Arc::new(Pod::new("ns", name).with_labels([(label, group)]))
}

fn add_group(groups: &SharedPodGroups, name: &str, created: i128) -> GroupKey {
    let group = gantry_api::coscheduling::CoschedulingGroup::new("ns", name, 1);
    groups
        .lock()
        .set_coscheduling_group(Arc::new(group), created);
    GroupKey::labelled(&member("x", name)).unwrap()
}

/// Upstream's TestLess (coscheduling_test.go): priority, then the group's creation or
/// the pod's first attempt, then `namespace/name`; a failed group is as young as its
/// failure (TestMarkAndClearPodGroupScheduleFailure).
#[test]
fn coscheduling_orders_by_priority_then_age_then_name() {
    let (mut q, groups) = coscheduling_queue();
    let old = add_group(&groups, "old", -5_000_000_000);
    add_group(&groups, "new", 2_000_000_000);
    q.add(member("z-new", "new"), secs(3));
    q.add(pod("b-single", 0), secs(1));
    q.add(member("y-old", "old"), secs(3));
    q.add(pod("a-single", 0), secs(1));
    q.add(pod("high", 10), secs(4));
    let order: Vec<String> = std::iter::from_fn(|| q.pop(secs(5)))
        .map(|p| p.pod.name.to_string())
        .collect();
    assert_eq!(order, ["high", "y-old", "a-single", "b-single", "z-new"]);
    groups.lock().coscheduling_memory_mut(old).failed_at = Some(secs(9));
    q.add(member("x-old", "old"), secs(6));
    q.add(member("w-new", "new"), secs(6));
    assert_eq!(q.pop(secs(7)).unwrap().pod.name.as_ref(), "w-new");
    assert_eq!(q.pop(secs(7)).unwrap().pod.name.as_ref(), "x-old");
}

/// With queueing hints, a pod back from a wait at Permit backs off only if an event
/// its rejecting plugin registered came meanwhile; otherwise it waits for one.
#[test]
fn a_pod_rejected_while_waiting_backs_off_only_for_its_plugins_events() {
    let (mut q, _) = coscheduling_queue();
    q.add(member("a", "g"), T0);
    let popped = q.pop(T0).unwrap();
    q.on_event(
        ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
        secs(1),
    );
    q.add_rejected_while_waiting(popped, vec!["Coscheduling"], secs(2));
    assert_eq!(q.pending().unschedulable, 1);
    q.add(member("b", "g"), secs(2));
    let popped = q.pop(secs(2)).unwrap();
    q.on_event(
        ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
        secs(3),
    );
    q.add_rejected_while_waiting(popped, vec!["Coscheduling"], secs(4));
    // b backs off; so does a, which that event moved at 3 s while its backoff (1 s from
    // 2 s) had not yet ended: from v1.33 a backoff ends only after its last whole second.
    assert_eq!(q.pending().backoff, 2);
}

/// Upstream's `Activate`: pods backing off or waiting for an event go to activeQ at
/// once; an unknown pod is skipped.
#[test]
fn activated_pods_move_to_the_active_queue_at_once() {
    let mut q = queue();
    q.add(pod("u", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.add_unschedulable(popped, vec!["NodeResourcesFit"], T0);
    q.add(pod("b", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.add_backoff(popped, T0);
    assert!(q.pop(T0).is_none());
    q.activate(&[
        Arc::from("ns/u"),
        Arc::from("ns/b"),
        Arc::from("ns/missing"),
    ]);
    assert_eq!(q.pending().active, 2);
    assert!(q.pop(T0).is_some() && q.pop(T0).is_some());
}

/// A rejected member's forget wakes the pods it kept out, but those `concerned` leaves
/// alone stay.
#[test]
fn a_forget_can_leave_some_pods_waiting() {
    let mut q = queue();
    for name in ["kept-out", "sibling"] {
        q.add(pod(name, 0), T0);
        let popped = q.pop(T0).unwrap();
        q.add_unschedulable(popped, vec!["NodeResourcesFit"], T0);
    }
    q.assumed_pod_forgotten_outside(secs(5), |p| p.name.as_ref() != "sibling");
    assert_eq!(q.pop(secs(5)).unwrap().pod.name.as_ref(), "kept-out");
    assert!(q.pop(secs(60)).is_none());
    assert_eq!(q.pending().unschedulable, 1);
}

/// SchedulerPopFromBackoffQ (v1.33 on): a backoff that ends at 1.3 s ends in the window of
/// 1 s, so the pod backs off until 2 s (`alignToWindow`, `isPodBackingoff`); when nothing
/// else waits, the pod whose backoff ends first is popped at once, the higher priority
/// first among those ending in one window; a pod backing off after an error is not.
#[test]
fn an_idle_queue_pops_the_backoff_head_from_v1_33() {
    let ms = Duration::from_millis;
    let mut q = queue();
    for (name, priority) in [("low", 0), ("high", 5), ("error", 9)] {
        q.add(pod(name, priority), ms(300));
        let popped = q.pop(ms(300)).unwrap();
        match name {
            "error" => q.add_backoff(popped, ms(300)),
            _ => q.add_unschedulable(popped, vec!["NodeResourcesFit"], ms(300)),
        }
    }
    q.on_event(
        ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
        ms(300),
    );
    assert_eq!(q.next_backoff_expiry(), Some(secs(2)));
    let popped = |q: &mut SchedulingQueue, at| q.pop(at).map(|p| p.pod.name.to_string());
    assert_eq!(popped(&mut q, ms(400)).as_deref(), Some("high"));
    assert_eq!(popped(&mut q, ms(400)).as_deref(), Some("low"));
    assert_eq!(
        popped(&mut q, ms(1999)),
        None,
        "the error waits its backoff out"
    );
    assert_eq!(popped(&mut q, secs(2)).as_deref(), Some("error"));
    // Before v1.33 nothing is popped before its backoff ends, at 1.3 s.
    let mut q = queue_v1_32();
    q.add(pod("p", 0), ms(300));
    let popped_pod = q.pop(ms(300)).unwrap();
    q.add_unschedulable(popped_pod, vec!["NodeResourcesFit"], ms(300));
    q.on_event(
        ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
        ms(300),
    );
    assert_eq!(popped(&mut q, ms(1299)), None);
    assert_eq!(popped(&mut q, ms(1300)).as_deref(), Some("p"));
}

const POD_DELETED: ClusterEvent = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
const NODE_ADDED: ClusterEvent = ClusterEvent::new(EventResource::Node, ActionType::ADD);

/// Pod `ns/p`, rejected by NodeResourcesFit while its preemption started, and held back:
/// an event during its attempt sent it towards backoff, where PreEnqueue turned it away.
fn held_preemptor() -> SchedulingQueue {
    let mut q = queue();
    q.add(pod("p", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.preemption_started(Preemptor::Pod(popped.pod.uid.clone()));
    q.on_event(NODE_ADDED, T0);
    q.add_unschedulable(popped, vec!["NodeResourcesFit"], T0);
    q
}

/// DefaultPreemption's PreEnqueue under SchedulerAsyncPreemption: a preemptor on its way
/// back to the queue while its victims are deleted is held back (gated); only a pod's
/// deletion may move it, once its preemption is done, and only if another plugin that
/// rejected it cares for that deletion.
#[test]
fn a_preemptor_is_held_back_until_its_victims_are_deleted() {
    let mut q = held_preemptor();
    assert_eq!(q.pending().gated, 1);
    assert!(q.pop(secs(100)).is_none());
    q.on_event(POD_DELETED, secs(100));
    assert_eq!(q.pending().gated, 1, "its victim is still being deleted");
    q.preemption_finished(&Preemptor::Pod(Arc::from("ns/p")));
    q.flush_unschedulable_leftover(secs(1000));
    q.on_event(NODE_ADDED, secs(1000));
    assert_eq!(q.pending().gated, 1, "only a pod's deletion moves it");
    q.on_event(POD_DELETED, secs(1000));
    let again = q.pop(secs(1000)).unwrap();
    assert!(
        again
            .unschedulable_plugins
            .contains(&preemption_hold::DEFAULT_PREEMPTION)
    );
    assert_eq!(q.pending(), PendingCounts::default());
}

/// A preemptor no plugin in particular rejected (a gang member rejected with its group)
/// and held back is moved by nothing: DefaultPreemption's queueing hint always skips.
#[test]
fn a_held_pod_no_other_plugin_rejected_stays_held() {
    let mut q = queue();
    q.add(pod("p", 0), T0);
    let popped = q.pop(T0).unwrap();
    q.preemption_started(Preemptor::Pod(popped.pod.uid.clone()));
    q.add_unschedulable(popped, Vec::new(), T0);
    // Not held yet: it waits for an event, which the hold then turns away.
    assert_eq!(q.pending().unschedulable, 1);
    q.on_event(NODE_ADDED, secs(1));
    assert_eq!(q.pending().gated, 1);
    q.preemption_finished(&Preemptor::Pod(Arc::from("ns/p")));
    q.on_event(POD_DELETED, secs(2));
    q.flush_unschedulable_leftover(secs(1000));
    assert_eq!(q.pending().gated, 1);
    assert!(q.pop(secs(1000)).is_none());
    // Activated (a pod-group cycle taking it), it passes PreEnqueue now.
    q.activate(&[Arc::from("ns/p")]);
    assert_eq!(q.pop(secs(1000)).unwrap().pod.name.as_ref(), "p");
}

/// A pod-group cycle leaves out a member whose preemption is in flight (upstream's
/// `PopSpecificPod` activates it, and PreEnqueue holds it back), and takes one whose
/// preemption is done.
#[test]
fn a_group_cycle_leaves_out_a_member_still_preempting() {
    let mut q = queue();
    for name in ["a", "b", "c"] {
        q.add(pod(name, 0), T0);
    }
    let members: Vec<Arc<Pod>> = ["a", "b", "c"].iter().map(|n| pod(n, 0)).collect();
    let first = q.pop(T0).unwrap();
    let cycle = q.pop_members(first, &members);
    assert_eq!(cycle.len(), 3);
    let mut first = None;
    for member in cycle {
        if member.pod.name.as_ref() == "a" {
            first = Some(member);
            continue;
        }
        q.preemption_started(Preemptor::Pod(member.pod.uid.clone()));
        q.add_unschedulable(member, Vec::new(), T0);
    }
    q.preemption_finished(&Preemptor::Pod(Arc::from("ns/c")));
    let again = q.pop_members(first.unwrap(), &members);
    let mut names: Vec<&str> = again.iter().map(|m| m.pod.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(q.pending().gated, 1);
}

/// A pod of PodGroup `ns/group` (`spec.schedulingGroup`).
fn in_pod_group(name: &str, group: &str) -> Arc<Pod> {
    let mut pod = Pod::new("ns", name);
    pod.scheduling_group = Some(gantry_api::Sym::new(group));
    Arc::new(pod)
}

/// A pod group's preemption (workload-aware preemption) holds back every member: those
/// that preempted and one created while the victims are deleted (upstream's PreEnqueue
/// asks `IsPodGroupRunningPreemption` of the member's PodGroup), but not a pod of another
/// group. Once it is done, a group cycle takes them all.
#[test]
fn a_group_preemption_holds_back_a_member_created_meanwhile() {
    let mut q = queue();
    let group = Preemptor::Group(GroupKey::of(&in_pod_group("a", "g")).unwrap());
    q.add(in_pod_group("a", "g"), T0);
    let first = q.pop(T0).unwrap();
    q.preemption_started(group.clone());
    q.add_unschedulable(first, vec!["NodeResourcesFit"], T0);
    q.add(in_pod_group("b", "g"), secs(1));
    q.add(in_pod_group("other", "h"), secs(1));
    assert_eq!(q.pending().gated, 1, "b is held back");
    assert_eq!(q.pop(secs(1)).unwrap().pod.name.as_ref(), "other");
    assert!(q.pop(secs(1)).is_none());
    assert!(q.is_preempting(&in_pod_group("a", "g")) && q.is_preempting(&in_pod_group("c", "g")));
    q.preemption_finished(&group);
    assert!(!q.is_preempting(&in_pod_group("b", "g")));
    q.on_event(POD_DELETED, secs(5));
    let first = q.pop(secs(5)).unwrap();
    assert_eq!(
        first.pod.name.as_ref(),
        "a",
        "b is moved by nothing but its group"
    );
    let cycle = q.pop_members(first, &[in_pod_group("a", "g"), in_pod_group("b", "g")]);
    let mut names: Vec<&str> = cycle.iter().map(|m| m.pod.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b"]);
}

/// The hold ends as soon as the last victim, once its deletion has begun, is seen gone
/// (the deletion's watch event may come before the deleting call returns), but not for a
/// victim seen gone before the preemption got to it.
#[test]
fn a_preemption_ends_when_its_last_victim_is_seen_gone() {
    let mut q = held_preemptor();
    q.victim_gone("ns/v");
    q.on_event(POD_DELETED, secs(10));
    assert_eq!(q.pending().gated, 1, "its preemption has not got to v");
    q.preemption_deleting_last_victim(&Preemptor::Pod(Arc::from("ns/p")), Arc::from("ns/v"));
    q.on_event(POD_DELETED, secs(10));
    assert_eq!(q.pending().gated, 1, "v is still there");
    q.victim_gone("ns/v");
    q.on_event(POD_DELETED, secs(10));
    assert_eq!(q.pop(secs(10)).unwrap().pod.name.as_ref(), "p");
    assert!(!q.is_preempting(&pod("p", 0)));
    // The call's own end, later, changes nothing.
    q.preemption_finished(&Preemptor::Pod(Arc::from("ns/p")));
}
