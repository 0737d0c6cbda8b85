//! GPU sharing end to end: a scenario's HAMi pool, the annotations each placed pod
//! carries, the summary's counts, reproducibility, and the card invariant.

use std::time::Duration;

use gantry_api::gpu;
use gantry_framework::plugins::default_profile;
use gantry_sim::scenario::Scenario;
use gantry_sim::{BindLatency, GpuReport, SimOptions, Simulation, Summary};

/// 2 nodes × 2 cards of 10 shares and 16 GiB; inference pods take 4 GiB and 25% of a
/// card (4 to a card by compute), a training job takes 2 whole cards.
const POOL: &str = r#"
nodeGroups:
- name: gpu
  count: 2
  allocatable: {cpu: "64", memory: 256Gi, pods: "110"}
  gpus: {count: 2, memory: 16Gi, type: NVIDIA-L4, split: 10}
workloads:
- name: train
  count: 1
  template:
    spec:
      containers: [{name: t, resources: {limits: {nvidia.com/gpu: "2"}}}]
- name: serve
  count: 9
  arrival: {start: 1s, rate: 100/s}
  template:
    spec:
      containers: [{name: s, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "4096", nvidia.com/gpucores: "25"}}}]
"#;

fn simulate(options: SimOptions) -> (Summary, Simulation) {
    let scenario = Scenario::parse(POOL, "pool.yaml").unwrap();
    let mut sim = Simulation::new(
        scenario.cluster.clone(),
        vec![default_profile("default-scheduler")],
        options,
    )
    .unwrap();
    scenario.schedule_into(&mut sim);
    (sim.run().unwrap(), sim)
}

#[test]
fn shared_cards_fill_and_every_placement_says_which_card() {
    let (summary, sim) = simulate(SimOptions::default());
    sim.check_invariants().unwrap();
    // The job takes one node's two cards; 8 inference pods fill the other node's cards
    // 4 to a card; the ninth fits nowhere.
    assert_eq!(
        (summary.scheduled, summary.unschedulable),
        (9, 1),
        "{summary:?}"
    );
    assert_eq!((summary.gpu_pods, summary.shared_cards), (9, 2));
    let train = sim
        .placements()
        .iter()
        .find(|p| p.pod == "default/train-0")
        .unwrap();
    let node = train.node.as_deref().unwrap();
    assert_eq!(
        train.annotations[gpu::DEVICES_ALLOCATED],
        format!("GPU-{node}-1,NVIDIA,16384,100:GPU-{node}-0,NVIDIA,16384,100:;")
    );
    assert_eq!(train.annotations[gpu::ASSIGNED_NODE], node);
    assert_eq!(train.annotations[gpu::BIND_PHASE], "allocating");
    for p in sim.placements().iter().filter(|p| p.node.is_some()) {
        assert!(
            p.annotations[gpu::DEVICES_TO_ALLOCATE].contains(",NVIDIA,"),
            "{p:?}"
        );
    }
    let pending = sim.placements().iter().find(|p| p.node.is_none()).unwrap();
    assert!(pending.annotations.is_empty());
    let reason = pending.reason.as_deref().unwrap();
    // Four 4 GiB pods fill a 16 GiB card; the job holds the other node's whole cards.
    assert!(
        reason.starts_with("0/2 nodes are available: 2 2/2 CardInsufficientMemory."),
        "{reason}"
    );
    let line = serde_json::to_string(train).unwrap();
    assert!(
        line.contains(r#""annotations":{"hami.io/bind-phase":"allocating""#),
        "{line}"
    );
}

#[test]
fn the_same_seed_gives_the_same_cards() {
    let run = || {
        let (_, sim) = simulate(SimOptions::default());
        sim.placements().to_vec()
    };
    assert_eq!(run(), run());
}

#[test]
fn without_assume_slow_binds_share_a_card_beyond_what_it_has() {
    let slow = |assume| SimOptions {
        assume,
        bind_latency: BindLatency::Fixed(Duration::from_millis(500)),
        ..SimOptions::default()
    };
    let (_, sim) = simulate(slow(true));
    sim.check_invariants().unwrap();
    assert_eq!(GpuReport::of(sim.cache()).overcommitted_cards, 0);
    let (_, sim) = simulate(slow(false));
    assert!(GpuReport::of(sim.cache()).overcommitted_cards > 0);
    let violation = sim.check_invariants().unwrap_err();
    assert!(
        violation.contains("GPU cards hold more than they have"),
        "{violation}"
    );
}

#[test]
fn a_failed_bind_writes_the_cards_again_on_the_next_attempt() {
    let options = SimOptions {
        bind_failure_rate: 0.5,
        seed: 3,
        ..SimOptions::default()
    };
    let (summary, sim) = simulate(options);
    assert!(summary.bind_failures > 0, "{summary:?}");
    sim.check_invariants().unwrap();
    for p in sim.placements().iter().filter(|p| p.node.is_some()) {
        let node = p.node.as_deref().unwrap();
        assert_eq!(p.annotations[gpu::ASSIGNED_NODE], node, "{p:?}");
        assert!(p.annotations[gpu::DEVICES_ALLOCATED].starts_with(&format!("GPU-{node}-")));
    }
}

/// Samples read the free GPU memory stranded on cards in use only when asked. Here the
/// job fills one node's two cards whole (nothing free there); the inference pods then
/// take 4 of 16 GiB each on the other node's cards, and its free memory can only be
/// stranded on a card in use or free on a card untouched: 28 GiB free with one pod on a
/// card is 12/28 stranded; 24 GiB with two pods on one card (8/24) or on two (24/24);
/// once every card is full nothing is free, and the share is not defined.
#[test]
fn samples_say_how_much_free_gpu_memory_is_stranded_on_cards_in_use() {
    let (_, sim) = simulate(SimOptions::default());
    assert!(sim.samples.iter().all(|s| s.gpu_memory_stranded.is_none()));
    let options = SimOptions {
        sample_gpus: true,
        ..SimOptions::default()
    };
    let (_, sim) = simulate(options);
    let shares: Vec<Option<f64>> = sim.samples.iter().map(|s| s.gpu_memory_stranded).collect();
    assert_eq!(*shares.last().unwrap(), None, "every card is full");
    assert!(
        shares.contains(&Some(0.0)),
        "the job alone strands nothing: {shares:?}"
    );
    assert!(shares.contains(&Some(12.0 / 28.0)), "{shares:?}");
    // HAMi spreads the second pod onto the other card: all 24 GiB free are stranded.
    assert!(shares.contains(&Some(1.0)), "{shares:?}");
}
