//! The usage of a node's HAMi-registered GPUs, card by card, kept in its NodeInfo and
//! updated as pods are added, removed, assumed and forgotten, so that every snapshot
//! (and every what-if fork) carries it. HAMi's scheduler rebuilt this from every cached
//! GPU pod on every Filter call; here a pod's share is added once and taken away once.

use std::sync::Arc;

use gantry_api::Pod;
use gantry_api::gpu::{self, NodeDevices};
use smallvec::SmallVec;

/// What the pods on one card hold. Sums of int32 amounts (HAMi's fields) kept in i64:
/// HAMi's own int32 sums wrap, and two pods holding 2147483647 MiB each would leave the
/// card looking empty. At the ends of i64 (2^32 pods' worth) they saturate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CardUsage {
    /// Shares in use (HAMi's `Used`): one per container placed on the card.
    pub used: i64,
    pub memory_mib: i64,
    pub cores: i64,
    /// Pods holding all of the card's compute (whole-card, exclusive requests).
    pub exclusive: i64,
}

impl CardUsage {
    pub fn add(&mut self, other: &CardUsage, sign: i64) {
        let add = |a: i64, b: i64| a.saturating_add(sign.saturating_mul(b));
        self.used = add(self.used, other.used);
        self.memory_mib = add(self.memory_mib, other.memory_mib);
        self.cores = add(self.cores, other.cores);
        self.exclusive = add(self.exclusive, other.exclusive);
    }

    fn max_with(&mut self, other: &CardUsage) {
        self.used = self.used.max(other.used);
        self.memory_mib = self.memory_mib.max(other.memory_mib);
        self.cores = self.cores.max(other.cores);
    }
}

/// A node's cards at a glance, kept in the snapshot's columns so that a Filter can pass a
/// node without visiting its cards: the open cards (healthy, not cordoned, not split into
/// MIG instances) and the least any of them has free. A container asking for at most
/// `open` cards, each with one share, this much memory and this much compute, finds them
/// here whatever order the cards are walked in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CardSummary {
    /// Cards registered on the node.
    pub cards: u32,
    /// Cards healthy, not cordoned and not in MIG mode.
    pub open: u32,
    /// The least free shares, memory and compute of an open card (0 without one).
    pub min_free_shares: i64,
    pub min_free_memory_mib: i64,
    pub min_free_cores: i64,
    /// What all the cards hold and offer ([`DeviceUsage::total`] and `capacity`): a
    /// node score reads them.
    pub total: CardUsage,
    pub capacity: CardUsage,
}

/// A node's cards and their usage. Shared between a NodeInfo and its snapshot copies
/// until one of them changes (copy on write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceUsage {
    devices: Arc<NodeDevices>,
    /// Aligned with `devices.cards`.
    cards: SmallVec<[CardUsage; 8]>,
    /// Sums over the cards, for HAMi's node score.
    total: CardUsage,
    /// What the cards offer together: shares, memory, compute (`exclusive` unused).
    capacity: CardUsage,
    /// Pods holding at least one card here.
    pods: u32,
    /// Kept with the usage (the cards are at hand when it changes), so that reading it,
    /// as the snapshot's columns do for every node, touches no card.
    summary: CardSummary,
}

impl DeviceUsage {
    pub fn new(devices: Arc<NodeDevices>) -> DeviceUsage {
        let mut capacity = CardUsage::default();
        for card in &devices.cards {
            capacity.used += i64::from(card.count);
            capacity.memory_mib += i64::from(card.memory_mib);
            capacity.cores += i64::from(card.cores);
        }
        let mut usage = DeviceUsage {
            cards: SmallVec::from_elem(CardUsage::default(), devices.cards.len()),
            devices,
            total: CardUsage::default(),
            capacity,
            pods: 0,
            summary: CardSummary::default(),
        };
        usage.summary = usage.summarise();
        usage
    }

    pub fn devices(&self) -> &Arc<NodeDevices> {
        &self.devices
    }

    /// Per card, aligned with `devices().cards`.
    #[inline]
    pub fn cards(&self) -> &[CardUsage] {
        &self.cards
    }

