//! Scenario files: node groups, workloads that arrive over virtual time, and timed
//! cluster events, in a small YAML format (see the README). Pod templates are ordinary
//! Kubernetes Pod manifests, decoded like any other.
//!
//! ```yaml
//! nodeGroups:
//! - name: general
//!   count: 100
//!   zones: [zone-a, zone-b, zone-c]
//!   allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
//!   labels: {pool: general}
//!   taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
//! workloads:
//! - name: web
//!   count: 300
//!   arrival: {start: 0s, rate: 50/s}
//!   template:
//!     metadata: {labels: {app: web}}
//!     spec: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}
//! events:
//! - {at: 10s, deleteNodes: {group: general, count: 2}}
//! ```
//!
//! Node groups may carry HAMi GPUs (`gpus:`, see `scenario/gpus.rs`) and DRA devices
//! (`devices:`, with `deviceClasses` and workloads' `claims`, see `scenario/devices.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::{ClusterObjects, DecodeError, PriorityClass};
use gantry_api::dra::{DeviceClass, ResourceClaimTemplate, ResourceSlice, SliceNodes};
use gantry_api::{Gate, Node, Pod, Sym, TaintEffect};
use serde::Deserialize;
use serde_json::{Value, json};
use thiserror::Error;

use crate::{SimEvent, Simulation};

mod devices;
mod gpus;

