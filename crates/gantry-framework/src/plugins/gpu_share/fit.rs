//! Whether a pod's containers fit a node's cards, and which cards they get: HAMi's
//! per-card checks (`Fit` in `pkg/device/nvidia/device.go`), its per-container walk
//! over the ordered cards (`fitInDevices`) and its per-pod pass (`scoreNode`: each init
//! container alone on the node as it is, then the other containers one after another).

use gantry_api::gpu::Card;
use gantry_cache::{CardUsage, DeviceUsage};
use smallvec::SmallVec;

use super::request::{CardRequest, PodRequest};
use super::score::card_score;

/// HAMi's reason names (`pkg/device/common`), in the alphabetical order its `GenReason`
/// writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    AllocatedCardsInsufficientRequest,
    CardComputeUnitsExhausted,
    CardCordoned,
    CardInsufficientCore,
    CardInsufficientMemory,
    CardMigTopologyInfeasible,
    CardNotHealth,
    CardTimeSlicingExhausted,
    CardTypeMismatch,
    CardUuidMismatch,
    ExclusiveDeviceAllocateConflict,
    NumaNotFit,
}

const REASONS: [Reason; 12] = [
    Reason::AllocatedCardsInsufficientRequest,
    Reason::CardComputeUnitsExhausted,
    Reason::CardCordoned,
    Reason::CardInsufficientCore,
    Reason::CardInsufficientMemory,
    Reason::CardMigTopologyInfeasible,
    Reason::CardNotHealth,
    Reason::CardTimeSlicingExhausted,
    Reason::CardTypeMismatch,
    Reason::CardUuidMismatch,
    Reason::ExclusiveDeviceAllocateConflict,
    Reason::NumaNotFit,
];

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::AllocatedCardsInsufficientRequest => "AllocatedCardsInsufficientRequest",
            Reason::CardComputeUnitsExhausted => "CardComputeUnitsExhausted",
            Reason::CardCordoned => "CardCordoned",
            Reason::CardInsufficientCore => "CardInsufficientCore",
            Reason::CardInsufficientMemory => "CardInsufficientMemory",
            Reason::CardMigTopologyInfeasible => "CardMigTopologyInfeasible",
            Reason::CardNotHealth => "CardNotHealth",
            Reason::CardTimeSlicingExhausted => "CardTimeSlicingExhausted",
            Reason::CardTypeMismatch => "CardTypeMismatch",
            Reason::CardUuidMismatch => "CardUuidMismatch",
            Reason::ExclusiveDeviceAllocateConflict => "ExclusiveDeviceAllocateConflict",
            Reason::NumaNotFit => "NumaNotFit",
        }
    }
}

/// A node with more requested cards than it has: HAMi's reason, without counts.
pub const NODE_INSUFFICIENT_DEVICE: &str = "NodeInsufficientDevice";
/// A node without HAMi-registered cards, for a pod that asks for shares.
pub const NODE_UNREGISTERED: &str = "node unregistered";

/// Per-reason card counts, written as HAMi's `GenReason` writes them.
#[derive(Default)]
struct Reasons([u32; REASONS.len()]);

impl Reasons {
    fn add(&mut self, reason: Reason, cards: usize) {
        self.0[reason as usize] += cards as u32;
    }

    fn set(&mut self, reason: Reason, cards: usize) {
        self.0[reason as usize] = cards as u32;
    }

    /// `2/8 CardInsufficientCore, 3/8 CardInsufficientMemory`.
    fn message(&self, cards: usize) -> String {
        let mut out = String::new();
        for reason in REASONS {
            let count = self.0[reason as usize];
            if count > 0 {
                if !out.is_empty() {
                    out.push_str(", ");
                }
                out.push_str(&format!("{count}/{cards} {}", reason.name()));
            }
        }
        out
    }
}

/// The checks before HAMi's NUMA bookkeeping: health, cordon, type and mode.
pub fn check_card_kind(card: &Card, pod: &PodRequest) -> Option<Reason> {
    if !card.health {
        return Some(Reason::CardNotHealth);
    }
    if card.cordoned {
        return Some(Reason::CardCordoned);
    }
    let type_ok = (pod.use_types.is_empty()
        || pod.use_types.iter().any(|t| card.type_upper.contains(&**t)))
        && !pod
            .nouse_types
            .iter()
            .any(|t| card.type_upper.contains(&**t))
        && pod
            .vgpu_mode
            .as_deref()
            .is_none_or(|mode| mode.contains(&*card.mode));
    (!type_ok).then_some(Reason::CardTypeMismatch)
}

