//! What the API server checks across objects, once every source is read: the Priority
//! admission plugin (upstream `plugin/pkg/admission/priority`), one object per name
//! (a second create is refused as `AlreadyExists`), and pods bound to nodes that exist;
//! what it then holds, it lists by key.

use std::collections::{HashMap, HashSet};

use super::priority::{PriorityClass, system_priority_classes};
use super::validation;
use super::{ClusterObjects, ObjectError, field_error};
use crate::{Pod, PodGroup, PreemptionPolicy, Sym};

/// What a pod's manifest said about its priority, before admission filled it in.
#[derive(Debug, Clone, Copy)]
pub(super) struct PodPriorityFields {
    /// The pod's index in [`ClusterObjects::pods`].
    pod: usize,
    /// `spec.priority`: set by the API server on every pod it stored, so a pod that
    /// carries it was admitted already (a dump), and one that does not is being created.
    priority: Option<i32>,
    /// `spec.preemptionPolicy`.
    pub policy: Option<PreemptionPolicy>,
}

impl PodPriorityFields {
    pub fn new(priority: Option<i32>, policy: Option<PreemptionPolicy>) -> PodPriorityFields {
        PodPriorityFields {
            pod: 0,
            priority,
            policy,
        }
    }

    /// These fields for the pod at `index`.
    pub fn at(self, index: usize) -> PodPriorityFields {
        PodPriorityFields { pod: index, ..self }
    }

    /// Whether the pod carried `spec.priority` (a stored pod always does).
    pub fn priority_given(&self) -> bool {
        self.priority.is_some()
    }

    pub fn shifted(self, offset: usize) -> PodPriorityFields {
        self.at(self.pod + offset)
    }
}

/// Priority admission, then names, then node references, then the list order.
pub(super) fn admit(
    cluster: &mut ClusterObjects,
    mut pending: Option<&mut ClusterObjects>,
) -> Result<(), ObjectError> {
    resolve_priorities(cluster, pending.as_deref_mut())?;
    unique_nodes(cluster)?;
    unique_pods(cluster, pending.as_deref_mut())?;
    unique_pod_groups(cluster, pending.as_deref())?;
    let nodes: HashSet<Sym> = cluster.nodes.iter().map(|n| n.name).collect();
    let pending_pods = pending.iter().flat_map(|p| p.pods.iter());
    for pod in cluster.pods.iter().chain(pending_pods) {
        if let Some(node) = pod.node_name.filter(|n| !nodes.contains(n)) {
            return Err(field_error(
                &format!("Pod {}", pod.key()),
                "spec.nodeName",
                validation::invalid(
                    node.as_str(),
                    "no Node of that name in the input: a bound pod needs its node",
                ),
            ));
        }
    }
    in_list_order(cluster);
    Ok(())
}

/// Puts the nodes and pods in the order kube-apiserver lists them: by key, that is by name,
/// and pods by namespace then name (etcd's `/registry/minions/<name>` and
/// `/registry/pods/<namespace>/<name>`). A kube-scheduler starting against the cluster
/// adds them to its cache and queue in that order, not in any file's, and what it keeps
/// from the first object added follows it: the node tree's zone order, each image's size
/// (the first node reporting it), the order of a node's pods (preemption's ties) and of
/// equal-priority pending pods. Positions in the input files are forgotten: names that
/// admission gave were given above, and errors naming two sources are raised above too.
/// Pods given apart (`--pods`) keep their order: they are created one after another.
fn in_list_order(cluster: &mut ClusterObjects) {
    cluster
        .nodes
        .sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    cluster
        .pods
        .sort_by(|a, b| (a.namespace.as_str(), &*a.name).cmp(&(b.namespace.as_str(), &*b.name)));
    cluster.sources.clear();
    cluster.generated.pods.clear();
    cluster.generated.nodes.clear();
}

