//! ImageLocality: prefers nodes that already hold the pod's images, weighted by how
//! widespread each image is (an image on every node does not distinguish any).

use crate::NodeInfos;
use gantry_api::{Pod, Sym};
use gantry_cache::{NodeColumns, NodeFlags, NodeInfo};

use crate::{Cluster, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};

pub const NAME: &str = "ImageLocality";

const MB: i64 = 1024 * 1024;
const MIN_THRESHOLD: i64 = 23 * MB;
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

#[derive(Default)]
pub struct ImageLocality {
    /// Read each image's node count as of the snapshot (v1.29 on), not as of when the
    /// node was set (v1.28).
    pub counts_at_snapshot: bool,
    /// Score init containers' images too, the threshold growing with them (v1.30 on).
    pub counts_init_containers: bool,
    /// Score the images of image volumes too, the threshold not growing with them
    /// (kubernetes#130231, v1.36 on).
    pub counts_image_volumes: bool,
}

/// The pod's images, normalised, how many containers they come from (the threshold
/// grows with those, not with image volumes), and the number of nodes in the cluster.
#[derive(Clone)]
struct PodImages {
    images: Vec<Sym>,
    containers: usize,
    total_nodes: usize,
}

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    /// The set of the containers' and init containers' images, normalised (upstream signs
    /// no image volume).
    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        let images = (pod.containers.iter())
            .chain(&pod.init_containers)
            .map(|c| normalized(c.image.as_str()).as_str());
        signature.add_sorted(crate::signature::signer::IMAGE_NAMES, images);
        true
    }
}

/// Upstream's `normalizedImageName`: an image without a tag means `:latest`.
fn normalized(image: &str) -> Sym {
    let tag = image.rfind(':');
    let slash = image.rfind('/');
    match (tag, slash) {
        (Some(t), Some(s)) if t > s => Sym::new(image),
        (Some(_), None) => Sym::new(image),
        _ => Sym::new(&format!("{image}:latest")),
    }
}

impl PreScorePlugin for ImageLocality {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _nodes: &NodeInfos<'_>,
        cluster: Cluster<'_>,
    ) -> Status {
        // Where no node reports images every node scores 0, whatever the pod's images;
        // an image no node reports adds nothing on any node, and is not looked for.
        let columns = cluster.nodes.columns();
        let no_images = columns.is_some_and(|c| !c.any(NodeFlags::IMAGES));
        let on_some_node = |image: &Sym| columns.is_none_or(|c| c.nodes_with_image(*image) > 0);
        let init: &[gantry_api::Container] = if self.counts_init_containers {
            &pod.init_containers
        } else {
            &[]
        };
        let volumes: &[Sym] = if self.counts_image_volumes {
            &pod.image_volumes
        } else {
            &[]
        };
        let images = if no_images {
            Vec::new()
        } else {
            init.iter()
                .chain(&pod.containers)
                .map(|c| c.image)
                .chain(volumes.iter().copied())
                .map(|image| normalized(image.as_str()))
                .filter(on_some_node)
                .collect()
        };
        state.write(
            NAME,
            PodImages {
                images,
                containers: init.len() + pod.containers.len(),
                total_nodes: cluster.nodes.num_nodes(),
            },
        );
        Status::success()
    }
}

impl ImageLocality {
    /// Upstream's `calculatePriority` of `sumImageScores`: the node's share of the pod's
    /// images, each weighted by how widespread it is, between the thresholds.
    fn score_images(&self, pod: &PodImages, node: &NodeInfo) -> i64 {
        let max_threshold = MAX_CONTAINER_THRESHOLD * pod.containers as i64;
        if max_threshold <= MIN_THRESHOLD {
            return 0;
        }
        let total = pod.total_nodes.max(1) as f64;
        let sum: i64 = pod
            .images
            .iter()
            .filter_map(|&image| node.image_state(image))
            .map(|s| {
                let nodes = if self.counts_at_snapshot {
                    s.num_nodes
                } else {
                    s.num_nodes_when_set
                };
                (s.size_bytes as f64 * (f64::from(nodes) / total)) as i64
            })
            .sum();
        let sum = sum.clamp(MIN_THRESHOLD, max_threshold);
        MAX_NODE_SCORE * (sum - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)
    }
}

impl ScorePlugin for ImageLocality {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        Ok(self.score_images(pod_images(state)?, node))
    }

    /// A node that reports no images scores 0 (the sum is below the floor).
    fn score_columns(
        &self,
        state: &CycleState,
        _pod: &Pod,
        nodes: &[&NodeInfo],
        columns: &NodeColumns,
        positions: &[usize],
        scores: &mut [i64],
    ) -> Result<bool, Status> {
        // The state read once, not once per node.
        let images = pod_images(state)?;
        super::score_nodes_with(
            NodeFlags::IMAGES,
            nodes,
            columns,
            positions,
            scores,
            |node| Ok(self.score_images(images, node)),
        )
    }

    /// No node reports images, or none of the pod's: every node scores 0.
    fn uniform_score(
        &self,
        state: &CycleState,
        _pod: &Pod,
        columns: &NodeColumns,
    ) -> Result<Option<i64>, Status> {
        let images = pod_images(state)?;
        Ok((!columns.any(NodeFlags::IMAGES) || images.images.is_empty()).then_some(0))
    }
}

