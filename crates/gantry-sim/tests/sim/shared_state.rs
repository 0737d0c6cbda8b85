//! Every hard constraint holds under shared state: random small workloads with host ports,
//! required pod (anti-)affinity over hostname and zone, DoNotSchedule spread (maxSkew 1)
//! over zone and hostname, HAMi GPU cards (the mutex policy and whole-card compute
//! included), CSI volume limits and ReadWriteOncePod claims, scheduled by 1 to 8 instances
//! with 0 to 200 ms of event latency; at the end an independent checker of every hard
//! constraint over the bound state finds nothing.
//!
//! The checker is written from the Kubernetes (and HAMi) definitions over this file's own
//! model of the workload and the placements the simulation reports: it never calls
//! Gantry's plugins, decoders or caches. Where a constraint is enforced only when a pod
//! is placed (spread, the first pod of an affinity group), it checks what such placements
//! imply for the final state of a run without deletions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_framework::plugins::default_profile;
use gantry_sim::{BindLatency, Placement, SimEvent, SimOptions, Simulation};
use proptest::prelude::*;
use serde_json::{Value, json};

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";
const DRIVER: &str = "csi.example.com";
const NODE_MILLI_CPU: i64 = 4000;
const NODE_PODS: usize = 110;
/// Every card: shares (HAMi's split count), memory and compute.
const CARD_SHARES: usize = 3;
const CARD_MEMORY_MIB: i64 = 8000;
const CARD_CORES: i64 = 100;
/// Claims with the ReadWriteOncePod access mode that several pods name.
const SHARED_CLAIMS: usize = 2;
const GROUPS: u8 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Hostname,
    Zone,
}

impl Key {
    fn label(self) -> &'static str {
        match self {
            Key::Hostname => HOSTNAME,
            Key::Zone => ZONE,
        }
    }
}

#[derive(Debug, Clone)]
struct NodeSpec {
    zone: u8,
    /// HAMi-registered cards (0: none).
    cards: u8,
    /// CSI volumes of `DRIVER` the node can attach.
    volume_limit: u8,
}

#[derive(Debug, Clone)]
struct Gpu {
    memory_mib: i64,
    cores: i64,
    mutex: bool,
}

#[derive(Debug, Clone)]
enum Volume {
    /// A claim of its own, bound to a CSI volume.
    Own,
    /// One of the ReadWriteOncePod claims.
    Shared(usize),
}

#[derive(Debug, Clone)]
struct PodSpec {
    milli_cpu: i64,
    host_port: Option<u16>,
    /// Labelled `anti=<group>`; with the flag, also required anti-affinity to the group.
    anti: Option<(u8, Key, bool)>,
    /// Required affinity to `aff=<group>`; with the flag, labelled `aff=<group>` too.
    affinity: Option<(u8, Key, bool)>,
    /// Labelled `spread=<group>`, with the group's constraints: 0 zone, 1 hostname, 2 both.
    spread: Option<u8>,
    gpu: Option<Gpu>,
    volume: Option<Volume>,
    arrival_ms: u64,
}

/// The spread constraints of group `group`: 0 zone, 1 hostname, 2 both.
fn spread_keys(group: u8) -> Vec<Key> {
    match group {
        0 => vec![Key::Zone],
        1 => vec![Key::Hostname],
        _ => vec![Key::Zone, Key::Hostname],
    }
}

#[derive(Debug, Clone)]
struct Case {
    nodes: Vec<NodeSpec>,
    pods: Vec<PodSpec>,
    schedulers: u32,
    event_latency_ms: u64,
    /// `None`: the realistic log-normal.
    bind_latency_ms: Option<u64>,
    seed: u64,
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![Just(Key::Hostname), Just(Key::Zone)]
}

fn node_spec(zones: u8) -> impl Strategy<Value = NodeSpec> {
    (0..zones, prop_oneof![3 => Just(0u8), 2 => 1..=2u8], 1..=2u8).prop_map(
        |(zone, cards, volume_limit)| NodeSpec {
            zone,
            cards,
            volume_limit,
        },
    )
}

