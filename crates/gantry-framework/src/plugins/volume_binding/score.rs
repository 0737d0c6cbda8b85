//! PreScore and Score under StorageCapacityScoring (KEP-4049; v1.33 alpha, v1.37 beta
//! and on): each node scores by the share of storage the pod's volumes would take there,
//! read through `VolumeBindingArgs.shape` (upstream's `scorer.go` and `Score` in
//! `volume_binding.go`).
//!
//! A node where the pod's claims bind static volumes counts only those: per storage class
//! of the volumes, the claims' requests against the volumes' capacities. Otherwise the
//! claims it would provision count, where a CSIStorageCapacity decided the capacity check:
//! per class, the requests against that object's `capacity` (the last claim's object of a
//! class wins, as upstream assigns rather than adds). Each class scores the shape at
//! `requested × 100 / capacity` (100 when there is no capacity or too little); the node
//! scores the mean over classes, rounded half away from zero; no class scores 0.

use crate::NodeInfos;
use gantry_api::{Pod, QuantityFormat, Sym};
use gantry_cache::NodeInfo;
use smallvec::SmallVec;

use super::filter::Plan;
use super::{NAME, PreFilterState, VolumeBinding};
use crate::plugins::shape_score::broken_linear;
use crate::{Cluster, CycleState, Detail, PreScorePlugin, ScorePlugin, Status};

/// Upstream's `maxUtilization`.
const MAX_UTILIZATION: i64 = 100;

impl PreScorePlugin for VolumeBinding {
    /// Skips with the gate off, and for pods whose PreFilter skipped (no claims: every
    /// node would score 0).
    fn pre_score(
        &self,
        state: &mut CycleState,
        _pod: &Pod,
        _nodes: &NodeInfos<'_>,
        _cluster: Cluster<'_>,
    ) -> Status {
        if self.capacity_shape.is_none() || state.read::<PreFilterState>(NAME).is_none() {
            return Status::skip();
        }
        Status::success()
    }
}

impl ScorePlugin for VolumeBinding {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let Some(shape) = &self.capacity_shape else {
            return Ok(0);
        };
        Ok(class_uses(state, node).map_or(0, |(classes, _)| node_score(shape, &classes)))
    }
}

impl VolumeBinding {
    /// For `explain`, with StorageCapacityScoring on: per storage class, what the pod's
    /// volumes would take of the storage the score counts on the node, and its score.
    pub(super) fn score_details(&self, state: &CycleState, node: &NodeInfo) -> Vec<Detail> {
        let (Some(shape), Some((classes, from))) = (&self.capacity_shape, class_uses(state, node))
        else {
            return Vec::new();
        };
        let gib = |bytes: i64| QuantityFormat::BinarySI.canonical(bytes.saturating_mul(1000));
        (classes.iter())
            .map(|c| Detail {
                item: c
                    .class
                    .map_or("no class".to_string(), |name| format!("class {name}")),
                state: format!(
                    "{} of {} ({}%), {from}",
                    gib(c.requested),
                    gib(c.capacity),
                    utilization(c.requested, c.capacity)
                ),
                reason: None,
                score: Some(broken_linear(shape, utilization(c.requested, c.capacity)) as f64),
                chosen: false,
            })
            .collect()
    }
}

/// What the pod's volumes would take on the node, per storage class, and of what: the
/// static volumes they bind when they bind any, otherwise the capacity objects that
/// decided the claims to provision. `None` where the node does not fit them.
fn class_uses(
    state: &CycleState,
    node: &NodeInfo,
) -> Option<(SmallVec<[ClassUse; 4]>, &'static str)> {
    let s = state.read::<PreFilterState>(NAME)?;
    let node = node.node()?;
    let Plan::Fits(matches, provisions) = s.plan(node) else {
        return None;
    };
    let mut classes: SmallVec<[ClassUse; 4]> = SmallVec::new();
    if !matches.is_empty() {
        for m in &matches {
            let class = ClassUse::of(&mut classes, m.volume.storage_class);
            class.capacity = class.capacity.saturating_add(m.volume.capacity);
            class.requested = class.requested.saturating_add(m.claim.requested);
        }
        return Some((classes, "the volumes it binds"));
    }
    for claim in provisions {
        let Some(object) = (claim.capacities.as_ref())
            .and_then(|objects| objects.iter().find(|c| c.reaches(&node.labels)))
        else {
            continue;
        };
        let class = ClassUse::of(&mut classes, Some(claim.class.name));
        class.capacity = object.capacity.unwrap_or(0);
        class.requested = class.requested.saturating_add(claim.requested);
    }
    Some((classes, "the capacity it provisions from"))
}