#[derive(Debug, Error)]
pub struct ScenarioError {
    pub source_name: String,
    /// Field path, e.g. `workloads[1].arrival.rate`; empty for the file as a whole (its
    /// syntax).
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.field.as_str() {
            "" => write!(f, "{}: {}", self.source_name, self.message),
            field => write!(f, "{}: {field}: {}", self.source_name, self.message),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScenarioFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    priority_classes: Vec<PriorityClassSpec>,
    #[serde(default)]
    device_classes: Vec<devices::DeviceClassSpec>,
    #[serde(default)]
    node_groups: Vec<NodeGroup>,
    #[serde(default)]
    workloads: Vec<Workload>,
    #[serde(default)]
    events: Vec<TimedEvent>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PriorityClassSpec {
    name: String,
    value: i32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NodeGroup {
    name: String,
    count: usize,
    #[serde(default)]
    zones: Vec<String>,
    allocatable: serde_json::Map<String, Value>,
    #[serde(default)]
    labels: serde_json::Map<String, Value>,
    #[serde(default)]
    taints: Vec<TaintSpec>,
    /// Shareable GPUs, registered as HAMi's device plugin registers them.
    #[serde(default)]
    gpus: Option<gpus::GpuSpec>,
    /// DRA devices: each entry is one ResourceSlice per node.
    #[serde(default)]
    devices: Vec<devices::DeviceSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TaintSpec {
    key: String,
    #[serde(default)]
    value: String,
    effect: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Workload {
    name: String,
    #[serde(default = "default_namespace")]
    namespace: String,
    count: usize,
    #[serde(default)]
    arrival: Arrival,
    /// DRA claims: one ResourceClaimTemplate each, named in every pod's
    /// `spec.resourceClaims`.
    #[serde(default)]
    claims: Vec<devices::ClaimSpec>,
    /// A Pod manifest (metadata and spec); `kind` and the name are filled in.
    template: Value,
}

fn default_namespace() -> String {
    "default".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Arrival {
    /// When the first pod arrives (`0s`, `1m`, `250ms`).
    #[serde(default)]
    start: Option<String>,
    /// Pods per unit of time (`100/s`, `30/m`); absent: all at `start`.
    #[serde(default)]
    rate: Option<String>,
    /// Explicit arrival times, one per pod (instead of `start` and `rate`).
    #[serde(default)]
    times: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TimedEvent {
    at: String,
    #[serde(default)]
    add_nodes: Option<GroupCount>,
    #[serde(default)]
    delete_nodes: Option<GroupCount>,
    #[serde(default)]
    drain_nodes: Option<GroupCount>,
    #[serde(default)]
    delete_pods: Option<WorkloadCount>,
    #[serde(default)]
    scale: Option<WorkloadCount>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GroupCount {
    group: String,
    count: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WorkloadCount {
    workload: String,
    count: usize,
}

/// The longest duration a scenario may name (ten years): every virtual time stays far
/// from overflowing.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// The most nodes and pods one scenario may create, over all its groups, workloads and
/// events: many times the largest cluster Kubernetes supports (5,000 nodes, 150,000
/// pods), and a clear error before memory runs out.
pub const MAX_NODES: usize = 100_000;
pub const MAX_PODS: usize = 2_000_000;

/// A parsed scenario: the initial cluster, then timed events (pod arrivals included).
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub cluster: ClusterObjects,
    pub events: Vec<(Duration, SimEvent)>,
    /// The file's `events`, one line each, for marking them on plots.
    pub timeline: Vec<Mark>,
}

/// One of a scenario's events as a person reads it: `drain 20 nodes of general`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub at: Duration,
    pub what: String,
}

impl Scenario {
    /// A scenario as the newest release's API server admits its pods.
    pub fn parse(text: &str, source_name: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse_for(text, source_name, gantry_api::Release::default())
    }

    /// A scenario whose pods go through `release`'s API server.
    pub fn parse_for(
        text: &str,
        source_name: &str,
        release: gantry_api::Release,
    ) -> Result<Scenario, ScenarioError> {
        let err = |field: String, message: String| ScenarioError {
            source_name: source_name.to_string(),
            field,
            message,
        };
        let value =
            gantry_api::decode::parse_yaml_value(text).map_err(|e| err(String::new(), e))?;
        let file: ScenarioFile = serde_path_to_error::deserialize(value)
            .map_err(|e| err(e.path().to_string(), e.inner().to_string()))?;
        Builder {
            file: &file,
            source_name,
            release,
            err: &err,
            nodes: std::cell::Cell::new(0),
            pods: std::cell::Cell::new(0),
            first_pods: std::cell::RefCell::default(),
        }
        .build()
    }

    /// Puts the scenario's events on the simulation's clock.
    pub fn schedule_into(&self, sim: &mut Simulation) {
        for (at, event) in &self.events {
            sim.schedule(*at, event.clone());
        }
    }
}

struct Builder<'a, E: Fn(String, String) -> ScenarioError> {
    file: &'a ScenarioFile,
    source_name: &'a str,
    release: gantry_api::Release,
    err: &'a E,
    /// Nodes and pods created so far, against `MAX_NODES` and `MAX_PODS`.
    nodes: std::cell::Cell<usize>,
    pods: std::cell::Cell<usize>,
    /// Each workload's first pod, decoded from its template: the others are its replicas,
    /// sharing the template as a controller's pods do.
    first_pods: std::cell::RefCell<HashMap<usize, Pod>>,
}

impl<E: Fn(String, String) -> ScenarioError> Builder<'_, E> {
    fn build(&self) -> Result<Scenario, ScenarioError> {
        let err = self.err;
        self.check_unique_names()?;
        let mut cluster = ClusterObjects::for_release(self.release);
        cluster.priority_classes = self
            .file
            .priority_classes
            .iter()
            .map(|p| PriorityClass {
                name: Sym::new(&p.name),
                value: p.value,
                global_default: false,
                preemption_policy: gantry_api::PreemptionPolicy::PreemptLowerPriority,
            })
            .collect();
        cluster.dra.device_classes = self.device_classes()?;
        let mut events = Vec::new();
        // Node groups: every node exists at time 0; `addNodes` events add more later,
        // numbered on from the group's last; deletions and drains take the newest.
        // Every node's slices are published at time 0, those of nodes added later too:
        // a slice is only ever read for its node.
        let mut group_next = Vec::new();
        let mut group_live: Vec<Vec<usize>> = Vec::new();
        let mut group_slices = Vec::new();
        for (g, group) in self.file.node_groups.iter().enumerate() {
            self.count_nodes(group.count, &format!("nodeGroups[{g}].count"))?;
            for i in 0..group.count {
                cluster.nodes.push(self.node(g, group, i)?);
            }
            let slices = self.group_slices(g, group)?;
            for i in 0..group.count {
                cluster
                    .dra
                    .slices
                    .extend(node_slices(&slices, &node_name(&group.name, i)));
            }
            group_next.push(group.count);
            group_live.push((0..group.count).collect());
            group_slices.push(slices);
        }
        let mut workload_pods: Vec<Vec<String>> = vec![Vec::new(); self.file.workloads.len()];
        let mut workload_next = vec![0usize; self.file.workloads.len()];
        let mut template_names = HashMap::new();
        for (w, workload) in self.file.workloads.iter().enumerate() {
            let field = format!("workloads[{w}].arrival");
            let start = match &workload.arrival.start {
                Some(s) => parse_duration(s).map_err(|m| err(format!("{field}.start"), m))?,
                None => Duration::ZERO,
            };
            let interval = match &workload.arrival.rate {
                Some(r) => parse_rate(r).map_err(|m| err(format!("{field}.rate"), m))?,
                None => Duration::ZERO,
            };
            let times = match &workload.arrival.times {
                None => None,
                Some(_) if workload.arrival.start.is_some() || workload.arrival.rate.is_some() => {
                    return Err(err(
                        format!("{field}.times"),
                        "cannot be combined with start or rate".into(),
                    ));
                }
                Some(times) if times.len() != workload.count => {
                    return Err(err(
                        format!("{field}.times"),
                        format!("lists {} times for {} pods", times.len(), workload.count),
                    ));
                }
                Some(times) => Some(
                    times
                        .iter()
                        .enumerate()
                        .map(|(i, t)| {
                            parse_duration(t).map_err(|m| err(format!("{field}.times[{i}]"), m))
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ),
            };
            self.count_pods(workload.count, &format!("workloads[{w}].count"))?;
            if times.is_none() {
                last_arrival(start, interval, workload.count).ok_or_else(|| {
                    err(
                        field.clone(),
                        format!(
                            "the last of {} pods would arrive after {}, the longest time a scenario may span",
                            workload.count,
                            show_duration(MAX_DURATION)
                        ),
                    )
                })?;
            }
            for i in 0..workload.count {
                let pod = self.pod(w, workload, i, &cluster)?;
                workload_pods[w].push(pod.key());
                let at = match &times {
                    Some(t) => t[i],
                    None => start + interval * i as u32,
                };
                events.push((at, SimEvent::CreatePod(Arc::new(pod))));
            }
            workload_next[w] = workload.count;
            // After the pods, whose decoding checks the namespace the templates share.
            cluster
                .dra
                .templates
                .extend(self.claim_templates(w, workload, &mut template_names)?);
        }
        let mut timeline = Vec::new();
        for (e, event) in self.file.events.iter().enumerate() {
            let field = format!("events[{e}]");
            let at = parse_duration(&event.at).map_err(|m| err(format!("{field}.at"), m))?;
            let actions = [
                event.add_nodes.is_some(),
                event.delete_nodes.is_some(),
                event.drain_nodes.is_some(),
                event.delete_pods.is_some(),
                event.scale.is_some(),
            ];
            if actions.iter().filter(|a| **a).count() != 1 {
                return Err(err(
                    field,
                    "needs exactly one of addNodes, deleteNodes, drainNodes, deletePods, scale"
                        .into(),
                ));
            }
            timeline.push(Mark {
                at,
                what: describe(event),
            });
            if let Some(gc) = &event.add_nodes {
                let g = self.group_index(&gc.group, &format!("{field}.addNodes.group"))?;
                self.count_nodes(gc.count, &format!("{field}.addNodes.count"))?;
                let group = &self.file.node_groups[g];
                for i in group_next[g]..group_next[g] + gc.count {
                    events.push((at, SimEvent::AddNode(Arc::new(self.node(g, group, i)?))));
                    cluster
                        .dra
                        .slices
                        .extend(node_slices(&group_slices[g], &node_name(&group.name, i)));
                    group_live[g].push(i);
                }
                group_next[g] += gc.count;
            }
            for (gc, drain, name) in [
                (&event.delete_nodes, false, "deleteNodes"),
                (&event.drain_nodes, true, "drainNodes"),
            ] {
                let Some(gc) = gc else { continue };
                let g = self.group_index(&gc.group, &format!("{field}.{name}.group"))?;
                let group = &self.file.node_groups[g];
                if gc.count > group_live[g].len() {
                    return Err((self.err)(
                        format!("{field}.{name}.count"),
                        format!(
                            "{} nodes asked for, but group {} has {} by then",
                            gc.count,
                            group.name,
                            group_live[g].len()
                        ),
                    ));
                }
                let keep = group_live[g].len() - gc.count;
                for i in group_live[g].split_off(keep).into_iter().rev() {
                    let node = Sym::new(&node_name(&group.name, i));
                    events.push((
                        at,
                        if drain {
                            SimEvent::DrainNode {
                                node,
                                recreate: true,
                            }
                        } else {
                            SimEvent::DeleteNode(node)
                        },
                    ));
                }
            }
            if let Some(wc) = &event.delete_pods {
                let w =
                    self.workload_index(&wc.workload, &format!("{field}.deletePods.workload"))?;
                if wc.count > workload_pods[w].len() {
                    return Err((self.err)(
                        format!("{field}.deletePods.count"),
                        format!(
                            "{} pods asked for, but workload {} has {} by then",
                            wc.count,
                            wc.workload,
                            workload_pods[w].len()
                        ),
                    ));
                }
                for key in workload_pods[w].iter().take(wc.count) {
                    events.push((at, SimEvent::DeletePod(key.clone())));
                }
                workload_pods[w].drain(..wc.count);
            }
            if let Some(wc) = &event.scale {
                let w = self.workload_index(&wc.workload, &format!("{field}.scale.workload"))?;
                self.count_pods(wc.count, &format!("{field}.scale.count"))?;
                let workload = &self.file.workloads[w];
                for i in workload_next[w]..workload_next[w] + wc.count {
                    let pod = self.pod(w, workload, i, &cluster)?;
                    workload_pods[w].push(pod.key());
                    events.push((at, SimEvent::CreatePod(Arc::new(pod))));
                }
                workload_next[w] += wc.count;
            }
        }
        events.sort_by_key(|(at, _)| *at);
        timeline.sort_by_key(|m| m.at);
        Ok(Scenario {
            name: self
                .file
                .name
                .clone()
                .unwrap_or_else(|| self.source_name.to_string()),
            cluster,
            events,
            timeline,
        })
    }

    /// Node groups, workloads and priority classes are named once each: a second one of
    /// a name is an error naming both.
    fn check_unique_names(&self) -> Result<(), ScenarioError> {
        let file = self.file;
        let lists: [(&str, Vec<&str>); 4] = [
            (
                "nodeGroups",
                file.node_groups.iter().map(|g| g.name.as_str()).collect(),
            ),
            (
                "workloads",
                file.workloads.iter().map(|w| w.name.as_str()).collect(),
            ),
            (
                "priorityClasses",
                file.priority_classes
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect(),
            ),
            (
                "deviceClasses",
                file.device_classes
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect(),
            ),
        ];
        for (list, names) in lists {
            for (i, name) in names.iter().enumerate() {
                if let Some(first) = names[..i].iter().position(|n| n == name) {
                    return Err((self.err)(
                        format!("{list}[{i}].name"),
                        format!("{name:?} is also the name of {list}[{first}]"),
                    ));
                }
            }
        }
        Ok(())
    }

    fn count_nodes(&self, count: usize, field: &str) -> Result<(), ScenarioError> {
        self.count(&self.nodes, count, MAX_NODES, "nodes", field)
    }

    fn count_pods(&self, count: usize, field: &str) -> Result<(), ScenarioError> {
        self.count(&self.pods, count, MAX_PODS, "pods", field)
    }

    fn count(
        &self,
        total: &std::cell::Cell<usize>,
        count: usize,
        max: usize,
        what: &str,
        field: &str,
    ) -> Result<(), ScenarioError> {
        let after = total.get().saturating_add(count);
        if after > max {
            return Err((self.err)(
                field.to_string(),
                format!(
                    "{count} more {what} would make {after}, over the {max} a scenario may create"
                ),
            ));
        }
        total.set(after);
        Ok(())
    }

    fn group_index(&self, name: &str, field: &str) -> Result<usize, ScenarioError> {
        self.file
            .node_groups
            .iter()
            .position(|g| g.name == name)
            .ok_or_else(|| (self.err)(field.to_string(), format!("no node group named {name:?}")))
    }

    fn workload_index(&self, name: &str, field: &str) -> Result<usize, ScenarioError> {
        self.file
            .workloads
            .iter()
            .position(|w| w.name == name)
            .ok_or_else(|| (self.err)(field.to_string(), format!("no workload named {name:?}")))
    }

    /// The scenario's device classes, decoded like any other.
    fn device_classes(&self) -> Result<Vec<DeviceClass>, ScenarioError> {
        let mut classes = Vec::new();
        for (c, class) in self.file.device_classes.iter().enumerate() {
            let field = format!("deviceClasses[{c}]");
            let manifest = class
                .manifest()
                .map_err(|(sub, message)| (self.err)(below(&field, &sub), message))?;
            let decoded =
                self.decode_as(manifest, &field, |f| f.replacen("metadata.name", "name", 1))?;
            classes.extend(decoded.dra.device_classes);
        }
        Ok(classes)
    }

    /// The slices a group's node publishes, one per `devices` entry, decoded once for the
    /// group's first node: [`node_slices`] renames them for each node.
    fn group_slices(
        &self,
        g: usize,
        group: &NodeGroup,
    ) -> Result<Vec<ResourceSlice>, ScenarioError> {
        let node = node_name(&group.name, 0);
        let mut slices: Vec<ResourceSlice> = Vec::new();
        for (d, spec) in group.devices.iter().enumerate() {
            let field = format!("nodeGroups[{g}].devices[{d}]");
            if let Some(first) = group.devices[..d]
                .iter()
                .position(|o| o.driver == spec.driver)
            {
                return Err((self.err)(
                    format!("{field}.driver"),
                    format!("{:?} is also the driver of devices[{first}]", spec.driver),
                ));
            }
            let manifest = spec
                .slice(&node)
                .map_err(|(sub, message)| (self.err)(below(&field, &sub), message))?;
            let decoded = self.decode_as(manifest, &field, devices::own_slice_field)?;
            slices.extend(decoded.dra.slices);
        }
        Ok(slices)
    }

    /// A workload's claim templates, one per claim. `made` holds every template made so
    /// far, by namespace and name, with the claim that made it.
    fn claim_templates(
        &self,
        w: usize,
        workload: &Workload,
        made: &mut HashMap<(String, String), String>,
    ) -> Result<Vec<ResourceClaimTemplate>, ScenarioError> {
        let err = self.err;
        if !workload.claims.is_empty() && !self.release.enabled(Gate::DynamicResourceAllocation) {
            return Err(err(
                format!("workloads[{w}].claims"),
                format!(
                    "Kubernetes {} has DynamicResourceAllocation off: its API server would drop the pods' resourceClaims",
                    self.release
                ),
            ));
        }
        // The template's own `spec.resourceClaims`, which the claims join.
        let own: Vec<&str> = workload
            .template
            .pointer("/spec/resourceClaims")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("name").and_then(Value::as_str))
            .collect();
        let mut templates = Vec::new();
        for (c, claim) in workload.claims.iter().enumerate() {
            let field = format!("workloads[{w}].claims[{c}]");
            if let Some(first) = workload.claims[..c]
                .iter()
                .position(|o| o.name == claim.name)
            {
                return Err(err(
                    format!("{field}.name"),
                    format!("{:?} is also the name of claims[{first}]", claim.name),
                ));
            }
            if own.contains(&claim.name.as_str()) {
                return Err(err(
                    format!("{field}.name"),
                    format!(
                        "{:?} is also the name of an entry of template.spec.resourceClaims",
                        claim.name
                    ),
                ));
            }
            if !self
                .file
                .device_classes
                .iter()
                .any(|d| d.name == claim.device_class)
            {
                return Err(err(
                    format!("{field}.deviceClass"),
                    format!("no device class {:?} in deviceClasses", claim.device_class),
                ));
            }
            let manifest = claim
                .template(&workload.name, &workload.namespace)
                .map_err(|(sub, message)| err(below(&field, &sub), message))?;
            let name = devices::template_name(&workload.name, &claim.name);
            let key = (workload.namespace.clone(), name.clone());
            if let Some(other) = made.get(&key) {
                return Err(err(
                    format!("{field}.name"),
                    format!(
                        "makes the claim template {name:?} in namespace {:?}, as {other} does",
                        workload.namespace
                    ),
                ));
            }
            made.insert(key, field.clone());
            let decoded =
                self.decode_as(manifest, &field, |f| f.replacen("metadata.name", "name", 1))?;
            templates.extend(decoded.dra.templates);
        }
        Ok(templates)
    }

    /// The `index`-th node of a group, as a Node manifest decoded like any other.
    fn node(&self, g: usize, group: &NodeGroup, index: usize) -> Result<Node, ScenarioError> {
        let name = node_name(&group.name, index);
        let mut labels = group.labels.clone();
        labels.insert("kubernetes.io/hostname".into(), json!(name));
        if !group.zones.is_empty() {
            labels.insert(
                "topology.kubernetes.io/zone".into(),
                json!(group.zones[index % group.zones.len()]),
            );
        }
        for (t, taint) in group.taints.iter().enumerate() {
            if TaintEffect::parse(&taint.effect).is_none() {
                return Err((self.err)(
                    format!("nodeGroups[{g}].taints[{t}].effect"),
                    format!(
                        "must be NoSchedule, PreferNoSchedule or NoExecute, not {:?}",
                        taint.effect
                    ),
                ));
            }
        }
        let mut allocatable = group.allocatable.clone();
        let mut annotations = serde_json::Map::new();
        if let Some(spec) = &group.gpus {
            let registered = spec.register(&name).map_err(|(field, message)| {
                (self.err)(format!("nodeGroups[{g}].gpus.{field}"), message)
            })?;
            annotations.insert(
                gantry_api::gpu::REGISTER_ANNOTATION.into(),
                json!(registered.annotation),
            );
            allocatable
                .entry(gantry_api::gpu::GPU_COUNT)
                .or_insert_with(|| json!(registered.shares.to_string()));
        }
        let manifest = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"taints": group.taints.iter().map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect})).collect::<Vec<_>>()},
            "status": {"allocatable": allocatable, "capacity": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]},
        });
        // Errors point at the scenario's own fields, not at the generated manifest's.
        let decoded = self.decode_as(manifest, &format!("nodeGroups[{g}]"), |field| {
            let mut field = field.to_string();
            for (generated, own) in [
                ("status.capacity", "allocatable"),
                ("status.allocatable", "allocatable"),
                ("spec.taints", "taints"),
                ("metadata.labels", "labels"),
            ] {
                field = field.replacen(generated, own, 1);
            }
            field
        })?;
        decoded
            .nodes
            .into_iter()
            .next()
            .ok_or_else(|| (self.err)(format!("nodeGroups[{g}]"), "no node decoded".into()))
    }

    /// The `index`-th pod of a workload.
    fn pod(
        &self,
        w: usize,
        workload: &Workload,
        index: usize,
        cluster: &ClusterObjects,
    ) -> Result<Pod, ScenarioError> {
        let name = format!("{}-{index}", workload.name);
        if let Some(first) = self.first_pods.borrow().get(&w) {
            return Ok(first.replica(&name));
        }
        let field = format!("workloads[{w}].template");
        let mut manifest = workload.template.clone();
        let Some(object) = manifest.as_object_mut() else {
            return Err((self.err)(
                field,
                "must be a Pod manifest (metadata and spec)".into(),
            ));
        };
        object.insert("apiVersion".into(), json!("v1"));
        object.insert("kind".into(), json!("Pod"));
        let metadata = object.entry("metadata").or_insert_with(|| json!({}));
        let Some(metadata) = metadata.as_object_mut() else {
            return Err((self.err)(
                format!("{field}.metadata"),
                "must be a mapping".into(),
            ));
        };
        metadata.insert("name".into(), json!(name));
        metadata.insert("namespace".into(), json!(workload.namespace));
        if !workload.claims.is_empty() {
            let spec = object.entry("spec").or_insert_with(|| json!({}));
            let Some(spec) = spec.as_object_mut() else {
                return Err((self.err)(
                    format!("{field}.spec"),
                    "must be a mapping".into(),
                ));
            };
            let entries = spec.entry("resourceClaims").or_insert_with(|| json!([]));
            let Some(entries) = entries.as_array_mut() else {
                return Err((self.err)(
                    format!("{field}.spec.resourceClaims"),
                    "must be a list".into(),
                ));
            };
            entries.extend(workload.claims.iter().map(|c| c.pod_entry(&workload.name)));
        }
        let mut decoded = self.decode(manifest, &field)?;
        decoded.priority_classes = cluster.priority_classes.clone();
        decoded
            .resolve_priorities()
            .map_err(|e| (self.err)(format!("{field}.{}", e.field), e.message))?;
        let pod = decoded
            .pods
            .into_iter()
            .next()
            .ok_or_else(|| (self.err)(field, "no pod decoded".into()))?;
        self.first_pods.borrow_mut().insert(w, pod.clone());
        Ok(pod)
    }

    fn decode(&self, manifest: Value, field: &str) -> Result<ClusterObjects, ScenarioError> {
        self.decode_as(manifest, field, str::to_string)
    }

    /// Decodes a generated manifest; `own` names an error's field (of the manifest) as
    /// the scenario does, below `field`.
    fn decode_as(
        &self,
        manifest: Value,
        field: &str,
        own: impl Fn(&str) -> String,
    ) -> Result<ClusterObjects, ScenarioError> {
        let text = manifest.to_string();
        let mut objects = ClusterObjects::for_release(self.release);
        objects
            .decode_more(&text, self.source_name)
            .map(|()| objects)
            .map_err(|e| match e {
                DecodeError::Object { error, .. } => {
                    (self.err)(below(field, &own(&error.field)), error.message)
                }
                DecodeError::Syntax { message, .. } => (self.err)(field.to_string(), message),
                other => (self.err)(field.to_string(), other.to_string()),
            })
    }
}

