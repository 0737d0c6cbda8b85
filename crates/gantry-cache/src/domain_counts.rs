//! Matching pods per topology domain, kept in the snapshot for the pod selections the
//! plugins ask about, so that PodTopologySpread and InterPodAffinity read one count per
//! domain instead of counting on every node for every pod they schedule.
//!
//! The counts are derived from the snapshot's own NodeInfos: each update takes a changed
//! node's old contribution out and its new one in, so they agree with the nodes the
//! snapshot holds by construction. A selection is counted from the update after a plugin
//! first asked for it (the plugin counts node by node meanwhile), and forgotten once
//! unused for a while.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use foldhash::fast::RandomState;
use gantry_api::{Pod, Sym};
use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::{NodeInfo, PodSelection};

/// Pods per value of a topology key.
pub type PodsPerDomain = HashMap<Sym, i64, RandomState>;

/// A selection unused for this many snapshot updates (about one per pod scheduled) is
/// forgotten. Keeping one costs little, as a node change counts again only the selections
/// its changed pods match; forgetting one that comes back costs a count over every node
/// (about 3 M instructions at 5,000 nodes) and a cycle counting node by node. At 4,096,
/// `gantry bench replay-affinity` (100 deployments, each back after some 10,000 pods of
/// the others) counted its selections 400 times, at 16,384 once each: 5% fewer
/// instructions in all (docs/performance.md).
const FORGET_AFTER_UPDATES: u64 = 16384;
/// At most this many selections are counted (each costs a little on every node change);
/// past it, the least recently used one makes room. A cluster whose pods ask for more
/// selections than this, cycle after cycle, recounts one over every node per cycle, and
/// its plugins count node by node meanwhile: at 64, a trace of 5,000 nodes whose pods of
/// 100 deployments each carry a preferred anti-affinity scheduled 9.8 times slower
/// (docs/record.md).
const MAX_SELECTIONS: usize = 1024;

/// One selection's counts over the snapshot's nodes.
#[derive(Debug)]
pub struct DomainCounts {
    /// Every value of the topology key some node has, with the matching pods on the
    /// nodes that have it (0 included). Shared with the cycles that read it, so it is
    /// copied only when it changes while a cycle still holds it.
    pods: Arc<PodsPerDomain>,
    /// Nodes per value: a domain exists while a node has the value.
    nodes: HashMap<Sym, u32, RandomState>,
    nodes_with_key: u32,
    /// Domains with at least one matching pod.
    occupied: u32,
    /// The update that last read the counts.
    last_used: AtomicU64,
}

/// What one node adds to a selection's counts: its value of the topology key and its
/// matching pods; nothing when it lacks the key.
type Contribution = Option<(Sym, i64)>;

impl DomainCounts {
    fn new(now: u64) -> DomainCounts {
        DomainCounts {
            pods: Arc::default(),
            nodes: HashMap::default(),
            nodes_with_key: 0,
            occupied: 0,
            last_used: AtomicU64::new(now),
        }
    }

    /// Every domain with its matching pods, zero included.
    pub fn pods(&self) -> &Arc<PodsPerDomain> {
        &self.pods
    }

    /// Domains that hold at least one matching pod.
    pub fn occupied_domains(&self) -> u32 {
        self.occupied
    }

    /// Nodes that have the topology key.
    pub fn nodes_with_key(&self) -> u32 {
        self.nodes_with_key
    }

    fn contribution(selection: &PodSelection, info: &NodeInfo) -> Contribution {
        let value = info.node()?.labels.get(selection.topology_key)?;
        Some((value, i64::from(selection.count_on(info))))
    }

    fn apply(&mut self, (value, pods): (Sym, i64), sign: i64) {
        self.add_pods(value, sign * pods);
        let nodes = self.nodes.entry(value).or_insert(0);
        *nodes = nodes.saturating_add_signed(sign as i32);
        self.nodes_with_key = self.nodes_with_key.saturating_add_signed(sign as i32);
        if *nodes == 0 {
            self.nodes.remove(&value);
            Arc::make_mut(&mut self.pods).remove(&value);
        }
    }

    /// Moves the matching pods counted in the domain `value` by `delta`.
    fn add_pods(&mut self, value: Sym, delta: i64) {
        let count = Arc::make_mut(&mut self.pods).entry(value).or_insert(0);
        let was_occupied = *count != 0;
        *count += delta;
        let occupied = *count != 0;
        self.occupied = self.occupied + u32::from(occupied) - u32::from(was_occupied);
    }

    fn replace(&mut self, old: Contribution, new: Contribution) {
        if old == new {
            return;
        }
        if let Some(old) = old {
            self.apply(old, -1);
        }
        if let Some(new) = new {
            self.apply(new, 1);
        }
    }

    fn counted<'a>(
        selection: &PodSelection,
        nodes: impl Iterator<Item = &'a NodeInfo>,
        now: u64,
    ) -> DomainCounts {
        let mut counts = DomainCounts::new(now);
        for info in nodes {
            counts.replace(None, DomainCounts::contribution(selection, info));
        }
        counts
    }

    fn same_counts(&self, other: &DomainCounts) -> bool {
        self.pods == other.pods
            && self.nodes == other.nodes
            && self.nodes_with_key == other.nodes_with_key
            && self.occupied == other.occupied
    }
}