/// What the pod's volumes of one storage class would take on a node, in bytes (upstream's
/// `StorageResource`).
struct ClassUse {
    class: Option<Sym>,
    requested: i64,
    capacity: i64,
}

impl ClassUse {
    /// The entry of `class`, added if new.
    fn of(classes: &mut SmallVec<[ClassUse; 4]>, class: Option<Sym>) -> &mut ClassUse {
        let i = match classes.iter().position(|c| c.class == class) {
            Some(i) => i,
            None => {
                classes.push(ClassUse {
                    class,
                    requested: 0,
                    capacity: 0,
                });
                classes.len() - 1
            }
        };
        &mut classes[i]
    }
}

/// Upstream's `buildScorerFunction`: the mean of the classes' scores.
fn node_score(shape: &[(i64, i64)], classes: &[ClassUse]) -> i64 {
    if classes.is_empty() {
        return 0;
    }
    let total: i64 = (classes.iter())
        .map(|c| broken_linear(shape, utilization(c.requested, c.capacity)))
        .sum();
    (total as f64 / classes.len() as f64).round() as i64
}

/// The share of `capacity` that `requested` takes, in percent (floored; 100 when there is
/// no capacity or too little).
fn utilization(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return MAX_UTILIZATION;
    }
    let share = i128::from(requested) * i128::from(MAX_UTILIZATION) / i128::from(capacity);
    i64::try_from(share).unwrap_or(MAX_UTILIZATION)
}

/// Upstream's `TestVolumeBinding` rows with `EnableStorageCapacityScoring` (v1.36.2
/// `volume_binding_test.go`); the test's own default shape is `[{0,0},{100,10}]`.
#[cfg(test)]
mod tests {
    use gantry_api::storage::VolumeBindingMode;
    use gantry_api::{CsiDriver, Node, PersistentVolume, PersistentVolumeClaim, StorageCapacity};

    use super::super::testing::*;
    use super::*;
    use crate::plugins::testing::{node, node_info};
    use crate::{ApiObjects, FilterPlugin, PreFilterPlugin};

    const GIB: i64 = 1 << 30;
    const TEST_SHAPE: [(i64, i64); 2] = [(0, 0), (100, 10)];
    const WITH_CAPACITY: &str = "wait-sc-with-storage-capacity";
    const DRIVER: &str = "driver-with-storage-capacity";

