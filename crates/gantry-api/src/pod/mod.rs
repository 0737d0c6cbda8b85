//! The pod as the scheduler sees it, with its effective resource requests computed once.

use std::sync::Arc;

use crate::release::Release;
use crate::{Labels, Resources, Sym};

mod affinity;
mod container;
mod requests;
#[cfg(test)]
mod tests;

pub use affinity::*;
pub use container::*;

/// The default scheduler's name, for pods that name none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// What the release decides about a pod's derived values, stored in the template when the
/// pod is decoded (builders take v1.35's), so that nothing is decided per cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodRules {
    /// Sidecars' host ports count (`Release::sidecar_host_ports`, v1.34+).
    pub sidecar_host_ports: bool,
    /// The defaulted requests a node's pods add up to count sidecars as the real requests
    /// do (`Release::non_zero_requests_count_sidecars`, v1.32+).
    pub non_zero_counts_sidecars: bool,
}

impl PodRules {
    pub fn of(release: Release) -> PodRules {
        PodRules {
            sidecar_host_ports: release.sidecar_host_ports(),
            non_zero_counts_sidecars: release.non_zero_requests_count_sidecars(),
        }
    }
}

impl Default for PodRules {
    fn default() -> PodRules {
        PodRules::of(Release::default())
    }
}

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptionPolicy {
    PreemptLowerPriority,
    Never,
}

/// An object's controlling owner (`metadata.ownerReferences[]` with `controller: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// `apps/v1`, `v1`, `batch/v1`...: with the kind, which controller type owns the pod
    /// (upstream matches the pair, so a `ReplicaSet` of another group is not one).
    pub api_version: Sym,
    pub kind: Sym,
    pub name: Arc<str>,
    pub uid: Arc<str>,
}

/// A pod: its identity and where it is, plus the parts that pods of one template share
/// (labels, annotations, spec) behind an `Arc`. Shared as `Arc<Pod>` everywhere; a copy
/// (to record the node a pod was assumed on) copies a few pointers, never the spec.
///
/// The template's fields read and write through the pod (`pod.labels`, `pod.containers`):
/// writing to a pod whose template is shared gives it a template of its own first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    pub node_name: Option<Sym>,
    pub nominated_node_name: Option<Sym>,
    /// Set when the pod has a deletion timestamp.
    pub terminating: bool,
    /// Its first `DisruptionTarget` condition is `True` with reason
    /// `PreemptionByScheduler`: a scheduler chose it as a preemption victim (upstream's
    /// `podTerminatingByPreemption` reads it, with `terminating`).
    pub preempted_by_scheduler: bool,
    /// Succeeded and Failed pods hold nothing: see [`Pod::is_finished`].
    pub phase: PodPhase,
    /// `status.startTime` in seconds since the epoch (preemption prefers younger victims).
    pub start_time: Option<i64>,
    /// Annotations the scheduler wrote on binding (HAMi's devices and bind time): this
    /// pod's own, read before the template's, so that writing them copies no spec.
    pub bind_annotations: Option<Arc<[crate::node::Annotation]>>,
    /// `metadata.generation` (0 when absent): the conditions the scheduler writes observe
    /// it (`observedGeneration`, PodObservedGenerationTracking).
    pub generation: i64,
    /// `status.resourceClaimStatuses`: the claims the claim controller made for this
    /// pod's template entries (the pod's own, so that naming them copies no spec).
    pub claim_statuses: Option<Arc<[crate::dra::ResourceClaimStatus]>>,
    template: Arc<PodTemplate>,
}