/// The selections the snapshot counts, and the ones asked for since its last update.
#[derive(Debug, Default)]
pub struct SelectionCounts {
    counted: HashMap<PodSelection, DomainCounts, RandomState>,
    wanted: Mutex<Vec<PodSelection>>,
    /// Snapshot updates so far: the clock of `last_used`.
    updates: u64,
}

impl SelectionCounts {
    /// The counts for `selection`, if kept; a miss asks for them from the next update.
    pub fn get(&self, selection: &PodSelection) -> Option<&DomainCounts> {
        match self.counted.get(selection) {
            Some(counts) => {
                counts.last_used.store(self.updates, Ordering::Relaxed);
                Some(counts)
            }
            None => {
                let mut wanted = self.wanted.lock();
                if !wanted.contains(selection) {
                    wanted.push(selection.clone());
                }
                None
            }
        }
    }

    /// A node changed from `old` to `new` (`None`: absent before, or gone after).
    ///
    /// A node's contribution to a selection is its matching pods in the domain its value
    /// of the topology key names: while that value stays (its labels the same, or changed
    /// elsewhere), the count there moves by the matching pods added and removed, with no
    /// recount of the node's pods. With a hundred selections kept, counting each on every
    /// node change was a quarter of a replay's time; recounting, on each change, the
    /// selections it touched (two counts of the node's pods for each), a thirteenth.
    pub(crate) fn node_changed(&mut self, old: Option<&NodeInfo>, new: Option<&NodeInfo>) {
        if self.counted.is_empty() {
            return;
        }
        let changed = match (old, new) {
            (Some(old), Some(new)) => Some((
                old,
                new,
                same_labels(old, new),
                changed_pods(old.pods(), new.pods()),
            )),
            _ => None,
        };
        for (selection, counts) in &mut self.counted {
            let value = |info: &NodeInfo| info.node()?.labels.get(selection.topology_key);
            if let Some((old, new, same_labels, changed)) = &changed
                && (*same_labels || value(old) == value(new))
            {
                let delta: i64 = (changed.iter())
                    .filter(|(pod, _)| selection.matches(pod))
                    .map(|(_, sign)| sign)
                    .sum();
                if delta != 0
                    && let Some(value) = value(new)
                {
                    counts.add_pods(value, delta);
                }
                continue;
            }
            let contribution = |info: Option<&NodeInfo>| {
                info.and_then(|i| DomainCounts::contribution(selection, i))
            };
            counts.replace(contribution(old), contribution(new));
        }
    }

    /// Ends an update: forgets selections unused for long, and counts the ones asked for
    /// over `nodes` (every node of the snapshot, as updated).
    pub(crate) fn finish_update<'a, I: Iterator<Item = &'a NodeInfo>>(
        &mut self,
        nodes: impl Fn() -> I,
    ) {
        self.updates += 1;
        let now = self.updates;
        self.counted
            .retain(|_, c| now - c.last_used.load(Ordering::Relaxed) < FORGET_AFTER_UPDATES);
        let wanted = std::mem::take(self.wanted.get_mut());
        for selection in wanted {
            if self.counted.contains_key(&selection) {
                continue;
            }
            if self.counted.len() >= MAX_SELECTIONS {
                self.forget_least_recently_used();
            }
            let counts = DomainCounts::counted(&selection, nodes(), now);
            self.counted.insert(selection, counts);
        }
    }

    fn forget_least_recently_used(&mut self) {
        let oldest = self
            .counted
            .iter()
            .min_by_key(|(_, c)| c.last_used.load(Ordering::Relaxed))
            .map(|(s, _)| s.clone());
        if let Some(oldest) = oldest {
            self.counted.remove(&oldest);
        }
    }

    /// Counts every kept selection afresh over `nodes`.
    pub(crate) fn recount<'a, I: Iterator<Item = &'a NodeInfo>>(&mut self, nodes: impl Fn() -> I) {
        let now = self.updates;
        for (selection, counts) in &mut self.counted {
            let last_used = counts.last_used.load(Ordering::Relaxed);
            *counts = DomainCounts::counted(selection, nodes(), now);
            counts.last_used.store(last_used, Ordering::Relaxed);
        }
    }

    /// Whether every kept selection's counts equal a count from scratch over `nodes`.
    pub fn agree_with<'a, I: Iterator<Item = &'a NodeInfo>>(&self, nodes: impl Fn() -> I) -> bool {
        self.counted
            .iter()
            .all(|(s, c)| c.same_counts(&DomainCounts::counted(s, nodes(), 0)))
    }

    /// Number of selections counted.
    pub fn len(&self) -> usize {
        self.counted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counted.is_empty()
    }
}

/// Whether two versions of a node carry the same labels.
pub(crate) fn same_labels(old: &NodeInfo, new: &NodeInfo) -> bool {
    match (old.node(), new.node()) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a.labels == b.labels,
        (None, None) => true,
        _ => false,
    }
}

