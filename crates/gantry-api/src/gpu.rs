//! HAMi's GPU-sharing vocabulary (Project-HAMi/HAMi): the resources pods ask for, the
//! annotations its device plugin writes on nodes (the card inventory) and the ones its
//! scheduler writes on pods (the cards assigned), in HAMi's own encodings, so that a
//! cluster that runs HAMi can be dumped and simulated unchanged.

use std::sync::{Arc, LazyLock};

use serde::Deserialize;

use crate::Sym;

/// Whole cards per container.
pub const GPU_COUNT: &str = "nvidia.com/gpu";
/// MiB of card memory per card.
pub const GPU_MEMORY: &str = "nvidia.com/gpumem";
/// Share of each card's memory, in percent (instead of `nvidia.com/gpumem`).
pub const GPU_MEMORY_PERCENTAGE: &str = "nvidia.com/gpumem-percentage";
/// Share of each card's compute, in percent.
pub const GPU_CORES: &str = "nvidia.com/gpucores";
/// Task priority HAMi's in-container runtime reads; no scheduling effect.
pub const GPU_PRIORITY: &str = "nvidia.com/priority";

/// The JSON array of cards HAMi's device plugin writes on its node.
pub const REGISTER_ANNOTATION: &str = "hami.io/node-nvidia-register";
/// Topology pair scores between a node's cards (JSON), for `topology-aware`.
pub const PAIR_SCORE_ANNOTATION: &str = "hami.io/node-nvidia-score";
/// Comma-separated card UUIDs that take no new pods.
pub const CORDON_ANNOTATION: &str = "hami.io/device-cordon";

/// Pod steering annotations (comma-separated lists).
pub const USE_GPU_TYPE: &str = "nvidia.com/use-gputype";
pub const NOUSE_GPU_TYPE: &str = "nvidia.com/nouse-gputype";
pub const USE_GPU_UUID: &str = "nvidia.com/use-gpuuuid";
pub const NOUSE_GPU_UUID: &str = "nvidia.com/nouse-gpuuuid";
pub const NUMA_BIND: &str = "nvidia.com/numa-bind";
pub const VGPU_MODE: &str = "nvidia.com/vgpu-mode";
pub const GPU_SCHEDULER_POLICY: &str = "hami.io/gpu-scheduler-policy";
pub const NODE_SCHEDULER_POLICY: &str = "hami.io/node-scheduler-policy";
pub const DEVICE_SCORING_WEIGHTS: &str = "hami.io/device-scoring-weights";

/// What HAMi's scheduler writes on a pod it placed.
pub const ASSIGNED_NODE: &str = "hami.io/vgpu-node";
pub const ASSIGNED_TIME: &str = "hami.io/vgpu-time";
pub const DEVICES_TO_ALLOCATE: &str = "hami.io/vgpu-devices-to-allocate";
pub const DEVICES_ALLOCATED: &str = "hami.io/vgpu-devices-allocated";
pub const BIND_PHASE: &str = "hami.io/bind-phase";
pub const BIND_TIME: &str = "hami.io/bind-time";
/// The bind phase HAMi's scheduler writes; the node's device plugin later moves it on.
pub const BIND_PHASE_ALLOCATING: &str = "allocating";

/// The device type HAMi writes in assignments for NVIDIA cards.
pub const DEVICE_TYPE: &str = "NVIDIA";

/// The resources a HAMi deployment's scheduler configuration marks `ignoredByScheduler`
/// and that Gantry's NodeResourcesFit therefore skips. `nvidia.com/gpu` is left out on
/// purpose: HAMi nodes report cards × split as allocatable, so counting it never refuses
/// what HAMi accepts, and clusters with NVIDIA's own device plugin keep kube-scheduler's
/// accounting (see docs/upstream-rules.md).
pub fn ignored_by_scheduler(resource: Sym) -> bool {
    static IGNORED: LazyLock<[Sym; 4]> = LazyLock::new(|| {
        [GPU_MEMORY, GPU_MEMORY_PERCENTAGE, GPU_CORES, GPU_PRIORITY].map(Sym::new)
    });
    IGNORED.contains(&resource)
}