fn gpu() -> impl Strategy<Value = Gpu> {
    (
        prop_oneof![Just(1000i64), Just(3000), Just(5000)],
        prop_oneof![Just(0i64), Just(30), Just(50), Just(100)],
        prop::bool::weighted(0.3),
    )
        .prop_map(|(memory_mib, cores, mutex)| Gpu {
            memory_mib,
            cores,
            mutex,
        })
}

fn volume() -> impl Strategy<Value = Volume> {
    prop_oneof![
        2 => Just(Volume::Own),
        1 => (0..SHARED_CLAIMS).prop_map(Volume::Shared),
    ]
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        (2..=15i64).prop_map(|c| c * 100),
        prop::option::weighted(0.3, prop_oneof![Just(8080u16), Just(8081)]),
        prop::option::weighted(0.35, (0..GROUPS, key(), prop::bool::weighted(0.8))),
        prop::option::weighted(0.3, (0..GROUPS, key(), prop::bool::weighted(0.8))),
        prop::option::weighted(0.35, 0..3u8),
        prop::option::weighted(0.3, gpu()),
        prop::option::weighted(0.3, volume()),
        0..=300u64,
    )
        .prop_map(
            |(milli_cpu, host_port, anti, affinity, spread, gpu, volume, arrival_ms)| PodSpec {
                milli_cpu,
                host_port,
                anti,
                affinity,
                spread,
                gpu,
                volume,
                arrival_ms,
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    (2..=3u8)
        .prop_flat_map(|zones| {
            (
                Just(zones),
                prop::collection::vec(node_spec(zones), 2..=6),
                prop::collection::vec(pod_spec(), 4..=24),
                1..=8u32,
                prop_oneof![Just(0u64), 1..=200u64],
                prop::option::weighted(0.5, 0..=60u64),
                any::<u64>(),
            )
        })
        .prop_map(
            |(_zones, nodes, pods, schedulers, event_latency_ms, bind_latency_ms, seed)| Case {
                nodes,
                pods,
                schedulers,
                event_latency_ms,
                bind_latency_ms,
                seed,
            },
        )
}

// ---- the workload as Kubernetes objects ----------------------------------------------

fn node_name(i: usize) -> String {
    format!("n{i}")
}

fn zone_name(zone: u8) -> String {
    format!("zone-{zone}")
}

fn card_id(node: usize, card: usize) -> String {
    format!("GPU-{}-{card}", node_name(node))
}

fn pod_name(i: usize) -> String {
    format!("p{i}")
}

fn selector(label: &str, group: u8) -> Value {
    json!({"matchLabels": {label: format!("g{group}")}})
}

fn node_objects(i: usize, spec: &NodeSpec) -> Vec<Value> {
    let name = node_name(i);
    let mut allocatable = json!({"cpu": "4", "memory": "64Gi", "pods": NODE_PODS.to_string()});
    let mut annotations = json!({});
    if spec.cards > 0 {
        let cards: Vec<Value> = (0..spec.cards as usize)
            .map(|c| {
                json!({
                    "id": card_id(i, c), "index": c, "count": CARD_SHARES,
                    "devmem": CARD_MEMORY_MIB, "devcore": CARD_CORES, "type": "NVIDIA-L4",
                    "numa": 0, "mode": "hami-core", "health": true,
                })
            })
            .collect();
        annotations["hami.io/node-nvidia-register"] =
            Value::String(Value::Array(cards).to_string());
        allocatable["nvidia.com/gpu"] = json!((spec.cards as usize * CARD_SHARES).to_string());
    }
    vec![
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {HOSTNAME: name, ZONE: zone_name(spec.zone)},
                "annotations": annotations,
            },
            "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]},
        }),
        json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": name},
            "spec": {"drivers": [{"name": DRIVER, "nodeID": name, "allocatable": {"count": spec.volume_limit}}]},
        }),
    ]
}

