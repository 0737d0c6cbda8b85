//! The scheduling and binding cycles on small clusters: assume, Reserve/Permit with
//! unreserve, binding failures, the assume ablation, and metrics.

use std::sync::{Arc, Mutex};

use gantry_api::{Node, Pod, Resources, Sym};
use gantry_cache::{Cache, ClusterState, NodeInfo, Snapshot};
use gantry_framework::config::Point;
use gantry_framework::plugins::default_profile;
use gantry_framework::{
    ApiObjects, CycleState, PermitPlugin, Plugin, PostBindPlugin, PreBindPlugin, Profile,
    ReservePlugin, Status,
};
use gantry_scheduler::metrics::AttemptResult;
use gantry_scheduler::{Attempt, Binder, Scheduler};

fn cluster(nodes: &[(&str, i64)]) -> Arc<Cache> {
    let cache = Arc::new(Cache::new());
    for (name, milli_cpu) in nodes {
        let mut allocatable = Resources::new(*milli_cpu, 8 << 30);
        allocatable.pods = 110;
        cache.add_node(Arc::new(Node::new(name, allocatable)));
    }
    cache
}

fn pod(name: &str, milli_cpu: i64) -> Arc<Pod> {
    Arc::new(Pod::new("default", name).with_requests(milli_cpu, 1 << 20))
}

fn scheduler(cache: &Arc<Cache>, profile: Profile, seed: u64) -> Scheduler {
    Scheduler::new(cache.clone(), vec![profile], ApiObjects::default(), seed)
}

/// Schedules `pod`, which must be placed: the assumed pod and its cycle state, for `bind`.
fn placed(scheduler: &mut Scheduler, pod: &Arc<Pod>) -> (Arc<Pod>, Box<CycleState>) {
    let Attempt::Scheduled { pod, state, .. } = scheduler.schedule_one(pod) else {
        panic!("expected a placement")
    };
    (pod, state)
}

/// A whole binding cycle, for pods whose claims wait for no binding conditions.
fn bind(
    scheduler: &mut Scheduler,
    pod: &Arc<Pod>,
    state: &mut CycleState,
    binder: &mut TestBinder,
) -> Result<(), gantry_scheduler::BindFailure> {
    let pre_bound = scheduler.pre_bind(pod, state, binder);
    assert!(!matches!(pre_bound, Ok(Some(_))), "no claim waits here");
    scheduler.complete_bind(pod, state, binder, pre_bound.map(|_| ()))
}

/// A binder that accepts or refuses every bind, and confirms accepted pods in the cache.
struct TestBinder {
    cache: Arc<Cache>,
    refuse: bool,
}

impl Binder for TestBinder {
    fn write_claims(
        &mut self,
        _pod: &Arc<Pod>,
        claims: &[Arc<gantry_api::dra::ResourceClaim>],
        _allocated_now: &[gantry_api::dra::ClaimKey],
    ) -> Result<(), String> {
        for claim in claims {
            self.cache.dra().set_claim(claim.clone());
        }
        Ok(())
    }

    fn bind(&mut self, pod: &Arc<Pod>, _node: Sym) -> Result<(), String> {
        if self.refuse {
            return Err("conflict".into());
        }
        self.cache.add_pod(pod.clone()).map_err(|e| e.to_string())
    }
}

/// Records Reserve/Unreserve calls; its Permit rejects pods named "reject-me".
struct Recorder(Arc<Mutex<Vec<String>>>);

impl Plugin for Recorder {
    fn name(&self) -> &'static str {
        "Recorder"
    }
}

impl ReservePlugin for Recorder {
    fn reserve(&self, _state: &mut CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        self.0
            .lock()
            .unwrap()
            .push(format!("reserve {} {}", pod.name, node.name()));
        Status::success()
    }
    fn unreserve(&self, _state: &mut CycleState, pod: &Pod, node: Sym) {
        self.0
            .lock()
            .unwrap()
            .push(format!("unreserve {} {node}", pod.name));
    }
}