fn pod_images(state: &CycleState) -> Result<&PodImages, Status> {
    state
        .read::<PodImages>(NAME)
        .ok_or_else(|| Status::error("ImageLocality PreScore state missing"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiObjects;
    use gantry_api::{Container, Node, Resources};
    use gantry_cache::{Cache, ClusterState, Snapshot};
    use std::sync::Arc;

    fn pod_with_images(images: &[&str]) -> Pod {
        let mut pod = Pod::new("ns", "p");
        for image in images {
            let mut c = Container::new("c", Some(0), Some(0));
            c.image = Sym::new(image);
            pod = pod.with_container(c);
        }
        pod
    }

    #[test]
    fn table() {
        // Re-derived from upstream's image_locality_test: node 1 holds gcr.io/40 (40MB) and
        // gcr.io/250 (250MB), node 2 holds gcr.io/10 (10MB) and gcr.io/2000 (2000MB).
        let cache = Cache::new();
        cache.add_node(Arc::new(
            Node::new("machine1", Resources::default())
                .with_image("gcr.io/40:latest", 40 * MB)
                .with_image("gcr.io/300:latest", 300 * MB)
                .with_image("gcr.io/2000:latest", 2000 * MB),
        ));
        cache.add_node(Arc::new(
            Node::new("machine2", Resources::default())
                .with_image("gcr.io/250:latest", 250 * MB)
                .with_image("gcr.io/10:latest", 10 * MB),
        ));
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        let objects = ApiObjects::default();
        let columns = snapshot.columns().expect("a snapshot keeps columns");
        let pre_scored = |pod: &Pod, counts_image_volumes: bool| {
            let mut state = CycleState::new();
            let cluster = Cluster {
                nodes: &snapshot,
                objects: &objects,
            };
            let plugin = ImageLocality {
                counts_at_snapshot: true,
                counts_init_containers: true,
                counts_image_volumes,
            };
            plugin.pre_score(&mut state, pod, &NodeInfos::given(&[]), cluster);
            (plugin, state)
        };
        let score_as = |pod: &Pod, counts_image_volumes: bool| -> Vec<i64> {
            let (plugin, state) = pre_scored(pod, counts_image_volumes);
            let scores: Vec<i64> = (0..snapshot.num_nodes())
                .map(|i| plugin.score(&state, pod, snapshot.node_at(i)).unwrap())
                .collect();
            // The column loop agrees with Score node by node.
            let nodes: Vec<&NodeInfo> = (0..snapshot.num_nodes())
                .map(|i| snapshot.node_at(i))
                .collect();
            let positions: Vec<usize> = (0..nodes.len()).collect();
            let mut in_one_pass = vec![-1; nodes.len()];
            let answered = plugin
                .score_columns(&state, pod, &nodes, columns, &positions, &mut in_one_pass)
                .unwrap();
            assert!(answered);
            assert_eq!(in_one_pass, scores);
            if let Some(uniform) = plugin.uniform_score(&state, pod, columns).unwrap() {
                assert!(scores.iter().all(|&s| s == uniform));
            }
            scores
        };
        let score = |pod: &Pod| score_as(pod, true);
        let uniform = |pod: &Pod| {
            let (plugin, state) = pre_scored(pod, true);
            plugin.uniform_score(&state, pod, columns).unwrap()
        };
        // Images no node reports: every node scores 0, said once for all; one image on a
        // node, and the nodes are scored.
        assert_eq!(
            uniform(&pod_with_images(&["gcr.io/300:v1", "gcr.io/9"])),
            Some(0)
        );
        assert_eq!(
            uniform(&pod_with_images(&["gcr.io/300:v1", "gcr.io/10"])),
            None
        );
        // Two images, each on one of two nodes: 40MB*1/2 = 20MB on machine1 (below the
        // 23MB floor: 0); 250MB*1/2 = 125MB on machine2: 100*(125-23)/(2000-23) = 5.
        assert_eq!(
            score(&pod_with_images(&["gcr.io/40", "gcr.io/250"])),
            [0, 5]
        );
        // 300MB/2 = 150MB + 2000MB/2 = 1000MB: (1150-23)*100/(2000-23) = 57.
        assert_eq!(
            score(&pod_with_images(&["gcr.io/300", "gcr.io/2000"])),
            [57, 0]
        );
        // No container: no threshold to score between.
        assert_eq!(score(&pod_with_images(&[])), [0, 0]);
        // A tagged name must match exactly.
        assert_eq!(score(&pod_with_images(&["gcr.io/300:v1"])), [0, 0]);
        assert_eq!(
            normalized("registry:5000/app"),
            Sym::new("registry:5000/app:latest")
        );
        assert_eq!(normalized("nginx:1.25"), Sym::new("nginx:1.25"));
        // v1.36: an image volume's image adds to the sum, not to the threshold. One
        // container (gcr.io/40, 20MB on machine1) and the volume gcr.io/2000 (1000MB on
        // machine1): min(1020MB, 1000MB) -> 100*(1000-23)/(1000-23) = 100; v1.35
        // ignores the volume: 20MB is below the floor.
        let mut with_volume = pod_with_images(&["gcr.io/40"]);
        let template: &mut gantry_api::PodTemplate = &mut with_volume;
        template.image_volumes = vec![Sym::new("gcr.io/2000")];
        assert_eq!(score_as(&with_volume, true), [100, 0]);
        assert_eq!(score_as(&with_volume, false), [0, 0]);
    }
}
