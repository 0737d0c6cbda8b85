//! The snapshot's nodes as columns: what the resource plugins and the cheap per-node
//! checks read, one contiguous array per quantity, in node-list order. A plugin that loops
//! over five hundred nodes for one pod then walks a few arrays of integers instead of five
//! hundred NodeInfos scattered over the heap.
//!
//! The columns are kept by the [`Snapshot`](crate::Snapshot): written again for the nodes
//! an update copied, rebuilt when the node list is.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::{Resources, Sym, TaintEffect};

use crate::{CardSummary, ImageState, NodeInfo};

/// Facts about a node that let a plugin settle it without reading its NodeInfo.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeFlags(u8);

impl NodeFlags {
    /// `spec.unschedulable` (cordoned).
    pub const UNSCHEDULABLE: NodeFlags = NodeFlags(1);
    /// At least one NoSchedule or NoExecute taint.
    pub const HARD_TAINTS: NodeFlags = NodeFlags(1 << 1);
    /// At least one PreferNoSchedule taint.
    pub const SOFT_TAINTS: NodeFlags = NodeFlags(1 << 2);
    /// The node reports images.
    pub const IMAGES: NodeFlags = NodeFlags(1 << 3);

    pub fn of(info: &NodeInfo) -> NodeFlags {
        let mut flags = NodeFlags::default();
        let Some(node) = info.node() else {
            return flags;
        };
        if node.unschedulable {
            flags.0 |= NodeFlags::UNSCHEDULABLE.0;
        }
        for taint in &node.taints {
            flags.0 |= match taint.effect {
                TaintEffect::NoSchedule | TaintEffect::NoExecute => NodeFlags::HARD_TAINTS.0,
                TaintEffect::PreferNoSchedule => NodeFlags::SOFT_TAINTS.0,
            };
        }
        if info.has_images() {
            flags.0 |= NodeFlags::IMAGES.0;
        }
        flags
    }

    #[inline]
    pub fn has(self, flag: NodeFlags) -> bool {
        self.0 & flag.0 != 0
    }
}

/// One amount per node.
pub type Column = Vec<i64>;

/// A scalar (extended) resource's allocatable and requested amounts per node.
#[derive(Debug, Clone)]
struct ScalarColumns {
    name: Sym,
    allocatable: Column,
    requested: Column,
}

/// The nodes' allocatable and requested amounts and flags, position by position in the
/// snapshot's node order.
#[derive(Debug, Clone, Default)]
pub struct NodeColumns {
    allocatable_cpu: Column,
    allocatable_memory: Column,
    allocatable_ephemeral: Column,
    allocatable_pods: Column,
    requested_cpu: Column,
    requested_memory: Column,
    requested_ephemeral: Column,
    non_zero_cpu: Column,
    non_zero_memory: Column,
    /// Pods on the node (what the `pods` allocatable is compared with).
    pod_count: Column,
    /// Every scalar resource some node has or some pod requests, sorted by name; a node
    /// without it holds zeros.
    scalars: Vec<ScalarColumns>,
    flags: Vec<NodeFlags>,
    /// HAMi-registered cards at a glance; `None` for a node without them.
    cards: Vec<Option<CardSummary>>,
    /// Each node's generation: what the scheduler's verdict memo checks its entries by.
    generations: Vec<u64>,
    /// Each node's name, so that naming the nodes a pod failed on reads no NodeInfo.
    names: Vec<Sym>,
    /// How many nodes have each flag (by bit).
    flag_counts: [usize; 8],
    /// Each node's images, as last written (shared with its NodeInfo).
    images: Vec<Arc<[ImageState]>>,
    /// How many nodes report each image name: an image no node has scores nowhere.
    nodes_per_image: HashMap<Sym, u32, RandomState>,
    /// As many zeros as there are nodes: the column of a scalar resource no node knows.
    zeros: Column,
    /// At least the magnitude of every amount written since the last rebuild (never
    /// lowered in between): below a bound, scores can skip their overflow checks.
    largest: u64,
}

/// Which amounts of a resource a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Allocatable,
    /// The sum of the pods' effective requests.
    Requested,
    /// The same with absent cpu and memory requests defaulted (what scoring reads);
    /// equal to `Requested` for the other resources.
    NonZeroRequested,
}