/// The checks after it, in HAMi's order; the memory the container would take on success.
pub fn check_card_room(
    card: &Card,
    used: &CardUsage,
    pod: &PodRequest,
    request: &CardRequest,
) -> Result<i32, Reason> {
    // HAMi's `CheckUUID`: both lists apply (an empty one is none).
    let listed =
        |list: &Option<Vec<Box<str>>>| list.as_ref().map(|l| l.iter().any(|u| **u == *card.id));
    let uuid_ok = listed(&pod.use_uuids) != Some(false) && listed(&pod.nouse_uuids) != Some(true);
    if !uuid_ok {
        return Err(Reason::CardUuidMismatch);
    }
    if i64::from(card.count) <= used.used {
        return Err(Reason::CardTimeSlicingExhausted);
    }
    if pod.gpu_policy.mutex && used.used > 0 {
        return Err(Reason::ExclusiveDeviceAllocateConflict);
    }
    // "core limit can't exceed 100": HAMi's Fit clamps (its card scores read the raw
    // request).
    let cores = request.granted_cores();
    let memory = request.memory_on(card.memory_mib);
    // In i64: the usage sums are (HAMi's int32 difference would wrap).
    if i64::from(card.memory_mib) - used.memory_mib < i64::from(memory) {
        return Err(Reason::CardInsufficientMemory);
    }
    if i64::from(card.cores) - used.cores < i64::from(cores) {
        return Err(Reason::CardInsufficientCore);
    }
    if card.cores == 100 && cores == 100 && used.used > 0 {
        return Err(Reason::ExclusiveDeviceAllocateConflict);
    }
    if card.cores != 0 && used.cores == i64::from(card.cores) && cores == 0 {
        return Err(Reason::CardComputeUnitsExhausted);
    }
    // MIG instances are not modelled: a mig-mode card offers no profile that fits.
    if &*card.mode == "mig" {
        return Err(Reason::CardMigTopologyInfeasible);
    }
    Ok(memory)
}

/// One card given to a container: its position on the node, the memory and compute
/// the container takes there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Given {
    pub card: usize,
    pub memory_mib: i32,
    pub cores: i32,
}

/// The cards of one container, or why none fit.
pub type ContainerCards = SmallVec<[Given; 2]>;

/// Scratch state for one node: the cards' usage as the pod's containers take them, and
/// their order (positions), both on the stack for nodes of up to 16 cards.
struct Scratch {
    used: SmallVec<[CardUsage; 16]>,
    order: SmallVec<[u8; 16]>,
}

impl Scratch {
    fn new(usage: &DeviceUsage) -> Scratch {
        Scratch {
            used: SmallVec::from_slice(usage.cards()),
            order: (0..usage.cards().len() as u8).collect(),
        }
    }
}

/// HAMi's `fitInDevices` + `Fit` for one container: scores and orders the cards, walks
/// them from the end and takes the first that fit. On success the cards' usage grows.
fn fit_container(
    cards: &[Card],
    scratch: &mut Scratch,
    pod: &PodRequest,
    request: &CardRequest,
) -> Result<ContainerCards, String> {
    let keys = card_keys(cards, &scratch.used, pod, request);
    pod.gpu_policy.sort(&mut scratch.order, &keys);
    if request.nums as usize > cards.len() {
        return Err(NODE_INSUFFICIENT_DEVICE.into());
    }
    walk(cards, scratch, pod, request)
}