impl PermitPlugin for Recorder {
    fn permit(
        &self,
        _state: &mut CycleState,
        pod: &Pod,
        _node: Sym,
        _groups: &gantry_cache::PodGroupStates,
    ) -> (Status, gantry_framework::PermitTimeout) {
        if &*pod.name == "reject-me" {
            (
                Status::unschedulable("not today"),
                gantry_framework::PermitTimeout::ZERO,
            )
        } else if &*pod.name == "fail-me" {
            (
                Status::error("permit broke"),
                gantry_framework::PermitTimeout::ZERO,
            )
        } else {
            (Status::success(), gantry_framework::PermitTimeout::ZERO)
        }
    }
}

impl PreBindPlugin for Recorder {
    fn pre_bind(&self, _state: &mut CycleState, pod: &Pod, node: Sym) -> Status {
        self.0
            .lock()
            .unwrap()
            .push(format!("prebind {} {node}", pod.name));
        if &*pod.name == "prebind-fails" {
            Status::error("volume not attached")
        } else {
            Status::success()
        }
    }
}

impl PostBindPlugin for Recorder {
    fn post_bind(&self, _state: &CycleState, pod: &Pod, node: Sym) {
        self.0
            .lock()
            .unwrap()
            .push(format!("postbind {} {node}", pod.name));
    }
}

fn profile_with_recorder(log: &Arc<Mutex<Vec<String>>>) -> Profile {
    let mut profile = default_profile("default-scheduler");
    let recorder = Arc::new(Recorder(log.clone()));
    profile.reserve.push(recorder.clone());
    profile.permit.push(recorder.clone());
    profile.pre_bind.push(recorder.clone());
    profile.post_bind.push(recorder);
    profile
}

#[test]
fn binding_cycle_runs_pre_bind_bind_post_bind_and_a_pre_bind_failure_unreserves() {
    let cache = cluster(&[("n1", 1000)]);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut scheduler = scheduler(&cache, profile_with_recorder(&log), 1);
    let mut binder = TestBinder {
        cache: cache.clone(),
        refuse: false,
    };
    let (assumed, mut state) = placed(&mut scheduler, &pod("ok", 100));
    bind(&mut scheduler, &assumed, &mut state, &mut binder).unwrap();
    let (assumed, mut state) = placed(&mut scheduler, &pod("prebind-fails", 100));
    let err = bind(&mut scheduler, &assumed, &mut state, &mut binder).unwrap_err();
    assert!(err.message.contains("volume not attached"), "{err}");
    assert!(err.forgotten, "the assumed pod gave back its room");
    assert_eq!(
        *log.lock().unwrap(),
        [
            "reserve ok n1",
            "prebind ok n1",
            "postbind ok n1",
            "reserve prebind-fails n1",
            "prebind prebind-fails n1",
            "unreserve prebind-fails n1"
        ]
    );
    assert_eq!(
        requested_on(&cache, "n1"),
        100,
        "the failed pod was forgotten"
    );
}

fn requested_on(cache: &Cache, node: &str) -> i64 {
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot).unwrap();
    snapshot.node(Sym::new(node)).unwrap().requested().milli_cpu
}

#[test]
fn permit_rejection_unreserves_and_forgets_the_assumed_pod() {
    let cache = cluster(&[("n1", 1000)]);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut scheduler = scheduler(&cache, profile_with_recorder(&log), 1);
    // A rejection is a fit error over the pod's node, naming the plugin (upstream's
    // schedulingCycle); an error stays an error.
    let attempt = scheduler.schedule_one(&pod("reject-me", 500));
    let Attempt::Unschedulable {
        fit_error,
        nominated: None,
    } = attempt
    else {
        panic!("expected a rejection, got {attempt:?}")
    };
    assert_eq!(
        fit_error.to_string(),
        "0/1 nodes are available: 1 not today."
    );
    assert_eq!(fit_error.rejecting_plugins().len(), 1);
    let attempt = scheduler.schedule_one(&pod("fail-me", 500));
    let Attempt::Error(message) = attempt else {
        panic!("expected an error, got {attempt:?}")
    };
    assert!(message.contains("permit broke"), "{message}");
    assert_eq!(
        *log.lock().unwrap(),
        [
            "reserve reject-me n1",
            "unreserve reject-me n1",
            "reserve fail-me n1",
            "unreserve fail-me n1"
        ]
    );
    assert_eq!(
        requested_on(&cache, "n1"),
        0,
        "the assumed pods were forgotten"
    );
    assert_eq!(scheduler.metrics.attempts(AttemptResult::Unschedulable), 1);
    assert_eq!(scheduler.metrics.attempts(AttemptResult::Error), 1);
}

