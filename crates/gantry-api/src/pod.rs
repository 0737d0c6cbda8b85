//! The pod as the scheduler sees it, with its effective resource requests computed once.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::labels::{LabelSelector, NodeSelector, NodeSelectorTerm};
use crate::release::Release;
use crate::resources::{DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
use crate::{Labels, ResourceName, Resources, Sym, TaintEffect};

/// The default scheduler's name, for pods that name none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TolerationOp {
    Equal,
    Exists,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    /// `None` with `Exists` tolerates every taint.
    pub key: Option<Sym>,
    pub op: TolerationOp,
    pub value: Sym,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Upstream's `Toleration.ToleratesTaint`.
    pub fn tolerates(&self, taint: &crate::Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_some_and(|k| k != taint.key) {
            return false;
        }
        match self.op {
            TolerationOp::Equal => self.value == taint.value,
            TolerationOp::Exists => true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredSchedulingTerm {
    pub weight: i32,
    pub term: NodeSelectorTerm,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAffinity {
    pub required: Option<NodeSelector>,
    pub preferred: Vec<PreferredSchedulingTerm>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    /// `None` (absent) matches no pod; an empty selector matches every pod.
    pub label_selector: Option<LabelSelector>,
    pub namespaces: Vec<Sym>,
    /// `None` means "only `namespaces`" (or the pod's own namespace when that is empty too);
    /// an empty selector means every namespace.
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: Sym,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedPodAffinityTerm {
    pub weight: i32,
    pub term: PodAffinityTerm,
}

/// Pod affinity or anti-affinity: the two have the same shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinity {
    pub required: Vec<PodAffinityTerm>,
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

impl PodAffinity {
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affinity {
    pub node_affinity: NodeAffinity,
    pub pod_affinity: PodAffinity,
    pub pod_anti_affinity: PodAffinity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

/// Whether node affinity / taints decide which nodes count in a spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologySpreadConstraint {
    pub max_skew: i32,
    pub topology_key: Sym,
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// `matchLabelKeys` already merged in as `In` requirements.
    pub label_selector: Option<LabelSelector>,
    pub min_domains: Option<i32>,
    /// Default Honor.
    pub node_affinity_policy: InclusionPolicy,
    /// Default Ignore.
    pub node_taints_policy: InclusionPolicy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

/// A port a container asks the node for (`hostPort` > 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// "0.0.0.0" when unset: it conflicts with every address.
    pub ip: Sym,
    pub protocol: Protocol,
    pub port: i32,
}

impl HostPort {
    pub fn any_ip() -> Sym {
        Sym::new("0.0.0.0")
    }

    /// Upstream's `HostPortInfo.CheckConflict`: same protocol and port, and the same
    /// address or either side on 0.0.0.0.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        if self.protocol != other.protocol || self.port != other.port {
            return false;
        }
        let any = HostPort::any_ip();
        self.ip == other.ip || self.ip == any || other.ip == any
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub name: Arc<str>,
    pub image: Sym,
    pub requests: Resources,
    /// No cpu request was given (scoring then counts the default 100m).
    pub cpu_unset: bool,
    /// No memory request was given (scoring then counts the default 200Mi).
    pub memory_unset: bool,
    pub host_ports: SmallVec<[HostPort; 1]>,
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub restartable: bool,
    /// Resources named with a zero amount, which `requests` does not keep: HAMi tells
    /// `nvidia.com/gpucores: 0` from no `nvidia.com/gpucores` at all.
    pub zero_requests: Box<[Sym]>,
    /// What a bound pod's container holds while it is resized in place, when the pod's
    /// status makes that differ from the spec (the release's rule, applied at decode:
    /// see `decode::pod`). Only the pod's usage on its node reads it.
    pub resized: Option<Box<ContainerRequests>>,
}

/// A container's requests with which of cpu and memory are named at all (upstream keeps
/// a map: a resource named with 0 is not a missing one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRequests {
    pub requests: Resources,
    pub cpu_unset: bool,
    pub memory_unset: bool,
}

/// The pod-level requests (`spec.resources.requests`, gate PodLevelResources), for the
/// resources upstream supports there (cpu, memory, hugepages-*): each one named replaces
/// the containers' aggregate (upstream's `PodRequests`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLevelRequests {
    pub requests: Resources,
    /// The resources named, zero amounts included (a named 0 replaces too).
    pub named: Box<[ResourceName]>,
}

impl PodLevelRequests {
    pub fn names(&self, resource: ResourceName) -> bool {
        self.named.contains(&resource)
    }
}

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

impl Container {
    /// Whether the container names `resource` in its requests or limits, zero included.
    pub fn names_resource(&self, resource: Sym) -> bool {
        self.requests.scalar(resource) != 0 || self.zero_requests.contains(&resource)
    }

    /// A container with the given requests (`None` for an absent cpu or memory request).
    pub fn new(name: &str, milli_cpu: Option<i64>, memory: Option<i64>) -> Container {
        Container {
            name: Arc::from(name),
            image: Sym::new(""),
            requests: Resources::new(milli_cpu.unwrap_or(0), memory.unwrap_or(0)),
            cpu_unset: milli_cpu.is_none(),
            memory_unset: memory.is_none(),
            host_ports: SmallVec::new(),
            restartable: false,
            zero_requests: Box::new([]),
            resized: None,
        }
    }

    /// The spec's requests, as a view.
    fn spec(&self) -> View<'_> {
        View {
            requests: &self.requests,
            cpu_unset: self.cpu_unset,
            memory_unset: self.memory_unset,
        }
    }

    /// What the container holds on its node: the resized requests if any, else the spec's.
    fn held(&self) -> View<'_> {
        match &self.resized {
            Some(r) => View {
                requests: &r.requests,
                cpu_unset: r.cpu_unset,
                memory_unset: r.memory_unset,
            },
            None => self.spec(),
        }
    }

    /// Requests with cpu and memory defaulted when unset, as scoring counts them.
    pub fn non_zero_requests(&self) -> Resources {
        let mut r = self.requests.clone();
        if self.cpu_unset {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if self.memory_unset {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
        r
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub name: Arc<str>,
    /// `persistentVolumeClaim.claimName`, when the volume is a claim.
    pub claim_name: Option<Arc<str>>,
    pub read_only: bool,
    /// An in-tree disk that two pods on one node may not both mount (VolumeRestrictions).
    pub disk: Option<Disk>,
    /// A `hostPath`, or an `emptyDir` not held in memory: data on the node's own disk,
    /// which the Cluster Autoscaler does not throw away by draining the node.
    pub local: bool,
    /// A generic ephemeral volume: `claim_name` is `<pod>-<volume>`, the claim the
    /// ephemeral volume controller creates for (and owned by) this pod. VolumeBinding and
    /// NodeVolumeLimits count it as a claim, the other volume rules do not (as upstream).
    pub ephemeral: bool,
}

impl Volume {
    /// A volume that mounts the named claim.
    pub fn claim(name: &str, claim: &str) -> Volume {
        Volume {
            name: Arc::from(name),
            claim_name: Some(Arc::from(claim)),
            read_only: false,
            disk: None,
            local: false,
            ephemeral: false,
        }
    }

    /// The claim a `persistentVolumeClaim` volume names (not an ephemeral volume's).
    pub fn persistent_claim(&self) -> Option<&str> {
        self.claim_name.as_deref().filter(|_| !self.ephemeral)
    }
}

/// The in-tree volume sources that name a disk directly; upstream's `isVolumeConflict`
/// forbids two pods on one node from mounting the same one (read-only mounts aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disk {
    GcePersistentDisk {
        pd_name: Arc<str>,
        read_only: bool,
    },
    AwsElasticBlockStore {
        volume_id: Arc<str>,
    },
    Iscsi {
        iqn: Arc<str>,
        read_only: bool,
    },
    Rbd {
        monitors: Box<[Arc<str>]>,
        pool: Arc<str>,
        image: Arc<str>,
        read_only: bool,
    },
}

impl Disk {
    /// Upstream's `isVolumeConflict` for two disks: the same GCE disk unless both mounts
    /// are read-only; the same EBS volume always; the same iSCSI IQN unless both are
    /// read-only; the same RBD image (a shared monitor, same pool and image) unless both
    /// are read-only.
    pub fn conflicts(&self, other: &Disk) -> bool {
        match (self, other) {
            (
                Disk::GcePersistentDisk { pd_name, read_only },
                Disk::GcePersistentDisk {
                    pd_name: other_name,
                    read_only: other_read_only,
                },
            ) => pd_name == other_name && !(*read_only && *other_read_only),
            (
                Disk::AwsElasticBlockStore { volume_id },
                Disk::AwsElasticBlockStore {
                    volume_id: other_id,
                },
            ) => volume_id == other_id,
            (
                Disk::Iscsi { iqn, read_only },
                Disk::Iscsi {
                    iqn: other_iqn,
                    read_only: other_read_only,
                },
            ) => iqn == other_iqn && !(*read_only && *other_read_only),
            (
                Disk::Rbd {
                    monitors,
                    pool,
                    image,
                    read_only,
                },
                Disk::Rbd {
                    monitors: other_monitors,
                    pool: other_pool,
                    image: other_image,
                    read_only: other_read_only,
                },
            ) => {
                monitors.iter().any(|m| other_monitors.contains(m))
                    && pool == other_pool
                    && image == other_image
                    && !(*read_only && *other_read_only)
            }
            _ => false,
        }
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
    /// Succeeded and Failed pods hold nothing: see [`Pod::is_finished`].
    pub phase: PodPhase,
    /// `status.startTime` in seconds since the epoch (preemption prefers younger victims).
    pub start_time: Option<i64>,
    /// Annotations the scheduler wrote on binding (HAMi's devices and bind time): this
    /// pod's own, read before the template's, so that writing them copies no spec.
    pub bind_annotations: Option<Arc<[crate::node::Annotation]>>,
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
            phase: PodPhase::Pending,
            start_time: None,
            bind_annotations: None,
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
    /// The effective request of the pod to be placed: what the node must have free for it
    /// (upstream's `PodRequests` without status: pod-level requests replace the containers'
    /// aggregate, overhead added).
    #[inline]
    pub fn requests(&self) -> &Resources {
        &self.requests
    }

    /// The pod's requests with absent cpu/memory defaulted to 100m/200Mi per container, as
    /// NodeResourcesFit's score reads the pod to be placed (upstream's
    /// `calculatePodResourceRequest`). Pod-level requests do not replace the aggregate
    /// here: upstream builds Fit's scorer without its `enablePodLevelResources` flag
    /// (`noderesources/fit.go`, `nodeResourceStrategyTypeMap`, v1.32 to v1.35.4), so it
    /// skips them, while Filter, BalancedAllocation and the node's usage read them.
    #[inline]
    pub fn non_zero_requests(&self) -> &Resources {
        &self.non_zero_requests
    }

    /// What the pod holds on its node (`NodeInfo.Requested`): [`Self::requests`], or more
    /// while an in-place resize is under way (upstream's `CalculateResource`).
    #[inline]
    pub fn usage(&self) -> &Resources {
        self.usage.as_deref().unwrap_or(&self.requests)
    }

    /// The defaulted cpu and memory the pod adds to its node's `NonZeroRequested` (other
    /// resources zero).
    #[inline]
    pub fn non_zero_usage(&self) -> &Resources {
        &self.non_zero_usage
    }

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

    /// The first resource whose request or usage adds up to more than i64 holds (cpu in
    /// millicores, the rest in units), if any: the API server takes every quantity that
    /// fits alone, but kube-scheduler's int64 sum of them wraps. Sums saturate, so such a
    /// total stands at an end of i64; the decoder refuses the pod rather than schedule it
    /// with a saturated request.
    pub fn requests_overflow(&self) -> Option<crate::ResourceName> {
        [
            self.requests(),
            self.non_zero_requests(),
            self.usage(),
            self.non_zero_usage(),
        ]
        .into_iter()
        .find_map(Resources::first_saturated)
    }

    /// The containers' aggregate requests from the spec, without pod-level requests and
    /// overhead (upstream's `AggregateContainerRequests`, which the API server's defaulting
    /// and validation of pod-level resources read).
    pub fn aggregate_container_requests(&self) -> Resources {
        aggregate(
            self,
            Container::spec,
            Defaults {
                cpu: false,
                memory: false,
            },
        )
    }

    /// Recomputes the derived requests from the containers, pod-level requests, overhead
    /// and rules. Call after changing any of them; the decoder and builders do.
    pub fn update_requests(&mut self) {
        const NONE: Defaults = Defaults {
            cpu: false,
            memory: false,
        };
        const BOTH: Defaults = Defaults {
            cpu: true,
            memory: true,
        };
        self.requests = pod_requests(self, Container::spec, NONE);
        self.non_zero_requests = aggregate(self, Container::spec, BOTH);
        if let Some(overhead) = &self.overhead {
            self.non_zero_requests.add(overhead);
        }
        let usage = pod_requests(self, Container::held, NONE);
        let non_zero = if !self.rules.non_zero_counts_sidecars {
            legacy_non_zero(self)
        } else if let Some(pod_level) = &self.pod_level {
            // Upstream's getNonMissingContainerRequests: with pod-level requests, the
            // defaults fill only what is missing at every level.
            let named = |resource: ResourceName, unset: fn(&View<'_>) -> bool| {
                pod_level.names(resource)
                    || self.overhead.as_ref().is_some_and(|o| o.get(resource) != 0)
                    || (self.containers.iter())
                        .chain(self.init_containers.iter())
                        .any(|c| !unset(&c.held()))
            };
            let defaults = Defaults {
                cpu: !named(ResourceName::Cpu, |v| v.cpu_unset),
                memory: !named(ResourceName::Memory, |v| v.memory_unset),
            };
            if defaults.cpu || defaults.memory {
                pod_requests(self, Container::held, defaults)
            } else {
                usage.clone()
            }
        } else {
            pod_requests(self, Container::held, BOTH)
        };
        self.non_zero_usage = Resources::new(non_zero.milli_cpu, non_zero.memory);
        self.usage = (usage != self.requests).then(|| Box::new(usage));
    }
}

/// A container's requests as one rule reads them.
struct View<'a> {
    requests: &'a Resources,
    cpu_unset: bool,
    memory_unset: bool,
}

/// Which of cpu and memory take their default where a container leaves them out
/// (upstream's `NonMissingContainerRequests`).
#[derive(Clone, Copy)]
struct Defaults {
    cpu: bool,
    memory: bool,
}

impl View<'_> {
    fn with(&self, defaults: Defaults) -> Resources {
        let mut r = self.requests.clone();
        if defaults.cpu && self.cpu_unset {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if defaults.memory && self.memory_unset {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
        r
    }
}

/// Upstream's `PodRequests` (component-helpers/resource/helpers.go): the containers'
/// aggregate (`AggregateContainerRequests`: the sum over regular containers and sidecars,
/// at least the largest init container's request counting the sidecars started before
/// it), then each pod-level request in place of the aggregate, then overhead.
fn pod_requests(
    pod: &PodTemplate,
    view: fn(&Container) -> View<'_>,
    defaults: Defaults,
) -> Resources {
    let mut total = aggregate(pod, view, defaults);
    if let Some(pod_level) = &pod.pod_level {
        for &resource in &pod_level.named {
            total.set(resource, pod_level.requests.get(resource));
        }
    }
    if let Some(overhead) = &pod.overhead {
        total.add(overhead);
    }
    total
}

/// Upstream's `AggregateContainerRequests`. Sums saturate at the ends of i64 (see
/// [`PodTemplate::requests_overflow`]).
fn aggregate(pod: &PodTemplate, view: fn(&Container) -> View<'_>, defaults: Defaults) -> Resources {
    let mut total = Resources::default();
    for c in &pod.containers {
        total.add(&view(c).with(defaults));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in &pod.init_containers {
        let r = view(c).with(defaults);
        if c.restartable {
            total.add(&r);
            sidecars.add(&r);
            init_peak.max_with(&sidecars);
        } else {
            let mut during = r;
            during.add(&sidecars);
            init_peak.max_with(&during);
        }
    }
    total.max_with(&init_peak);
    total
}

/// The defaulted cpu and memory of a bound pod before v1.32 (`calculateResource` in
/// pkg/scheduler/framework/types.go at release-1.31): the regular containers' sum, at
/// least what each init container sees while it runs, each of these lists defaulted as
/// a whole (`GetNonzeroRequests` on the list `PodRequests` hands its `ContainerFn`: a
/// sidecar's is the sidecars' running sum, another init container's its own requests
/// plus that sum), sidecars not added to the regular containers; overhead added.
fn legacy_non_zero(pod: &PodTemplate) -> Resources {
    let non_zero = |r: &Resources, cpu_named: bool, memory_named: bool| {
        (
            if cpu_named {
                r.milli_cpu
            } else {
                DEFAULT_MILLI_CPU_REQUEST
            },
            if memory_named {
                r.memory
            } else {
                DEFAULT_MEMORY_REQUEST
            },
        )
    };
    let (mut cpu, mut memory) = (0, 0);
    for c in &pod.containers {
        let v = c.held();
        let (c, m) = non_zero(v.requests, !v.cpu_unset, !v.memory_unset);
        cpu = i64::saturating_add(cpu, c);
        memory = i64::saturating_add(memory, m);
    }
    let (mut init_cpu, mut init_memory) = (0, 0);
    let mut sidecars = Resources::default();
    let (mut sidecars_cpu, mut sidecars_memory) = (false, false);
    for c in &pod.init_containers {
        let v = c.held();
        let (c_cpu, c_memory) = if c.restartable {
            sidecars.add(v.requests);
            sidecars_cpu |= !v.cpu_unset;
            sidecars_memory |= !v.memory_unset;
            non_zero(&sidecars, sidecars_cpu, sidecars_memory)
        } else {
            let mut during = v.requests.clone();
            during.add(&sidecars);
            non_zero(
                &during,
                sidecars_cpu || !v.cpu_unset,
                sidecars_memory || !v.memory_unset,
            )
        };
        init_cpu = init_cpu.max(c_cpu);
        init_memory = init_memory.max(c_memory);
    }
    let mut out = Resources::new(cpu.max(init_cpu), memory.max(init_memory));
    if let Some(overhead) = &pod.overhead {
        out.add(&Resources::new(overhead.milli_cpu, overhead.memory));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(cpu: i64, mem: i64) -> Container {
        Container::new("c", Some(cpu), Some(mem))
    }

    fn sidecar(cpu: i64, mem: i64) -> Container {
        Container {
            restartable: true,
            ..container(cpu, mem)
        }
    }

    #[test]
    fn requests_sum_containers_and_take_init_peak() {
        // Cases re-derived from component-helpers' TestPodResourceRequests.
        let pod = Pod::new("ns", "p")
            .with_container(container(100, 10))
            .with_container(container(200, 20))
            .with_init_container(container(250, 5));
        assert_eq!(pod.requests(), &Resources::new(300, 30));

        let pod = Pod::new("ns", "p")
            .with_container(container(100, 10))
            .with_init_container(container(500, 5));
        assert_eq!(pod.requests(), &Resources::new(500, 10));
    }

    #[test]
    fn sidecars_add_to_containers_and_to_later_init_containers() {
        // init1 (sidecar 1 cpu), init2 (regular 2 cpu) runs while the sidecar runs: 3 cpu
        // peak; steady state: container 1 cpu + sidecar 1 cpu = 2 cpu.
        let pod = Pod::new("ns", "p")
            .with_init_container(sidecar(1000, 0))
            .with_init_container(container(2000, 0))
            .with_container(container(1000, 0));
        assert_eq!(pod.requests().milli_cpu, 3000);

        let pod = Pod::new("ns", "p")
            .with_init_container(container(2000, 0))
            .with_init_container(sidecar(1000, 0))
            .with_container(container(1000, 0));
        assert_eq!(pod.requests().milli_cpu, 2000);
    }

    #[test]
    fn overhead_is_added() {
        let mut pod = Pod::new("ns", "p").with_container(container(100, 10));
        pod.overhead = Some(Box::new(Resources::new(50, 5)));
        pod.update_requests();
        assert_eq!(pod.requests(), &Resources::new(150, 15));
    }

    #[test]
    fn non_zero_requests_default_missing_cpu_and_memory() {
        let pod = Pod::new("ns", "p")
            .with_container(Container::new("a", None, None))
            .with_container(Container::new("b", Some(0), Some(300)));
        assert_eq!(pod.requests(), &Resources::new(0, 300));
        assert_eq!(
            pod.non_zero_requests(),
            &Resources::new(DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST + 300)
        );
    }

    #[test]
    fn a_copy_shares_the_template_and_a_write_copies_it() {
        let pod = Pod::new("ns", "p")
            .with_labels([("app", "web")])
            .with_requests(100, 10);
        let bound = pod.bound_to(Sym::new("n1"));
        assert!(
            bound.shares_template(&pod),
            "recording the node copies no spec"
        );
        assert_eq!(bound.node_name, Some(Sym::new("n1")));
        assert_eq!(pod.node_name, None);
        let mut edited = bound.clone();
        edited.priority = 7;
        assert!(
            !edited.shares_template(&pod),
            "a write gets a template of its own"
        );
        assert_eq!((pod.priority, bound.priority, edited.priority), (0, 0, 7));
        assert_eq!(edited.requests(), pod.requests());
    }

    #[test]
    fn replicas_share_the_template_and_equal_templates_can_be_shared() {
        let pod = Pod::new("ns", "web-0")
            .with_labels([("app", "web")])
            .with_requests(100, 10)
            .on_node("n1");
        let replica = pod.replica("web-1");
        assert!(replica.shares_template(&pod));
        assert_eq!(
            (&*replica.name, &*replica.uid, replica.node_name),
            ("web-1", "ns/web-1", pod.node_name)
        );

        let mut decoded_apart = Pod::new("ns", "web-2")
            .with_labels([("app", "web")])
            .with_requests(100, 10);
        assert!(!decoded_apart.shares_template(&pod));
        assert!(decoded_apart.share_template_of(&pod));
        assert!(decoded_apart.shares_template(&pod));
        let mut different = Pod::new("ns", "db-0").with_requests(100, 10);
        assert!(!different.share_template_of(&pod), "labels differ");
    }

    #[test]
    fn disks_conflict_as_upstream_is_volume_conflict_says() {
        let gce = |name: &str, read_only| Disk::GcePersistentDisk {
            pd_name: Arc::from(name),
            read_only,
        };
        assert!(gce("foo", false).conflicts(&gce("foo", false)));
        assert!(gce("foo", true).conflicts(&gce("foo", false)));
        assert!(
            !gce("foo", true).conflicts(&gce("foo", true)),
            "all read-only"
        );
        assert!(!gce("foo", false).conflicts(&gce("bar", false)));
        let ebs = |id: &str| Disk::AwsElasticBlockStore {
            volume_id: Arc::from(id),
        };
        assert!(ebs("foo").conflicts(&ebs("foo")));
        assert!(!ebs("foo").conflicts(&ebs("bar")));
        assert!(!ebs("foo").conflicts(&gce("foo", false)), "different kinds");
        let iscsi = |iqn: &str, read_only| Disk::Iscsi {
            iqn: Arc::from(iqn),
            read_only,
        };
        let target = "iqn.2016-12.server:storage.target01";
        assert!(iscsi(target, false).conflicts(&iscsi(target, true)));
        assert!(!iscsi(target, true).conflicts(&iscsi(target, true)));
        assert!(
            !iscsi(target, false).conflicts(&iscsi("iqn.2016-12.server:storage.target02", false))
        );
        let rbd = |monitors: &[&str], image: &str, read_only| Disk::Rbd {
            monitors: monitors.iter().map(|m| Arc::from(*m)).collect(),
            pool: Arc::from("foo"),
            image: Arc::from(image),
            read_only,
        };
        assert!(rbd(&["a", "b"], "bar", false).conflicts(&rbd(&["b", "c"], "bar", false)));
        assert!(!rbd(&["a", "b"], "bar", false).conflicts(&rbd(&["c", "d"], "bar", false)));
        assert!(!rbd(&["a"], "bar", false).conflicts(&rbd(&["a"], "baz", false)));
        assert!(!rbd(&["a"], "bar", true).conflicts(&rbd(&["a"], "bar", true)));
    }

    const MI: i64 = 1024 * 1024;

    fn with_pod_level(mut pod: Pod, named: &[(ResourceName, i64)]) -> Pod {
        let mut requests = Resources::default();
        for &(resource, amount) in named {
            requests.set(resource, amount);
        }
        pod.pod_level = Some(Box::new(PodLevelRequests {
            requests,
            named: named.iter().map(|(r, _)| *r).collect(),
        }));
        pod.update_requests();
        pod
    }

    fn unset() -> Container {
        Container::new("c", None, None)
    }

    #[test]
    fn pod_level_requests_replace_the_containers_aggregate() {
        use ResourceName::{Cpu, Memory};
        // Rows of component-helpers/resource/helpers_test.go TestPodLevelResourceRequests
        // (cpu in millicores, memory in Mi): pod-level, containers, init containers
        // (sidecar when flagged), expected PodRequests.
        type Row = (
            &'static str,
            &'static [(ResourceName, i64)],
            &'static [(i64, i64)],
            &'static [(i64, i64, bool)],
            (i64, i64),
        );
        let rows: &[Row] = &[
            ("pod level memory", &[(Memory, 2)], &[], &[], (0, 2)),
            (
                "pod level memory and container level cpu",
                &[(Memory, 2)],
                &[(2, 0)],
                &[],
                (2, 2),
            ),
            ("only container level", &[], &[(2, 3)], &[], (2, 3)),
            (
                "both levels",
                &[(Cpu, 8), (Memory, 6)],
                &[(2, 3)],
                &[],
                (8, 6),
            ),
            (
                "container and init container",
                &[],
                &[(2, 3)],
                &[(4, 5, false)],
                (4, 5),
            ),
            (
                "container and sidecar",
                &[],
                &[(2, 3)],
                &[(4, 5, true)],
                (6, 8),
            ),
            (
                "container, sidecar and init",
                &[],
                &[(2, 3)],
                &[(4, 5, true), (8, 6, false)],
                (12, 11),
            ),
            (
                "pod level over container, sidecar and init",
                &[(Cpu, 18), (Memory, 15)],
                &[(2, 3)],
                &[(4, 5, true), (8, 6, false)],
                (18, 15),
            ),
        ];
        for (name, pod_level, containers, init, (cpu, memory)) in rows {
            let mut pod = Pod::new("ns", "p");
            for &(c, m) in *containers {
                pod = pod.with_container(container(c, m * MI));
            }
            for &(c, m, sidecar) in *init {
                let mut ic = container(c, m * MI);
                ic.restartable = sidecar;
                pod = pod.with_init_container(ic);
            }
            let levels: Vec<_> = pod_level
                .iter()
                .map(|&(r, a)| (r, if r == Memory { a * MI } else { a }))
                .collect();
            let pod = if levels.is_empty() {
                pod
            } else {
                with_pod_level(pod, &levels)
            };
            assert_eq!(
                (pod.requests().milli_cpu, pod.requests().memory),
                (*cpu, memory * MI),
                "{name}"
            );
            assert_eq!(pod.usage(), pod.requests(), "{name}: nothing resized");
        }
    }

    #[test]
    fn overhead_is_added_after_pod_level_requests() {
        // TestPodRequestsAndLimits "req-and-overhead", then the same with the cpu set at
        // pod level: the pod-level request replaces the aggregate, overhead comes on top.
        let mut pod = Pod::new("ns", "p").with_container(container(1000, 10));
        pod.overhead = Some(Box::new(Resources::new(5000, 5)));
        pod.update_requests();
        assert_eq!(pod.requests(), &Resources::new(6000, 15));
        let pod = with_pod_level(pod, &[(ResourceName::Cpu, 3000)]);
        assert_eq!(pod.requests(), &Resources::new(8000, 15));
    }

    #[test]
    fn bound_pods_non_zero_requests_with_pod_level_requests() {
        use ResourceName::{Cpu, EphemeralStorage, Memory};
        let (cpu, memory) = (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST);
        // Rows of pkg/scheduler/framework/types_test.go TestPodInfoCalculateResources:
        // (usage cpu, memory), (non-zero cpu, memory).
        let requestless = Pod::new("ns", "p").with_container(unset());
        assert_eq!(requestless.usage(), &Resources::default());
        assert_eq!(requestless.non_zero_usage(), &Resources::new(cpu, memory));

        let both = with_pod_level(
            Pod::new("ns", "p")
                .with_init_container(container(500, 500 * MI))
                .with_container(container(500, 500 * MI)),
            &[(Cpu, 1200), (Memory, 1200 * MI)],
        );
        assert_eq!(both.usage(), &Resources::new(1200, 1200 * MI));
        assert_eq!(both.non_zero_usage(), &Resources::new(1200, 1200 * MI));

        let mut sidecar = container(500, 500 * MI);
        sidecar.restartable = true;
        let with_sidecar = with_pod_level(
            Pod::new("ns", "p")
                .with_init_container(sidecar)
                .with_container(container(500, 500 * MI)),
            &[(Cpu, 1200), (Memory, 1200 * MI)],
        );
        assert_eq!(
            with_sidecar.non_zero_usage(),
            &Resources::new(1200, 1200 * MI)
        );

        let memory_only = with_pod_level(
            Pod::new("ns", "p")
                .with_init_container(unset())
                .with_container(unset()),
            &[(Memory, 1200 * MI)],
        );
        assert_eq!(memory_only.usage(), &Resources::new(0, 1200 * MI));
        assert_eq!(
            memory_only.non_zero_usage(),
            &Resources::new(cpu, 1200 * MI)
        );

        let cpu_only = with_pod_level(
            Pod::new("ns", "p")
                .with_init_container(unset())
                .with_container(unset()),
            &[(Cpu, 500)],
        );
        assert_eq!(cpu_only.non_zero_usage(), &Resources::new(500, memory));

        let storage = |amount| {
            let mut c = unset();
            c.requests.set(EphemeralStorage, amount);
            c
        };
        let unsupported = with_pod_level(
            Pod::new("ns", "p")
                .with_init_container(storage(500 * MI))
                .with_container(storage(800 * MI)),
            &[(Cpu, 500)],
        );
        let mut usage = Resources::new(500, 0);
        usage.ephemeral_storage = 800 * MI;
        assert_eq!(unsupported.usage(), &usage);
        assert_eq!(unsupported.non_zero_usage(), &Resources::new(500, memory));
    }

    #[test]
    fn defaults_fill_only_what_is_missing_at_every_level() {
        // getNonMissingContainerRequests: one container names memory, so no container's
        // missing memory is defaulted on the node's side; the pod being scored
        // (calculatePodResourceRequest in Fit's scorer, which skips pod-level requests)
        // defaults each container's missing cpu and memory.
        let pod = with_pod_level(
            Pod::new("ns", "p")
                .with_container(Container::new("a", None, Some(300 * MI)))
                .with_container(unset()),
            &[(ResourceName::Cpu, 700)],
        );
        assert_eq!(pod.non_zero_usage(), &Resources::new(700, 300 * MI));
        assert_eq!(
            pod.non_zero_requests(),
            &Resources::new(
                2 * DEFAULT_MILLI_CPU_REQUEST,
                300 * MI + DEFAULT_MEMORY_REQUEST
            )
        );
        // Without pod-level requests both default per container.
        let pod = Pod::new("ns", "p")
            .with_container(Container::new("a", None, Some(300 * MI)))
            .with_container(unset());
        let both = Resources::new(
            2 * DEFAULT_MILLI_CPU_REQUEST,
            300 * MI + DEFAULT_MEMORY_REQUEST,
        );
        assert_eq!(
            (pod.non_zero_usage(), pod.non_zero_requests()),
            (&both, &both)
        );
    }

    #[test]
    fn a_resized_container_counts_in_usage_only() {
        let mut c = container(1000, 100 * MI);
        c.resized = Some(Box::new(ContainerRequests {
            requests: Resources::new(3000, 100 * MI),
            cpu_unset: false,
            memory_unset: false,
        }));
        let pod = Pod::new("ns", "p").with_container(c);
        assert_eq!(pod.requests(), &Resources::new(1000, 100 * MI));
        assert_eq!(pod.usage(), &Resources::new(3000, 100 * MI));
        assert_eq!(pod.non_zero_usage(), &Resources::new(3000, 100 * MI));
        assert_eq!(pod.non_zero_requests(), &Resources::new(1000, 100 * MI));
    }

    #[test]
    fn before_v1_32_the_node_counts_defaulted_requests_without_adding_sidecars() {
        // calculateResource at release-1.31: GetNonzeroRequests on each list PodRequests
        // hands to ContainerFn; sidecars are not added to the regular containers' sum.
        let (cpu, memory) = (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST);
        let mut sidecar = unset();
        sidecar.restartable = true;
        let build = |rules: PodRules, init: Vec<Container>, overhead: Option<Resources>| {
            let mut pod = Pod::new("ns", "p").with_container(unset());
            pod.rules = rules;
            pod.init_containers = init;
            pod.overhead = overhead.map(Box::new);
            pod.update_requests();
            pod
        };
        let v131 = PodRules::of(Release::at(31));
        let v132 = PodRules::of(Release::at(32));
        // A requestless sidecar and container: max(100m, 100m) against 100m + 100m.
        let old = build(v131, vec![sidecar.clone()], None);
        let new = build(v132, vec![sidecar.clone()], None);
        assert_eq!(old.non_zero_usage(), &Resources::new(cpu, memory));
        assert_eq!(new.non_zero_usage(), &Resources::new(2 * cpu, 2 * memory));
        assert_eq!(
            old.non_zero_requests(),
            new.non_zero_requests(),
            "the pod being scored counts sidecars in both"
        );
        // Sidecar 1 cpu, init 2 cpu (started after it), container: the init container
        // sees 3 cpu; memory named by none, so each list defaults to 200Mi once.
        let mut one_cpu_sidecar = Container::new("s", Some(1000), None);
        one_cpu_sidecar.restartable = true;
        let init = vec![one_cpu_sidecar, Container::new("i", Some(2000), None)];
        let old = build(v131, init.clone(), None);
        let new = build(v132, init, None);
        assert_eq!(old.non_zero_usage(), &Resources::new(3000, memory));
        assert_eq!(new.non_zero_usage(), &Resources::new(3000, 2 * memory));
        // Two sidecars: the second one's list is the running sum (1.5 cpu), not its own.
        let mut second = Container::new("t", Some(500), None);
        second.restartable = true;
        let mut first = Container::new("s", Some(1000), None);
        first.restartable = true;
        let old = build(v131, vec![first, second], None);
        assert_eq!(old.non_zero_usage().milli_cpu, 1500);
        // Overhead is added to the old rule's result.
        let old = build(v131, vec![sidecar], Some(Resources::new(50, 5)));
        assert_eq!(old.non_zero_usage(), &Resources::new(cpu + 50, memory + 5));
    }

    #[test]
    fn sidecar_host_ports_count_from_v1_34() {
        // util.GetHostPorts: restartable init containers' ports first, then containers';
        // a regular init container's never.
        let port = |port| HostPort {
            ip: HostPort::any_ip(),
            protocol: Protocol::Tcp,
            port,
        };
        let with_port = |mut c: Container, p, restartable| {
            c.host_ports.push(port(p));
            c.restartable = restartable;
            c
        };
        let build = |rules: PodRules| {
            let mut pod = Pod::new("ns", "p")
                .with_container(with_port(unset(), 80, false))
                .with_init_container(with_port(unset(), 8080, true))
                .with_init_container(with_port(unset(), 9090, false));
            pod.rules = rules;
            pod
        };
        let ports = |pod: &Pod| pod.host_ports().map(|p| p.port).collect::<Vec<_>>();
        assert_eq!(ports(&build(PodRules::of(Release::at(34)))), [8080, 80]);
        assert_eq!(ports(&build(PodRules::default())), [8080, 80]);
        assert_eq!(ports(&build(PodRules::of(Release::at(33)))), [80]);
    }

    #[test]
    fn host_port_conflicts() {
        let any = HostPort::any_ip();
        let ip1 = Sym::new("10.0.0.1");
        let ip2 = Sym::new("10.0.0.2");
        let p = |ip, protocol, port| HostPort { ip, protocol, port };
        assert!(p(any, Protocol::Tcp, 80).conflicts(&p(ip1, Protocol::Tcp, 80)));
        assert!(p(ip1, Protocol::Tcp, 80).conflicts(&p(ip1, Protocol::Tcp, 80)));
        assert!(!p(ip1, Protocol::Tcp, 80).conflicts(&p(ip2, Protocol::Tcp, 80)));
        assert!(!p(any, Protocol::Tcp, 80).conflicts(&p(any, Protocol::Udp, 80)));
        assert!(!p(any, Protocol::Tcp, 80).conflicts(&p(any, Protocol::Tcp, 81)));
    }
}
