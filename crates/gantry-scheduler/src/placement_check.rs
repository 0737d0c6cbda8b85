//! The check of a decision at bind time, for several scheduler instances sharing one
//! cluster (Gödel's shared state): each instance decides on its own snapshot, which other
//! instances' binds may have outdated by the time it binds. One function serves both
//! places that ask: the binder's re-check against its instance's latest cache
//! ([`Scheduler::check_placement`](crate::Scheduler::check_placement)), and the simulated
//! API's admission of a bind against the authoritative state (docs/shared-state.md).
//!
//! The check is the scheduling cycle's own Filter phase on one node: every PreFilter and
//! Filter plugin of the pod's profile, in order, then what the plugins chose within the
//! node (HAMi's cards, [`FilterPlugin::filter_chosen`]). Nothing is left out, because
//! every Filter verdict can change between decision and bind:
//! - resources, host ports, volume limits and restrictions, GPU cards, required
//!   (anti-)affinity and DoNotSchedule spread change with other instances' binds (spread
//!   and affinity over a zone, and ReadWriteOncePod claims, span nodes);
//! - VolumeBinding's promised volumes change with other pods' reservations;
//! - the node-property plugins (NodeUnschedulable, NodeName, TaintToleration,
//!   NodeAffinity, VolumeZone) change only when the node does (a cordon, a taint, a
//!   label), which can happen between decision and bind too; they cost a few comparisons,
//!   so they run as well rather than being argued away. A bind is admitted only if the pod
//!   passes every Filter plugin at that moment.
//!
//! The binder's re-check adds two checks of the devices Reserve chose, which the binder
//! writes as they are: none is held by another claim meanwhile ([`devices_still_free`]),
//! and their pools' counters still cover them ([`counters_still_cover`]).
//!
//! Pods nominated to the node by preemption are left out (Filter in the cycle counts them
//! as if they were there): a nomination is a hint that keeps room for a preemptor while
//! pods are *decided*, not a bound pod, so no hard constraint is at stake at bind time.
//! Counting them here would refuse binds the API server accepts, and an instance's
//! nominations are its own, so two instances would admit different things.

use std::sync::Arc;

use gantry_api::dra::{DeviceId, ResourceClaim};
use gantry_api::{Pod, Release};
use gantry_cache::{ClusterState, DraCache, Snapshot};
use gantry_framework::plugins::dynamic_resources;
use gantry_framework::{Cluster, CycleState, Profile, Status};

use crate::framework_runner::{PluginTimer, PodFilters, run_pre_filter};

/// Whether `pod`, which names its node, passes every PreFilter and Filter plugin of
/// `profile` on that node in `cluster`, and what the plugins chose within the node (the
/// GPU cards written on it) is still free. `cluster` must not hold the pod itself (take an
/// assumed pod out first): the check asks whether the pod may be *added*. `Err` carries
/// the rejecting plugin's status (its plugin is empty when the node is gone or the pod is
/// already there).
pub fn check_placement(
    profile: &Profile,
    cluster: Cluster<'_>,
    pod: &Arc<Pod>,
) -> Result<(), Status> {
    let Some(node_name) = pod.node_name else {
        return Err(Status::error(format!("pod {} names no node", pod.key())));
    };
    let Some(node) = cluster.nodes.node(node_name) else {
        return Err(Status::unschedulable(format!(
            "node {:?} no longer exists",
            node_name.as_str()
        )));
    };
    if node.pods().iter().any(|p| p.uid == pod.uid) {
        return Err(Status::error(format!(
            "pod {} is already on node {node_name}: it is checked against a state without it",
            pod.key()
        )));
    }
    let mut state = CycleState::new();
    let mut timer = PluginTimer::default();
    if let Some(narrowed) = run_pre_filter(profile, &mut state, pod, cluster, &mut timer)?
        && !narrowed.nodes.contains(&node_name)
    {
        let plugin = narrowed.plugins.last().copied().unwrap_or_default();
        return Err(
            Status::unresolvable(format!("node(s) didn't satisfy plugin {plugin}"))
                .with_plugin(plugin),
        );
    }
    let filters = PodFilters::new(profile, &state);
    let status = filters.run(&state, pod, node);
    if !status.is_success() {
        return Err(status);
    }
    for plugin in &profile.filter {
        if state.is_filter_skipped(plugin.name()) {
            continue;
        }
        let status = plugin.filter_chosen(&state, pod, node);
        if !status.is_success() {
            return Err(status.with_plugin(plugin.name()));
        }
    }
    Ok(())
}

/// The binder's first check of the pod's allocations in flight (the devices Reserve
/// chose, which the binder writes as they are; a fresh allocation on the node could pick
/// others): none of their devices is held by another claim meanwhile.
pub(crate) fn devices_still_free(
    dra: &DraCache,
    in_flight: &[Arc<ResourceClaim>],
) -> Result<(), Status> {
    match dra.device_held_twice(in_flight) {
        Some(device) => Err(Status::unresolvable(format!(
            "device {device} is allocated to another claim meanwhile"
        ))
        .with_plugin(dynamic_resources::NAME)),
        None => Ok(()),
    }
}