#[test]
fn failed_bind_unreserves_and_forgets_and_a_good_one_confirms() {
    let cache = cluster(&[("n1", 1000)]);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut scheduler = scheduler(&cache, profile_with_recorder(&log), 1);
    let (assumed, mut state) = placed(&mut scheduler, &pod("p", 600));
    assert_eq!(requested_on(&cache, "n1"), 600, "assumed before binding");
    let mut refusing = TestBinder {
        cache: cache.clone(),
        refuse: true,
    };
    let failure = bind(&mut scheduler, &assumed, &mut state, &mut refusing).unwrap_err();
    assert!(failure.forgotten);
    assert_eq!(requested_on(&cache, "n1"), 0);
    assert_eq!(log.lock().unwrap().last().unwrap(), "unreserve p n1");

    let (assumed, mut state) = placed(&mut scheduler, &pod("p", 600));
    let mut binder = TestBinder {
        cache: cache.clone(),
        refuse: false,
    };
    bind(&mut scheduler, &assumed, &mut state, &mut binder).unwrap();
    assert!(!cache.is_assumed(&assumed.uid));
    assert_eq!(requested_on(&cache, "n1"), 600);
    assert!(
        scheduler
            .metrics
            .render_prometheus()
            .contains("scheduler_schedule_attempts_total")
    );
    let filter = scheduler.metrics.extension_point(Point::Filter);
    assert_eq!(filter.count(), 2, "two cycles ran Filter");
    assert!(filter.sum_seconds() > 0.0);
    assert_eq!(scheduler.metrics.extension_point(Point::Bind).count(), 2);
}

#[test]
fn without_assume_the_next_cycle_does_not_see_a_pending_bind() {
    // Two 600m pods, one 1000m node. With assume, the second fits nowhere; without it,
    // the second cycle still sees the node empty and over-commits it.
    for assume in [true, false] {
        let cache = cluster(&[("n1", 1000)]);
        let mut scheduler = scheduler(&cache, default_profile("default-scheduler"), 1);
        scheduler.assume = assume;
        let first = scheduler.schedule_one(&pod("a", 600));
        assert!(matches!(first, Attempt::Scheduled { .. }));
        let second = scheduler.schedule_one(&pod("b", 600));
        assert_eq!(
            matches!(second, Attempt::Scheduled { .. }),
            !assume,
            "assume = {assume}"
        );
    }
}