/// HAMi's `Fit`: walks the cards in `scratch.order` from its end.
fn walk(
    cards: &[Card],
    scratch: &mut Scratch,
    pod: &PodRequest,
    request: &CardRequest,
) -> Result<ContainerCards, String> {
    let topology = pod.gpu_policy.topology;
    let mut reasons = Reasons::default();
    let mut left = request.nums;
    let mut previous_numa: Option<i32> = None;
    let mut given = ContainerCards::new();
    let mut done = false;
    for &position in scratch.order.iter().rev() {
        let card = &cards[position as usize];
        if let Some(reason) = check_card_kind(card, pod) {
            reasons.add(reason, 1);
            continue;
        }
        if pod.numa_bind && previous_numa != Some(card.numa) {
            // A new NUMA node: start over, counting the cards given up.
            if left != request.nums {
                reasons.add(Reason::NumaNotFit, given.len());
            }
            left = request.nums;
            previous_numa = Some(card.numa);
            given.clear();
        }
        match check_card_room(card, &scratch.used[position as usize], pod, request) {
            Err(reason) => reasons.add(reason, 1),
            Ok(memory_mib) => {
                if left > 0 {
                    if !topology {
                        left -= 1;
                    }
                    given.push(Given {
                        card: position as usize,
                        memory_mib,
                        cores: request.granted_cores(),
                    });
                }
                if left == 0 && !topology {
                    done = true;
                    break;
                }
            }
        }
    }
    let wanted = request.nums as usize;
    if topology && given.len() >= wanted {
        if given.len() > wanted {
            given = super::topology::pick(cards, &given, wanted);
        }
        done = true;
    }
    if !done {
        if !given.is_empty() {
            reasons.set(Reason::AllocatedCardsInsufficientRequest, given.len());
        }
        return Err(reasons.message(cards.len()));
    }
    for g in &given {
        let used = &mut scratch.used[g.card];
        used.add(
            &CardUsage {
                used: 1,
                memory_mib: i64::from(g.memory_mib),
                cores: i64::from(g.cores),
                exclusive: 0,
            },
            1,
        );
    }
    Ok(given)
}

fn card_keys(
    cards: &[Card],
    used: &[CardUsage],
    pod: &PodRequest,
    request: &CardRequest,
) -> SmallVec<[super::policy::CardKey; 16]> {
    cards
        .iter()
        .zip(used)
        .map(|(card, used)| super::policy::CardKey {
            score: card_score(card, used, request, &pod.weights),
            numa: card.numa,
            used: used.used,
            index: card.index,
        })
        .collect()
}

/// Whether each container's cards are independent of the others' choices, so that the
/// pod fits exactly when every card-asking container has enough cards that pass the
/// checks, in any order: no NUMA binding, no topology, at most one regular container
/// asking (init containers each see the node as it is).
pub(super) fn order_free(pod: &PodRequest) -> bool {
    !pod.numa_bind
        && !pod.gpu_policy.topology
        && pod.containers[pod.init_containers..]
            .iter()
            .filter(|c| c.is_some())
            .count()
            <= 1
}

/// HAMi's verdict on a node without the cards it would give: counts passing cards when
/// order cannot matter, else runs the full walk.
pub fn fits(pod: &PodRequest, usage: &DeviceUsage) -> Result<(), String> {
    if !order_free(pod) {
        return allocate(pod, usage).map(drop);
    }
    let cards = &usage.devices().cards;
    for request in pod.containers.iter().flatten() {
        if request.nums as usize > cards.len() {
            return Err(NODE_INSUFFICIENT_DEVICE.into());
        }
        let mut reasons = Reasons::default();
        let mut passing = 0;
        for (card, used) in cards.iter().zip(usage.cards()).rev() {
            let verdict = match check_card_kind(card, pod) {
                Some(reason) => Err(reason),
                None => check_card_room(card, used, pod, request),
            };
            match verdict {
                Err(reason) => reasons.add(reason, 1),
                Ok(_) => passing += 1,
            }
            if passing == request.nums {
                break;
            }
        }
        if passing < request.nums {
            if passing > 0 {
                reasons.set(Reason::AllocatedCardsInsufficientRequest, passing as usize);
            }
            return Err(reasons.message(cards.len()));
        }
    }
    Ok(())
}

/// The cards HAMi gives each container of the pod on this node (init containers first,
/// an empty entry for a container that asks for none), or the reason it does not fit.
pub fn allocate(pod: &PodRequest, usage: &DeviceUsage) -> Result<Vec<ContainerCards>, String> {
    let cards = &usage.devices().cards;
    let mut out = Vec::with_capacity(pod.containers.len());
    for request in &pod.containers[..pod.init_containers] {
        out.push(match request {
            // Each init container runs alone, on the node as it is.
            Some(request) => fit_container(cards, &mut Scratch::new(usage), pod, request)?,
            None => ContainerCards::new(),
        });
    }
    let mut scratch = Scratch::new(usage);
    for request in &pod.containers[pod.init_containers..] {
        out.push(match request {
            Some(request) => fit_container(cards, &mut scratch, pod, request)?,
            None => ContainerCards::new(),
        });
    }
    Ok(out)
}