/// One card of a node, as HAMi's device plugin registered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    pub id: Arc<str>,
    pub index: u32,
    /// Pods that may share the card (`deviceSplitCount`).
    pub count: i32,
    pub memory_mib: i32,
    /// Compute, 100 for a whole card.
    pub cores: i32,
    pub card_type: Arc<str>,
    /// `card_type` upper-cased, as HAMi compares types.
    pub type_upper: Arc<str>,
    pub numa: i32,
    /// `hami-core`, `mig` or `mps`.
    pub mode: Arc<str>,
    pub health: bool,
    /// Listed in `hami.io/device-cordon`: pods already there stay, no new pod comes.
    pub cordoned: bool,
    /// Topology scores to other cards of the node, by UUID.
    pub pair_scores: Vec<(Arc<str>, i64)>,
}

impl Card {
    /// The pair score to the card `other`; 0 when the node published none.
    pub fn pair_score(&self, other: &str) -> i64 {
        self.pair_scores
            .iter()
            .find(|(id, _)| &**id == other)
            .map_or(0, |(_, s)| *s)
    }
}

/// The NVIDIA cards HAMi registered on a node, in the order its annotation lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDevices {
    pub cards: Vec<Card>,
}

impl NodeDevices {
    /// The position of the card `uuid` (a MIG instance's `uuid[t-i]` names its card).
    pub fn position(&self, uuid: &str) -> Option<usize> {
        let card = uuid.split_once('[').map_or(uuid, |(card, _)| card);
        self.cards.iter().position(|c| &*c.id == card)
    }
}

/// HAMi's `DeviceInfo`, as the device plugin marshals it.
#[derive(Deserialize)]
struct RegisteredCard {
    #[serde(default)]
    id: String,
    #[serde(default)]
    index: u32,
    #[serde(default)]
    count: i32,
    #[serde(default)]
    devmem: i32,
    #[serde(default)]
    devcore: i32,
    #[serde(default, rename = "type")]
    card_type: String,
    #[serde(default)]
    numa: i32,
    #[serde(default)]
    mode: String,
    /// Absent means unhealthy, as Go's zero value.
    #[serde(default)]
    health: bool,
}

#[derive(Deserialize)]
struct PairScore {
    #[serde(default)]
    uuid: String,
    #[serde(default)]
    score: std::collections::BTreeMap<String, i64>,
}

/// A node annotation HAMi could not decode: the annotation and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationError {
    pub annotation: &'static str,
    pub message: String,
}

/// Reads the cards of a node from its annotations, as HAMi's `GetNodeDevices` does. A
/// node without the register annotation, or with an empty list, has no shareable GPUs;
/// cards whose type does not name NVIDIA are not NVIDIA's to share.
pub fn parse_node_devices(
    annotations: &[(Arc<str>, Arc<str>)],
) -> Result<Option<NodeDevices>, AnnotationError> {
    let annotation = |key| crate::node::find_annotation(annotations, key);
    let Some(register) = annotation(REGISTER_ANNOTATION) else {
        return Ok(None);
    };
    let error = |annotation, e: serde_json::Error| AnnotationError {
        annotation,
        message: format!("not HAMi's JSON list of cards: {e}"),
    };
    let registered: Vec<RegisteredCard> =
        serde_json::from_str(register).map_err(|e| error(REGISTER_ANNOTATION, e))?;
    let pair_scores: Vec<PairScore> = match annotation(PAIR_SCORE_ANNOTATION) {
        Some(text) => serde_json::from_str(text).map_err(|e| error(PAIR_SCORE_ANNOTATION, e))?,
        None => Vec::new(),
    };
    let cordoned: Vec<&str> = annotation(CORDON_ANNOTATION)
        .into_iter()
        .flat_map(|list| list.split(','))
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .collect();
    let cards: Vec<Card> = registered
        .into_iter()
        .filter(|c| c.card_type.to_lowercase().contains("nvidia"))
        .map(|c| Card {
            pair_scores: pair_scores
                .iter()
                .find(|p| p.uuid == c.id)
                .map(|p| {
                    p.score
                        .iter()
                        .map(|(id, s)| (Arc::from(id.as_str()), *s))
                        .collect()
                })
                .unwrap_or_default(),
            cordoned: cordoned.contains(&c.id.as_str()),
            type_upper: Arc::from(c.card_type.to_uppercase()),
            id: Arc::from(c.id),
            index: c.index,
            count: c.count,
            memory_mib: c.devmem,
            cores: c.devcore,
            card_type: Arc::from(c.card_type),
            numa: c.numa,
            mode: Arc::from(c.mode),
            health: c.health,
        })
        .collect();
    // One id, one card: HAMi keeps usage by id, and a pod could be given the card twice.
    if let Some((i, card)) = cards
        .iter()
        .enumerate()
        .find(|(i, c)| cards[..*i].iter().any(|earlier| earlier.id == c.id))
    {
        return Err(AnnotationError {
            annotation: REGISTER_ANNOTATION,
            message: format!(
                "card {:?} is registered twice (entry {i} repeats an earlier id)",
                &*card.id
            ),
        });
    }
    Ok((!cards.is_empty()).then_some(NodeDevices { cards }))
}