    /// Sums over the cards.
    #[inline]
    pub fn total(&self) -> &CardUsage {
        &self.total
    }

    /// What the cards offer together (`used`: shares), summed in i64 (HAMi's int32 sum
    /// would wrap for cards registered with amounts near i32::MAX).
    #[inline]
    pub fn capacity(&self) -> &CardUsage {
        &self.capacity
    }

    /// Pods holding at least one card of the node.
    pub fn gpu_pods(&self) -> u32 {
        self.pods
    }

    /// What every open card of the node has free at least (see [`CardSummary`]).
    #[inline]
    pub fn summary(&self) -> &CardSummary {
        &self.summary
    }

    fn summarise(&self) -> CardSummary {
        let mut summary = CardSummary {
            cards: self.cards.len() as u32,
            total: self.total,
            capacity: self.capacity,
            ..CardSummary::default()
        };
        let open = self
            .devices
            .cards
            .iter()
            .zip(&self.cards)
            .filter(|(card, _)| card.health && !card.cordoned && &*card.mode != "mig");
        for (card, used) in open {
            let free_shares = i64::from(card.count).saturating_sub(used.used);
            let free_memory = i64::from(card.memory_mib).saturating_sub(used.memory_mib);
            let free_cores = i64::from(card.cores).saturating_sub(used.cores);
            if summary.open == 0 {
                (summary.min_free_shares, summary.min_free_memory_mib) = (free_shares, free_memory);
                summary.min_free_cores = free_cores;
            }
            summary.open += 1;
            summary.min_free_shares = summary.min_free_shares.min(free_shares);
            summary.min_free_memory_mib = summary.min_free_memory_mib.min(free_memory);
            summary.min_free_cores = summary.min_free_cores.min(free_cores);
        }
        summary
    }

    /// The first card `pod` (naming this node, with its cards written) would overfill if
    /// it were added to what the cards hold now: more shares, memory or compute than the
    /// card has, or a whole-card pod sharing it. For a binder that checks a decision
    /// against a cache other instances' binds have changed since.
    pub fn overfilled_by(&self, pod: &Pod) -> Option<&str> {
        held_cards(pod, &self.devices)
            .into_iter()
            .find(|(card, usage)| {
                let mut after = self.cards[*card];
                after.add(usage, 1);
                let offered = &self.devices.cards[*card];
                after.used > i64::from(offered.count)
                    || after.memory_mib > i64::from(offered.memory_mib)
                    || after.cores > i64::from(offered.cores)
                    || (after.exclusive > 0 && after.used > 1)
            })
            .map(|(card, _)| &*self.devices.cards[card].id)
    }

    /// Adds (`sign` 1) or takes away (-1) what `pod` holds on these cards.
    pub(crate) fn account(&mut self, pod: &Pod, sign: i64) {
        let held = held_cards(pod, &self.devices);
        if held.is_empty() {
            return;
        }
        for (card, usage) in &held {
            self.cards[*card].add(usage, sign);
            self.total.add(usage, sign);
        }
        self.pods = self.pods.saturating_add_signed(sign as i32);
        self.summary = self.summarise();
    }
}

/// Whether HAMi counts `pod` as holding cards: its scheduler wrote an assignment for the
/// node the pod is on.
pub(crate) fn holds_cards(pod: &Pod) -> bool {
    pod.annotation(gpu::DEVICES_ALLOCATED).is_some()
        && pod.annotation(gpu::ASSIGNED_NODE) == pod.node_name.map(|n| n.as_str())
}

