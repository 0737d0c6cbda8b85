//! Builders for the volume plugins' tests, after upstream's `makePVC` / `makePV`.

use std::sync::Arc;

use gantry_api::labels::{NodeSelectorOp, NodeSelectorRequirement};
use gantry_api::storage::{ClaimPhase, VolumeBindingMode};
use gantry_api::{
    Labels, Node, NodeSelector, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, Pod,
    StorageClass, Sym, Volume,
};
use gantry_cache::{Cache, Snapshot};

/// An unbound claim in "default" with no access modes and no request.
pub fn claim(name: &str, class: Option<&str>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        namespace: Sym::new("default"),
        name: Sym::new(name),
        storage_class: class.map(Sym::new),
        requested: 0,
        access_modes: Default::default(),
        volume_name: None,
        phase: ClaimPhase::Pending,
        terminating: false,
        controller_uid: None,
        selected_node: None,
    }
}

pub fn bound_claim(name: &str, class: &str, volume: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        volume_name: Some(Sym::new(volume)),
        phase: ClaimPhase::Bound,
        ..claim(name, Some(class))
    }
}

/// A volume with no capacity, access modes, affinity or claim.
pub fn volume(name: &str, class: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        name: Sym::new(name),
        labels: Labels::default(),
        capacity: 0,
        access_modes: Default::default(),
        storage_class: class.map(Sym::new),
        node_affinity: None,
        claim_ref: None,
        csi_driver: None,
        available: true,
    }
}

/// One node selector term: `key In values` for each pair.
pub fn affinity(pairs: &[(&str, &[&str])]) -> Option<NodeSelector> {
    let match_expressions = pairs
        .iter()
        .map(|(key, values)| NodeSelectorRequirement {
            key: Sym::new(key),
            op: NodeSelectorOp::In,
            values: values.iter().map(|v| Sym::new(v)).collect(),
        })
        .collect();
    Some(NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions,
            match_fields: vec![],
        }],
    })
}

pub fn class(name: &str, mode: VolumeBindingMode, provisioner: &str) -> StorageClass {
    StorageClass {
        name: Sym::new(name),
        provisioner: Sym::new(provisioner),
        binding_mode: mode,
        allowed_topologies: None,
    }
}

/// A pod in "default" using the named claims.
pub fn pod_with_claims(name: &str, claims: &[&str]) -> Pod {
    let mut pod = Pod::new("default", name);
    pod.volumes = claims.iter().map(|c| Volume::claim(c, c)).collect();
    pod
}

/// A snapshot of the nodes, with the pods placed on the nodes they name.
pub fn snapshot(nodes: &[Node], pods: &[Pod]) -> Snapshot {
    let cache = Cache::new();
    for node in nodes {
        cache.add_node(Arc::new(node.clone()));
    }
    for (i, pod) in pods.iter().enumerate() {
        let mut pod = pod.clone();
        pod.uid = Arc::from(format!("{}-{i}", pod.uid));
        if pod.node_name.is_none() {
            pod.node_name = nodes.first().map(|n| n.name);
        }
        cache.add_pod(Arc::new(pod)).expect("test pods are unique");
    }
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot).unwrap();
    snapshot
}
