//! The scenario file's format as serde reads it: node groups, workloads, arrivals,
//! timed events.

use serde::Deserialize;
use serde_json::Value;

use super::{devices, gpus};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ScenarioFile {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) priority_classes: Vec<PriorityClassSpec>,
    #[serde(default)]
    pub(super) device_classes: Vec<devices::DeviceClassSpec>,
    #[serde(default)]
    pub(super) node_groups: Vec<NodeGroup>,
    #[serde(default)]
    pub(super) workloads: Vec<Workload>,
    #[serde(default)]
    pub(super) events: Vec<TimedEvent>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PriorityClassSpec {
    pub(super) name: String,
    pub(super) value: i32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct NodeGroup {
    pub(super) name: String,
    pub(super) count: usize,
    #[serde(default)]
    pub(super) zones: Vec<String>,
    pub(super) allocatable: serde_json::Map<String, Value>,
    #[serde(default)]
    pub(super) labels: serde_json::Map<String, Value>,
    #[serde(default)]
    pub(super) taints: Vec<TaintSpec>,
    /// Shareable GPUs, registered as HAMi's device plugin registers them.
    #[serde(default)]
    pub(super) gpus: Option<gpus::GpuSpec>,
    /// DRA devices: each entry is one ResourceSlice per node.
    #[serde(default)]
    pub(super) devices: Vec<devices::DeviceSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct TaintSpec {
    pub(super) key: String,
    #[serde(default)]
    pub(super) value: String,
    pub(super) effect: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Workload {
    pub(super) name: String,
    #[serde(default = "default_namespace")]
    pub(super) namespace: String,
    pub(super) count: usize,
    #[serde(default)]
    pub(super) arrival: Arrival,
    /// DRA claims: one ResourceClaimTemplate each, named in every pod's
    /// `spec.resourceClaims`.
    #[serde(default)]
    pub(super) claims: Vec<devices::ClaimSpec>,
    /// A Pod manifest (metadata and spec); `kind` and the name are filled in.
    pub(super) template: Value,
}

pub(super) fn default_namespace() -> String {
    "default".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Arrival {
    /// When the first pod arrives (`0s`, `1m`, `250ms`).
    #[serde(default)]
    pub(super) start: Option<String>,
    /// Pods per unit of time (`100/s`, `30/m`); absent: all at `start`.
    #[serde(default)]
    pub(super) rate: Option<String>,
    /// Explicit arrival times, one per pod (instead of `start` and `rate`).
    #[serde(default)]
    pub(super) times: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct TimedEvent {
    pub(super) at: String,
    #[serde(default)]
    pub(super) add_nodes: Option<GroupCount>,
    #[serde(default)]
    pub(super) delete_nodes: Option<GroupCount>,
    #[serde(default)]
    pub(super) drain_nodes: Option<GroupCount>,
    #[serde(default)]
    pub(super) delete_pods: Option<WorkloadCount>,
    #[serde(default)]
    pub(super) scale: Option<WorkloadCount>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct GroupCount {
    pub(super) group: String,
    pub(super) count: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct WorkloadCount {
    pub(super) workload: String,
    pub(super) count: usize,
}