/// What `pod` holds per card of `devices`, read from `hami.io/vgpu-devices-allocated` as
/// HAMi's accounting reads it (`CollapseInitContainerUsage`): init containers run one at
/// a time before the others, so per card and per dimension a pod holds the larger of the
/// sum over its other containers and the largest single init container. Cards the node
/// does not have are skipped, as HAMi skips them.
fn held_cards(pod: &Pod, devices: &NodeDevices) -> SmallVec<[(usize, CardUsage); 4]> {
    struct Held {
        card: usize,
        regular: CardUsage,
        init: CardUsage,
    }
    let mut held: SmallVec<[Held; 4]> = SmallVec::new();
    if !holds_cards(pod) {
        return SmallVec::new();
    }
    let encoded = pod.annotation(gpu::DEVICES_ALLOCATED).unwrap_or_default();
    let init_containers = pod.init_containers.len();
    // One container's cards at a time: containers come in order.
    let mut container: SmallVec<[(usize, CardUsage); 4]> = SmallVec::new();
    let mut current = usize::MAX;
    let mut fold = |index: usize, cards: &mut SmallVec<[(usize, CardUsage); 4]>| {
        for (card, usage) in cards.drain(..) {
            let entry = match held.iter_mut().position(|h| h.card == card) {
                Some(i) => &mut held[i],
                None => {
                    held.push(Held {
                        card,
                        regular: CardUsage::default(),
                        init: CardUsage::default(),
                    });
                    held.last_mut().expect("just pushed")
                }
            };
            if index < init_containers {
                entry.init.max_with(&usage);
            } else {
                entry.regular.add(&usage, 1);
            }
        }
    };
    let decoded = gpu::for_each_assigned_card(encoded, |index, uuid, memory_mib, cores| {
        if index != current {
            fold(current, &mut container);
            current = index;
        }
        let Some(card) = devices.position(uuid) else {
            return;
        };
        let usage = CardUsage {
            used: 1,
            memory_mib: i64::from(memory_mib),
            cores: i64::from(cores),
            exclusive: 0,
        };
        match container.iter_mut().find(|(c, _)| *c == card) {
            Some((_, held)) => held.add(&usage, 1),
            None => container.push((card, usage)),
        }
    });
    if let Err(message) = decoded {
        tracing::warn!(pod = %pod.key(), %message, "unreadable {} annotation: the pod holds no cards", gpu::DEVICES_ALLOCATED);
        return SmallVec::new();
    }
    fold(current, &mut container);
    held.into_iter()
        .map(|h| {
            let mut usage = h.regular;
            usage.max_with(&h.init);
            let whole = i64::from(devices.cards[h.card].cores);
            usage.exclusive = i64::from(whole > 0 && usage.cores >= whole);
            (h.card, usage)
        })
        .filter(|(_, usage)| usage.used > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::Container;

    fn devices() -> Arc<NodeDevices> {
        let register = r#"[{"id":"gpu-0","count":10,"devmem":8000,"devcore":100,"type":"NVIDIA-A10","health":true},{"id":"gpu-1","count":10,"devmem":8000,"devcore":100,"type":"NVIDIA-A10","health":true}]"#;
        let annotations = [(Arc::from(gpu::REGISTER_ANNOTATION), Arc::from(register))];
        Arc::new(gpu::parse_node_devices(&annotations).unwrap().unwrap())
    }

    fn pod(name: &str, init: usize, assignment: &str, node: &str) -> Pod {
        let mut pod = Pod::new("ns", name).on_node("n1");
        for i in 0..init {
            pod = pod.with_init_container(Container::new(&format!("i{i}"), None, None));
        }
        pod.annotations = [
            (gpu::ASSIGNED_NODE, node),
            (gpu::DEVICES_ALLOCATED, assignment),
        ]
        .iter()
        .map(|(k, v)| (Arc::from(*k), Arc::from(*v)))
        .collect();
        pod
    }

    #[test]
    fn a_pod_is_added_and_taken_away_card_by_card() {
        let mut usage = DeviceUsage::new(devices());
        let p = pod("a", 0, "gpu-1,NVIDIA,1000,30:;gpu-1,NVIDIA,500,100:;", "n1");
        usage.account(&p, 1);
        assert_eq!(usage.cards()[0], CardUsage::default());
        assert_eq!(
            usage.cards()[1],
            CardUsage {
                used: 2,
                memory_mib: 1500,
                cores: 130,
                exclusive: 1
            }
        );
        assert_eq!(usage.total().used, 2);
        assert_eq!(usage.gpu_pods(), 1);
        usage.account(&p, -1);
        assert_eq!(usage, DeviceUsage::new(devices()));
    }

    #[test]
    fn a_decision_overfills_a_card_that_others_filled_meanwhile() {
        let mut usage = DeviceUsage::new(devices());
        let half = pod("a", 0, "gpu-0,NVIDIA,5000,50:;", "n1");
        assert_eq!(usage.overfilled_by(&half), None);
        usage.account(&pod("b", 0, "gpu-0,NVIDIA,4000,10:;", "n1"), 1);
        assert_eq!(
            usage.overfilled_by(&half),
            Some("gpu-0"),
            "9000 MiB of 8000"
        );
        let small = pod("c", 0, "gpu-0,NVIDIA,1000,10:;", "n1");
        assert_eq!(usage.overfilled_by(&small), None);
        let whole = pod("d", 0, "gpu-0,NVIDIA,0,100:;", "n1");
        assert_eq!(
            usage.overfilled_by(&whole),
            Some("gpu-0"),
            "a whole card shared"
        );
        let elsewhere = pod("e", 0, "gpu-1,NVIDIA,0,100:;", "n1");
        assert_eq!(usage.overfilled_by(&elsewhere), None);
        // Each limit on its own: compute past 100% with memory and slots to spare...
        let busy = pod("f", 0, "gpu-0,NVIDIA,1000,95:;", "n1");
        assert_eq!(usage.overfilled_by(&busy), Some("gpu-0"), "105% of compute");
        // ...and an eleventh share of a card split ten ways.
        let mut shares = DeviceUsage::new(devices());
        for i in 0..10 {
            let tiny = pod(&format!("s{i}"), 0, "gpu-1,NVIDIA,10,1:;", "n1");
            assert_eq!(shares.overfilled_by(&tiny), None, "share {i}");
            shares.account(&tiny, 1);
        }
        let eleventh = pod("s10", 0, "gpu-1,NVIDIA,10,1:;", "n1");
        assert_eq!(
            shares.overfilled_by(&eleventh),
            Some("gpu-1"),
            "11 of 10 shares"
        );
    }

    #[test]
    fn usage_past_int32_stays_full_and_comes_off_exactly() {
        // HAMi sums card usage in int32: twice 2147483647 MiB wraps to -2, an empty card.
        let mut usage = DeviceUsage::new(devices());
        let huge = |name| pod(name, 0, "gpu-0,NVIDIA,2147483647,0:;", "n1");
        usage.account(&huge("a"), 1);
        usage.account(&huge("b"), 1);
        assert_eq!(usage.cards()[0].memory_mib, 2 * i64::from(i32::MAX));
        assert_eq!(usage.total().memory_mib, 2 * i64::from(i32::MAX));
        let small = pod("c", 0, "gpu-0,NVIDIA,1,0:;", "n1");
        assert_eq!(usage.overfilled_by(&small), Some("gpu-0"));
        usage.account(&huge("a"), -1);
        usage.account(&huge("b"), -1);
        assert_eq!(usage, DeviceUsage::new(devices()));
    }

    #[test]
    fn init_containers_count_at_their_peak_not_added() {
        // HAMi's CollapseInitContainerUsage: max(sum of app containers, largest init).
        let mut usage = DeviceUsage::new(devices());
        let p = pod(
            "a",
            2,
            "gpu-0,NVIDIA,1024,2:;gpu-0,NVIDIA,1024,2:;gpu-0,NVIDIA,500,1:gpu-1,NVIDIA,3000,5:;",
            "n1",
        );
        usage.account(&p, 1);
        assert_eq!(
            (
                usage.cards()[0].used,
                usage.cards()[0].memory_mib,
                usage.cards()[0].cores
            ),
            (1, 1024, 2)
        );
        assert_eq!(usage.cards()[1].memory_mib, 3000);
    }

    #[test]
    fn pods_without_an_assignment_for_their_node_hold_nothing() {
        let mut usage = DeviceUsage::new(devices());
        usage.account(&pod("other-node", 0, "gpu-0,NVIDIA,1,1:;", "n2"), 1);
        usage.account(&pod("unknown-card", 0, "gpu-9,NVIDIA,1,1:;", "n1"), 1);
        usage.account(&pod("malformed", 0, "gpu-0,NVIDIA:;", "n1"), 1);
        assert_eq!(usage, DeviceUsage::new(devices()));
    }
}