    fn sized(name: &str, class: &str, gib: i64) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            requested: gib * GIB,
            ..claim(name, Some(class))
        }
    }

    /// A volume of `class` reachable where the nodes carry every `(key, value)`.
    fn pv(name: &str, class: &str, gib: i64, on: &[(&str, &str)]) -> PersistentVolume {
        let pairs: Vec<(&str, &[&str])> = on
            .iter()
            .map(|(k, v)| (*k, std::slice::from_ref(v)))
            .collect();
        PersistentVolume {
            capacity: gib * GIB,
            node_affinity: affinity(&pairs),
            ..volume(name, Some(class))
        }
    }

    /// Upstream's `makeCapacity`: on the node labelled `nodeKey: <node>`.
    fn capacity(node: &str, gib: i64) -> StorageCapacity {
        StorageCapacity {
            key: format!("default/{node}"),
            storage_class: Sym::new(WITH_CAPACITY),
            node_topology: Some(gantry_api::LabelSelector::from_pairs([(
                Sym::new("nodeKey"),
                Sym::new(node),
            )])),
            capacity: Some(gib * GIB),
            maximum_volume_size: None,
        }
    }

    fn labelled(name: &str) -> Node {
        node(name, 1000, GIB).with_labels([("nodeKey", name)])
    }

    fn zonal(name: &str, zone: &str) -> Node {
        node(name, 1000, GIB).with_labels([
            ("topology.kubernetes.io/region", zone),
            ("topology.kubernetes.io/zone", zone),
        ])
    }

    fn zonal_pv(name: &str, gib: i64, zone: &str) -> PersistentVolume {
        let on = [
            ("topology.kubernetes.io/region", zone),
            ("topology.kubernetes.io/zone", zone),
        ];
        pv(name, "wait-sc", gib, &on)
    }

    struct Row {
        name: &'static str,
        claims: Vec<PersistentVolumeClaim>,
        volumes: Vec<PersistentVolume>,
        capacities: Vec<StorageCapacity>,
        nodes: Vec<Node>,
        shape: Vec<(i64, i64)>,
        /// Per node: `None` where Filter refuses it.
        scores: Vec<Option<i64>>,
    }

    /// Runs the row, and checks that `explain`'s classes give each fitting node its score
    /// (their mean, rounded); returns the first fitting node's details.
    fn run(row: Row) -> Vec<Detail> {
        let classes = [
            class("wait-sc", VolumeBindingMode::WaitForFirstConsumer, ""),
            class("wait-hdd-sc", VolumeBindingMode::WaitForFirstConsumer, ""),
            class(
                WITH_CAPACITY,
                VolumeBindingMode::WaitForFirstConsumer,
                DRIVER,
            ),
        ];
        let mut objects = ApiObjects::default();
        objects.set_storage(&row.volumes, &row.claims, &classes, &[]);
        let driver = CsiDriver {
            name: Sym::new(DRIVER),
            storage_capacity: true,
            prevent_pod_scheduling_if_missing: false,
        };
        objects.set_storage_capacities(&[driver], &row.capacities);
        let plugin = VolumeBinding {
            capacity_shape: Some(row.shape.clone()),
            ..VolumeBinding::default()
        };
        let names: Vec<&str> = row.claims.iter().map(|c| c.name.as_str()).collect();
        let pod = pod_with_claims("pod-a", &names);
        let snapshot = snapshot(&row.nodes, &[]);
        let cluster = Cluster {
            nodes: &snapshot,
            objects: &objects,
        };
        let mut state = CycleState::new();
        assert!(plugin.pre_filter(&mut state, &pod, cluster).1.is_success());
        assert!(
            plugin
                .pre_score(&mut state, &pod, &NodeInfos::given(&[]), cluster)
                .is_success()
        );
        let mut first = None;
        for (node, want) in row.nodes.iter().zip(&row.scores) {
            let info = node_info(node, &[]);
            let fits = plugin.filter(&state, &pod, &info).is_success();
            let got = fits.then(|| plugin.score(&state, &pod, &info).unwrap());
            assert_eq!(got, *want, "{}: {}", row.name, node.name);
            let details = plugin.details(&state, &pod, &info);
            if let Some(got) = got {
                let scores: Vec<f64> = details.iter().filter_map(|d| d.score).collect();
                let mean = scores.iter().sum::<f64>() / scores.len() as f64;
                assert_eq!(
                    mean.round() as i64,
                    got,
                    "{}: {} explained",
                    row.name,
                    node.name
                );
                first.get_or_insert(details);
            }
        }
        first.unwrap_or_default()
    }

    #[test]
    fn local_volumes_with_close_capacity_are_preferred() {
        let host = "kubernetes.io/hostname";
        let details = run(Row {
            name: "one claim",
            claims: vec![sized("pvc-a", "wait-sc", 50)],
            volumes: vec![
                pv("pv-a-0", "wait-sc", 200, &[(host, "node-a")]),
                pv("pv-a-1", "wait-sc", 200, &[(host, "node-a")]),
                pv("pv-b-0", "wait-sc", 100, &[(host, "node-b")]),
                pv("pv-b-1", "wait-sc", 100, &[(host, "node-b")]),
            ],
            capacities: vec![],
            nodes: vec![labelled("node-a"), labelled("node-b"), labelled("node-c")],
            shape: TEST_SHAPE.to_vec(),
            scores: vec![Some(25), Some(50), None],
        });
        assert_eq!(details[0].item, "class wait-sc");
        assert_eq!(
            details[0].state,
            "50Gi of 200Gi (25%), the volumes it binds"
        );
        // Two classes: 25 and 50 on node-a average 37.5, rounded up.
        let mut volumes = Vec::new();
        for (node, gib) in [("node-a", 200), ("node-b", 100)] {
            for (j, class) in ["wait-sc", "wait-sc", "wait-hdd-sc", "wait-hdd-sc"]
                .iter()
                .enumerate()
            {
                let name = format!("pv-{}-{j}", &node[5..]);
                volumes.push(pv(&name, class, gib, &[(host, node)]));
            }
        }
        run(Row {
            name: "multiple claims",
            claims: vec![
                sized("pvc-0", "wait-sc", 50),
                sized("pvc-1", "wait-hdd-sc", 100),
            ],
            volumes,
            capacities: vec![],
            nodes: vec![labelled("node-a"), labelled("node-b"), labelled("node-c")],
            shape: TEST_SHAPE.to_vec(),
            scores: vec![Some(38), Some(75), None],
        });
    }

    #[test]
    fn zonal_volumes_with_close_capacity_are_preferred() {
        let row = |shape: &[(i64, i64)], scores: [i64; 2]| Row {
            name: "zonal",
            claims: vec![sized("pvc-a", "wait-sc", 50)],
            volumes: vec![
                zonal_pv("pv-a-0", 200, "zone-a"),
                zonal_pv("pv-a-1", 200, "zone-a"),
                zonal_pv("pv-b-0", 100, "zone-b"),
                zonal_pv("pv-b-1", 100, "zone-b"),
            ],
            capacities: vec![],
            nodes: ["a", "b", "c"]
                .iter()
                .flat_map(|z| {
                    let zone = format!("zone-{z}");
                    [
                        zonal(&format!("{zone}-node-a"), &zone),
                        zonal(&format!("{zone}-node-b"), &zone),
                    ]
                })
                .collect(),
            shape: shape.to_vec(),
            scores: vec![
                Some(scores[0]),
                Some(scores[0]),
                Some(scores[1]),
                Some(scores[1]),
                None,
                None,
            ],
        };
        run(row(&TEST_SHAPE, [25, 50]));
        // Custom shape: 25% → 15, 50% → 30.
        run(row(&[(0, 0), (50, 3), (100, 5)], [15, 30]));
    }

    #[test]
    fn storage_capacity_scores() {
        let nodes = || vec![labelled("node-a"), labelled("node-b"), labelled("node-c")];
        let capacities = |gib: [i64; 3]| {
            vec![
                capacity("node-a", gib[0]),
                capacity("node-b", gib[1]),
                capacity("node-c", gib[2]),
            ]
        };
        run(Row {
            name: "storage capacity score",
            claims: vec![sized("pvc-dynamic", WITH_CAPACITY, 10)],
            volumes: vec![],
            capacities: capacities([100, 50, 10]),
            nodes: nodes(),
            shape: TEST_SHAPE.to_vec(),
            scores: vec![Some(10), Some(20), Some(100)],
        });
        // A static binding on the node: only static bindings count.
        let host = "kubernetes.io/hostname";
        run(Row {
            name: "with static binds",
            claims: vec![
                sized("pvc-dynamic", WITH_CAPACITY, 10),
                sized("pvc-static", "wait-sc", 50),
            ],
            volumes: ["a", "b", "c"]
                .iter()
                .map(|n| {
                    pv(
                        &format!("pv-static-{n}"),
                        "wait-sc",
                        100,
                        &[(host, &format!("node-{n}"))],
                    )
                })
                .collect(),
            capacities: capacities([100, 50, 10]),
            nodes: nodes(),
            shape: TEST_SHAPE.to_vec(),
            scores: vec![Some(50), Some(50), Some(50)],
        });
        // Two claims of one class against one object: requests add, capacity does not.
        run(Row {
            name: "two claims of one class",
            claims: vec![
                sized("pvc-dynamic-0", WITH_CAPACITY, 50),
                sized("pvc-dynamic-1", WITH_CAPACITY, 50),
            ],
            volumes: vec![],
            capacities: vec![capacity("node-a", 100)],
            nodes: vec![labelled("node-a")],
            shape: TEST_SHAPE.to_vec(),
            scores: vec![Some(100)],
        });
        run(Row {
            name: "prefer node with least allocatable",
            claims: vec![sized("pvc-dynamic", WITH_CAPACITY, 10)],
            volumes: vec![],
            capacities: capacities([100, 20, 10]),
            nodes: nodes(),
            shape: TEST_SHAPE.to_vec(),
            scores: vec![Some(10), Some(50), Some(100)],
        });
        run(Row {
            name: "prefer node with maximum allocatable",
            claims: vec![sized("pvc-dynamic", WITH_CAPACITY, 10)],
            volumes: vec![],
            capacities: capacities([100, 20, 10]),
            nodes: nodes(),
            shape: super::super::DEFAULT_CAPACITY_SHAPE.to_vec(),
            scores: vec![Some(90), Some(50), Some(0)],
        });
    }

    /// Without the gate (no shape), and for a pod with no claims, PreScore skips.
    #[test]
    fn pre_score_skips_without_the_gate_or_claims() {
        let objects = ApiObjects::default();
        let snapshot = snapshot(&[labelled("node-a")], &[]);
        let cluster = Cluster {
            nodes: &snapshot,
            objects: &objects,
        };
        let pod = pod_with_claims("pod-a", &[]);
        let mut plugin = VolumeBinding::default();
        let mut state = CycleState::new();
        plugin.pre_filter(&mut state, &pod, cluster);
        assert!(
            plugin
                .pre_score(&mut state, &pod, &NodeInfos::given(&[]), cluster)
                .is_skip()
        );
        plugin.capacity_shape = Some(TEST_SHAPE.to_vec());
        assert!(
            plugin
                .pre_score(&mut state, &pod, &NodeInfos::given(&[]), cluster)
                .is_skip()
        );
        assert_eq!(node_score(&TEST_SHAPE, &[]), 0);
    }
}
