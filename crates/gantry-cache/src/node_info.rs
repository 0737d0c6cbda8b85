//! NodeInfo: a node with the pods on it and the totals the plugins read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gantry_api::dra::ResourceSlice;
use gantry_api::small_copy::copy_into;
use gantry_api::{HostPort, Node, Pod, Resources, Sym};
use smallvec::SmallVec;

use crate::affinity_terms::AffinityTerms;
use crate::device_usage::{DeviceUsage, holds_cards};
use crate::label_index::PodLabelIndex;

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Draws the next value of the one process-wide generation counter. Values never repeat,
/// so a node deleted and re-created under the same name still gets a fresh generation.
pub fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed) + 1
}

/// A claim a pod on this node uses, by namespace and claim name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PvcKey {
    pub namespace: Sym,
    pub claim: Sym,
}

/// An image on a node: its size, and on how many nodes it is present. Upstream v1.28
/// takes the count when the node is set and never refreshes it; from v1.29 the count is
/// taken when the node is copied into the snapshot (kubernetes#116938). Both are kept, so
/// that ImageLocality reads the one its release reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageState {
    pub name: Sym,
    pub size_bytes: i64,
    /// As of the last copy into a snapshot.
    pub num_nodes: u32,
    /// As of when this node was last set.
    pub num_nodes_when_set: u32,
}

/// A node and its pods. Pods are shared (`Arc`), so cloning a NodeInfo into a snapshot
/// copies pointers and totals, never pods.
#[derive(Debug, Default)]
pub struct NodeInfo {
    node: Option<Arc<Node>>,
    pods: Vec<Arc<Pod>>,
    pods_with_affinity: Vec<Arc<Pod>>,
    pods_with_required_anti_affinity: Vec<Arc<Pod>>,
    used_ports: SmallVec<[HostPort; 4]>,
    requested: Resources,
    non_zero_requested: Resources,
    /// Some sum in `requested` or `non_zero_requested` saturated at i64::MAX (pods asking
    /// for more than int64 holds together): the totals are then a lower bound, which never
    /// leaves room on the node, and removing a pod adds the others up anew.
    saturated: bool,
    pvc_ref_counts: SmallVec<[(PvcKey, u32); 2]>,
    /// Sorted by image name.
    image_states: Arc<[ImageState]>,
    label_index: PodLabelIndex,
    affinity_terms: AffinityTerms,
    /// The ResourceSlices local to this node (DRA devices), so that forks and copies of
    /// the node carry its devices.
    resource_slices: Arc<[Arc<ResourceSlice>]>,
    /// HAMi-registered GPUs and what the pods hold on each card.
    gpus: Option<Arc<DeviceUsage>>,
    generation: u64,
}

// Field by field, so that `clone_from` (how preemption's dry run copies each node it
// tries over its scratch copy) reuses the copy's buffers instead of allocating new ones:
// the pod list, once per node tried. The small inline lists of plain values
// are copied with `copy_into` (nothing to do when both are empty, as most are).
clone_field_by_field!(NodeInfo {
    node,
    pods,
    pods_with_affinity,
    pods_with_required_anti_affinity,
    used_ports via copy_into,
    requested,
    non_zero_requested,
    saturated,
    pvc_ref_counts via copy_into,
    image_states,
    label_index,
    affinity_terms,
    resource_slices,
    gpus,
    generation,
});

impl NodeInfo {
    pub fn new(node: Arc<Node>) -> NodeInfo {
        let mut info = NodeInfo::default();
        info.set_node(node);
        info
    }

    /// The node object; `None` for a ghost (deleted while pods remained on it).
    #[inline]
    pub fn node(&self) -> Option<&Arc<Node>> {
        self.node.as_ref()
    }

    /// The node's name. Only called on NodeInfos in a snapshot, which always have a node.
    #[inline]
    pub fn name(&self) -> Sym {
        match &self.node {
            Some(node) => node.name,
            None => {
                static GHOST: std::sync::LazyLock<Sym> = std::sync::LazyLock::new(|| Sym::new(""));
                *GHOST
            }
        }
    }

    #[inline]
    pub fn pods(&self) -> &[Arc<Pod>] {
        &self.pods
    }

    pub fn pods_with_affinity(&self) -> &[Arc<Pod>] {
        &self.pods_with_affinity
    }

    pub fn pods_with_required_anti_affinity(&self) -> &[Arc<Pod>] {
        &self.pods_with_required_anti_affinity
    }

    #[inline]
    pub fn used_ports(&self) -> &[HostPort] {
        &self.used_ports
    }