fn node_name(group: &str, index: usize) -> String {
    format!("{group}-{index}")
}

/// A group's slices as `node` publishes them: named after the node, in its own pool. (A
/// node's name is at most 63 characters, as its hostname label, and a driver's too: the
/// slice's name stays far within the API's 253.)
fn node_slices<'a>(
    slices: &'a [ResourceSlice],
    node: &'a str,
) -> impl Iterator<Item = ResourceSlice> + 'a {
    slices.iter().map(move |slice| ResourceSlice {
        name: Sym::new(&devices::slice_name(node, slice.driver.as_str())),
        pool: Sym::new(node),
        nodes: SliceNodes::Node(Sym::new(node)),
        ..slice.clone()
    })
}

/// `field.sub`, or `field` itself when `sub` is empty.
fn below(field: &str, sub: &str) -> String {
    if sub.is_empty() {
        field.to_string()
    } else {
        format!("{field}.{sub}")
    }
}

/// `250ms`, `30s`, `5m`, `2h`, or a bare number of seconds; at most `MAX_DURATION`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (like 250ms, 30s, 5m, 2h)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("{text:?} has an unknown unit (use ms, s, m or h)")),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!("{text:?} must be a non-negative duration"));
    }
    if seconds > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "{text:?} is longer than {}, the longest time a scenario may span",
            show_duration(MAX_DURATION)
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `100/s`, `30/m`, `5/h`: the interval between two arrivals (at most `MAX_DURATION`).
pub fn parse_rate(text: &str) -> Result<Duration, String> {
    let (count, unit) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?} is not a rate (like 100/s or 30/m)"))?;
    let count: f64 = count
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a rate (like 100/s or 30/m)"))?;
    if !(count.is_finite() && count > 0.0) {
        return Err(format!("{text:?} must be a positive rate"));
    }
    let per = match unit.trim() {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "{text:?} has an unknown unit {other:?} (use s, m or h)"
            ));
        }
    };
    let interval = per / count;
    if interval > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "{text:?} is too slow: one pod every {interval:.3e} s is longer than {}, the longest time a scenario may span",
            show_duration(MAX_DURATION)
        ));
    }
    Ok(Duration::from_secs_f64(interval))
}

