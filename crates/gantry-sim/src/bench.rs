//! scheduler_perf's SchedulingBasic workload, run through the real scheduling and
//! binding cycles with the simulated API: nodes, then init pods, then the measured pods
//! whose throughput is the figure.

use std::sync::Arc;
use std::time::Instant;

use gantry_cache::Cache;
use gantry_cache::synthetic::default_node;
use gantry_framework::ApiObjects;
use gantry_framework::plugins::default_profile;
use gantry_scheduler::metrics::AttemptResult;
use gantry_scheduler::{Attempt, Scheduler};

use crate::SimulatedApi;

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
    let cache = Arc::new(Cache::new());
    for n in 0..nodes {
        cache.add_node(Arc::new(default_node(&format!("node-{n}"), n)));
    }
    let mut profile = default_profile("default-scheduler");
    profile.percentage_of_nodes_to_score = percentage;
    let mut scheduler = Scheduler::new(cache.clone(), vec![profile], ApiObjects::default(), 1);
    let mut api = SimulatedApi::new(cache);
    let pod = |name: String| {
        let container = gantry_api::Container::new("c", Some(100), Some(500 << 20));
        Arc::new(gantry_api::Pod::new("sched-0", &name).with_container(container))
    };
    let mut schedule = |p: Arc<gantry_api::Pod>| -> bool {
        match scheduler.schedule_one(&p) {
            Attempt::Scheduled { pod, mut state, .. } => {
                scheduler.bind(&pod, &mut state, &mut api).is_ok()
            }
            _ => false,
        }
    };
    for i in 0..init_pods {
        schedule(pod(format!("init-{i}")));
    }
    let mut latencies = Vec::with_capacity(measured_pods);
    let mut scheduled = 0;
    let start = Instant::now();
    for i in 0..measured_pods {
        let t = Instant::now();
        if schedule(pod(format!("measured-{i}"))) {
            scheduled += 1;
        }
        latencies.push(t.elapsed().as_micros() as u64);
    }
    let elapsed = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    let attempts = scheduler.metrics.attempts(AttemptResult::Scheduled)
        + scheduler.metrics.attempts(AttemptResult::Unschedulable)
        + scheduler.metrics.attempts(AttemptResult::Error);
    BasicMeasurement {
        nodes,
        measured_pods,
        scheduled,
        pods_per_sec: measured_pods as f64 / elapsed.max(1e-9),
        p50_us: at(0.5),
        p99_us: at(0.99),
        nodes_evaluated_per_pod: scheduler.nodes_evaluated as f64 / attempts.max(1) as f64,
    }
}