impl NodeColumns {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.flags.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }

    /// The columns of `nodes`, in order (a snapshot keeps its own up to date).
    pub fn of<'a>(nodes: impl ExactSizeIterator<Item = &'a NodeInfo>) -> NodeColumns {
        let mut columns = NodeColumns::default();
        columns.rebuild(nodes);
        columns
    }

    /// Rewrites every column from the nodes, in order.
    pub(crate) fn rebuild<'a>(&mut self, nodes: impl ExactSizeIterator<Item = &'a NodeInfo>) {
        let n = nodes.len();
        for column in self.fixed_columns_mut() {
            column.clear();
            column.resize(n, 0);
        }
        self.scalars.clear();
        self.flags.clear();
        self.flags.resize(n, NodeFlags::default());
        self.cards.clear();
        self.cards.resize(n, None);
        self.generations.clear();
        self.generations.resize(n, 0);
        self.names.clear();
        self.names.resize(n, Sym::new(""));
        self.flag_counts = [0; 8];
        self.images.clear();
        self.images.resize(n, Arc::from([]));
        self.nodes_per_image.clear();
        self.largest = 0;
        for (position, info) in nodes.enumerate() {
            self.set(position, info);
        }
    }

    /// Writes the node at `position` again (it changed).
    pub(crate) fn set(&mut self, position: usize, info: &NodeInfo) {
        let allocatable = info.allocatable();
        let requested = info.requested();
        let non_zero = info.non_zero_requested();
        self.allocatable_cpu[position] = allocatable.milli_cpu;
        self.allocatable_memory[position] = allocatable.memory;
        self.allocatable_ephemeral[position] = allocatable.ephemeral_storage;
        self.allocatable_pods[position] = allocatable.pods;
        self.requested_cpu[position] = requested.milli_cpu;
        self.requested_memory[position] = requested.memory;
        self.requested_ephemeral[position] = requested.ephemeral_storage;
        self.non_zero_cpu[position] = non_zero.milli_cpu;
        self.non_zero_memory[position] = non_zero.memory;
        self.pod_count[position] = info.pods().len() as i64;
        let flags = NodeFlags::of(info);
        for (bit, count) in self.flag_counts.iter_mut().enumerate() {
            let had = self.flags[position].0 >> bit & 1;
            *count = *count + usize::from(flags.0 >> bit & 1) - usize::from(had);
        }
        self.flags[position] = flags;
        self.cards[position] = info.gpus().map(|usage| *usage.summary());
        self.generations[position] = info.generation();
        self.names[position] = info.name();
        self.set_images(position, info.image_states());
        for (name, _) in allocatable.scalars().chain(requested.scalars()) {
            self.ensure_scalar(name);
        }
        for scalar in &mut self.scalars {
            scalar.allocatable[position] = allocatable.scalar(scalar.name);
            scalar.requested[position] = requested.scalar(scalar.name);
        }
        self.largest = [allocatable, requested, non_zero]
            .into_iter()
            .map(Resources::largest_magnitude)
            .fold(self.largest, u64::max);
    }

    /// Counts the node's images anew when their names changed (the node counts of a
    /// node's images change more often than the names, and change nothing here).
    fn set_images(&mut self, position: usize, images: &Arc<[ImageState]>) {
        let old = std::mem::replace(&mut self.images[position], images.clone());
        let same_names = Arc::ptr_eq(&old, images)
            || (old.len() == images.len()
                && old.iter().zip(images.iter()).all(|(a, b)| a.name == b.name));
        if same_names {
            return;
        }
        for state in old.iter() {
            if let Some(count) = self.nodes_per_image.get_mut(&state.name) {
                *count -= 1;
                if *count == 0 {
                    self.nodes_per_image.remove(&state.name);
                }
            }
        }
        for state in images.iter() {
            *self.nodes_per_image.entry(state.name).or_insert(0) += 1;
        }
    }

    /// How many nodes report the image `name`.
    pub fn nodes_with_image(&self, name: Sym) -> u32 {
        self.nodes_per_image.get(&name).copied().unwrap_or(0)
    }

    /// An upper bound of the magnitude of every amount in the columns.
    pub fn largest_amount(&self) -> u64 {
        self.largest
    }

    fn ensure_scalar(&mut self, name: Sym) {
        if let Err(at) = self.scalars.binary_search_by_key(&name, |s| s.name) {
            let n = self.len();
            self.scalars.insert(
                at,
                ScalarColumns {
                    name,
                    allocatable: vec![0; n],
                    requested: vec![0; n],
                },
            );
        }
    }

    fn fixed_columns_mut(&mut self) -> [&mut Column; 11] {
        [
            &mut self.allocatable_cpu,
            &mut self.allocatable_memory,
            &mut self.allocatable_ephemeral,
            &mut self.allocatable_pods,
            &mut self.requested_cpu,
            &mut self.requested_memory,
            &mut self.requested_ephemeral,
            &mut self.non_zero_cpu,
            &mut self.non_zero_memory,
            &mut self.pod_count,
            &mut self.zeros,
        ]
    }

    /// The fixed columns that hold amounts (all but `zeros`).
    fn amounts(&self) -> [&Column; 10] {
        [
            &self.allocatable_cpu,
            &self.allocatable_memory,
            &self.allocatable_ephemeral,
            &self.allocatable_pods,
            &self.requested_cpu,
            &self.requested_memory,
            &self.requested_ephemeral,
            &self.non_zero_cpu,
            &self.non_zero_memory,
            &self.pod_count,
        ]
    }

    /// The amounts of `resource` on every node, in node order.
    pub fn column(&self, resource: gantry_api::ResourceName, amount: Amount) -> &[i64] {
        use gantry_api::ResourceName as R;
        match (resource, amount) {
            (R::Cpu, Amount::Allocatable) => &self.allocatable_cpu,
            (R::Cpu, Amount::Requested) => &self.requested_cpu,
            (R::Cpu, Amount::NonZeroRequested) => &self.non_zero_cpu,
            (R::Memory, Amount::Allocatable) => &self.allocatable_memory,
            (R::Memory, Amount::Requested) => &self.requested_memory,
            (R::Memory, Amount::NonZeroRequested) => &self.non_zero_memory,
            (R::EphemeralStorage, Amount::Allocatable) => &self.allocatable_ephemeral,
            (R::EphemeralStorage, _) => &self.requested_ephemeral,
            (R::Pods, Amount::Allocatable) => &self.allocatable_pods,
            // Pods request no pod slots: the slots in use are `pod_count`.
            (R::Pods, _) => &self.zeros,
            (R::Scalar(name), amount) => {
                match self.scalars.binary_search_by_key(&name, |s| s.name) {
                    Ok(i) if amount == Amount::Allocatable => &self.scalars[i].allocatable,
                    Ok(i) => &self.scalars[i].requested,
                    Err(_) => &self.zeros,
                }
            }
        }
    }

    /// Pods on each node.
    pub fn pod_count(&self) -> &[i64] {
        &self.pod_count
    }

    pub fn flags(&self) -> &[NodeFlags] {
        &self.flags
    }

    /// Per node, its HAMi-registered cards at a glance (`None`: it has none).
    pub fn card_summaries(&self) -> &[Option<CardSummary>] {
        &self.cards
    }

    /// Each node's generation (see `NodeInfo::generation`): a node whose generation is
    /// the same is the same, pods and all.
    pub fn generations(&self) -> &[u64] {
        &self.generations
    }

    /// Each node's name.
    pub fn names(&self) -> &[Sym] {
        &self.names
    }

    /// Whether any node has this flag.
    pub fn any(&self, flag: NodeFlags) -> bool {
        let bit = flag.0.trailing_zeros() as usize;
        self.flag_counts.get(bit).is_some_and(|&count| count > 0)
    }

    /// Whether the two hold the same amounts and flags (a scalar resource one of them has
    /// no column for counts as zeros there).
    pub fn same_values(&self, other: &NodeColumns) -> bool {
        let names = self.scalars.iter().chain(&other.scalars).map(|s| s.name);
        self.amounts() == other.amounts()
            && self.flags == other.flags
            && self.cards == other.cards
            && self.generations == other.generations
            && self.names == other.names
            && self.flag_counts == other.flag_counts
            && self.nodes_per_image == other.nodes_per_image
            && names.into_iter().all(|name| {
                let resource = gantry_api::ResourceName::Scalar(name);
                [Amount::Allocatable, Amount::Requested]
                    .iter()
                    .all(|&a| self.column(resource, a) == other.column(resource, a))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::{Node, Pod, ResourceName, Resources};
    use std::sync::Arc;

    fn info(name: &str, cpu: i64, pods: &[Pod]) -> NodeInfo {
        let mut allocatable = Resources::new(cpu, 1 << 30);
        allocatable.pods = 10;
        let mut info = NodeInfo::new(Arc::new(Node::new(name, allocatable)));
        for p in pods {
            info.add_pod(Arc::new(p.clone()));
        }
        info
    }

    #[test]
    fn columns_follow_the_nodes_and_unknown_scalars_read_as_zeros() {
        let gpu = Sym::new("example.com/gpu");
        let mut with_gpu = Pod::new("ns", "g").with_requests(100, 0);
        with_gpu.containers[0].requests.set_scalar(gpu, 2);
        with_gpu.update_requests();
        let nodes = [
            info(
                "a",
                1000,
                &[
                    Pod::new("ns", "p").with_container(gantry_api::Container::new(
                        "c",
                        Some(300),
                        None,
                    )),
                ],
            ),
            info("b", 2000, &[]),
        ];
        let mut columns = NodeColumns::default();
        columns.rebuild(nodes.iter());
        assert_eq!(
            columns.column(ResourceName::Cpu, Amount::Requested),
            [300, 0]
        );
        assert_eq!(
            columns.column(ResourceName::Memory, Amount::NonZeroRequested),
            [gantry_api::resources::DEFAULT_MEMORY_REQUEST, 0]
        );
        assert_eq!(columns.pod_count(), [1, 0]);
        assert_eq!(
            columns.column(ResourceName::Scalar(gpu), Amount::Requested),
            [0, 0]
        );
        // A pod with a scalar request lands on b: the column appears.
        let b = info("b", 2000, &[with_gpu]);
        columns.set(1, &b);
        assert_eq!(
            columns.column(ResourceName::Scalar(gpu), Amount::Requested),
            [0, 2]
        );
        let mut fresh = NodeColumns::default();
        fresh.rebuild([&nodes[0], &b].into_iter());
        assert!(columns.same_values(&fresh));
        fresh.set(0, &info("a", 1000, &[]));
        assert!(!columns.same_values(&fresh));
    }

    /// Images of 1 MB each, counted on `num_nodes` nodes.
    fn image_states(images: &[&str], num_nodes: u32) -> Vec<ImageState> {
        (images.iter())
            .map(|image| ImageState {
                name: Sym::new(image),
                size_bytes: 1 << 20,
                num_nodes,
                num_nodes_when_set: num_nodes,
            })
            .collect()
    }

    /// A node with those images: a new list each time, as the cache writes one whenever
    /// the images' node counts change.
    fn with_images(name: &str, images: &[&str], num_nodes: u32) -> NodeInfo {
        let mut info = info(name, 1000, &[]);
        info.set_image_states(image_states(images, num_nodes));
        info
    }

    #[test]
    fn image_names_are_counted_per_node_as_the_nodes_change() {
        let counts = |columns: &NodeColumns| {
            ["x", "y", "z"].map(|image| columns.nodes_with_image(Sym::new(image)))
        };
        let mut columns = NodeColumns::default();
        let (a, b) = (
            with_images("a", &["x", "y"], 1),
            with_images("b", &["y"], 2),
        );
        columns.rebuild([&a, &b].into_iter());
        assert_eq!(counts(&columns), [1, 2, 0]);
        let b = with_images("b", &["z"], 1);
        columns.set(1, &b);
        assert_eq!(counts(&columns), [1, 1, 1]);
        // The same names with other node counts: nothing moves.
        columns.set(0, &with_images("a", &["x", "y"], 7));
        assert_eq!(counts(&columns), [1, 1, 1]);
        let a = with_images("a", &[], 0);
        columns.set(0, &a);
        assert_eq!(counts(&columns), [0, 0, 1]);
        let mut fresh = NodeColumns::default();
        fresh.rebuild([&a, &b].into_iter());
        assert!(columns.same_values(&fresh));
        let mut renamed = b.clone();
        renamed.set_image_states(image_states(&["w"], 1));
        fresh.set(1, &renamed);
        assert!(
            !columns.same_values(&fresh),
            "the image counts are compared"
        );
    }

    #[test]
    fn flags_say_what_the_node_has() {
        let tainted = Node::new("t", Resources::new(1, 1))
            .with_taint("k", "v", TaintEffect::NoExecute)
            .with_taint("s", "v", TaintEffect::PreferNoSchedule);
        let flags = NodeFlags::of(&NodeInfo::new(Arc::new(tainted)));
        assert!(flags.has(NodeFlags::HARD_TAINTS) && flags.has(NodeFlags::SOFT_TAINTS));
        assert!(!flags.has(NodeFlags::UNSCHEDULABLE) && !flags.has(NodeFlags::IMAGES));
        let mut cordoned = Node::new("c", Resources::new(1, 1));
        cordoned.unschedulable = true;
        let mut info = NodeInfo::new(Arc::new(cordoned));
        info.set_image_states(vec![crate::ImageState {
            name: Sym::new("img:1"),
            size_bytes: 10,
            num_nodes: 1,
            num_nodes_when_set: 1,
        }]);
        let flags = NodeFlags::of(&info);
        assert!(flags.has(NodeFlags::UNSCHEDULABLE) && flags.has(NodeFlags::IMAGES));
        assert!(!flags.has(NodeFlags::HARD_TAINTS));

        // The counts behind `any` follow the nodes as they are written again.
        let plain = NodeInfo::new(Arc::new(Node::new("p", Resources::new(1, 1))));
        let mut columns = NodeColumns::default();
        columns.rebuild([&plain, &plain].into_iter());
        assert!(!columns.any(NodeFlags::IMAGES) && !columns.any(NodeFlags::UNSCHEDULABLE));
        columns.set(1, &info);
        assert!(columns.any(NodeFlags::IMAGES) && columns.any(NodeFlags::UNSCHEDULABLE));
        columns.set(0, &info);
        columns.set(1, &plain);
        assert!(columns.any(NodeFlags::IMAGES));
        columns.set(0, &plain);
        assert!(!columns.any(NodeFlags::IMAGES) && !columns.any(NodeFlags::UNSCHEDULABLE));
    }

    #[test]
    fn card_summaries_follow_the_cards_usage() {
        use crate::CardUsage;
        use gantry_api::gpu;
        let register = r#"[{"id":"g0","count":10,"devmem":8000,"devcore":100,"type":"NVIDIA","health":true},{"id":"g1","count":4,"devmem":8000,"devcore":100,"type":"NVIDIA","health":false}]"#;
        let mut node = Node::new("n", Resources::new(1000, 1 << 30));
        node.annotations = Arc::from([(Arc::from(gpu::REGISTER_ANNOTATION), Arc::from(register))]);
        node.gpus = gpu::parse_node_devices(&node.annotations)
            .unwrap()
            .map(Arc::new);
        let mut gpu_node = NodeInfo::new(Arc::new(node));
        let plain = info("p", 1000, &[]);
        let mut columns = NodeColumns::default();
        columns.rebuild([&gpu_node, &plain].into_iter());
        let open = |free_shares, free_memory_mib, free_cores, total| {
            Some(CardSummary {
                cards: 2,
                open: 1,
                min_free_shares: free_shares,
                min_free_memory_mib: free_memory_mib,
                min_free_cores: free_cores,
                total,
                capacity: CardUsage {
                    used: 14,
                    memory_mib: 16000,
                    cores: 200,
                    exclusive: 0,
                },
            })
        };
        assert_eq!(
            columns.card_summaries(),
            [open(10, 8000, 100, CardUsage::default()), None]
        );
        let mut p = Pod::new("ns", "a").on_node("n");
        p.annotations = [
            (gpu::ASSIGNED_NODE, "n"),
            (gpu::DEVICES_ALLOCATED, "g0,NVIDIA,3000,30:;"),
        ]
        .iter()
        .map(|(k, v)| (Arc::from(*k), Arc::from(*v)))
        .collect();
        gpu_node.add_pod(Arc::new(p));
        columns.set(0, &gpu_node);
        let held = CardUsage {
            used: 1,
            memory_mib: 3000,
            cores: 30,
            exclusive: 0,
        };
        assert_eq!(columns.card_summaries()[0], open(9, 5000, 70, held));
        let mut fresh = NodeColumns::default();
        fresh.rebuild([&gpu_node, &plain].into_iter());
        assert!(columns.same_values(&fresh));
        fresh.cards[0] = open(10, 8000, 100, held);
        assert!(!columns.same_values(&fresh), "the summaries are compared");
    }
}