/// The classes in force: the input's (one global default at most, one object per name)
/// and the built-in ones it does not redefine.
fn classes_in_force<'a>(
    inputs: impl Iterator<Item = &'a PriorityClass>,
) -> Result<Vec<PriorityClass>, ObjectError> {
    let mut classes: Vec<PriorityClass> = Vec::new();
    for class in inputs {
        let object = format!("PriorityClass {}", class.name);
        if classes.iter().any(|c| c.name == class.name) {
            return Err(field_error(
                &object,
                "metadata.name",
                already_exists("priorityclasses.scheduling.k8s.io", class.name.as_str(), ""),
            ));
        }
        if class.global_default
            && let Some(default) = classes.iter().find(|c| c.global_default)
        {
            return Err(field_error(
                &object,
                "globalDefault",
                format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    default.name
                ),
            ));
        }
        classes.push(class.clone());
    }
    for builtin in system_priority_classes() {
        if !classes.iter().any(|c| c.name == builtin.name) {
            classes.push(builtin);
        }
    }
    Ok(classes)
}

/// Upstream's `admitPod` for every decoded pod (see [`ClusterObjects::resolve_priorities`]).
pub(super) fn resolve_priorities(
    cluster: &mut ClusterObjects,
    pending: Option<&mut ClusterObjects>,
) -> Result<(), ObjectError> {
    let pending_classes = pending.iter().flat_map(|p| p.priority_classes.iter());
    let classes = classes_in_force(cluster.priority_classes.iter().chain(pending_classes))?;
    let default = classes.iter().find(|c| c.global_default);
    for objects in std::iter::once(cluster).chain(pending) {
        for fields in std::mem::take(&mut objects.admission) {
            admit_pod(&mut objects.pods[fields.pod], fields, &classes, default)?;
        }
        for group in &mut objects.pod_groups {
            admit_pod_group(group, &classes, default)?;
        }
        super::shared_templates::share_templates(&mut objects.pods);
    }
    Ok(())
}

fn admit_pod(
    pod: &mut Pod,
    fields: PodPriorityFields,
    classes: &[PriorityClass],
    default: Option<&PriorityClass>,
) -> Result<(), ObjectError> {
    let object = || format!("Pod {}", pod.key());
    let class = match pod.priority_class_name {
        Some(name) => match named_class(name, fields.priority.is_some(), classes, &object)? {
            Some(class) => Some(class),
            None => return Ok(()),
        },
        None if fields.priority.is_some() => return Ok(()),
        None => default,
    };
    let (priority, policy) = match class {
        Some(class) => (class.value, class.preemption_policy),
        None => (0, PreemptionPolicy::PreemptLowerPriority),
    };
    if let Some(given) = fields.priority.filter(|p| *p != priority) {
        return Err(field_error(
            &object(),
            "spec.priority",
            format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
            ),
        ));
    }
    if let Some(given) = fields.policy.filter(|p| *p != policy) {
        return Err(field_error(
            &object(),
            "spec.preemptionPolicy",
            format!(
                "the string value of PreemptionPolicy ({}) must not be provided in pod spec; priority admission controller computed {} from the given PriorityClass name",
                policy_name(given),
                policy_name(policy)
            ),
        ));
    }
    pod.priority = priority;
    pod.preemption_policy = policy;
    if pod.priority_class_name.is_none() {
        pod.priority_class_name = class.map(|c| c.name);
    }
    Ok(())
}

/// Upstream's `admitPodGroup` (WorkloadAwarePreemption on, v1.36.2): the group's priority
/// is its class's (or the global default's, or 0), and a priority given otherwise is
/// refused. A stored group whose class is not in the input keeps the priority it has.
fn admit_pod_group(
    group: &mut PodGroup,
    classes: &[PriorityClass],
    default: Option<&PriorityClass>,
) -> Result<(), ObjectError> {
    let key = group.key();
    let object = || format!("PodGroup {key}");
    let Some(fields) = group.preemption.as_mut() else {
        return Ok(());
    };
    let class = match fields.priority_class_name {
        Some(name) => match named_class(name, fields.priority.is_some(), classes, &object)? {
            Some(class) => Some(class),
            None => return Ok(()),
        },
        None => default,
    };
    let priority = class.map_or(0, |c| c.value);
    if let Some(given) = fields.priority.filter(|p| *p != priority) {
        return Err(field_error(
            &object(),
            "spec.priority",
            format!(
                "priority set in the pod group ({given}) must match the priority computed ({priority}) based on the priority class set in the spec"
            ),
        ));
    }
    fields.priority = Some(priority);
    fields.priority_class_name = class.map(|c| c.name);
    Ok(())
}

