//! scheduler_perf's SchedulingBasic workload, run through the real scheduling and
//! binding cycles with the simulated API: nodes, then init pods, then the measured pods
//! whose throughput is the figure.

use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use gantry_cache::synthetic::default_node;
use gantry_framework::plugins::default_profile;

use crate::{SimEvent, SimOptions, Simulation};

#[derive(Debug, Clone, Copy)]
pub struct BasicMeasurement {
    pub nodes: usize,
    pub measured_pods: usize,
    pub scheduled: usize,
    pub pods_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub nodes_evaluated_per_pod: f64,
}

/// `percentage`: percentageOfNodesToScore (`None` = upstream's adaptive default).
pub fn measure_basic(
    nodes: usize,
    init_pods: usize,
    measured_pods: usize,
    percentage: Option<u32>,
) -> BasicMeasurement {
    let mut cluster = ClusterObjects::default();
    cluster.nodes = (0..nodes)
        .map(|n| default_node(&format!("node-{n}"), n))
        .collect();
    let mut profile = default_profile("default-scheduler");
    profile.percentage_of_nodes_to_score = percentage;
    let mut sim = Simulation::new(&cluster, vec![profile], SimOptions::default())
        .expect("a synthetic cluster loads");
    let pod = |name: String| {
        let container = gantry_api::Container::new("c", Some(100), Some(500 << 20));
        gantry_api::Pod::new("sched-0", &name).with_container(container)
    };
    for i in 0..init_pods {
        sim.schedule(
            Duration::ZERO,
            SimEvent::CreatePod(std::sync::Arc::new(pod(format!("init-{i}")))),
        );
    }
    sim.run_until(Duration::ZERO);
    sim.clear_latencies();
    let evaluated_before = sim.scheduler.nodes_evaluated;
    let measure_from = Duration::from_secs(1);
    for i in 0..measured_pods {
        sim.schedule(
            measure_from,
            SimEvent::CreatePod(std::sync::Arc::new(pod(format!("measured-{i}")))),
        );
    }
    let summary = sim.run();
    let measured_attempts = summary.attempts.saturating_sub(init_pods as u64).max(1);
    BasicMeasurement {
        nodes,
        measured_pods,
        scheduled: summary.scheduled.saturating_sub(init_pods),
        pods_per_sec: measured_pods as f64 / summary.wall_s.max(1e-9),
        p50_us: summary.p50_us,
        p99_us: summary.p99_us,
        nodes_evaluated_per_pod: (sim.scheduler.nodes_evaluated - evaluated_before) as f64
            / measured_attempts as f64,
    }
}