/// Whether the cards an earlier decision wrote on the pod (`assignment`, HAMi's
/// `vgpu-devices-allocated`) still pass HAMi's per-card checks on the node as it is now,
/// without the pod: the checks `walk` made when it chose them (health, cordon, type, uuid,
/// shares, the mutex policy, memory, compute, a whole card's exclusivity, exhausted
/// compute units), card by card, with the usage growing as the regular containers take
/// their cards and each init container seeing the node as it is. `Err` names the card and
/// HAMi's reason. For a binder that checks a decision against a state other schedulers'
/// binds have changed since.
pub fn assigned_cards_fit(
    pod: &PodRequest,
    usage: &DeviceUsage,
    assignment: &str,
) -> Result<(), String> {
    let cards = &usage.devices().cards;
    let mut regular = Scratch::new(usage);
    let mut verdict = Ok(());
    let decoded =
        gantry_api::gpu::for_each_assigned_card(assignment, |index, uuid, memory, cores| {
            if verdict.is_err() {
                return;
            }
            let Some(position) = usage.devices().position(uuid) else {
                verdict = Err(format!(
                    "GPU card {uuid} is no longer registered on the node"
                ));
                return;
            };
            let Some(Some(request)) = pod.containers.get(index) else {
                verdict = Err(format!(
                    "GPU card {uuid} is written for container {index}, which asks for no card"
                ));
                return;
            };
            let card = &cards[position];
            let init = index < pod.init_containers;
            let used = if init {
                usage.cards()[position]
            } else {
                regular.used[position]
            };
            if let Some(reason) = check_card_kind(card, pod) {
                verdict = Err(format!("GPU card {uuid}: {}", reason.name()));
                return;
            }
            if let Err(reason) = check_card_room(card, &used, pod, request) {
                verdict = Err(format!("GPU card {uuid}: {}", reason.name()));
                return;
            }
            if !init {
                let used = &mut regular.used[position];
                used.used += 1;
                used.memory_mib = used.memory_mib.saturating_add(i64::from(memory));
                used.cores = used.cores.saturating_add(i64::from(cores));
            }
        });
    decoded?;
    verdict
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use gantry_api::gpu::{self, NodeDevices};

    use super::*;
    use crate::plugins::gpu_share::policy::{GpuPolicy, NodePolicy, Weights};

    use crate::plugins::gpu_share::request::NO_PERCENTAGE;

    /// A card as HAMi's tests write `DeviceUsage{...}`: id, count, total memory, total
    /// cores, numa, health.
    pub(crate) fn card(
        id: &str,
        count: i32,
        memory: i32,
        cores: i32,
        numa: i32,
        health: bool,
    ) -> Card {
        Card {
            id: Arc::from(id),
            index: 0,
            count,
            memory_mib: memory,
            cores,
            card_type: Arc::from(gpu::DEVICE_TYPE),
            type_upper: Arc::from(gpu::DEVICE_TYPE),
            numa,
            mode: Arc::from("hami-core"),
            health,
            cordoned: false,
            pair_scores: Vec::new(),
        }
    }

    pub(crate) fn pod(policy: &str) -> PodRequest {
        PodRequest {
            containers: SmallVec::new(),
            init_containers: 0,
            gpu_policy: GpuPolicy::new(policy, false),
            node_policy: NodePolicy::Binpack,
            weights: Weights::default(),
            numa_bind: false,
            use_types: Vec::new(),
            nouse_types: Vec::new(),
            use_uuids: None,
            nouse_uuids: None,
            vgpu_mode: None,
            needs_hami: true,
        }
    }

    pub(crate) fn req(
        nums: i32,
        memory_mib: i32,
        memory_percentage: i32,
        cores: i32,
    ) -> CardRequest {
        CardRequest {
            nums,
            memory_mib,
            memory_percentage,
            cores,
        }
    }

    /// A node of `cards` with usage (used, memory, cores) per card.
    pub(crate) fn usage(cards: Vec<Card>, used: &[(i32, i32, i32)]) -> DeviceUsage {
        let mut cards = cards;
        for (i, c) in cards.iter_mut().enumerate() {
            c.index = i as u32;
        }
        let devices = Arc::new(NodeDevices { cards });
        let mut usage = DeviceUsage::new(devices);
        if !used.is_empty() {
            usage = usage_with(usage, used);
        }
        usage
    }

    /// Usage set through real pods, as the cache would count them.
    fn usage_with(usage: DeviceUsage, used: &[(i32, i32, i32)]) -> DeviceUsage {
        let mut info = gantry_cache::NodeInfo::default();
        let mut node = gantry_api::Node::new("n", gantry_api::Resources::default());
        node.gpus = Some(usage.devices().clone());
        info.set_node(Arc::new(node));
        for (i, (slots, memory, cores)) in used.iter().enumerate() {
            let id = &usage.devices().cards[i].id;
            for s in 0..*slots {
                // The first share carries the memory and compute.
                let (m, c) = if s == 0 { (*memory, *cores) } else { (0, 0) };
                let mut p = gantry_api::Pod::new("ns", &format!("u-{i}-{s}")).on_node("n");
                p.annotations = [
                    (gpu::ASSIGNED_NODE, "n".to_string()),
                    (gpu::DEVICES_ALLOCATED, format!("{id},NVIDIA,{m},{c}:;")),
                ]
                .iter()
                .map(|(k, v)| (Arc::from(*k), Arc::from(v.as_str())))
                .collect();
                info.add_pod(Arc::new(p));
            }
        }
        info.gpus().unwrap().clone()
    }

    /// HAMi's `Fit` for one container on the cards in their listed order (HAMi's tests
    /// call Fit directly on their list, unsorted).
    fn fit<'u>(p: &PodRequest, u: &'u DeviceUsage, r: CardRequest) -> Result<Vec<&'u str>, String> {
        let cards = &u.devices().cards;
        let given = walk(cards, &mut Scratch::new(u), p, &r)?;
        Ok(given.iter().map(|g| &*cards[g.card].id).collect())
    }

    #[test]
    fn hamis_fit_table() {
        // HAMi's TestDevices_Fit (pkg/device/nvidia/device_test.go), case by case.
        let c = |id, count, memory, cores, health| card(id, count, memory, cores, 0, health);
        let p = pod("spread");
        let two = usage(
            vec![
                c("dev-0", 100, 128, 100, true),
                c("dev-1", 100, 128, 100, true),
            ],
            &[],
        );
        assert_eq!(
            fit(&p, &two, req(1, 64, 0, 50)),
            Ok(vec!["dev-1"]),
            "fit success"
        );
        let one = |memory, used: &[(i32, i32, i32)]| {
            usage(vec![c("dev-0", 100, memory, 100, true)], used)
        };
        assert_eq!(
            fit(&p, &one(128, &[]), req(1, 512, 0, 50)),
            Err("1/1 CardInsufficientMemory".into())
        );
        assert_eq!(
            fit(&p, &one(1024, &[(1, 0, 100)]), req(1, 512, 0, 50)),
            Err("1/1 CardInsufficientCore".into())
        );
        let mut uuid = p.clone();
        uuid.use_uuids = Some(vec!["dev-0".into()]);
        let dev1 = usage(vec![c("dev-1", 100, 1280, 100, true)], &[]);
        assert_eq!(
            fit(&uuid, &dev1, req(2, 512, 0, 50)),
            Err("1/1 CardUuidMismatch".into())
        );
        let mut nouse = p.clone();
        nouse.nouse_uuids = Some(vec!["dev-0".into()]);
        assert_eq!(
            fit(&nouse, &one(1280, &[]), req(2, 512, 0, 50)),
            Err("1/1 CardUuidMismatch".into())
        );
        let full = usage(vec![c("dev-0", 1, 1280, 100, true)], &[(1, 0, 0)]);
        assert_eq!(
            fit(&p, &full, req(1, 512, 0, 50)),
            Err("1/1 CardTimeSlicingExhausted".into())
        );
        assert_eq!(
            fit(&p, &one(1280, &[]), req(1, 512, 0, 120)),
            Ok(vec!["dev-0"]),
            "fit success: but core limit can't exceed 100"
        );
        assert_eq!(
            fit(&p, &one(1280, &[(20, 0, 0)]), req(1, 512, 0, 100)),
            Err("1/1 ExclusiveDeviceAllocateConflict".into())
        );
        assert_eq!(
            fit(&p, &one(1280, &[(20, 0, 100)]), req(1, 512, 0, 0)),
            Err("1/1 CardComputeUnitsExhausted".into())
        );
        assert_eq!(
            fit(&p, &one(1280, &[(20, 0, 10)]), req(2, 512, 0, 20)),
            Err("1/1 AllocatedCardsInsufficientRequest".into())
        );
        let twin = usage(
            vec![
                c("dev-0", 100, 1280, 100, true),
                c("dev-1", 100, 1280, 100, true),
            ],
            &[],
        );
        assert_eq!(
            fit(&p, &twin, req(3, 512, 0, 20)),
            Err("2/2 AllocatedCardsInsufficientRequest".into()),
            "partial allocation"
        );
        let mut three = p.clone();
        three.containers.push(Some(req(3, 512, 0, 20)));
        assert_eq!(
            allocate(&three, &twin).unwrap_err(),
            NODE_INSUFFICIENT_DEVICE,
            "HAMi's fitInDevices refuses more cards than the node has before Fit"
        );
        assert_eq!(
            fit(&p, &one(1280, &[(20, 0, 10)]), req(1, 0, 10, 20)),
            Ok(vec!["dev-0"]),
            "memory percentage"
        );
        let sick = usage(vec![c("dev-0", 100, 1280, 100, false)], &[]);
        assert_eq!(
            fit(&p, &sick, req(1, 0, 10, 20)),
            Err("1/1 CardNotHealth".into())
        );
    }

    #[test]
    fn cordoned_cards_are_skipped() {
        // HAMi's TestFit_DeviceCordon.
        let p = pod("spread");
        let mut cards = vec![
            card("dev-0", 100, 128, 100, 0, true),
            card("dev-1", 100, 128, 100, 0, true),
        ];
        cards[1].cordoned = true;
        let u = usage(cards.clone(), &[]);
        assert_eq!(
            fit(&p, &u, req(1, 64, NO_PERCENTAGE, 50)),
            Ok(vec!["dev-0"])
        );
        cards[0].cordoned = true;
        let u = usage(cards, &[]);
        assert_eq!(
            fit(&p, &u, req(1, 64, NO_PERCENTAGE, 50)),
            Err("2/2 CardCordoned".into())
        );
    }

    #[test]
    fn numa_binding_restarts_on_each_numa_node() {
        // HAMi's TestFit_NumaSwitching: walked dev-2 (numa 0), dev-1, dev-0 (numa 1).
        let mut p = pod("spread");
        p.numa_bind = true;
        let u = usage(
            vec![
                card("dev-0", 10, 8192, 100, 1, true),
                card("dev-1", 10, 8192, 100, 1, true),
                card("dev-2", 10, 8192, 100, 0, true),
            ],
            &[],
        );
        assert_eq!(
            fit(&p, &u, req(2, 100, NO_PERCENTAGE, 10)),
            Ok(vec!["dev-1", "dev-0"])
        );
        let three = req(3, 100, NO_PERCENTAGE, 10);
        assert_eq!(
            fit(&p, &u, three),
            Err("2/3 AllocatedCardsInsufficientRequest, 1/3 NumaNotFit".into())
        );
    }

    #[test]
    fn mutex_takes_idle_cards_only() {
        // HAMi's TestFit_MutexPolicy.
        let p = pod("mutex");
        let u = usage(
            vec![
                card("used", 10, 8192, 100, 0, true),
                card("idle", 10, 8192, 100, 0, true),
            ],
            &[(1, 0, 0)],
        );
        assert_eq!(
            fit(&p, &u, req(1, 100, NO_PERCENTAGE, 10)),
            Ok(vec!["idle"])
        );
        assert!(fit(&p, &u, req(2, 100, NO_PERCENTAGE, 10)).is_err());
    }

    #[test]
    fn compute_above_a_whole_card_is_clamped_to_it() {
        // HAMi's Fit ("core limit can't exceed 100"; its TestFit_CoresValidation of
        // earlier releases refused such requests): the container gets the whole card's
        // compute, so a card with any compute used refuses it, and the clamped 100 asks
        // for the card alone.
        let p = pod("spread");
        let idle = usage(vec![card("GPU-1", 10, 8000, 100, 0, true)], &[]);
        for cores in [0, 50, 100, 101, 150, i32::MAX] {
            assert!(
                fit(&p, &idle, req(1, 1000, NO_PERCENTAGE, cores)).is_ok(),
                "{cores}"
            );
        }
        let some_used = usage(vec![card("GPU-1", 10, 8000, 100, 0, true)], &[(1, 0, 10)]);
        assert_eq!(
            fit(&p, &some_used, req(1, 1000, NO_PERCENTAGE, 150)),
            Err("1/1 CardInsufficientCore".into())
        );
        let shared = usage(vec![card("GPU-1", 10, 8000, 100, 0, true)], &[(1, 0, 0)]);
        assert_eq!(
            fit(&p, &shared, req(1, 1000, NO_PERCENTAGE, 150)),
            Err("1/1 ExclusiveDeviceAllocateConflict".into())
        );
        assert_eq!(req(1, 1000, NO_PERCENTAGE, 150).granted_cores(), 100);
    }

    /// The binder's re-check of the cards written on a pod runs the Filter's card rules on
    /// the node's usage now: (case, policy, usage of GPU-1 as (pods, memory, cores), the
    /// container's request, the written assignment, the verdict).
    #[test]
    fn the_written_cards_are_checked_by_every_card_rule() {
        let written = "GPU-1,NVIDIA,1000,30:;";
        type Case<'a> = (
            &'a str,
            &'a str,
            (i32, i32, i32),
            CardRequest,
            &'a str,
            Result<(), &'a str>,
        );
        let cases: [Case; 8] = [
            (
                "fits",
                "spread",
                (1, 1000, 30),
                req(1, 1000, NO_PERCENTAGE, 30),
                written,
                Ok(()),
            ),
            (
                "memory taken meanwhile",
                "spread",
                (1, 7500, 0),
                req(1, 1000, NO_PERCENTAGE, 30),
                written,
                Err("GPU card GPU-1: CardInsufficientMemory"),
            ),
            (
                "compute taken meanwhile",
                "spread",
                (1, 0, 80),
                req(1, 1000, NO_PERCENTAGE, 30),
                written,
                Err("GPU card GPU-1: CardInsufficientCore"),
            ),
            (
                "the mutex policy, once a pod uses the card",
                "mutex",
                (1, 0, 0),
                req(1, 1000, NO_PERCENTAGE, 30),
                written,
                Err("GPU card GPU-1: ExclusiveDeviceAllocateConflict"),
            ),
            (
                "a whole card's compute, once a pod uses it",
                "spread",
                (1, 0, 0),
                req(1, 1000, NO_PERCENTAGE, 100),
                "GPU-1,NVIDIA,1000,100:;",
                Err("GPU card GPU-1: ExclusiveDeviceAllocateConflict"),
            ),
            (
                "no compute asked of a card whose compute is gone",
                "spread",
                (1, 0, 100),
                req(1, 1000, NO_PERCENTAGE, 0),
                "GPU-1,NVIDIA,1000,0:;",
                Err("GPU card GPU-1: CardComputeUnitsExhausted"),
            ),
            (
                "every time slice taken",
                "spread",
                (10, 0, 0),
                req(1, 1000, NO_PERCENTAGE, 0),
                "GPU-1,NVIDIA,1000,0:;",
                Err("GPU card GPU-1: CardTimeSlicingExhausted"),
            ),
            (
                "a card gone from the node",
                "spread",
                (0, 0, 0),
                req(1, 1000, NO_PERCENTAGE, 30),
                "GPU-9,NVIDIA,1000,30:;",
                Err("GPU card GPU-9 is no longer registered on the node"),
            ),
        ];
        for (case, policy, (pods, memory, cores), request, assignment, verdict) in cases {
            let mut p = pod(policy);
            p.containers.push(Some(request));
            let u = usage(
                vec![card("GPU-1", 10, 8000, 100, 0, true)],
                &[(pods, memory, cores)],
            );
            assert_eq!(
                assigned_cards_fit(&p, &u, assignment),
                verdict.map_err(String::from),
                "{case}"
            );
        }
    }

    /// HAMi's TestCheckUUID: (case, use list, no-use list, whether dev-0 may be used).
    #[test]
    fn use_and_no_use_lists_both_apply_trimmed() {
        let p = pod("spread");
        let list = super::super::request::uuid_list;
        let cases = [
            ("no annotations", None, None, true),
            ("use list names it", Some("dev-0,123"), None, true),
            ("use list does not", Some("1dev-0,123"), None, false),
            ("no-use list names it", None, Some("dev-0,123"), false),
            ("no-use list does not", None, Some("1dev-0,123"), true),
            ("in both lists", Some("dev-0,123"), Some("dev-0"), false),
            (
                "in use, not in no-use",
                Some("dev-0,123"),
                Some("456"),
                true,
            ),
            ("spaces around", Some(" dev-0 , 123 "), None, true),
            ("empty use list", Some(""), None, true),
            ("spaces-only use list", Some("   "), None, true),
            ("empty no-use list", None, Some(""), true),
        ];
        for (case, use_list, nouse_list, ok) in cases {
            let mut q = p.clone();
            q.use_uuids = list(use_list);
            q.nouse_uuids = list(nouse_list);
            let u = usage(vec![card("dev-0", 10, 8000, 100, 0, true)], &[]);
            assert_eq!(
                fit(&q, &u, req(1, 1000, NO_PERCENTAGE, 0)).is_ok(),
                ok,
                "{case}"
            );
        }
    }

    #[test]
    fn a_zero_percentage_books_the_whole_card() {
        // HAMi's TestZeroMemoryPercentageIsAccountedAsWholeCard: the request reads 100%.
        let p = pod("spread");
        let empty = usage(vec![card("dev-0", 10, 11264, 100, 0, true)], &[]);
        let mut pr = p.clone();
        pr.containers.push(Some(req(1, 0, 100, 0)));
        let given = allocate(&pr, &empty).unwrap();
        assert_eq!(given[0][0].memory_mib, 11264);
        let almost_full = usage(
            vec![card("dev-0", 10, 11264, 100, 0, true)],
            &[(1, 11260, 0)],
        );
        assert!(
            fits(&pr, &almost_full)
                .unwrap_err()
                .contains("CardInsufficientMemory")
        );
    }

    #[test]
    fn type_and_mode_annotations_match_substrings() {
        // HAMi's Test_checkType, TestCheckGPUtype_* and TestCheckType_AllocateMode.
        let mut a100 = card("x", 1, 1, 100, 0, true);
        a100.type_upper = Arc::from("NVIDIA A100");
        let mut p = pod("spread");
        p.use_types = vec!["A10".into()];
        assert_eq!(check_card_kind(&a100, &p), None, "A10 is part of A100");
        p.nouse_types = vec!["A100".into()];
        assert_eq!(check_card_kind(&a100, &p), Some(Reason::CardTypeMismatch));
        let mut v100 = a100.clone();
        v100.type_upper = Arc::from("NVIDIA-V100");
        let mut q = pod("spread");
        q.use_types = vec!["A100".into()];
        assert_eq!(check_card_kind(&v100, &q), Some(Reason::CardTypeMismatch));
        let mut m = pod("spread");
        m.vgpu_mode = Some("mps".into());
        assert_eq!(check_card_kind(&a100, &m), Some(Reason::CardTypeMismatch));
        m.vgpu_mode = Some("hami-core".into());
        assert_eq!(check_card_kind(&a100, &m), None);
    }

    #[test]
    fn the_order_free_count_agrees_with_the_full_walk() {
        // Every card state and request of a small grid: same verdict, same reason.
        let states = [
            (0, 0, 0),
            (3, 6000, 30),
            (9, 100, 100),
            (10, 0, 0),
            (1, 8000, 0),
        ];
        for a in states {
            for b in states {
                let u = usage(
                    vec![
                        card("a", 10, 8000, 100, 0, true),
                        card("b", 10, 8000, 100, 1, true),
                    ],
                    &[a, b],
                );
                for r in [
                    req(1, 2000, NO_PERCENTAGE, 10),
                    req(2, 0, 50, 0),
                    req(1, 0, 100, 100),
                    req(3, 1, NO_PERCENTAGE, 1),
                ] {
                    let mut p = pod("binpack");
                    p.containers.push(Some(r));
                    assert_eq!(
                        fits(&p, &u),
                        allocate(&p, &u).map(drop),
                        "{a:?} {b:?} {r:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn containers_take_cards_one_after_another_and_init_containers_alone() {
        let u = usage(
            vec![
                card("a", 10, 1000, 100, 0, true),
                card("b", 10, 1000, 100, 0, true),
            ],
            &[],
        );
        let mut p = pod("binpack");
        p.containers.push(Some(req(1, 600, NO_PERCENTAGE, 0)));
        p.containers.push(Some(req(1, 600, NO_PERCENTAGE, 0)));
        p.containers.push(Some(req(1, 600, NO_PERCENTAGE, 0)));
        p.init_containers = 1;
        let given = allocate(&p, &u).unwrap();
        // The init container and the first regular one each pick from the empty node;
        // the second regular one finds that card too full.
        assert_eq!(given.len(), 3);
        assert_eq!(given[0][0].card, given[1][0].card);
        assert_ne!(given[1][0].card, given[2][0].card);
        p.containers.push(Some(req(1, 600, NO_PERCENTAGE, 0)));
        assert_eq!(
            allocate(&p, &u).unwrap_err(),
            "2/2 CardInsufficientMemory",
            "a third regular container finds both cards taken"
        );
        assert_eq!(fits(&p, &u), allocate(&p, &u).map(drop));
    }
}