/// A claim bound to a CSI volume of `DRIVER`.
fn claim_objects(claim: &str, access_mode: &str) -> Vec<Value> {
    let volume = format!("pv-{claim}");
    vec![
        json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": [access_mode],
                "csi": {"driver": DRIVER, "volumeHandle": volume},
                "claimRef": {"namespace": "default", "name": claim},
            },
            "status": {"phase": "Bound"},
        }),
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": "default"},
            "spec": {
                "accessModes": [access_mode],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": volume,
            },
            "status": {"phase": "Bound"},
        }),
    ]
}

fn claim_of(i: usize, volume: &Volume) -> String {
    match volume {
        Volume::Own => format!("own-{i}"),
        Volume::Shared(c) => format!("rwop-{c}"),
    }
}

fn pod_object(i: usize, spec: &PodSpec) -> Value {
    let mut labels = serde_json::Map::new();
    let mut annotations = serde_json::Map::new();
    let mut container = json!({
        "name": "c",
        "resources": {"requests": {"cpu": format!("{}m", spec.milli_cpu), "memory": "256Mi"}},
    });
    if let Some(port) = spec.host_port {
        container["ports"] = json!([{"containerPort": port, "hostPort": port, "protocol": "TCP"}]);
    }
    if let Some(gpu) = &spec.gpu {
        container["resources"]["limits"] = json!({
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": gpu.memory_mib.to_string(),
            "nvidia.com/gpucores": gpu.cores.to_string(),
        });
        if gpu.mutex {
            annotations.insert("hami.io/gpu-scheduler-policy".into(), json!("mutex"));
        }
    }
    let mut affinity = serde_json::Map::new();
    if let Some((group, key, with_term)) = spec.anti {
        labels.insert("anti".into(), json!(format!("g{group}")));
        if with_term {
            affinity.insert(
                "podAntiAffinity".into(),
                json!({"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector("anti", group), "topologyKey": key.label()}
                ]}),
            );
        }
    }
    if let Some((group, key, member)) = spec.affinity {
        if member {
            labels.insert("aff".into(), json!(format!("g{group}")));
        }
        affinity.insert(
            "podAffinity".into(),
            json!({"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector("aff", group), "topologyKey": key.label()}
            ]}),
        );
    }
    let mut pod_spec = json!({"containers": [container]});
    if !affinity.is_empty() {
        pod_spec["affinity"] = Value::Object(affinity);
    }
    if let Some(group) = spec.spread {
        labels.insert("spread".into(), json!(format!("g{group}")));
        let constraints: Vec<Value> = spread_keys(group)
            .into_iter()
            .map(|key| {
                json!({
                    "maxSkew": 1, "topologyKey": key.label(),
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": selector("spread", group),
                })
            })
            .collect();
        pod_spec["topologySpreadConstraints"] = Value::Array(constraints);
    }
    if let Some(volume) = &spec.volume {
        pod_spec["volumes"] =
            json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim_of(i, volume)}}]);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name(i), "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": pod_spec,
    })
}

