//! The simulated API server: binds and deletes pods, and delivers the resulting watch
//! events to the scheduler's cache, as a real API server and informer would.

use std::sync::Arc;

use gantry_api::{Pod, Sym};
use gantry_cache::Cache;
use gantry_scheduler::Binder;

pub struct SimulatedApi {
    cache: Arc<Cache>,
    /// Pods deleted through the API (preemption victims), in order.
    pub evicted: Vec<Arc<Pod>>,
    pub binds: u64,
}

impl SimulatedApi {
    pub fn new(cache: Arc<Cache>) -> SimulatedApi {
        SimulatedApi {
            cache,
            evicted: Vec::new(),
            binds: 0,
        }
    }
}

impl Binder for SimulatedApi {
    fn bind(&mut self, pod: &Arc<Pod>, node: Sym) -> Result<(), String> {
        if pod.node_name != Some(node) {
            return Err(format!("pod {} is not assumed on node {node}", pod.key()));
        }
        self.binds += 1;
        // The watch event for the bound pod: confirms the assumed pod, or adds it.
        self.cache.add_pod(pod.clone()).map_err(|e| e.to_string())
    }

    fn evict(&mut self, victim: &Arc<Pod>) -> Result<(), String> {
        self.cache.remove_pod(victim).map_err(|e| e.to_string())?;
        self.evicted.push(victim.clone());
        Ok(())
    }
}