/// The class an object names. A stored object (it carries a priority) whose class is not
/// in the input keeps what admission gave it (`None`); one being created needs its class.
fn named_class<'a>(
    name: Sym,
    stored: bool,
    classes: &'a [PriorityClass],
    object: &dyn Fn() -> String,
) -> Result<Option<&'a PriorityClass>, ObjectError> {
    match classes.iter().find(|c| c.name == name) {
        Some(class) => Ok(Some(class)),
        None if stored => Ok(None),
        None => Err(field_error(
            &object(),
            "spec.priorityClassName",
            format!("no PriorityClass with name {name} was found"),
        )),
    }
}

fn policy_name(policy: PreemptionPolicy) -> &'static str {
    match policy {
        PreemptionPolicy::PreemptLowerPriority => "PreemptLowerPriority",
        PreemptionPolicy::Never => "Never",
    }
}

/// The API server's `AlreadyExists` message, and why.
fn already_exists(resource: &str, name: &str, why: &str) -> String {
    format!("{resource} {name:?} already exists{why}")
}

/// A second PodGroup of a namespace and name is refused, as its create would be, rather
/// than replacing the first.
fn unique_pod_groups(
    cluster: &ClusterObjects,
    pending: Option<&ClusterObjects>,
) -> Result<(), ObjectError> {
    let mut taken = HashSet::new();
    let pending_groups = pending.iter().flat_map(|p| p.pod_groups.iter());
    for group in cluster.pod_groups.iter().chain(pending_groups) {
        if !taken.insert((group.namespace, group.name)) {
            return Err(field_error(
                &format!("PodGroup {}", group.key()),
                "metadata.name",
                already_exists(
                    "podgroups.scheduling.k8s.io",
                    group.name.as_str(),
                    &format!(": the input has two PodGroups {}", group.key()),
                ),
            ));
        }
    }
    Ok(())
}

fn unique_nodes(cluster: &mut ClusterObjects) -> Result<(), ObjectError> {
    let generated: HashSet<usize> = cluster.generated.nodes.iter().copied().collect();
    let mut taken: HashMap<Sym, usize> = HashMap::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        if generated.contains(&i) {
            continue;
        }
        if let Some(first) = taken.insert(node.name, i) {
            let files = in_sources([cluster.source_of_node(first), cluster.source_of_node(i)]);
            return Err(field_error(
                &format!("Node {}", node.name),
                "metadata.name",
                already_exists(
                    "nodes",
                    node.name.as_str(),
                    &format!(": the input has two Node objects of that name{files}"),
                ),
            ));
        }
    }
    let mut taken: HashSet<Sym> = taken.into_keys().collect();
    let mut generated: Vec<usize> = generated.into_iter().collect();
    generated.sort_unstable();
    for i in generated {
        let mut name = cluster.nodes[i].name;
        let mut tries = 0;
        while !taken.insert(name) {
            let prefix = generated_prefix(name.as_str());
            name = Sym::new(&cluster.generated.name(prefix));
            tries += 1;
            if tries > MAX_RENAMES {
                return Err(rename_error("Node", name.as_str()));
            }
        }
        cluster.nodes[i].name = name;
    }
    Ok(())
}

/// Renames before giving up on a clash (the API server's clients retry a few times too).
const MAX_RENAMES: usize = 100;

fn rename_error(kind: &str, name: &str) -> ObjectError {
    field_error(
        &format!("{kind} {name}"),
        "metadata.generateName",
        format!("no free name after {MAX_RENAMES} tries"),
    )
}

