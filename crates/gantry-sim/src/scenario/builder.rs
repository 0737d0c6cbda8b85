//! A scenario file expanded into its cluster and timed events, every field checked and
//! an error naming the field that is wrong.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::decode::{ClusterObjects, DecodeError, PriorityClass};
use gantry_api::dra::{DeviceClass, ResourceClaimTemplate, ResourceSlice, SliceNodes};
use gantry_api::{Gate, Node, Pod, Sym, TaintEffect};
use serde_json::{Value, json};

use super::devices;
use super::file::{NodeGroup, ScenarioFile, Workload};
use super::{
    MAX_DURATION, MAX_NODES, MAX_PODS, Mark, Scenario, ScenarioError, describe, last_arrival,
    parse_duration, parse_rate, show_duration,
};
use crate::SimEvent;

pub(super) struct Builder<'a, E: Fn(String, String) -> ScenarioError> {
    pub(super) file: &'a ScenarioFile,
    pub(super) source_name: &'a str,
    pub(super) release: gantry_api::Release,
    pub(super) err: &'a E,
    /// Nodes and pods created so far, against `MAX_NODES` and `MAX_PODS`.
    pub(super) nodes: std::cell::Cell<usize>,
    pub(super) pods: std::cell::Cell<usize>,
    /// Each workload's first pod, decoded from its template: the others are its replicas,
    /// sharing the template as a controller's pods do.
    pub(super) first_pods: std::cell::RefCell<HashMap<usize, Pod>>,
}

impl<E: Fn(String, String) -> ScenarioError> Builder<'_, E> {
    pub(super) fn build(&self) -> Result<Scenario, ScenarioError> {
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
            // Before the pods, which carry the claims in their spec.resourceClaims.
            self.check_claim_names(w, workload)?;
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
            let decoded = self.decode_as(manifest, &field, |f| {
                (f.replacen("metadata.name", "name", 1)).replacen(
                    "spec.extendedResourceName",
                    "extendedResourceName",
                    1,
                )
            })?;
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
            slices.extend(decoded.dra.slices.iter().map(|s| (**s).clone()));
        }
        Ok(slices)
    }

    /// A workload's claims are named as pods' claims must be (DNS labels), and apart from
    /// each other and from the template's own `spec.resourceClaims`, which they join.
    fn check_claim_names(&self, w: usize, workload: &Workload) -> Result<(), ScenarioError> {
        let err = self.err;
        // The template's own `spec.resourceClaims`, which the claims join.
        let own: Vec<&str> = workload
            .template
            .pointer("/spec/resourceClaims")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("name").and_then(Value::as_str))
            .collect();
        for (c, claim) in workload.claims.iter().enumerate() {
            let field = format!("workloads[{w}].claims[{c}]");
            devices::dns_label(&claim.name).map_err(|m| err(format!("{field}.name"), m))?;
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
        }
        Ok(())
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
        let mut templates = Vec::new();
        for (c, claim) in workload.claims.iter().enumerate() {
            let field = format!("workloads[{w}].claims[{c}]");
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
) -> impl Iterator<Item = Arc<ResourceSlice>> + 'a {
    slices.iter().map(move |slice| {
        Arc::new(ResourceSlice {
            name: Sym::new(&devices::slice_name(node, slice.driver.as_str())),
            pool: Sym::new(node),
            nodes: SliceNodes::Node(Sym::new(node)),
            ..slice.clone()
        })
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