/// What pods created from one template have in common: labels, annotations and the spec,
/// with the effective resource requests computed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTemplate {
    pub labels: Labels,
    pub annotations: Arc<[(Arc<str>, Arc<str>)]>,
    pub priority: i32,
    pub priority_class_name: Option<Sym>,
    pub preemption_policy: PreemptionPolicy,
    pub scheduler_name: Sym,
    pub node_selector: Labels,
    pub scheduling_gates: Vec<Arc<str>>,
    pub tolerations: Vec<Toleration>,
    pub affinity: Affinity,
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    pub containers: Vec<Container>,
    pub init_containers: Vec<Container>,
    /// RuntimeClass overhead (boxed: rare, and pods are many).
    pub overhead: Option<Box<Resources>>,
    pub volumes: Vec<Volume>,
    /// `spec.resources.requests` for the supported resources (boxed: rare).
    pub pod_level: Option<Box<PodLevelRequests>>,
    /// What the release decided (see [`PodRules`]).
    pub rules: PodRules,
    /// The owner reference marked as controller (a ReplicaSet, a Job, a DaemonSet, ...).
    pub controller: Option<Arc<OwnerRef>>,
    /// `spec.resourceClaims`: the DRA claims the pod uses (with the claim names its
    /// status gives, so pods whose claims differ do not share a template).
    pub resource_claims: Box<[crate::dra::PodResourceClaim]>,
    /// The node features the spec needs (NodeDeclaredFeatures; which of them a release
    /// infers is the plugin's to say).
    pub needs_features: crate::node_features::NodeFeatures,
    /// The images of `volumes[].image` (ImageVolume), which ImageLocality counts from v1.36.
    pub image_volumes: Vec<Sym>,
    /// `spec.schedulingGroup.podGroupName`: the PodGroup (same namespace) the pod belongs
    /// to, scheduled with it while GenericWorkload is on.
    pub scheduling_group: Option<Sym>,
    requests: Resources,
    non_zero_requests: Resources,
    /// The pod's requests as its node counts them, when they differ from `requests`
    /// (an in-place resize under way).
    usage: Option<Box<Resources>>,
    /// The defaulted cpu and memory its node counts for scoring.
    non_zero_usage: Resources,
}

impl std::ops::Deref for Pod {
    type Target = PodTemplate;

    #[inline]
    fn deref(&self) -> &PodTemplate {
        &self.template
    }
}

impl std::ops::DerefMut for Pod {
    /// Copy-on-write: a template shared with other pods is copied before it changes.
    fn deref_mut(&mut self) -> &mut PodTemplate {
        Arc::make_mut(&mut self.template)
    }
}

impl Pod {
    /// A pod with no containers: the start of a builder chain (see the `with_*` methods).
    pub fn new(namespace: &str, name: &str) -> Pod {
        Pod {
            namespace: Sym::new(namespace),
            name: Arc::from(name),
            uid: Arc::from(format!("{namespace}/{name}")),
            node_name: None,
            nominated_node_name: None,
            terminating: false,
            preempted_by_scheduler: false,
            phase: PodPhase::Pending,
            start_time: None,
            bind_annotations: None,
            generation: 0,
            claim_statuses: None,
            template: Arc::new(PodTemplate {
                labels: Labels::default(),
                annotations: Arc::from([]),
                priority: 0,
                priority_class_name: None,
                preemption_policy: PreemptionPolicy::PreemptLowerPriority,
                scheduler_name: Sym::new(DEFAULT_SCHEDULER_NAME),
                node_selector: Labels::default(),
                scheduling_gates: Vec::new(),
                tolerations: Vec::new(),
                affinity: Affinity::default(),
                topology_spread_constraints: Vec::new(),
                containers: Vec::new(),
                init_containers: Vec::new(),
                overhead: None,
                pod_level: None,
                rules: PodRules::default(),
                volumes: Vec::new(),
                controller: None,
                resource_claims: Box::default(),
                needs_features: Default::default(),
                image_volumes: Vec::new(),
                scheduling_group: None,
                requests: Resources::default(),
                non_zero_requests: Resources::default(),
                usage: None,
                non_zero_usage: Resources::default(),
            }),
        }
    }

    /// `namespace/name`, as kube-scheduler names pods in messages.
    pub fn key(&self) -> String {
        let namespace = self.namespace.as_str();
        // One allocation of the right size (`format!` grows its buffer).
        let mut key = String::with_capacity(namespace.len() + 1 + self.name.len());
        key.push_str(namespace);
        key.push('/');
        key.push_str(&self.name);
        key
    }

    /// The same pod on `node` (as the binding subresource records it): a copy of the
    /// pod's identity, sharing its template.
    pub fn bound_to(&self, node: Sym) -> Pod {
        Pod {
            node_name: Some(node),
            nominated_node_name: None,
            ..self.clone()
        }
    }

    /// Whether the two pods share one template (nothing of it was copied).
    pub fn shares_template(&self, other: &Pod) -> bool {
        Arc::ptr_eq(&self.template, &other.template)
    }

    /// Whether the two pods' templates are equal, shared or not.
    pub fn same_template(&self, other: &Pod) -> bool {
        self.shares_template(other) || self.template == other.template
    }