    /// Sum of the effective requests of the pods on the node.
    #[inline]
    pub fn requested(&self) -> &Resources {
        &self.requested
    }

    /// Sum of the pods' requests with cpu/memory defaulted (what scoring uses).
    #[inline]
    pub fn non_zero_requested(&self) -> &Resources {
        &self.non_zero_requested
    }

    #[inline]
    pub fn allocatable(&self) -> &Resources {
        static NONE: std::sync::LazyLock<Resources> = std::sync::LazyLock::new(Resources::default);
        match &self.node {
            Some(node) => &node.allocatable,
            None => &NONE,
        }
    }

    pub fn pvc_ref_counts(&self) -> impl Iterator<Item = (PvcKey, u32)> + '_ {
        self.pvc_ref_counts.iter().copied()
    }

    /// The node's pods counted by namespace and label.
    pub fn label_index(&self) -> &PodLabelIndex {
        &self.label_index
    }

    /// The distinct (anti-)affinity terms of the node's pods, with pod counts.
    pub fn affinity_terms(&self) -> &AffinityTerms {
        &self.affinity_terms
    }

    /// The image by that name on this node, if present.
    pub fn image_state(&self, name: Sym) -> Option<&ImageState> {
        self.image_states
            .binary_search_by_key(&name, |s| s.name)
            .ok()
            .map(|i| &self.image_states[i])
    }

    /// The node's images, sorted by name.
    pub(crate) fn image_states(&self) -> &Arc<[ImageState]> {
        &self.image_states
    }

    /// Whether the node reports any image.
    pub fn has_images(&self) -> bool {
        !self.image_states.is_empty()
    }

    pub(crate) fn set_image_states(&mut self, mut states: Vec<ImageState>) {
        states.sort_by_key(|s| s.name);
        self.image_states = states.into();
    }

    /// Sets each image's `num_nodes` to `count(name)`, copying the states only when one
    /// changes.
    pub(crate) fn refresh_image_counts(&mut self, count: impl Fn(Sym) -> u32) {
        if self
            .image_states
            .iter()
            .all(|s| s.num_nodes == count(s.name))
        {
            return;
        }
        let mut states = self.image_states.to_vec();
        for state in &mut states {
            state.num_nodes = count(state.name);
        }
        self.image_states = states.into();
    }

    /// The node's HAMi-registered GPUs and their usage; `None` when it has none.
    #[inline]
    pub fn gpus(&self) -> Option<&DeviceUsage> {
        self.gpus.as_deref()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The ResourceSlices published for this node.
    #[inline]
    pub fn resource_slices(&self) -> &[Arc<ResourceSlice>] {
        &self.resource_slices
    }

    pub fn set_resource_slices(&mut self, slices: Vec<Arc<ResourceSlice>>) {
        self.resource_slices = slices.into();
        self.bump();
    }

    /// Devices of the node's own ResourceSlices were taken or given back (the DRA store
    /// keeps which): nothing here changed, but what DynamicResources decides here did.
    pub fn note_devices_taken_changed(&mut self) {
        self.bump();
    }

    fn bump(&mut self) {
        self.generation = next_generation();
    }

    pub fn set_node(&mut self, node: Arc<Node>) {
        let same_gpus = match (&self.gpus, &node.gpus) {
            (Some(usage), Some(devices)) => **usage.devices() == **devices,
            (None, None) => true,
            _ => false,
        };
        if !same_gpus {
            // The inventory changed (rare): count the pods' shares again on the new cards.
            let mut usage = node.gpus.clone().map(DeviceUsage::new);
            if let Some(usage) = &mut usage {
                for pod in self.pods.iter().filter(|p| holds_cards(p)) {
                    usage.account(pod, 1);
                }
            }
            self.gpus = usage.map(Arc::new);
        }
        self.node = Some(node);
        self.bump();
    }

    /// Turns the NodeInfo into a ghost: the node is gone, its pods are still accounted.
    pub fn remove_node(&mut self) {
        self.node = None;
        self.bump();
    }

    pub fn add_pod(&mut self, pod: Arc<Pod>) {
        self.account(&pod, 1);
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if pod.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.pods.push(pod);
        self.bump();
    }

    /// Removes the pod with `uid`; `None` if it is not on this node.
    pub fn remove_pod(&mut self, uid: &str) -> Option<Arc<Pod>> {
        let index = self.pods.iter().position(|p| &*p.uid == uid)?;
        let pod = self.pods.swap_remove(index);
        for list in [
            &mut self.pods_with_affinity,
            &mut self.pods_with_required_anti_affinity,
        ] {
            if let Some(i) = list.iter().position(|p| &*p.uid == uid) {
                list.swap_remove(i);
            }
        }
        self.account(&pod, -1);
        self.bump();
        Some(pod)
    }

    fn account(&mut self, pod: &Pod, sign: i64) {
        if let Some(gpus) = &mut self.gpus
            && holds_cards(pod)
        {
            Arc::make_mut(gpus).account(pod, sign);
        }
        self.label_index.update(pod, sign);
        self.affinity_terms.update(pod, sign);
        if sign > 0 {
            self.saturated |= self.requested.add(pod.usage());
            self.saturated |= self.non_zero_requested.add(pod.non_zero_usage());
            if pod.has_host_ports() {
                self.used_ports.extend(pod.host_ports().copied());
            }
        } else {
            if self.saturated {
                // A saturated sum cannot be taken apart: add up the pods left (the pod
                // being removed is already out of the list).
                self.recount_requests();
            } else {
                self.requested.sub(pod.usage());
                self.non_zero_requested.sub(pod.non_zero_usage());
            }
            if pod.has_host_ports() {
                for port in pod.host_ports() {
                    if let Some(i) = self.used_ports.iter().position(|p| p == port) {
                        self.used_ports.swap_remove(i);
                    }
                }
            }
        }
        for volume in &pod.volumes {
            // Upstream's PVCRefCounts count persistentVolumeClaim volumes only.
            let Some(claim) = volume.persistent_claim() else {
                continue;
            };
            let key = PvcKey {
                namespace: pod.namespace,
                claim: Sym::new(claim),
            };
            match self.pvc_ref_counts.iter().position(|e| e.0 == key) {
                Some(i) if sign < 0 && self.pvc_ref_counts[i].1 <= 1 => {
                    self.pvc_ref_counts.swap_remove(i);
                }
                Some(i) if sign < 0 => self.pvc_ref_counts[i].1 -= 1,
                Some(i) => self.pvc_ref_counts[i].1 += 1,
                None if sign > 0 => self.pvc_ref_counts.push((key, 1)),
                None => {}
            }
        }
    }

    /// Adds up the requests of the pods on the node anew (after a saturated sum).
    fn recount_requests(&mut self) {
        let (mut requested, mut non_zero) = (Resources::default(), Resources::default());
        let mut saturated = false;
        for pod in &self.pods {
            saturated |= requested.add(pod.usage());
            saturated |= non_zero.add(pod.non_zero_usage());
        }
        self.requested = requested;
        self.non_zero_requested = non_zero;
        self.saturated = saturated;
    }

    /// Whether two NodeInfos hold the same node, pods (by identity) and totals.
    pub fn same_state(&self, other: &NodeInfo) -> bool {
        let same_pods = |a: &[Arc<Pod>], b: &[Arc<Pod>]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
        };
        let same_node = match (&self.node, &other.node) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        same_node
            && self.generation == other.generation
            && same_pods(&self.pods, &other.pods)
            && same_pods(&self.pods_with_affinity, &other.pods_with_affinity)
            && same_pods(
                &self.pods_with_required_anti_affinity,
                &other.pods_with_required_anti_affinity,
            )
            && self.used_ports == other.used_ports
            && self.requested == other.requested
            && self.non_zero_requested == other.non_zero_requested
            && self.saturated == other.saturated
            && self.pvc_ref_counts == other.pvc_ref_counts
            && self.image_states == other.image_states
            && self.label_index == other.label_index
            && self.affinity_terms == other.affinity_terms
            && self.resource_slices == other.resource_slices
            && self.gpus == other.gpus
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::{Container, HostPort, Protocol};

    fn node() -> Arc<Node> {
        Arc::new(Node::new("n1", Resources::new(4000, 1 << 30)))
    }

    #[test]
    fn a_copy_over_another_node_is_the_source() {
        let mut source = NodeInfo::new(node());
        let mut container = Container::new("c", Some(500), Some(1 << 20));
        container.host_ports.push(HostPort {
            ip: HostPort::any_ip(),
            protocol: Protocol::Tcp,
            port: 80,
        });
        source.add_pod(Arc::new(Pod::new("ns", "a").with_container(container)));
        let mut copy = NodeInfo::new(Arc::new(Node::new("n2", Resources::new(1, 1))));
        for name in ["x", "y", "z"] {
            copy.add_pod(Arc::new(Pod::new("ns", name)));
        }
        copy.clone_from(&source);
        for copy in [copy, source.clone()] {
            assert_eq!(copy.name(), source.name());
            assert_eq!(copy.pods().len(), 1);
            assert_eq!(copy.requested(), source.requested());
            assert_eq!(copy.non_zero_requested(), source.non_zero_requested());
            assert_eq!(copy.used_ports(), source.used_ports());
            assert_eq!(copy.allocatable(), source.allocatable());
            assert_eq!(copy.generation(), source.generation());
        }
    }

    #[test]
    fn bound_pods_count_their_usage_and_their_sidecars_ports() {
        use gantry_api::{ContainerRequests, PodRules, Release};
        let mut app = Container::new("app", Some(500), Some(1 << 20));
        app.resized = Some(Box::new(ContainerRequests {
            requests: Resources::new(800, 1 << 20),
            cpu_unset: false,
            memory_unset: false,
        }));
        let mut sidecar = Container::new("log", None, None);
        sidecar.restartable = true;
        sidecar.host_ports.push(HostPort {
            ip: HostPort::any_ip(),
            protocol: Protocol::Tcp,
            port: 9000,
        });
        let pod = |rules| {
            let mut pod = Pod::new("ns", "a")
                .with_container(app.clone())
                .with_init_container(sidecar.clone());
            pod.rules = rules;
            pod.update_requests();
            Arc::new(pod)
        };
        let mut info = NodeInfo::new(node());
        let v135 = pod(PodRules::default());
        info.add_pod(v135.clone());
        assert_eq!(v135.requests().milli_cpu, 500, "what placing it asked");
        assert_eq!(info.requested().milli_cpu, 800, "what the resize holds");
        assert_eq!(
            info.non_zero_requested().milli_cpu,
            800 + gantry_api::resources::DEFAULT_MILLI_CPU_REQUEST
        );
        assert_eq!(info.used_ports().len(), 1, "the sidecar's port (v1.34 on)");
        info.remove_pod(&v135.uid);
        assert!(info.requested().is_zero() && info.used_ports().is_empty());
        info.add_pod(pod(PodRules::of(Release::at(33))));
        assert!(
            info.used_ports().is_empty(),
            "v1.33 leaves sidecars' ports out"
        );
    }

    #[test]
    fn pods_are_accounted_and_unaccounted() {
        let mut info = NodeInfo::new(node());
        let g0 = info.generation();
        let mut container = Container::new("c", Some(500), None);
        container.host_ports.push(HostPort {
            ip: HostPort::any_ip(),
            protocol: Protocol::Tcp,
            port: 80,
        });
        let pod = Arc::new(Pod::new("ns", "a").with_container(container));
        info.add_pod(pod.clone());
        assert!(info.generation() > g0);
        assert_eq!(info.requested().milli_cpu, 500);
        assert_eq!(info.requested().memory, 0);
        assert_eq!(
            info.non_zero_requested().memory,
            gantry_api::resources::DEFAULT_MEMORY_REQUEST
        );
        assert_eq!(info.used_ports().len(), 1);

        let g1 = info.generation();
        assert!(info.remove_pod("missing").is_none());
        let removed = info.remove_pod(&pod.uid).unwrap();
        assert!(
            Arc::ptr_eq(&removed, &pod),
            "the shared pod comes back, not a copy"
        );
        assert!(info.generation() > g1);
        assert!(info.requested().is_zero());
        assert!(info.non_zero_requested().is_zero());
        assert!(info.used_ports().is_empty());
    }

    #[test]
    fn pvc_counts_follow_pods() {
        let mut info = NodeInfo::new(node());
        let with_claim = |name: &str| {
            let mut pod = Pod::new("ns", name);
            pod.volumes
                .push(gantry_api::Volume::claim("data", "claim-1"));
            Arc::new(pod)
        };
        info.add_pod(with_claim("a"));
        info.add_pod(with_claim("b"));
        assert_eq!(info.pvc_ref_counts().next().unwrap().1, 2);
        info.remove_pod("ns/a");
        assert_eq!(info.pvc_ref_counts().next().unwrap().1, 1);
        info.remove_pod("ns/b");
        assert_eq!(info.pvc_ref_counts().count(), 0);
    }

    fn gpu_node(cards: usize) -> Arc<Node> {
        use gantry_api::gpu;
        let register: Vec<String> = (0..cards)
            .map(|i| format!(r#"{{"id":"gpu-{i}","count":10,"devmem":8000,"devcore":100,"type":"NVIDIA-A10","health":true}}"#))
            .collect();
        let mut node = Node::new("n1", Resources::new(4000, 1 << 30));
        node.annotations = Arc::from([(
            Arc::from(gpu::REGISTER_ANNOTATION),
            Arc::from(format!("[{}]", register.join(","))),
        )]);
        node.gpus = gpu::parse_node_devices(&node.annotations)
            .unwrap()
            .map(Arc::new);
        Arc::new(node)
    }

    fn gpu_pod(name: &str, card: &str) -> Arc<Pod> {
        use gantry_api::gpu;
        let mut pod = Pod::new("ns", name).on_node("n1");
        pod.annotations = Arc::from([
            (Arc::from(gpu::ASSIGNED_NODE), Arc::from("n1")),
            (
                Arc::from(gpu::DEVICES_ALLOCATED),
                Arc::from(format!("{card},NVIDIA,1000,10:;")),
            ),
        ]);
        Arc::new(pod)
    }

    #[test]
    fn card_usage_follows_pods_and_a_changed_inventory() {
        let mut info = NodeInfo::new(gpu_node(2));
        let a = gpu_pod("a", "gpu-1");
        info.add_pod(a.clone());
        info.add_pod(gpu_pod("b", "gpu-1"));
        let snapshot = info.clone();
        assert_eq!(info.gpus().unwrap().cards()[1].used, 2);
        info.remove_pod(&a.uid);
        assert_eq!(info.gpus().unwrap().cards()[1].memory_mib, 1000);
        assert_eq!(
            snapshot.gpus().unwrap().cards()[1].used,
            2,
            "a copy keeps its own usage"
        );
        // Re-registered with one card: the pod on gpu-1 no longer holds anything here.
        info.set_node(gpu_node(1));
        assert_eq!(info.gpus().unwrap().cards().len(), 1);
        assert_eq!(info.gpus().unwrap().total().used, 0);
        info.set_node(gpu_node(2));
        assert_eq!(info.gpus().unwrap().cards()[1].used, 1);
        info.set_node(node());
        assert!(info.gpus().is_none());
    }

    proptest::proptest! {
        /// Whatever pods come and go, with requests up to i64::MAX each, the node's totals
        /// are the true sums clamped to i64: a node never looks freer than it is, and
        /// removing pods after a saturated sum gives the exact totals back.
        #[test]
        fn totals_never_look_freer_than_the_pods(
            steps in proptest::collection::vec(
                (proptest::prop_oneof![0..=i64::MAX, 0..1000i64, (i64::MAX / 3)..=i64::MAX], proptest::bool::ANY),
                1..40,
            ),
        ) {
            let mut info = NodeInfo::new(node());
            let mut live: Vec<(Arc<Pod>, i64)> = Vec::new();
            for (n, (amount, remove)) in steps.into_iter().enumerate() {
                if remove && !live.is_empty() {
                    let (pod, _) = live.remove(n % live.len());
                    info.remove_pod(&pod.uid);
                } else {
                    let pod = Arc::new(Pod::new("ns", &format!("p{n}")).with_requests(amount, amount));
                    info.add_pod(pod.clone());
                    live.push((pod, amount));
                }
                let exact: i128 = live.iter().map(|(_, a)| i128::from(*a)).sum();
                let clamped = exact.min(i128::from(i64::MAX)) as i64;
                proptest::prop_assert_eq!(info.requested().milli_cpu, clamped);
                proptest::prop_assert_eq!(info.requested().memory, clamped);
                proptest::prop_assert_eq!(info.non_zero_requested().milli_cpu, clamped);
                // What the fit check subtracts: never more free than the true free amount.
                let free = info.allocatable().milli_cpu - info.requested().milli_cpu;
                proptest::prop_assert!(i128::from(free) <= i128::from(info.allocatable().milli_cpu) - exact.min(i128::from(i64::MAX)));
            }
        }
    }

    #[test]
    fn a_saturated_node_recounts_exactly_when_a_pod_leaves() {
        let mut info = NodeInfo::new(node());
        let big = |name: &str| Arc::new(Pod::new("ns", name).with_requests(1 << 62, 0));
        for name in ["a", "b", "c"] {
            info.add_pod(big(name));
        }
        assert_eq!(
            info.requested().milli_cpu,
            i64::MAX,
            "three of 2^62 saturate"
        );
        info.remove_pod("ns/a");
        assert_eq!(info.requested().milli_cpu, i64::MAX, "two of them still do");
        info.remove_pod("ns/b");
        assert_eq!(info.requested().milli_cpu, 1 << 62);
        info.add_pod(Arc::new(Pod::new("ns", "small").with_requests(500, 0)));
        info.remove_pod("ns/c");
        assert_eq!(info.requested().milli_cpu, 500, "exact again once it fits");
    }

    #[test]
    fn generations_never_repeat() {
        let values: Vec<u64> = (0..1000).map(|_| next_generation()).collect();
        assert!(values.windows(2).all(|w| w[1] > w[0]));
    }
}