/// The binder's check of partitionable and shared devices, on `snapshot` without the pod:
/// the pod's allocations in flight, with every device allocated now, leave each counter
/// of their pools covered, and their shares with every share held now each capacity of
/// their devices (another instance may have given another partition or share of the same
/// device meanwhile, and the Filter re-run would find other devices free).
pub(crate) fn counters_still_cover(
    snapshot: &Snapshot,
    release: Release,
    pod: &Pod,
    in_flight: &[Arc<ResourceClaim>],
) -> Result<(), Status> {
    let devices: Vec<DeviceId> = (in_flight.iter())
        .filter_map(|c| c.allocation.as_ref())
        .flat_map(|a| a.held_device_list())
        .collect();
    let node = pod.node_name.and_then(|n| snapshot.node(n));
    let overrun = node.zip(snapshot.dra()).and_then(|(node, dra)| {
        dynamic_resources::overrun_at_bind(node, dra, release, &devices)
            .or_else(|| dynamic_resources::shares_overrun_at_bind(node, dra, release, in_flight))
    });
    match overrun {
        Some(message) => Err(Status::unresolvable(message).with_plugin(dynamic_resources::NAME)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use gantry_api::{
        InclusionPolicy, LabelSelector, Node, PodAffinityTerm, Resources, Sym,
        TopologySpreadConstraint, WhenUnsatisfiable,
    };
    use gantry_cache::{Cache, Snapshot};
    use gantry_framework::ApiObjects;
    use gantry_framework::plugins::{
        default_profile, gpu_share, inter_pod_affinity, node_resources_fit, pod_topology_spread,
    };

    use super::*;

    fn node(cache: &Cache, name: &str, zone: &str) {
        let mut allocatable = Resources::new(1000, 8 << 30);
        allocatable.pods = 110;
        let node = Node::new(name, allocatable).with_labels([
            ("kubernetes.io/hostname", name),
            ("topology.kubernetes.io/zone", zone),
        ]);
        cache.add_node(Arc::new(node));
    }

    fn pod(name: &str, milli_cpu: i64) -> Pod {
        Pod::new("default", name)
            .with_requests(milli_cpu, 1 << 20)
            .on_node("n1")
    }

    /// The check of `pod` against what `cache` holds (which does not hold `pod`).
    fn check(cache: &Cache, pod: &Arc<Pod>) -> Result<(), Status> {
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        let objects = ApiObjects::default();
        let cluster = Cluster {
            nodes: &snapshot,
            objects: &objects,
        };
        check_placement(&default_profile("default-scheduler"), cluster, pod)
    }

    #[test]
    fn another_instances_bind_outdates_a_placement() {
        let cache = Cache::new();
        node(&cache, "n1", "a");
        let mine = Arc::new(pod("mine", 600));
        assert_eq!(check(&cache, &mine), Ok(()));
        // Another instance bound a pod there meanwhile.
        cache.add_pod(Arc::new(pod("theirs", 600))).unwrap();
        let refused = check(&cache, &mine).unwrap_err();
        assert_eq!(refused.plugin(), node_resources_fit::NAME);
        assert_eq!(refused.message(), "Insufficient cpu");
    }

    #[test]
    fn a_state_that_holds_the_pod_already_is_an_error_not_a_verdict() {
        let cache = Cache::new();
        node(&cache, "n1", "a");
        let mine = Arc::new(pod("mine", 100));
        cache.assume_pod(mine.clone()).unwrap();
        let refused = check(&cache, &mine).unwrap_err();
        assert_eq!(refused.code(), gantry_framework::Code::Error);
    }

    fn term(key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(LabelSelector::from_pairs([(
                Sym::new("app"),
                Sym::new("db"),
            )])),
            namespaces: Vec::new(),
            namespace_selector: None,
            topology_key: Sym::new(key),
        }
    }

    #[test]
    fn required_anti_affinity_over_a_zone_against_a_pod_bound_on_another_node() {
        let cache = Cache::new();
        node(&cache, "n1", "a");
        node(&cache, "n2", "a");
        let mut mine = pod("mine", 100).with_labels([("app", "db")]);
        mine.affinity
            .pod_anti_affinity
            .required
            .push(term("topology.kubernetes.io/zone"));
        let mine = Arc::new(mine);
        assert_eq!(check(&cache, &mine), Ok(()));
        let theirs = pod("theirs", 100)
            .with_labels([("app", "db")])
            .on_node("n2");
        cache.add_pod(Arc::new(theirs)).unwrap();
        let refused = check(&cache, &mine).unwrap_err();
        assert_eq!(refused.plugin(), inter_pod_affinity::NAME);
    }

    #[test]
    fn do_not_schedule_spread_over_zones_counts_binds_on_other_nodes() {
        let cache = Cache::new();
        node(&cache, "n1", "a");
        node(&cache, "n2", "a");
        node(&cache, "n3", "b");
        let spread = |name: &str, node: &str| {
            let mut p = pod(name, 100).with_labels([("app", "web")]).on_node(node);
            p.topology_spread_constraints
                .push(TopologySpreadConstraint {
                    max_skew: 1,
                    topology_key: Sym::new("topology.kubernetes.io/zone"),
                    when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                    label_selector: Some(LabelSelector::from_pairs([(
                        Sym::new("app"),
                        Sym::new("web"),
                    )])),
                    min_domains: None,
                    node_affinity_policy: InclusionPolicy::Honor,
                    node_taints_policy: InclusionPolicy::Ignore,
                });
            Arc::new(p)
        };
        let mine = spread("mine", "n1");
        assert_eq!(check(&cache, &mine), Ok(()));
        // Another instance put one in zone a, on another node: a second there makes a
        // skew of 2.
        cache.add_pod(spread("theirs", "n2")).unwrap();
        let refused = check(&cache, &mine).unwrap_err();
        assert_eq!(refused.plugin(), pod_topology_spread::NAME);
        assert_eq!(check(&cache, &spread("elsewhere", "n3")), Ok(()));
    }

    fn gpu_cache() -> Cache {
        use gantry_api::gpu;
        let cache = Cache::new();
        // Two cards: Filter finds room on the idle one, so only the card written on the
        // pod can refuse it.
        let register = r#"[{"id":"gpu-0","count":10,"devmem":8000,"devcore":100,"type":"NVIDIA-A10","health":true},{"id":"gpu-1","count":10,"devmem":8000,"devcore":100,"type":"NVIDIA-A10","health":true}]"#;
        let mut allocatable = Resources::new(1000, 8 << 30);
        allocatable.pods = 110;
        allocatable.set(gantry_api::ResourceName::parse(gpu::GPU_COUNT), 20);
        let mut gpu_node = Node::new("n1", allocatable);
        gpu_node.annotations =
            Arc::from([(Arc::from(gpu::REGISTER_ANNOTATION), Arc::from(register))]);
        gpu_node.gpus = gpu::parse_node_devices(&gpu_node.annotations)
            .unwrap()
            .map(Arc::new);
        cache.add_node(Arc::new(gpu_node));
        cache
    }

    /// A pod asking for a share of a card, with the card a decision wrote on it.
    fn on_card(name: &str, memory_mib: i32, cores: i32, policy: Option<&str>) -> Arc<Pod> {
        use gantry_api::gpu;
        let mut card = gantry_api::Container::new("g", None, None);
        for (resource, amount) in [
            (gpu::GPU_COUNT, 1),
            (gpu::GPU_MEMORY, memory_mib),
            (gpu::GPU_CORES, cores),
        ] {
            let name = gantry_api::ResourceName::parse(resource);
            if amount == 0 {
                card.zero_requests = Box::from([Sym::new(resource)]);
            }
            card.requests.set(name, i64::from(amount));
        }
        let mut p = pod(name, 100).with_container(card);
        if let Some(policy) = policy {
            p.annotations = Arc::from([(Arc::from(gpu::GPU_SCHEDULER_POLICY), Arc::from(policy))]);
        }
        p.bind_annotations = Some(Arc::from([
            (Arc::from(gpu::ASSIGNED_NODE), Arc::from("n1")),
            (
                Arc::from(gpu::DEVICES_ALLOCATED),
                Arc::from(format!(";gpu-0,NVIDIA,{memory_mib},{cores}:;")),
            ),
        ]));
        Arc::new(p)
    }

    #[test]
    fn a_gpu_card_another_instance_filled_meanwhile_is_a_conflict() {
        let cache = gpu_cache();
        let mine = on_card("mine", 5000, 10, None);
        assert_eq!(check(&cache, &mine), Ok(()));
        cache.add_pod(on_card("theirs", 4000, 10, None)).unwrap();
        let refused = check(&cache, &mine).unwrap_err();
        assert_eq!(refused.plugin(), gpu_share::NAME);
        assert_eq!(refused.message(), "GPU card gpu-0: CardInsufficientMemory");
    }

    #[test]
    fn the_mutex_policy_and_a_whole_cards_compute_hold_at_bind_time() {
        // The card has room for both by memory and compute: only HAMi's rules refuse.
        let cache = gpu_cache();
        let mutex = on_card("mutex", 1000, 10, Some("mutex"));
        assert_eq!(check(&cache, &mutex), Ok(()));
        cache.add_pod(on_card("theirs", 1000, 10, None)).unwrap();
        let refused = check(&cache, &mutex).unwrap_err();
        assert_eq!(
            refused.message(),
            "GPU card gpu-0: ExclusiveDeviceAllocateConflict"
        );

        let cache = gpu_cache();
        cache.add_pod(on_card("whole", 1000, 100, None)).unwrap();
        let refused = check(&cache, &on_card("mine", 1000, 0, None)).unwrap_err();
        assert_eq!(
            refused.message(),
            "GPU card gpu-0: CardComputeUnitsExhausted"
        );
    }

    #[test]
    fn a_node_gone_from_the_cache_is_a_conflict() {
        let cache = Cache::new();
        node(&cache, "n2", "a");
        assert!(check(&cache, &Arc::new(pod("mine", 100))).is_err());
    }
}