    /// Another pod made from the same template, as a controller makes its replicas: its
    /// own name and the uid that follows from it (`namespace/name`), everything else as
    /// this pod's, the template shared.
    pub fn replica(&self, name: &str) -> Pod {
        Pod {
            name: Arc::from(name),
            uid: Arc::from(format!("{}/{name}", self.namespace)),
            claim_statuses: None,
            ..self.clone()
        }
    }

    /// The claim a `spec.resourceClaims` entry refers to: its claim by name, or the one
    /// made from its template as the pod's status names it. Before the claim controller
    /// has run, Gantry's what-if engine names it `<pod>-<entry>` (the controller adds a
    /// random suffix, which a what-if answer does without).
    pub fn claim_name(&self, entry: &crate::dra::PodResourceClaim) -> Arc<str> {
        use crate::dra::ClaimSource;
        match &entry.source {
            ClaimSource::Claim(name) => name.clone(),
            ClaimSource::Template(_) => self
                .claim_statuses
                .iter()
                .flat_map(|s| s.iter())
                .find(|s| s.name == entry.name)
                .map(|s| s.claim.clone())
                .unwrap_or_else(|| Arc::from(format!("{}-{}", self.name, entry.name))),
        }
    }

    /// Whether the claim controller has named a claim for this template entry.
    pub fn has_claim_status(&self, entry: &str) -> bool {
        self.claim_statuses
            .iter()
            .flat_map(|s| s.iter())
            .any(|s| &*s.name == entry)
    }

    /// Shares `other`'s template if it equals this pod's (pods decoded one by one from
    /// one controller's template); whether the two share one now.
    pub fn share_template_of(&mut self, other: &Pod) -> bool {
        if !self.shares_template(other) && self.template == other.template {
            self.template = other.template.clone();
        }
        self.shares_template(other)
    }

    /// The value of the annotation `key`, if the pod has it: the annotations written on
    /// bind first, then the template's.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.bind_annotations
            .as_deref()
            .and_then(|written| crate::node::find_annotation(written, key))
            .or_else(|| crate::node::find_annotation(&self.annotations, key))
    }

    /// In phase Succeeded or Failed: its containers are done. Kube-scheduler's informer
    /// does not list such pods (field selector `status.phase!=Succeeded,status.phase!=Failed`),
    /// so they hold no resources, ports or volumes and are never scheduled.
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    pub fn with_container(mut self, container: Container) -> Pod {
        self.containers.push(container);
        self.update_requests();
        self
    }

    pub fn with_init_container(mut self, container: Container) -> Pod {
        self.init_containers.push(container);
        self.update_requests();
        self
    }

    /// Adds a container requesting `milli_cpu` millicores and `memory` bytes.
    pub fn with_requests(self, milli_cpu: i64, memory: i64) -> Pod {
        let n = self.containers.len();
        self.with_container(Container::new(
            &format!("c{n}"),
            Some(milli_cpu),
            Some(memory),
        ))
    }

    pub fn with_labels<'a>(mut self, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Pod {
        self.labels = Labels::from_strs(pairs);
        self
    }

    pub fn with_priority(mut self, priority: i32) -> Pod {
        self.priority = priority;
        self
    }

    pub fn on_node(mut self, node: &str) -> Pod {
        self.node_name = Some(Sym::new(node));
        self
    }
}

impl PodTemplate {
    pub fn has_affinity(&self) -> bool {
        !self.affinity.pod_affinity.is_empty() || !self.affinity.pod_anti_affinity.is_empty()
    }

    pub fn has_required_anti_affinity(&self) -> bool {
        !self.affinity.pod_anti_affinity.required.is_empty()
    }

    /// The host ports the pod takes (upstream's `GetHostPorts`): from v1.34 the sidecars'
    /// first, then the containers'.
    pub fn host_ports(&self) -> impl Iterator<Item = &HostPort> {
        let sidecars = self.rules.sidecar_host_ports;
        (self.init_containers.iter())
            .filter(move |c| sidecars && c.restartable)
            .chain(self.containers.iter())
            .flat_map(|c| c.host_ports.iter())
    }

    /// Whether the pod takes any host port (a quick test before walking them: most pods
    /// take none).
    #[inline]
    pub fn has_host_ports(&self) -> bool {
        self.containers.iter().any(|c| !c.host_ports.is_empty())
            || (self.rules.sidecar_host_ports
                && (self.init_containers.iter()).any(|c| c.restartable && !c.host_ports.is_empty()))
    }
}