#[test]
fn pods_go_to_the_least_allocated_node_and_report_why_not() {
    let cache = cluster(&[("small", 1000), ("big", 4000)]);
    let mut scheduler = scheduler(&cache, default_profile("default-scheduler"), 7);
    let Attempt::Scheduled { node, .. } = scheduler.schedule_one(&pod("p", 500)) else {
        panic!()
    };
    assert_eq!(node, Sym::new("big"));
    let Attempt::Unschedulable {
        fit_error,
        nominated,
    } = scheduler.schedule_one(&pod("huge", 8000))
    else {
        panic!()
    };
    assert!(nominated.is_none());
    assert_eq!(
        fit_error.to_string(),
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    assert_eq!(fit_error.rejecting_plugins(), ["NodeResourcesFit"]);
}

/// After a preemption that nominates a node, the message ends at the Filter reasons:
/// upstream's RunPostFilterPlugins returns the successful plugin's status and drops what
/// DynamicResources' PostFilter said before it (`no new claims to deallocate`).
#[test]
fn a_successful_preemption_drops_the_earlier_post_filter_reasons() {
    let cache = cluster(&[("n1", 1000)]);
    let mut scheduler = scheduler(&cache, default_profile("default-scheduler"), 7);
    placed(&mut scheduler, &pod("low", 800));
    let high = Arc::new(Pod::clone(&pod("high", 800)).with_priority(10));
    let Attempt::Unschedulable {
        fit_error,
        nominated,
    } = scheduler.schedule_one(&high)
    else {
        panic!()
    };
    assert_eq!(nominated.map(|(node, _)| node), Some(Sym::new("n1")));
    assert_eq!(
        fit_error.to_string(),
        "0/1 nodes are available: 1 Insufficient cpu."
    );
}

#[test]
fn unknown_scheduler_name_is_an_error() {
    let cache = cluster(&[("n1", 1000)]);
    let mut scheduler = scheduler(&cache, default_profile("default-scheduler"), 1);
    let mut p = Pod::new("default", "x");
    p.scheduler_name = Sym::new("other");
    assert!(matches!(
        scheduler.schedule_one(&Arc::new(p)),
        Attempt::Error(_)
    ));
}

/// The verdict memo answers only for nodes no nominated pod counts on: a node that passed
/// two like pods, unchanged since, fails the next once a pod of higher priority is
/// nominated to it (Filter adds the nominated pod's requests there).
#[test]
fn a_nomination_on_an_unchanged_node_overrides_the_remembered_verdict() {
    let cache = cluster(&[("n1", 1000)]);
    let mut scheduler = scheduler(&cache, default_profile("default-scheduler"), 1);
    scheduler.assume = false; // n1 does not change between the cycles
    let first = pod("web-1", 600);
    // The second like pod in a row keeps n1's verdict.
    for pod in [first.clone(), Arc::new(first.replica("web-2"))] {
        assert!(matches!(
            scheduler.schedule_one(&pod),
            Attempt::Scheduled { .. }
        ));
    }
    let mut preemptor = Pod::new("default", "urgent")
        .with_requests(600, 1 << 20)
        .with_priority(1000);
    preemptor.nominated_node_name = Some(Sym::new("n1"));
    scheduler.note_nomination(Arc::new(preemptor));
    let replica = Arc::new(first.replica("web-3"));
    let Attempt::Unschedulable { fit_error, .. } = scheduler.schedule_one(&replica) else {
        panic!("the nominated pod's 600m leaves no room on n1")
    };
    let message = fit_error.to_string();
    assert!(message.contains("Insufficient cpu"), "{message}");
}

/// A cycle kept for an explanation (a replay judging the node the cluster chose) names the
/// nodes Filter refused even when the verdict memo answered for them and the pod was
/// placed: the memo copies its failures out for such a cycle.
#[test]
fn a_kept_cycle_names_the_nodes_the_memo_refused() {
    let cache = cluster(&[("n1", 1000), ("small", 100)]);
    let mut scheduler = scheduler(&cache, default_profile("default-scheduler"), 1);
    scheduler.assume = false; // the nodes do not change between the cycles
    scheduler.keep_last_cycle();
    let first = pod("web-1", 500);
    for name in ["web-2", "web-3"] {
        assert!(matches!(
            scheduler.schedule_one(&first),
            Attempt::Scheduled { .. }
        ));
        let replica = Arc::new(first.replica(name));
        assert!(matches!(
            scheduler.schedule_one(&replica),
            Attempt::Scheduled { .. }
        ));
    }
    let last = scheduler.last_cycle().expect("kept");
    assert!(
        matches!(
            last.judge(Sym::new("small")),
            gantry_scheduler::OtherNode::Refused { .. }
        ),
        "{:?}",
        last.judge(Sym::new("small"))
    );
}

/// A kept cycle is what the last cycle saw, not a mix with the one before: a pod that fits
/// nowhere after a pod that was placed leaves no chosen node and no scores behind.
#[test]
fn a_kept_cycle_forgets_the_cycle_before() {
    let cache = cluster(&[("n1", 1000), ("n2", 1000)]);
    let mut scheduler = scheduler(&cache, default_profile("default-scheduler"), 1);
    scheduler.keep_last_cycle();
    assert!(matches!(
        scheduler.schedule_one(&pod("fits", 500)),
        Attempt::Scheduled { .. }
    ));
    let placed = scheduler.last_cycle().expect("kept");
    assert!(
        placed.chosen.is_some() && placed.scored.len() == 2,
        "{placed:?}"
    );
    assert!(matches!(
        scheduler.schedule_one(&pod("too-big", 5000)),
        Attempt::Unschedulable { .. }
    ));
    let refused = scheduler.last_cycle().expect("kept");
    assert_eq!(refused.chosen, None);
    assert!(refused.scored.is_empty(), "{refused:?}");
    assert_eq!(
        refused.judge(Sym::new("n1")),
        gantry_scheduler::OtherNode::Unknown
    );
}
