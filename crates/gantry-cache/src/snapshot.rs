//! The snapshot a scheduling cycle reads: NodeInfos in zone-interleaved order, the same
//! nodes' amounts as columns, the sub-lists of nodes with (anti-)affinity pods, and the
//! claims in use.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use foldhash::fast::RandomState;
use gantry_api::Sym;

use crate::dra_cache::{DraCache, DraView};
use crate::node_info::{NodeInfo, PvcKey};
use crate::node_tree::NodeTree;
use crate::{
    ClusterState, DeclaredTerms, DomainCounts, DraState, NodeColumns, PodSelection, SelectionCounts,
};

static SNAPSHOT_IDS: AtomicU64 = AtomicU64::new(1);
/// Versions of snapshots' node lists, unique in the process.
static LISTS_VERSIONS: AtomicU64 = AtomicU64::new(1);

type Map<K, V> = HashMap<K, V, RandomState>;

/// What one `update_snapshot` did: the work it cost, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotUpdate {
    /// Changed NodeInfos taken from the cache (shared, not copied).
    pub cloned: usize,
    /// The node list and affinity sub-lists were rebuilt.
    pub lists_rebuilt: bool,
    /// The claim counts did not add up and were recounted from the nodes.
    pub claims_recounted: bool,
}

/// The snapshot disagreed with the cache after an update (upstream's "snapshot state is
/// not consistent"). It was rebuilt from scratch, so the next cycle sees the truth; this
/// cycle fails, as upstream's does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "snapshot state is not consistent, length of NodeInfoList={listed} not equal to length of nodes in tree={in_tree}, length of NodeInfoMap={mapped}; rebuilt from scratch"
)]
pub struct SnapshotError {
    pub listed: usize,
    pub in_tree: usize,
    pub mapped: usize,
}

/// NodeInfos live in stable slots, shared with the cache: an update points a slot at the
/// cache's current NodeInfo (the cache copies a NodeInfo a snapshot holds before it changes
/// it, so a change is copied once and a first snapshot of 5,000 nodes copies pointers, not
/// nodes and their pod lists). The lists, which hold slot numbers, stay valid and are
/// rebuilt only when nodes come or go or a node starts or stops holding affinity pods. The columns
/// follow the list: the changed nodes' entries are written again, all of them when the
/// list is rebuilt.
#[derive(Debug)]
pub struct Snapshot {
    id: u64,
    generation: u64,
    slots: Vec<Arc<NodeInfo>>,
    free: Vec<u32>,
    by_name: Map<Sym, u32>,
    /// Slots in zone-interleaved order.
    list: Vec<u32>,
    /// Position in `list` of each slot.
    slot_position: Vec<u32>,
    with_affinity: Vec<u32>,
    with_required_anti_affinity: Vec<u32>,
    columns: NodeColumns,
    /// Slots an update copied, kept between updates for its allocation.
    changed_slots: Vec<u32>,
    used_pvcs: Map<PvcKey, i64>,
    tree_version: Option<u64>,
    /// Which build of the node lists this is, unique among all snapshots: positions
    /// computed from the lists stay valid while it stays the same.
    lists_version: u64,
    /// The pods' (anti-)affinity terms with the declaring pods per topology domain.
    declared: DeclaredTerms,
    /// The cache's DRA store, read live (as upstream reads its claims).
    dra: Option<DraView>,
    /// Matching pods per topology domain for the selections the plugins ask about.
    selections: SelectionCounts,
}

impl Default for Snapshot {
    fn default() -> Snapshot {
        Snapshot::new()
    }
}

impl Snapshot {
    pub fn new() -> Snapshot {
        Snapshot {
            id: SNAPSHOT_IDS.fetch_add(1, Ordering::Relaxed),
            generation: 0,
            slots: Vec::new(),
            free: Vec::new(),
            by_name: Map::default(),
            list: Vec::new(),
            slot_position: Vec::new(),
            with_affinity: Vec::new(),
            with_required_anti_affinity: Vec::new(),
            columns: NodeColumns::default(),
            changed_slots: Vec::new(),
            used_pvcs: Map::default(),
            tree_version: None,
            lists_version: 0,
            declared: DeclaredTerms::default(),
            selections: SelectionCounts::default(),
            dra: None,
        }
    }

