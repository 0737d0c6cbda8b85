//! The sub-lists of nodes holding pods with (anti-)affinity, as upstream's delta store
//! tests pin them down (`clustersnapshot/store/delta_test.go`), through both stores.

use std::sync::Arc;

use gantry_api::labels::LabelSelector;
use gantry_api::{Node, Pod, PodAffinityTerm, Resources, Sym};
use gantry_cache::NodeInfo;
use gantry_whatif::{BasicStore, DeltaStore, DraCatalog, SnapshotStore};

fn stores(nodes: usize) -> Vec<Box<dyn SnapshotStore>> {
    let mut out: Vec<Box<dyn SnapshotStore>> = vec![
        Box::new(BasicStore::new(Arc::new(DraCatalog::default()))),
        Box::new(DeltaStore::new(Arc::new(DraCatalog::default()))),
    ];
    for store in &mut out {
        for i in 0..nodes {
            let node = Node::new(&format!("n{i}"), Resources::new(4000, 1 << 30));
            store.add_node(NodeInfo::new(Arc::new(node))).unwrap();
        }
    }
    out
}

fn term(app: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector::from_pairs([(
            Sym::new("app"),
            Sym::new(app),
        )])),
        namespaces: Vec::new(),
        namespace_selector: None,
        topology_key: Sym::new("kubernetes.io/hostname"),
    }
}

fn plain(name: &str) -> Arc<Pod> {
    Arc::new(Pod::new("default", name).with_requests(100, 100))
}

fn with_affinity(name: &str) -> Arc<Pod> {
    let mut pod = Pod::clone(&plain(name));
    pod.affinity.pod_affinity.required.push(term("test"));
    Arc::new(pod)
}

/// Upstream's `WithPodHostnameAntiAffinity`.
fn with_anti_affinity(name: &str, app: &str) -> Arc<Pod> {
    let mut pod = Pod::clone(&plain(name));
    pod.affinity.pod_anti_affinity.required.push(term(app));
    Arc::new(pod)
}

fn names(store: &dyn SnapshotStore, positions: &[u32]) -> Vec<String> {
    positions
        .iter()
        .map(|&p| store.node_at(p as usize).name().to_string())
        .collect()
}

#[test]
fn a_pod_without_affinity_leaves_the_lists_empty() {
    for mut store in stores(2) {
        store.add_pod(plain("plain-pod"), Sym::new("n0")).unwrap();
        assert!(store.with_affinity_pods().is_empty());
        assert!(store.with_required_anti_affinity_pods().is_empty());
    }
}

#[test]
fn affinity_and_anti_affinity_pods_list_their_node() {
    for mut store in stores(2) {
        store
            .add_pod(with_affinity("affinity-pod"), Sym::new("n0"))
            .unwrap();
        assert_eq!(names(&*store, store.with_affinity_pods()), ["n0"]);
        assert!(store.with_required_anti_affinity_pods().is_empty());
    }
    for mut store in stores(2) {
        store
            .add_pod(
                with_anti_affinity("anti-affinity-pod", "test"),
                Sym::new("n0"),
            )
            .unwrap();
        assert_eq!(
            names(&*store, store.with_required_anti_affinity_pods()),
            ["n0"]
        );
        assert_eq!(
            names(&*store, store.with_affinity_pods()),
            ["n0"],
            "anti-affinity counts too"
        );
    }
}

#[test]
fn removing_the_pod_empties_the_lists() {
    for mut store in stores(2) {
        let pod = with_anti_affinity("anti-affinity-pod", "test");
        store.add_pod(pod.clone(), Sym::new("n0")).unwrap();
        store.remove_pod(Sym::new("n0"), &pod.uid).unwrap();
        assert!(store.with_affinity_pods().is_empty());
        assert!(store.with_required_anti_affinity_pods().is_empty());
    }
}

#[test]
fn a_fork_sees_its_own_affinity_pods_and_revert_forgets_them() {
    for mut store in stores(3) {
        store
            .add_pod(
                with_anti_affinity("base-affinity-pod", "test"),
                Sym::new("n0"),
            )
            .unwrap();
        store.fork();
        store
            .add_pod(
                with_anti_affinity("fork-affinity-pod", "test2"),
                Sym::new("n1"),
            )
            .unwrap();
        assert_eq!(names(&*store, store.with_affinity_pods()), ["n0", "n1"]);
        store.revert().unwrap();
        assert_eq!(names(&*store, store.with_affinity_pods()), ["n0"]);
    }
}

#[test]
fn a_node_is_listed_once_however_many_affinity_pods_it_has() {
    for mut store in stores(1) {
        store
            .add_pod(with_anti_affinity("affinity-pod-1", "a"), Sym::new("n0"))
            .unwrap();
        store
            .add_pod(with_anti_affinity("affinity-pod-2", "b"), Sym::new("n0"))
            .unwrap();
        assert_eq!(store.with_affinity_pods().len(), 1);
        assert_eq!(store.with_required_anti_affinity_pods().len(), 1);
    }
}