/// When the last of `count` pods arrives, if within `MAX_DURATION`.
fn last_arrival(start: Duration, interval: Duration, count: usize) -> Option<Duration> {
    let steps = u32::try_from(count.saturating_sub(1)).ok()?;
    let last = start.checked_add(interval.checked_mul(steps)?)?;
    (last <= MAX_DURATION).then_some(last)
}

/// `3h`, `90s`, `250ms`: the largest unit that divides the duration.
fn show_duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0s".into(),
        _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        _ if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
        _ if ms.is_multiple_of(1000) => format!("{}s", ms / 1000),
        _ => format!("{ms}ms"),
    }
}

/// A scenario event as a person reads it, for the report's plots.
fn describe(event: &TimedEvent) -> String {
    let nodes = |verb: &str, gc: &GroupCount| format!("{verb} {} {} nodes", gc.count, gc.group);
    let pods = |verb: &str, wc: &WorkloadCount| format!("{verb} {} {} pods", wc.count, wc.workload);
    if let Some(gc) = &event.add_nodes {
        nodes("add", gc)
    } else if let Some(gc) = &event.delete_nodes {
        nodes("delete", gc)
    } else if let Some(gc) = &event.drain_nodes {
        nodes("drain", gc)
    } else if let Some(wc) = &event.delete_pods {
        pods("delete", wc)
    } else if let Some(wc) = &event.scale {
        pods("add", wc)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
name: example
priorityClasses: [{name: high, value: 1000}]
nodeGroups:
- name: general
  count: 4
  zones: [zone-a, zone-b]
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  labels: {pool: general}
- name: gpu
  count: 1
  allocatable: {cpu: "8", memory: 64Gi, pods: "110", nvidia.com/gpu: "4"}
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
workloads:
- name: web
  count: 6
  arrival: {start: 1s, rate: 2/s}
  template:
    metadata: {labels: {app: web}}
    spec:
      priorityClassName: high
      containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
events:
- {at: 10s, addNodes: {group: general, count: 2}}
- {at: 20s, drainNodes: {group: gpu, count: 1}}
- {at: 30s, scale: {workload: web, count: 3}}
- {at: 40s, deletePods: {workload: web, count: 2}}
"#;

    #[test]
    fn example_scenario_expands_into_nodes_and_timed_events() {
        let s = Scenario::parse(EXAMPLE, "example.yaml").unwrap();
        assert_eq!(s.name, "example");
        assert_eq!(s.cluster.nodes.len(), 5);
        let gpu = &s.cluster.nodes[4];
        assert_eq!(gpu.taints.len(), 1);
        assert_eq!(gpu.allocatable.scalar(Sym::new("nvidia.com/gpu")), 4);
        assert_eq!(
            s.cluster.nodes[1]
                .labels
                .get_str("topology.kubernetes.io/zone"),
            Some(Sym::new("zone-b"))
        );
        let creates: Vec<(Duration, &Arc<Pod>)> = s
            .events
            .iter()
            .filter_map(|(t, e)| match e {
                SimEvent::CreatePod(p) => Some((*t, p)),
                _ => None,
            })
            .collect();
        assert_eq!(creates.len(), 9);
        assert_eq!(creates[0].0, Duration::from_secs(1));
        assert_eq!(
            creates[1].0,
            Duration::from_millis(1500),
            "2/s is one pod every 500ms"
        );
        assert_eq!(creates[0].1.priority, 1000, "priority class resolved");
        assert_eq!(creates[0].1.requests().milli_cpu, 500);
        assert!(
            creates.iter().all(|(_, p)| p.shares_template(creates[0].1)),
            "a workload's pods share one template, the scaled-up ones too"
        );
        assert_eq!(
            (&*creates[8].1.name, &*creates[8].1.uid),
            ("web-8", "default/web-8")
        );
        let kinds: Vec<&str> = s
            .events
            .iter()
            .map(|(_, e)| match e {
                SimEvent::AddNode(_) => "add",
                SimEvent::DrainNode { .. } => "drain",
                SimEvent::DeletePod(_) => "delete-pod",
                SimEvent::CreatePod(_) => "create",
                SimEvent::DeleteNode(_) => "delete-node",
            })
            .filter(|k| *k != "create")
            .collect();
        assert_eq!(kinds, ["add", "add", "drain", "delete-pod", "delete-pod"]);
    }

    #[test]
    fn bad_scenarios_name_the_field() {
        let cases = [
            (
                "nodeGroups: [{name: a, count: x, allocatable: {}}]",
                "nodeGroups[0].count",
            ),
            (
                "nodeGroups: [{name: a, count: 1, allocatable: {cpu: lots}}]",
                "nodeGroups[0].allocatable.cpu",
            ),
            (
                "nodeGroups: [{name: a, count: 1, allocatable: {}, taints: [{key: k, effect: Never}]}]",
                "nodeGroups[0].taints[0].effect",
            ),
            (
                "workloads: [{name: w, count: 1, arrival: {rate: fast}, template: {spec: {containers: [{name: c}]}}}]",
                "workloads[0].arrival.rate",
            ),
            (
                "workloads: [{name: w, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: 1x}}}]}}}]",
                "workloads[0].template.spec.containers[0].resources.requests.cpu",
            ),
            (
                "workloads: [{name: w, count: 1, template: {spec: {priorityClassName: nope, containers: [{name: c}]}}}]",
                "workloads[0].template.spec.priorityClassName",
            ),
            (
                "events: [{at: soon, addNodes: {group: a, count: 1}}]",
                "events[0].at",
            ),
            (
                "workloads: [{name: w, count: 2, arrival: {times: [1s]}, template: {spec: {containers: [{name: c}]}}}]",
                "workloads[0].arrival.times",
            ),
            (
                "workloads: [{name: w, count: 1, arrival: {times: [later]}, template: {spec: {containers: [{name: c}]}}}]",
                "workloads[0].arrival.times[0]",
            ),
            (
                "events: [{at: 1s, addNodes: {group: missing, count: 1}}]",
                "events[0].addNodes.group",
            ),
            ("events: [{at: 1s}]", "events[0]"),
            (
                "workloads: [{name: w, count: 1, arrival: {start: 99999999999999999999h}, template: {spec: {containers: []}}}]",
                "workloads[0].arrival.start",
            ),
            (
                "workloads: [{name: w, count: 1, arrival: {rate: 0.0000000000000000001/h}, template: {spec: {containers: []}}}]",
                "workloads[0].arrival.rate",
            ),
            (
                "workloads: [{name: w, count: 3, arrival: {start: 87599h, rate: 1/h}, template: {spec: {containers: []}}}]",
                "workloads[0].arrival",
            ),
            (
                "events: [{at: 99999999h, addNodes: {group: a, count: 1}}]",
                "events[0].at",
            ),
            (
                "nodeGroups: [{name: a, count: 100000000000, allocatable: {}}]",
                "nodeGroups[0].count",
            ),
            (
                "workloads: [{name: w, count: 2000001, template: {spec: {containers: []}}}]",
                "workloads[0].count",
            ),
            (
                "nodeGroups: [{name: a, count: 1, allocatable: {}}]\nevents: [{at: 1s, addNodes: {group: a, count: 999999999}}]",
                "events[0].addNodes.count",
            ),
            ("nodegroups: []", "nodegroups"),
            ("nodeGroups: [\n", ""),
        ];
        for (text, field) in cases {
            let e = Scenario::parse(text, "bad.yaml").unwrap_err();
            assert!(e.field == field, "{text}: got {e}");
        }
    }

    #[test]
    fn a_second_group_workload_or_class_of_one_name_names_both() {
        let cases = [
            (
                "nodeGroups: [{name: a, count: 1, allocatable: {}}, {name: b, count: 1, allocatable: {}}, {name: a, count: 1, allocatable: {}}]",
                "nodeGroups[2].name",
                "\"a\" is also the name of nodeGroups[0]",
            ),
            (
                "workloads: [{name: w, count: 1, template: {}}, {name: w, count: 1, template: {}}]",
                "workloads[1].name",
                "\"w\" is also the name of workloads[0]",
            ),
            (
                "priorityClasses: [{name: p, value: 1}, {name: p, value: 2}]",
                "priorityClasses[1].name",
                "\"p\" is also the name of priorityClasses[0]",
            ),
        ];
        for (text, field, message) in cases {
            let e = Scenario::parse(text, "dup.yaml").unwrap_err();
            assert_eq!((e.field.as_str(), e.message.as_str()), (field, message));
        }
    }

    #[test]
    fn the_timeline_reads_as_a_person_would_say_it() {
        let s = Scenario::parse(EXAMPLE, "example.yaml").unwrap();
        let marks: Vec<(u64, &str)> = s
            .timeline
            .iter()
            .map(|m| (m.at.as_secs(), m.what.as_str()))
            .collect();
        assert_eq!(
            marks,
            [
                (10, "add 2 general nodes"),
                (20, "drain 1 gpu nodes"),
                (30, "add 3 web pods"),
                (40, "delete 2 web pods"),
            ]
        );
    }

    #[test]
    fn explicit_arrival_times() {
        let s = Scenario::parse(
            "workloads: [{name: w, count: 2, arrival: {times: [5s, 1m]}, template: {spec: {containers: [{name: c}]}}}]",
            "t.yaml",
        )
        .unwrap();
        let times: Vec<Duration> = s.events.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, [Duration::from_secs(5), Duration::from_secs(60)]);
    }

    #[test]
    fn durations_and_rates() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1d").is_err());
        assert_eq!(parse_rate("10/s").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_rate("30/m").unwrap(), Duration::from_secs(2));
        assert!(parse_rate("0/s").is_err());
        assert!(parse_rate("5/d").is_err());
    }
}