/// The pods in one list and not in the other, by identity (a pod changed is a new
/// `Arc`): -1 for those only in `old`, 1 for those only in `new`. The lists usually
/// differ by a pod added at the end or swapped out of its place, so the common ends are
/// set aside before the rest is compared.
fn changed_pods<'a>(old: &'a [Arc<Pod>], new: &'a [Arc<Pod>]) -> SmallVec<[(&'a Pod, i64); 4]> {
    let same = |(a, b): &(&Arc<Pod>, &Arc<Pod>)| Arc::ptr_eq(a, b);
    let prefix = old.iter().zip(new).take_while(same).count();
    let (old, new) = (&old[prefix..], &new[prefix..]);
    let suffix = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take_while(same)
        .count();
    let (old, new) = (&old[..old.len() - suffix], &new[..new.len() - suffix]);
    let address = |pod: &Arc<Pod>| Arc::as_ptr(pod) as usize;
    let mut old_addresses: SmallVec<[usize; 16]> = old.iter().map(address).collect();
    let mut new_addresses: SmallVec<[usize; 16]> = new.iter().map(address).collect();
    old_addresses.sort_unstable();
    new_addresses.sort_unstable();
    let mut changed = SmallVec::new();
    for (pods, other, sign) in [(old, &new_addresses, -1), (new, &old_addresses, 1)] {
        for pod in pods {
            if other.binary_search(&address(pod)).is_err() {
                changed.push((&**pod, sign));
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NamespaceScope;
    use gantry_api::LabelSelector;

    fn selection(i: usize) -> PodSelection {
        let app = (Sym::new("app"), Sym::new(&format!("app-{i}")));
        PodSelection {
            selector: LabelSelector::from_pairs([app]),
            namespaces: NamespaceScope::All,
            topology_key: Sym::new("kubernetes.io/hostname"),
            live_only: false,
        }
    }

    fn pod(name: &str) -> Arc<Pod> {
        Arc::new(Pod::new("default", name))
    }

    /// The names, `-` before those removed and `+` before those added.
    fn names(pods: &[(&Pod, i64)]) -> Vec<String> {
        let sign = |s: i64| if s < 0 { "-" } else { "+" };
        let mut names: Vec<String> = (pods.iter())
            .map(|(p, s)| format!("{}{}", sign(*s), p.name))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn changed_pods_are_those_added_removed_or_replaced() {
        let [a, b, c, d] = ["a", "b", "c", "d"].map(pod);
        let list = [a.clone(), b.clone(), c.clone(), d.clone()];
        let added = [a.clone(), b.clone(), c.clone(), d.clone(), pod("e")];
        assert_eq!(names(&changed_pods(&list, &added)), ["+e"]);
        // `swap_remove` of b: d takes its place.
        let removed = [a.clone(), d.clone(), c.clone()];
        assert_eq!(names(&changed_pods(&list, &removed)), ["-b"]);
        let replaced = [a.clone(), pod("b"), c.clone(), d.clone()];
        assert_eq!(names(&changed_pods(&list, &replaced)), ["+b", "-b"]);
        let reordered = [d.clone(), c.clone(), b.clone(), a.clone()];
        assert!(changed_pods(&list, &reordered).is_empty());
        assert_eq!(names(&changed_pods(&list, &[])), ["-a", "-b", "-c", "-d"]);
    }

    /// Asked for once each, one update apart: the first one asked for is the one
    /// forgotten when the limit is passed, and the count never exceeds it.
    #[test]
    fn past_the_limit_the_least_recently_used_selection_makes_room() {
        let mut counts = SelectionCounts::default();
        let nodes: Vec<NodeInfo> = Vec::new();
        for i in 0..=MAX_SELECTIONS {
            assert!(counts.get(&selection(i)).is_none());
            counts.finish_update(|| nodes.iter());
        }
        assert_eq!(counts.len(), MAX_SELECTIONS);
        assert!(counts.counted.contains_key(&selection(MAX_SELECTIONS)));
        assert!(counts.counted.contains_key(&selection(1)));
        assert!(!counts.counted.contains_key(&selection(0)));
    }

    /// A selection read at least once every `FORGET_AFTER_UPDATES` updates is kept; one
    /// left unread that long is forgotten, and asked for again is counted again.
    #[test]
    fn a_selection_unread_for_long_is_forgotten() {
        let mut counts = SelectionCounts::default();
        let nodes: Vec<NodeInfo> = Vec::new();
        let (read, unread) = (selection(0), selection(1));
        assert!(counts.get(&read).is_none() && counts.get(&unread).is_none());
        counts.finish_update(|| nodes.iter());
        for _ in 1..FORGET_AFTER_UPDATES {
            assert!(counts.get(&read).is_some());
            counts.finish_update(|| nodes.iter());
        }
        assert!(counts.counted.contains_key(&unread), "read just in time");
        assert!(counts.get(&read).is_some());
        counts.finish_update(|| nodes.iter());
        assert!(counts.counted.contains_key(&read));
        assert!(!counts.counted.contains_key(&unread));
        assert!(counts.get(&unread).is_none());
        counts.finish_update(|| nodes.iter());
        assert!(counts.get(&unread).is_some());
    }
}