    /// Reads `dra` from now on (the cache's store; set once, kept while it is the same).
    pub(crate) fn share_dra(&mut self, dra: &Arc<DraCache>) {
        if !self.dra.as_ref().is_some_and(|v| Arc::ptr_eq(&v.0, dra)) {
            self.dra = Some(DraView(dra.clone()));
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The generation of the newest change this snapshot holds.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Which build of the node lists the positions refer to: unchanged, every node is
    /// where it was (a node's own changes keep its position).
    pub fn lists_version(&self) -> u64 {
        self.lists_version
    }

    /// Builds a snapshot from every NodeInfo (ghosts included, for their claims).
    pub(crate) fn from_nodes<'a>(
        nodes: impl Iterator<Item = &'a Arc<NodeInfo>>,
        tree: &NodeTree,
    ) -> Snapshot {
        let mut snapshot = Snapshot::new();
        snapshot.fill_from(nodes, tree);
        snapshot
    }

    fn fill_from<'a>(&mut self, nodes: impl Iterator<Item = &'a Arc<NodeInfo>>, tree: &NodeTree) {
        let id = self.id;
        // The selections asked for stay asked for; their counts are taken afresh.
        let selections = std::mem::take(&mut self.selections);
        let dra = self.dra.take();
        *self = Snapshot {
            id,
            selections,
            dra,
            ..Snapshot::new()
        };
        let mut generation = 0;
        for info in nodes {
            generation = generation.max(info.generation());
            for (key, count) in info.pvc_ref_counts() {
                *self.used_pvcs.entry(key).or_default() += i64::from(count);
            }
            if let Some(node) = info.node() {
                self.by_name.insert(node.name, self.slots.len() as u32);
                self.slots.push(info.clone());
            }
        }
        self.generation = generation;
        self.rebuild_lists(tree);
        let slots = &self.slots;
        self.declared = DeclaredTerms::counted(slots.iter().map(Arc::as_ref));
        self.selections.recount(|| slots.iter().map(Arc::as_ref));
        self.selections
            .finish_update(|| slots.iter().map(Arc::as_ref));
    }

