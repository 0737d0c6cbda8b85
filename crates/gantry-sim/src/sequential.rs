//! The sequential procedure the parity scenarios were recorded with: submit pods one at a
//! time; each is bound, or found unschedulable and withdrawn (it holds nothing).

use std::sync::Arc;

use gantry_api::Pod;
use gantry_api::decode::ClusterObjects;
use gantry_cache::Cache;
use gantry_framework::ApiObjects;
use gantry_framework::Profile;
use gantry_scheduler::{Attempt, Binder, Scheduler};
use serde::Serialize;

use crate::SimulatedApi;

/// Where one pod went, in the format of the parity scenarios' `expected.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub pod: String,
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<String>,
}

pub struct SequentialRun {
    pub placements: Vec<Placement>,
    pub scheduler: Scheduler,
}

/// A preempting pod is retried at most this often before it is reported pending.
const MAX_ATTEMPTS: usize = 8;

/// Loads `cluster` (nodes, bound pods, namespaces, services) and schedules `pending` in
/// order, one at a time.
pub fn run_sequential(
    cluster: &ClusterObjects,
    pending: &[Pod],
    profiles: Vec<Profile>,
    seed: u64,
) -> Result<SequentialRun, String> {
    let cache = Arc::new(Cache::new());
    for node in &cluster.nodes {
        cache.add_node(Arc::new(node.clone()));
    }
    for pod in cluster.pods.iter().filter(|p| p.node_name.is_some()) {
        cache
            .add_pod(Arc::new(pod.clone()))
            .map_err(|e| e.to_string())?;
    }
    let objects = ApiObjects::new(&cluster.namespaces, &cluster.services);
    let mut scheduler = Scheduler::new(cache.clone(), profiles, objects, seed);
    let mut api = SimulatedApi::new(cache);
    let mut placements = Vec::with_capacity(pending.len());
    for pod in pending {
        placements.push(schedule_until_settled(
            &mut scheduler,
            &mut api,
            Arc::new(pod.clone()),
        ));
    }
    Ok(SequentialRun {
        placements,
        scheduler,
    })
}

fn schedule_until_settled(
    scheduler: &mut Scheduler,
    api: &mut SimulatedApi,
    mut pod: Arc<Pod>,
) -> Placement {
    let mut placement = Placement {
        pod: pod.key(),
        node: None,
        reason: None,
        evicted: Vec::new(),
    };
    if let Some(profile) = scheduler.profile_for(&pod) {
        for plugin in &profile.pre_enqueue {
            let status = plugin.pre_enqueue(&pod);
            if !status.is_success() {
                placement.reason = Some(status.message());
                return placement;
            }
        }
    }
    for _ in 0..MAX_ATTEMPTS {
        match scheduler.schedule_one(&pod) {
            Attempt::Scheduled {
                pod: assumed,
                node,
                mut state,
            } => match scheduler.bind(&assumed, &mut state, api) {
                Ok(()) => {
                    placement.node = Some(node.to_string());
                    return placement;
                }
                Err(e) => placement.reason = Some(format!("binding failed: {e}")),
            },
            Attempt::Unschedulable {
                fit_error,
                nominated: Some((node, victims)),
            } => {
                for victim in &victims {
                    if api.evict(victim).is_ok() {
                        placement.evicted.push(victim.key());
                    }
                }
                let mut retry = Pod::clone(&pod);
                retry.nominated_node_name = Some(node);
                pod = Arc::new(retry);
                placement.reason = Some(fit_error.to_string());
            }
            Attempt::Unschedulable {
                fit_error,
                nominated: None,
            } => {
                placement.reason = Some(fit_error.to_string());
                scheduler.clear_nomination(&pod);
                return placement;
            }
            Attempt::Error(message) => {
                placement.reason = Some(message);
                scheduler.clear_nomination(&pod);
                return placement;
            }
        }
    }
    scheduler.clear_nomination(&pod);
    placement
}
