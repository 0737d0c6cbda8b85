//! The binder's check of a decision against the latest cache, for several scheduler
//! instances sharing one cluster (Gödel's shared state): each instance decides on its own
//! snapshot, which other instances' binds may have outdated by the time it binds, so the
//! binder asks again whether the pod still fits its node before writing the binding.

use std::sync::Arc;

use gantry_api::Pod;
use gantry_framework::plugins::{
    gpu_share, inter_pod_affinity, node_ports, node_resources_fit, node_volume_limits,
};
use gantry_framework::{Cluster, CycleState, Profile, Status};

/// The plugins whose verdicts another instance's binds can overturn: resources, host
/// ports, required (anti-)affinity and volume limits (and the GPU cards the decision
/// chose, checked card by card after them). Node properties (labels, taints)
/// change through the node, not through binds, and are left to the scheduling cycle.
pub const CHECKED_PLUGINS: [&str; 4] = [
    node_resources_fit::NAME,
    node_ports::NAME,
    inter_pod_affinity::NAME,
    node_volume_limits::NAME,
];

fn checked(name: &str) -> bool {
    CHECKED_PLUGINS.contains(&name)
}

/// Whether `pod` (which names its node) still fits that node in `cluster`, by the
/// profile's [`CHECKED_PLUGINS`]. The cluster may already hold the pod (assumed by this
/// instance): its own share is taken out first, as preemption's what-if removes victims,
/// so a pod never conflicts with itself. `Err` carries the rejecting plugin's status.
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
            "node {:?} is no longer in the cache",
            node_name.as_str()
        )));
    };
    let mut state = CycleState::new();
    for plugin in profile.pre_filter.iter().filter(|p| checked(p.name())) {
        let (_, status) = plugin.pre_filter(&mut state, pod, cluster);
        if status.is_skip() {
            state.skip_filter(plugin.name());
        } else if !status.is_success() {
            return Err(status.with_plugin(plugin.name()));
        }
    }
    let mut without_self;
    let mut info = node;
    if let Some(assumed) = node.pods().iter().find(|p| p.uid == pod.uid) {
        without_self = node.clone();
        without_self.remove_pod(&pod.uid);
        for plugin in profile.pre_filter.iter().filter(|p| checked(p.name())) {
            plugin.remove_pod(&mut state, pod, assumed, &without_self);
        }
        info = &without_self;
    }
    for plugin in profile.filter.iter().filter(|p| checked(p.name())) {
        if state.is_filter_skipped(plugin.name()) {
            continue;
        }
        let status = plugin.filter(&state, pod, info);
        if !status.is_success() {
            return Err(status.with_plugin(plugin.name()));
        }
    }
    // The GPU cards the decision wrote on the pod must still have room for it.
    if let Some(card) = info.gpus().and_then(|usage| usage.overfilled_by(pod)) {
        return Err(Status::unschedulable(format!(
            "GPU card {card} no longer has room for the pod"
        ))
        .with_plugin(gpu_share::NAME));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use gantry_api::{LabelSelector, Node, PodAffinityTerm, Resources, Sym};
    use gantry_cache::{Cache, Snapshot};
    use gantry_framework::ApiObjects;
    use gantry_framework::plugins::default_profile;

    use super::*;

    fn node(cache: &Cache, name: &str) {
        let mut allocatable = Resources::new(1000, 8 << 30);
        allocatable.pods = 110;
        let node = Node::new(name, allocatable).with_labels([("kubernetes.io/hostname", name)]);
        cache.add_node(Arc::new(node));
    }

    fn pod(name: &str, milli_cpu: i64) -> Pod {
        Pod::new("default", name)
            .with_requests(milli_cpu, 1 << 20)
            .on_node("n1")
    }

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
    fn an_assumed_pod_is_not_counted_twice_but_another_instances_bind_is() {
        let cache = Cache::new();
        node(&cache, "n1");
        let mine = Arc::new(pod("mine", 600));
        cache.assume_pod(mine.clone()).unwrap();
        assert_eq!(check(&cache, &mine), Ok(()));
        // Another instance bound a pod there meanwhile; the watch brought it in.
        cache.add_pod(Arc::new(pod("theirs", 600))).unwrap();
        let refused = check(&cache, &mine).unwrap_err();
        assert_eq!(refused.plugin(), node_resources_fit::NAME);
        assert_eq!(refused.message(), "Insufficient cpu");
    }

    #[test]
    fn required_anti_affinity_against_a_pod_bound_meanwhile_is_a_conflict() {
        let cache = Cache::new();
        node(&cache, "n1");
        let term = PodAffinityTerm {
            label_selector: Some(LabelSelector::from_pairs([(
                Sym::new("app"),
                Sym::new("db"),
            )])),
            namespaces: Vec::new(),
            namespace_selector: None,
            topology_key: Sym::new("kubernetes.io/hostname"),
        };
        let mut mine = pod("mine", 100).with_labels([("app", "db")]);
        mine.affinity.pod_anti_affinity.required.push(term);
        let mine = Arc::new(mine);
        cache.assume_pod(mine.clone()).unwrap();
        assert_eq!(
            check(&cache, &mine),
            Ok(()),
            "a pod never conflicts with itself"
        );
        cache
            .add_pod(Arc::new(pod("theirs", 100).with_labels([("app", "db")])))
            .unwrap();
        let refused = check(&cache, &mine).unwrap_err();
        assert_eq!(refused.plugin(), inter_pod_affinity::NAME);
    }

    #[test]
    fn a_gpu_card_another_instance_filled_meanwhile_is_a_conflict() {
        use gantry_api::gpu;
        let cache = Cache::new();
        let register = r#"[{"id":"gpu-0","count":10,"devmem":8000,"devcore":100,"type":"NVIDIA-A10","health":true}]"#;
        let mut allocatable = Resources::new(1000, 8 << 30);
        allocatable.pods = 110;
        let mut gpu_node = Node::new("n1", allocatable);
        gpu_node.annotations =
            Arc::from([(Arc::from(gpu::REGISTER_ANNOTATION), Arc::from(register))]);
        gpu_node.gpus = gpu::parse_node_devices(&gpu_node.annotations)
            .unwrap()
            .map(Arc::new);
        cache.add_node(Arc::new(gpu_node));
        // The card as a decision writes it on the assumed pod.
        let on_card = |name: &str, memory_mib: i32| {
            let mut p = pod(name, 100);
            p.bind_annotations = Some(Arc::from([
                (Arc::from(gpu::ASSIGNED_NODE), Arc::from("n1")),
                (
                    Arc::from(gpu::DEVICES_ALLOCATED),
                    Arc::from(format!("gpu-0,NVIDIA,{memory_mib},10:;")),
                ),
            ]));
            Arc::new(p)
        };
        let mine = on_card("mine", 5000);
        cache.assume_pod(mine.clone()).unwrap();
        assert_eq!(
            check(&cache, &mine),
            Ok(()),
            "its own share is not counted twice"
        );
        cache.add_pod(on_card("theirs", 4000)).unwrap();
        let refused = check(&cache, &mine).unwrap_err();
        assert_eq!(refused.plugin(), gpu_share::NAME);
        assert_eq!(
            refused.message(),
            "GPU card gpu-0 no longer has room for the pod"
        );
    }

    #[test]
    fn a_node_gone_from_the_cache_is_a_conflict() {
        let cache = Cache::new();
        node(&cache, "n2");
        assert!(check(&cache, &Arc::new(pod("mine", 100))).is_err());
    }
}