fn manifests(case: &Case) -> String {
    let mut items = Vec::new();
    for (i, node) in case.nodes.iter().enumerate() {
        items.extend(node_objects(i, node));
    }
    for c in 0..SHARED_CLAIMS {
        items.extend(claim_objects(&format!("rwop-{c}"), "ReadWriteOncePod"));
    }
    for (i, pod) in case.pods.iter().enumerate() {
        if matches!(pod.volume, Some(Volume::Own)) {
            items.extend(claim_objects(&format!("own-{i}"), "ReadWriteOnce"));
        }
        items.push(pod_object(i, pod));
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// Runs the case; returns each pod's node (by pod index) and the placements.
fn run(case: &Case) -> Result<(Vec<Option<usize>>, Vec<Placement>), String> {
    let mut cluster =
        ClusterObjects::decode(&manifests(case), "case.json").map_err(|e| e.to_string())?;
    cluster.admit().map_err(|e| e.to_string())?;
    let pods = std::mem::take(&mut cluster.pods);
    let options = SimOptions {
        seed: case.seed,
        schedulers: case.schedulers,
        event_latency: Duration::from_millis(case.event_latency_ms),
        bind_latency: case.bind_latency_ms.map_or(BindLatency::REALISTIC, |ms| {
            BindLatency::Fixed(Duration::from_millis(ms))
        }),
        ..SimOptions::default()
    };
    let mut sim = Simulation::new(cluster, vec![default_profile("default-scheduler")], options)?;
    for (pod, spec) in pods.into_iter().zip(&case.pods) {
        sim.schedule(
            Duration::from_millis(spec.arrival_ms),
            SimEvent::CreatePod(Arc::new(pod)),
        );
    }
    sim.run().map_err(|e| e.to_string())?;
    sim.check_invariants()?;
    let placements = sim.placements().to_vec();
    let mut nodes = vec![None; case.pods.len()];
    for placement in &placements {
        let index: usize = placement.pod.name.trim_start_matches('p').parse().unwrap();
        nodes[index] = placement
            .node
            .as_deref()
            .map(|n| n.trim_start_matches('n').parse().unwrap());
    }
    Ok((nodes, placements))
}

// ---- the independent checker -----------------------------------------------------------

/// The value of the topology key on node `node`.
fn domain(case: &Case, node: usize, key: Key) -> usize {
    match key {
        Key::Hostname => node,
        Key::Zone => usize::from(case.nodes[node].zone),
    }
}

/// Every violation of a hard constraint in the bound state `on` (each pod's node).
fn violations(case: &Case, on: &[Option<usize>], placements: &[Placement]) -> Vec<String> {
    let mut out = Vec::new();
    let bound: Vec<(usize, usize)> = on
        .iter()
        .enumerate()
        .filter_map(|(p, n)| n.map(|n| (p, n)))
        .collect();
    let pods = &case.pods;

    // NodeResourcesFit: requests within allocatable.
    for n in 0..case.nodes.len() {
        let here: Vec<usize> = bound
            .iter()
            .filter(|(_, m)| *m == n)
            .map(|(p, _)| *p)
            .collect();
        let cpu: i64 = here.iter().map(|&p| pods[p].milli_cpu).sum();
        if cpu > NODE_MILLI_CPU || here.len() > NODE_PODS {
            out.push(format!(
                "node n{n} over-committed: {cpu}m cpu, {} pods",
                here.len()
            ));
        }
    }

    // NodePorts: one (protocol, host port) per node.
    for (i, &(p, n)) in bound.iter().enumerate() {
        for &(q, m) in &bound[i + 1..] {
            if n == m && pods[p].host_port.is_some() && pods[p].host_port == pods[q].host_port {
                out.push(format!(
                    "p{p} and p{q} both hold host port {:?} on n{n}",
                    pods[p].host_port
                ));
            }
        }
    }

    // Required anti-affinity: no pod the term selects in the pod's domain, whichever was
    // bound first (the incoming pod's terms and the existing pods' terms both count).
    for &(p, n) in &bound {
        let Some((group, key, true)) = pods[p].anti else {
            continue;
        };
        for &(q, m) in &bound {
            if q != p
                && pods[q].anti.is_some_and(|(g, _, _)| g == group)
                && domain(case, n, key) == domain(case, m, key)
            {
                out.push(format!(
                    "p{p} (anti-affinity to anti=g{group} over {}) shares a domain with p{q}",
                    key.label()
                ));
            }
        }
    }

    // Required affinity: a pod the term selects in the pod's domain. Only the first pod of
    // a group may do without, and only if it matches its own term (no pod the term
    // selected existed anywhere when it was placed; later ones all exist at the end).
    let matches_affinity = |q: usize, group: u8| {
        pods[q]
            .affinity
            .is_some_and(|(g, _, member)| g == group && member)
    };
    let mut lonely: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
    for &(p, n) in &bound {
        let Some((group, key, member)) = pods[p].affinity else {
            continue;
        };
        let partnered = bound.iter().any(|&(q, m)| {
            q != p && matches_affinity(q, group) && domain(case, n, key) == domain(case, m, key)
        });
        if !partnered {
            if !member {
                out.push(format!(
                    "p{p} (affinity to aff=g{group}) has no such pod in its domain"
                ));
            }
            lonely.entry(group).or_default().push(p);
        }
    }
    for (group, alone) in lonely {
        if alone.len() > 1 {
            out.push(format!(
                "pods {alone:?} of aff=g{group} each have no partner in their domain: only the first placed may"
            ));
        }
    }

    // PodTopologySpread, DoNotSchedule, maxSkew 1: every pod of a group carries the group's
    // constraints and matches them, so each placement went to a domain holding the fewest,
    // and the counts over all domains never differ by more than 1.
    for group in 0..3u8 {
        for key in spread_keys(group) {
            let domains: BTreeSet<usize> = (0..case.nodes.len())
                .map(|n| domain(case, n, key))
                .collect();
            let count = |d: usize| {
                bound
                    .iter()
                    .filter(|&&(p, n)| pods[p].spread == Some(group) && domain(case, n, key) == d)
                    .count()
            };
            let counts: Vec<usize> = domains.iter().map(|&d| count(d)).collect();
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            if max - min > 1 {
                out.push(format!(
                    "spread=g{group} over {}: counts {counts:?} differ by more than maxSkew 1",
                    key.label()
                ));
            }
        }
    }

    // HAMi cards: shares, memory and compute within the card; a pod taking all of a card's
    // compute holds it alone; a mutex pod takes only an idle card, so at most one per card.
    #[derive(Default)]
    struct CardUse {
        pods: Vec<usize>,
        shares: usize,
        memory: i64,
        cores: i64,
    }
    let mut cards: BTreeMap<String, CardUse> = BTreeMap::new();
    let by_name: BTreeMap<String, &Placement> =
        placements.iter().map(|p| (p.pod.to_string(), p)).collect();
    for &(p, n) in &bound {
        let Some(gpu) = &pods[p].gpu else { continue };
        let name = format!("default/{}", pod_name(p));
        let Some(assigned) = by_name[name.as_str()]
            .annotations
            .get("hami.io/vgpu-devices-allocated")
        else {
            out.push(format!("p{p} asks for a GPU share but holds no card"));
            continue;
        };
        for card in assigned.split([';', ':']).filter(|s| !s.is_empty()) {
            let fields: Vec<&str> = card.split(',').collect();
            let (id, memory, cores) = (
                fields[0],
                fields[2].parse::<i64>().unwrap(),
                fields[3].parse::<i64>().unwrap(),
            );
            if !(0..case.nodes[n].cards as usize).any(|c| card_id(n, c) == id) {
                out.push(format!("p{p} on n{n} holds card {id} of another node"));
            }
            if memory != gpu.memory_mib || cores != gpu.cores {
                out.push(format!(
                    "p{p} holds {memory} MiB, {cores} cores of {id}, asked {} and {}",
                    gpu.memory_mib, gpu.cores
                ));
            }
            let usage = cards.entry(id.to_string()).or_default();
            usage.pods.push(p);
            usage.shares += 1;
            usage.memory += memory;
            usage.cores += cores;
        }
    }
    for (id, usage) in &cards {
        if usage.shares > CARD_SHARES || usage.memory > CARD_MEMORY_MIB || usage.cores > CARD_CORES
        {
            out.push(format!(
                "card {id} holds {} shares, {} MiB, {} cores (pods {:?})",
                usage.shares, usage.memory, usage.cores, usage.pods
            ));
        }
        let whole = usage
            .pods
            .iter()
            .any(|&p| pods[p].gpu.as_ref().unwrap().cores == CARD_CORES);
        if whole && usage.pods.len() > 1 {
            out.push(format!(
                "card {id} is shared by {:?} though one takes all its compute",
                usage.pods
            ));
        }
        let mutex = usage
            .pods
            .iter()
            .filter(|&&p| pods[p].gpu.as_ref().unwrap().mutex)
            .count();
        if mutex > 1 {
            out.push(format!(
                "card {id} holds {mutex} mutex pods: {:?}",
                usage.pods
            ));
        }
    }

    // CSI volume limits: distinct claims of the driver on a node within its CSINode count.
    for (n, node) in case.nodes.iter().enumerate() {
        let claims: BTreeSet<String> = bound
            .iter()
            .filter(|(_, m)| *m == n)
            .filter_map(|&(p, _)| pods[p].volume.as_ref().map(|v| claim_of(p, v)))
            .collect();
        if claims.len() > usize::from(node.volume_limit) {
            out.push(format!(
                "n{n} attaches {} volumes of {DRIVER}, its limit is {}: {claims:?}",
                claims.len(),
                node.volume_limit
            ));
        }
    }

    // ReadWriteOncePod: one pod in the whole cluster uses the claim.
    for c in 0..SHARED_CLAIMS {
        let users: Vec<usize> = bound
            .iter()
            .filter(|&&(p, _)| matches!(pods[p].volume, Some(Volume::Shared(s)) if s == c))
            .map(|&(p, _)| p)
            .collect();
        if users.len() > 1 {
            out.push(format!(
                "ReadWriteOncePod claim rwop-{c} is used by {users:?}"
            ));
        }
    }
    out
}

/// Cases per run: 1200 take about 30 s in a debug build on two cores (each is a whole
/// simulation); `SHARED_STATE_CASES` sets another count.
fn cases() -> u32 {
    std::env::var("SHARED_STATE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1200)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 400,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_hard_constraint_is_broken_whatever_the_instances_and_latency(case in case()) {
        let (on, placements) = run(&case).map_err(TestCaseError::fail)?;
        let found = violations(&case, &on, &placements);
        prop_assert!(found.is_empty(), "{} instances, {} ms event latency: {found:#?}\nplacements: {on:?}", case.schedulers, case.event_latency_ms);
    }
}

/// The checker itself finds what it should: a hand-made state breaking each rule.
#[test]
fn the_checker_finds_each_kind_of_violation() {
    let node = |zone| NodeSpec {
        zone,
        cards: 1,
        volume_limit: 1,
    };
    let plain = PodSpec {
        milli_cpu: 100,
        host_port: None,
        anti: None,
        affinity: None,
        spread: None,
        gpu: None,
        volume: None,
        arrival_ms: 0,
    };
    let with = |f: &dyn Fn(&mut PodSpec)| {
        let mut p = plain.clone();
        f(&mut p);
        p
    };
    let case = |pods: Vec<PodSpec>| Case {
        nodes: vec![node(0), node(0), node(1)],
        pods,
        schedulers: 1,
        event_latency_ms: 0,
        bind_latency_ms: None,
        seed: 0,
    };
    let check = |pods: Vec<PodSpec>, on: &[Option<usize>]| violations(&case(pods), on, &[]);
    // Two pods on n0 and n1 (one zone), one on n2 (the other).
    let port = with(&|p| p.host_port = Some(8080));
    assert_eq!(
        check(vec![port.clone(), port.clone()], &[Some(0), Some(0)]).len(),
        1
    );
    assert!(check(vec![port.clone(), port], &[Some(0), Some(1)]).is_empty());
    let anti = with(&|p| p.anti = Some((0, Key::Zone, true)));
    assert!(!check(vec![anti.clone(), anti.clone()], &[Some(0), Some(1)]).is_empty());
    assert!(check(vec![anti.clone(), anti], &[Some(0), Some(2)]).is_empty());
    let first = with(&|p| p.affinity = Some((1, Key::Hostname, true)));
    assert!(
        check(vec![first.clone()], &[Some(0)]).is_empty(),
        "the first may be alone"
    );
    assert!(!check(vec![first.clone(), first.clone()], &[Some(0), Some(1)]).is_empty());
    assert!(check(vec![first.clone(), first], &[Some(1), Some(1)]).is_empty());
    let follower = with(&|p| p.affinity = Some((1, Key::Zone, false)));
    assert!(!check(vec![follower], &[Some(0)]).is_empty());
    let spread = with(&|p| p.spread = Some(0));
    let three = vec![spread.clone(), spread.clone(), spread];
    assert!(
        !check(three.clone(), &[Some(0), Some(1), None]).is_empty(),
        "2 in zone 0, 0 in zone 1"
    );
    assert!(check(three, &[Some(0), Some(2), Some(1)]).is_empty());
    let heavy = with(&|p| p.milli_cpu = 3000);
    assert!(!check(vec![heavy.clone(), heavy], &[Some(0), Some(0)]).is_empty());
    let volume = with(&|p| p.volume = Some(Volume::Own));
    assert!(!check(vec![volume.clone(), volume.clone()], &[Some(0), Some(0)]).is_empty());
    assert!(check(vec![volume.clone(), volume], &[Some(0), Some(1)]).is_empty());
    let rwop = with(&|p| p.volume = Some(Volume::Shared(0)));
    assert!(!check(vec![rwop.clone(), rwop], &[Some(0), Some(2)]).is_empty());
    // Cards, as the placements say which one each pod holds.
    let gpu = |cores, mutex| {
        with(&|p| {
            p.gpu = Some(Gpu {
                memory_mib: 1000,
                cores,
                mutex,
            })
        })
    };
    let on_card = |pod: usize, node: usize| Placement {
        pod: format!("default/p{pod}").as_str().into(),
        node: Some(node_name(node).as_str().into()),
        reason: None,
        evicted: Vec::new(),
        annotations: [(
            "hami.io/vgpu-devices-allocated".to_string(),
            format!(
                "{},NVIDIA,1000,{}:;",
                card_id(node, 0),
                if pod == 0 { 100 } else { 0 }
            ),
        )]
        .into(),
    };
    let gpu_check = |pods: Vec<PodSpec>| {
        let placements: Vec<Placement> = (0..pods.len()).map(|p| on_card(p, 0)).collect();
        let on = vec![Some(0); pods.len()];
        violations(&case(pods), &on, &placements)
    };
    assert!(
        !gpu_check(vec![gpu(100, false), gpu(0, false)]).is_empty(),
        "a whole card shared"
    );
    let mutex = |cores| gpu(cores, true);
    let found = gpu_check(vec![gpu(100, false), mutex(0), mutex(0)]);
    assert!(found.iter().any(|v| v.contains("mutex")), "{found:?}");
    assert!(gpu_check(vec![gpu(100, false)]).is_empty());
    let found = gpu_check(vec![
        gpu(30, false),
        gpu(0, false),
        gpu(0, false),
        gpu(0, false),
    ]);
    assert!(found.iter().any(|v| v.contains("shares")), "{found:?}");
}

/// Not a check: how many of the first `SURVEY` (default 1000) cases of proptest's
/// deterministic generator break a constraint, with 1 and with 2 to 8 instances, by kind.
/// `cargo test -p gantry-sim --test shared_state survey -- --ignored --nocapture`.
#[test]
#[ignore]
fn survey() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    const KINDS: [&str; 10] = [
        "over-committed",
        "host port",
        "anti-affinity",
        "partner",
        "spread",
        "mutex",
        "compute",
        "shares",
        "volumes of",
        "ReadWriteOncePod",
    ];
    let n: usize = std::env::var("SURVEY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut runner = TestRunner::deterministic();
    let (mut single, mut single_bad, mut multi, mut multi_bad) = (0, 0, 0, 0);
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let start = std::time::Instant::now();
    for _ in 0..n {
        let case = case().new_tree(&mut runner).unwrap().current();
        let (on, placements) = run(&case).unwrap();
        let found = violations(&case, &on, &placements);
        for v in &found {
            let kind = KINDS.into_iter().find(|k| v.contains(k)).unwrap_or("other");
            *kinds.entry(kind).or_default() += 1;
        }
        let bad = usize::from(!found.is_empty());
        if case.schedulers == 1 {
            (single, single_bad) = (single + 1, single_bad + bad);
        } else {
            (multi, multi_bad) = (multi + 1, multi_bad + bad);
        }
    }
    eprintln!(
        "{:.1} s: with 1 instance {single_bad} of {single} cases break a constraint, with 2-8 {multi_bad} of {multi}; violations by kind: {kinds:?}",
        start.elapsed().as_secs_f64()
    );
}