/// The `generateName` a generated name came from.
fn generated_prefix(name: &str) -> &str {
    &name[..name.len().saturating_sub(5)]
}

/// ` (in a.yaml and b.yaml)`, or ` (both in a.yaml)`, for two objects' sources when known.
fn in_sources([first, second]: [Option<&str>; 2]) -> String {
    match (first, second) {
        (Some(a), Some(b)) if a == b => format!(" (both in {a})"),
        (Some(a), Some(b)) => format!(" (in {a} and {b})"),
        _ => String::new(),
    }
}

/// Where a pod of a name is: for the message naming both objects.
fn describe(pod: Option<&Pod>) -> String {
    match pod.and_then(|p| p.node_name) {
        Some(node) => format!("bound to {node}"),
        None if pod.is_some() => "pending".to_string(),
        None => "finished".to_string(),
    }
}

fn unique_pods(
    cluster: &mut ClusterObjects,
    pending: Option<&mut ClusterObjects>,
) -> Result<(), ObjectError> {
    // First the names people wrote, in input order; then the generated ones, renamed
    // where they clash (as a client retries a create that met `AlreadyExists`).
    let mut taken: HashMap<(Sym, String), Option<(bool, usize)>> = HashMap::new();
    let sets: [Option<&ClusterObjects>; 2] = [Some(&*cluster), pending.as_deref()];
    for (set, objects) in sets.iter().enumerate() {
        let Some(objects) = objects else { continue };
        let generated: HashSet<usize> = objects.generated.pods.iter().copied().collect();
        let named = objects
            .pods
            .iter()
            .enumerate()
            .filter(|(i, _)| !generated.contains(i))
            .map(|(i, p)| ((p.namespace, p.name.to_string()), Some((set == 1, i))));
        let finished = objects.finished_pods.iter().map(|key| {
            let (ns, name) = key.split_once('/').unwrap_or(("default", key));
            ((Sym::new(ns), name.to_string()), None)
        });
        for (key, location) in named.chain(finished) {
            if let Some(first) = taken.insert(key.clone(), location) {
                let set_of = |in_pending: bool| {
                    let objects = if in_pending { sets[1] } else { sets[0] };
                    objects.expect("recorded from this set")
                };
                let pod_at = |at: Option<(bool, usize)>| {
                    at.map(|(in_pending, i)| &set_of(in_pending).pods[i])
                };
                let source_at = |at: Option<(bool, usize)>| {
                    at.and_then(|(in_pending, i)| set_of(in_pending).source_of_pod(i))
                };
                let files = in_sources([source_at(first), source_at(location)]);
                return Err(field_error(
                    &format!("Pod {}/{}", key.0, key.1),
                    "metadata.name",
                    already_exists(
                        "pods",
                        &key.1,
                        &format!(
                            ": the input has two pods {}/{} (one {}, one {}){files}",
                            key.0,
                            key.1,
                            describe(pod_at(first)),
                            describe(pod_at(location))
                        ),
                    ),
                ));
            }
        }
    }
    for objects in std::iter::once(cluster).chain(pending) {
        let mut generated = objects.generated.pods.clone();
        generated.sort_unstable();
        for i in generated {
            let namespace = objects.pods[i].namespace;
            let mut name = objects.pods[i].name.to_string();
            let mut tries = 0;
            while taken.contains_key(&(namespace, name.clone())) {
                name = objects.generated.name(generated_prefix(&name));
                tries += 1;
                if tries > MAX_RENAMES {
                    return Err(rename_error("Pod", &name));
                }
            }
            taken.insert((namespace, name.clone()), None);
            let pod = &mut objects.pods[i];
            if *pod.name != *name {
                pod.name = name.as_str().into();
                if pod.uid.starts_with(&*format!("{}/", namespace)) {
                    pod.uid = format!("{namespace}/{name}").into();
                }
            }
        }
    }
    Ok(())
}