    /// Applies the changed NodeInfos (newest first) from the cache. Two checks guard the
    /// shortcuts, as upstream's `UpdateSnapshot`: claim counts that would go negative are
    /// recounted from every node (with the lists), and a node list that disagrees with the
    /// cache's node tree rebuilds everything and fails the update.
    pub(crate) fn apply<'a, I: Iterator<Item = &'a Arc<NodeInfo>>>(
        &mut self,
        changed: impl IntoIterator<Item = &'a Arc<NodeInfo>>,
        head_generation: u64,
        tree: &NodeTree,
        tree_version: u64,
        pvc_delta: Option<&Map<PvcKey, i64>>,
        all_nodes: impl Fn() -> I,
    ) -> Result<SnapshotUpdate, SnapshotError> {
        let mut update = SnapshotUpdate::default();
        let mut relist = self.tree_version != Some(tree_version);
        self.changed_slots.clear();
        // Slots whose node started or stopped holding (anti-)affinity pods.
        let mut flipped: Vec<u32> = Vec::new();
        for info in changed {
            let Some(node) = info.node() else { continue };
            update.cloned += 1;
            match self.by_name.get(&node.name) {
                Some(&slot) => {
                    let existing = &mut self.slots[slot as usize];
                    if affinity_flags(existing) != affinity_flags(info) {
                        flipped.push(slot);
                    }
                    self.declared.node_changed(Some(existing), Some(info));
                    self.selections.node_changed(Some(existing), Some(info));
                    *existing = info.clone();
                    self.changed_slots.push(slot);
                }
                None => {
                    relist = true;
                    self.declared.node_changed(None, Some(info));
                    self.selections.node_changed(None, Some(info));
                    let slot = match self.free.pop() {
                        Some(slot) => {
                            self.slots[slot as usize] = info.clone();
                            slot
                        }
                        None => {
                            self.slots.push(info.clone());
                            (self.slots.len() - 1) as u32
                        }
                    };
                    self.by_name.insert(node.name, slot);
                }
            }
        }
        if self.by_name.len() > tree.len() {
            let live: HashSet<Sym, RandomState> = tree.list().into_iter().collect();
            let gone: Vec<Sym> = self
                .by_name
                .keys()
                .filter(|n| !live.contains(n))
                .copied()
                .collect();
            for name in gone {
                let slot = self.by_name.remove(&name).expect("listed above");
                self.declared
                    .node_changed(Some(&self.slots[slot as usize]), None);
                self.selections
                    .node_changed(Some(&self.slots[slot as usize]), None);
                self.slots[slot as usize] = Arc::default();
                self.free.push(slot);
            }
            relist = true;
        }
        self.generation = self.generation.max(head_generation);
        let claims_add_up = pvc_delta.is_some_and(|delta| self.apply_pvc_delta(delta));
        if !claims_add_up {
            if pvc_delta.is_some() {
                tracing::error!("claim counts went negative; rebuilding the node snapshot lists");
                update.claims_recounted = true;
                relist = true;
            }
            self.recount_claims(all_nodes().map(Arc::as_ref));
        }
        if relist {
            self.rebuild_lists(tree);
            self.tree_version = Some(tree_version);
            update.lists_rebuilt = true;
        } else {
            for &slot in &self.changed_slots {
                let position = self.slot_position[slot as usize] as usize;
                self.columns.set(position, &self.slots[slot as usize]);
            }
            for slot in flipped {
                self.patch_affinity_lists(slot);
            }
        }
        if self.list.len() != tree.len() || self.by_name.len() != tree.len() {
            let error = SnapshotError {
                listed: self.list.len(),
                in_tree: tree.len(),
                mapped: self.by_name.len(),
            };
            tracing::error!(%error, "rebuilding the snapshot from scratch");
            self.fill_from(all_nodes(), tree);
            self.tree_version = Some(tree_version);
            return Err(error);
        }
        let slots = &self.slots;
        self.selections
            .finish_update(|| slots.iter().map(Arc::as_ref));
        Ok(update)
    }