/// One card assigned to a container: HAMi's `ContainerDevice`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignedCard {
    pub uuid: Arc<str>,
    pub memory_mib: i32,
    pub cores: i32,
}

/// HAMi's `EncodePodSingleDevice`: `uuid,NVIDIA,usedmem,usedcores:` per card, `;` after
/// each container (init containers first, then the others, one entry each).
pub fn encode_assignment(containers: &[Vec<AssignedCard>]) -> String {
    let mut out = String::new();
    for cards in containers {
        for card in cards {
            out.push_str(&card.uuid);
            out.push(',');
            out.push_str(DEVICE_TYPE);
            out.push(',');
            out.push_str(&card.memory_mib.to_string());
            out.push(',');
            out.push_str(&card.cores.to_string());
            out.push(':');
        }
        out.push(';');
    }
    out
}

/// Visits the cards of an assignment as `(container index, uuid, memory MiB, cores)`, as
/// HAMi's `DecodePodDevices` reads them: containers stay aligned with the pod's (empty
/// entries count), numbers that do not parse count as 0. `Err` names a card entry with
/// fewer than four fields, which HAMi rejects as a whole.
pub fn for_each_assigned_card(
    encoded: &str,
    mut visit: impl FnMut(usize, &str, i32, i32),
) -> Result<(), String> {
    let encoded = encoded.strip_suffix(';').unwrap_or(encoded);
    if encoded.is_empty() {
        return Ok(());
    }
    for (container, cards) in encoded.split(';').enumerate() {
        for card in cards.split(':').filter(|c| c.contains(',')) {
            let mut fields = card.split(',');
            let (Some(uuid), Some(_type), Some(memory), Some(cores)) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(format!("card entry {card:?} has fewer than 4 fields"));
            };
            visit(
                container,
                uuid,
                memory.parse().unwrap_or(0),
                cores.parse().unwrap_or(0),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotated(pairs: &[(&str, &str)]) -> Vec<(Arc<str>, Arc<str>)> {
        pairs
            .iter()
            .map(|(k, v)| (Arc::from(*k), Arc::from(*v)))
            .collect()
    }

    fn devices(register: &str) -> Result<Option<NodeDevices>, AnnotationError> {
        parse_node_devices(&annotated(&[(REGISTER_ANNOTATION, register)]))
    }

    /// Two entries with one id would let a pod be given one card twice: refused.
    #[test]
    fn a_card_registered_twice_is_refused() {
        let card = r#"{"id":"GPU-0","count":5,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","numa":0,"health":true,"index":0}"#;
        let error = devices(&format!("[{card},{card}]")).unwrap_err();
        assert_eq!(error.annotation, REGISTER_ANNOTATION);
        assert!(
            error
                .message
                .contains(r#"card "GPU-0" is registered twice"#),
            "{}",
            error.message
        );
    }

    #[test]
    fn register_annotation_as_hamis_get_node_devices_reads_it() {
        // HAMi's Test_GetNodeDevices: one Tesla P4 with 5 slots.
        let d = devices(
            r#"[{"id":"GPU-0","count":5,"devmem":8192,"devcore":100,"type":"NVIDIA-Tesla P4","numa":0,"health":true,"index":0}]"#,
        )
        .unwrap()
        .unwrap();
        let card = &d.cards[0];
        assert_eq!(
            (&*card.id, card.count, card.memory_mib, card.cores),
            ("GPU-0", 5, 8192, 100)
        );
        assert_eq!(
            (&*card.card_type, card.numa, card.health),
            ("NVIDIA-Tesla P4", 0, true)
        );
        assert_eq!(&*card.type_upper, "NVIDIA-TESLA P4");
        // An empty list: "no gpu found on node"; no annotation: no GPUs either.
        assert_eq!(devices("[]").unwrap(), None);
        assert_eq!(parse_node_devices(&[]).unwrap(), None);
        assert!(devices("not-valid-json").is_err());
    }

    #[test]
    fn missing_health_is_unhealthy_and_foreign_cards_are_skipped() {
        let d = devices(r#"[{"id":"a","count":1,"devmem":1,"devcore":100,"type":"NVIDIA-V100"},{"id":"b","type":"MLU370","health":true}]"#)
            .unwrap()
            .unwrap();
        assert_eq!(d.cards.len(), 1);
        assert!(!d.cards[0].health);
    }

    #[test]
    fn pair_scores_and_cordons_attach_to_their_cards() {
        // HAMi's TestGetNodeDevices_PairScores and TestFit_DeviceCordon ("dev-1, ").
        let annotations = [
            (
                REGISTER_ANNOTATION,
                r#"[{"id":"GPU-0","count":1,"devmem":8192,"devcore":100,"type":"NVIDIA-V100","health":true},{"id":"GPU-1","count":1,"devmem":8192,"devcore":100,"type":"NVIDIA-V100","health":true}]"#,
            ),
            (
                PAIR_SCORE_ANNOTATION,
                r#"[{"uuid":"GPU-0","score":{"GPU-1":100}},{"uuid":"GPU-1","score":{"GPU-0":100}}]"#,
            ),
            (CORDON_ANNOTATION, "GPU-1, "),
        ];
        let d = parse_node_devices(&annotated(&annotations))
            .unwrap()
            .unwrap();
        assert_eq!(d.cards[0].pair_score("GPU-1"), 100);
        assert_eq!(d.cards[0].pair_score("GPU-9"), 0);
        assert!(!d.cards[0].cordoned && d.cards[1].cordoned);
        let bad = annotated(&[annotations[0], (PAIR_SCORE_ANNOTATION, "not-valid-json")]);
        assert_eq!(
            parse_node_devices(&bad).unwrap_err().annotation,
            PAIR_SCORE_ANNOTATION
        );
    }

    #[test]
    fn assignments_round_trip_in_hamis_encoding() {
        // HAMi's Test_PatchAnnotations: "nvidia-device-0,NVIDIA,2000,1:;".
        let card = |uuid: &str, memory_mib, cores| AssignedCard {
            uuid: Arc::from(uuid),
            memory_mib,
            cores,
        };
        assert_eq!(
            encode_assignment(&[vec![card("nvidia-device-0", 2000, 1)]]),
            "nvidia-device-0,NVIDIA,2000,1:;"
        );
        let encoded = encode_assignment(&[vec![], vec![card("a", 10, 1), card("b", 20, 2)]]);
        assert_eq!(encoded, ";a,NVIDIA,10,1:b,NVIDIA,20,2:;");
        let mut seen = Vec::new();
        for_each_assigned_card(&encoded, |c, uuid, m, k| {
            seen.push((c, uuid.to_string(), m, k))
        })
        .unwrap();
        assert_eq!(
            seen,
            [(1, "a".to_string(), 10, 1), (1, "b".to_string(), 20, 2)]
        );
        assert!(for_each_assigned_card("a,NVIDIA,1:;", |_, _, _, _| {}).is_err());
        assert!(for_each_assigned_card("", |_, _, _, _| unreachable!()).is_ok());
    }

    #[test]
    fn mig_instances_name_their_card() {
        let d = devices(r#"[{"id":"GPU-0","type":"NVIDIA-A100","health":true}]"#)
            .unwrap()
            .unwrap();
        assert_eq!(d.position("GPU-0[1-2]"), Some(0));
        assert_eq!(d.position("GPU-9"), None);
    }

    #[test]
    fn hamis_managed_resources_but_the_count_are_ignored() {
        assert!(ignored_by_scheduler(Sym::new(GPU_MEMORY)));
        assert!(ignored_by_scheduler(Sym::new(GPU_CORES)));
        assert!(!ignored_by_scheduler(Sym::new(GPU_COUNT)));
        assert!(!ignored_by_scheduler(Sym::new("cpu")));
    }
}