    /// Counts every node's claim references afresh.
    fn recount_claims<'a>(&mut self, nodes: impl Iterator<Item = &'a NodeInfo>) {
        self.used_pvcs.clear();
        for info in nodes {
            for (key, count) in info.pvc_ref_counts() {
                *self.used_pvcs.entry(key).or_default() += i64::from(count);
            }
        }
    }

    /// Applies claim reference changes; false if a count would go negative (the delta
    /// does not belong to this snapshot's state), in which case the caller recounts.
    fn apply_pvc_delta(&mut self, delta: &Map<PvcKey, i64>) -> bool {
        for (key, change) in delta {
            let count = self.used_pvcs.entry(*key).or_default();
            *count += change;
            if *count < 0 {
                tracing::error!(?key, count = *count, "claim count went negative");
                return false;
            }
            if *count == 0 {
                self.used_pvcs.remove(key);
            }
        }
        true
    }

    fn rebuild_lists(&mut self, tree: &NodeTree) {
        self.lists_version = LISTS_VERSIONS.fetch_add(1, Ordering::Relaxed);
        self.list.clear();
        self.with_affinity.clear();
        self.with_required_anti_affinity.clear();
        self.slot_position.clear();
        self.slot_position.resize(self.slots.len(), u32::MAX);
        for name in tree.list() {
            let Some(&slot) = self.by_name.get(&name) else {
                continue;
            };
            let position = self.list.len() as u32;
            self.list.push(slot);
            self.slot_position[slot as usize] = position;
            let info = &self.slots[slot as usize];
            if !info.pods_with_affinity().is_empty() {
                self.with_affinity.push(position);
            }
            if !info.pods_with_required_anti_affinity().is_empty() {
                self.with_required_anti_affinity.push(position);
            }
        }
        let slots = &self.slots;
        self.columns
            .rebuild(self.list.iter().map(|&slot| &*slots[slot as usize]));
    }

    /// Puts the slot's node into, or takes it out of, the affinity sub-lists (sorted by
    /// position), after it started or stopped holding such pods: the order of the nodes
    /// did not change, so the lists need not be rebuilt.
    fn patch_affinity_lists(&mut self, slot: u32) {
        let position = self.slot_position[slot as usize];
        let (with_affinity, with_required_anti) = affinity_flags(&self.slots[slot as usize]);
        for (list, member) in [
            (&mut self.with_affinity, with_affinity),
            (&mut self.with_required_anti_affinity, with_required_anti),
        ] {
            match list.binary_search(&position) {
                Ok(i) if !member => {
                    list.remove(i);
                }
                Err(i) if member => list.insert(i, position),
                _ => {}
            }
        }
    }

    /// Whether the topology counts (declared terms and kept selections) equal counts
    /// taken from scratch over the snapshot's nodes.
    pub fn topology_counts_agree(&self) -> bool {
        let slots = &self.slots;
        self.declared == DeclaredTerms::counted(slots.iter().map(Arc::as_ref))
            && self.selections.agree_with(|| slots.iter().map(Arc::as_ref))
    }

    /// Number of pod selections whose domain counts the snapshot keeps.
    pub fn selections_counted(&self) -> usize {
        self.selections.len()
    }

    /// Node names in list order.
    pub fn node_names(&self) -> Vec<Sym> {
        self.list
            .iter()
            .map(|&s| self.slots[s as usize].name())
            .collect()
    }

    /// Claims in use, sorted (for comparisons).
    pub fn used_pvcs(&self) -> Vec<PvcKey> {
        let mut keys: Vec<PvcKey> = self.used_pvcs.keys().copied().collect();
        keys.sort();
        keys
    }

    /// Whether two snapshots hold the same nodes in the same order, with the same state.
    pub fn same_state(&self, other: &Snapshot) -> bool {
        self.num_nodes() == other.num_nodes()
            && (0..self.num_nodes()).all(|i| self.node_at(i).same_state(other.node_at(i)))
            && self.with_affinity == other.with_affinity
            && self.with_required_anti_affinity == other.with_required_anti_affinity
            && self.columns.same_values(&other.columns)
            && self.used_pvcs() == other.used_pvcs()
            && self.declared == other.declared
    }
}

/// Whether the node holds pods with (anti-)affinity, and pods with required anti-affinity.
fn affinity_flags(info: &NodeInfo) -> (bool, bool) {
    (
        !info.pods_with_affinity().is_empty(),
        !info.pods_with_required_anti_affinity().is_empty(),
    )
}

impl ClusterState for Snapshot {
    fn num_nodes(&self) -> usize {
        self.list.len()
    }

    fn node_at(&self, position: usize) -> &NodeInfo {
        &self.slots[self.list[position] as usize]
    }

    fn position(&self, name: Sym) -> Option<usize> {
        let slot = *self.by_name.get(&name)?;
        Some(self.slot_position[slot as usize] as usize)
    }

    fn with_affinity_pods(&self) -> &[u32] {
        &self.with_affinity
    }

    fn with_required_anti_affinity_pods(&self) -> &[u32] {
        &self.with_required_anti_affinity
    }

    fn is_pvc_used(&self, key: PvcKey) -> bool {
        self.used_pvcs.contains_key(&key)
    }

    fn columns(&self) -> Option<&NodeColumns> {
        Some(&self.columns)
    }

    fn domain_counts(&self, selection: &PodSelection) -> Option<&DomainCounts> {
        self.selections.get(selection)
    }

    fn declared_terms(&self) -> Option<&DeclaredTerms> {
        Some(&self.declared)
    }

    fn dra(&self) -> Option<&dyn DraState> {
        self.dra.as_ref().map(|v| v as &dyn DraState)
    }
}
