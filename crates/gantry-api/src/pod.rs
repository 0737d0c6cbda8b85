//! The pod as the scheduler sees it, with its effective resource requests computed once.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::labels::{LabelSelector, NodeSelector, NodeSelectorTerm};
use crate::resources::{DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
use crate::{Labels, Resources, Sym, TaintEffect};

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
    /// The owner reference marked as controller (a ReplicaSet, a Job, a DaemonSet, ...).
    pub controller: Option<Arc<OwnerRef>>,
    /// `spec.resourceClaims`: the DRA claims the pod uses (with the claim names its
    /// status gives, so pods whose claims differ do not share a template).
    pub resource_claims: Box<[crate::dra::PodResourceClaim]>,
    requests: Resources,
    non_zero_requests: Resources,
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
                volumes: Vec::new(),
                controller: None,
                resource_claims: Box::default(),
                requests: Resources::default(),
                non_zero_requests: Resources::default(),
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
            ..self.clone()
        }
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
    /// The effective request: what the node must have free for this pod.
    #[inline]
    pub fn requests(&self) -> &Resources {
        &self.requests
    }

    /// The effective request with absent cpu/memory defaulted to 100m/200Mi per container,
    /// which the scoring plugins use so that pods without requests still spread.
    #[inline]
    pub fn non_zero_requests(&self) -> &Resources {
        &self.non_zero_requests
    }

    pub fn has_affinity(&self) -> bool {
        !self.affinity.pod_affinity.is_empty() || !self.affinity.pod_anti_affinity.is_empty()
    }

    pub fn has_required_anti_affinity(&self) -> bool {
        !self.affinity.pod_anti_affinity.required.is_empty()
    }

    pub fn host_ports(&self) -> impl Iterator<Item = &HostPort> {
        self.containers.iter().flat_map(|c| c.host_ports.iter())
    }

    /// Recomputes the effective requests from the containers and overhead. Call after
    /// changing containers; the decoder and builders do. A sum past i64 saturates (see
    /// [`PodTemplate::requests_overflow`]).
    pub fn update_requests(&mut self) {
        self.requests = aggregate(self, |c| c.requests.clone()).0;
        self.non_zero_requests = aggregate(self, Container::non_zero_requests).0;
    }

    /// The first resource whose effective request adds up to more than i64 holds (cpu in
    /// millicores, the rest in units), if any: the API server takes every quantity that
    /// fits alone, but kube-scheduler's int64 sum of them wraps. The decoder refuses such
    /// a pod rather than schedule it with a saturated request.
    pub fn requests_overflow(&self) -> Option<crate::ResourceName> {
        let (requests, saturated) = aggregate(self, |c| c.requests.clone());
        if saturated {
            return requests.first_saturated();
        }
        let (non_zero, saturated) = aggregate(self, Container::non_zero_requests);
        saturated.then(|| non_zero.first_saturated()).flatten()
    }
}

/// Upstream's `PodRequests`: the sum over regular containers and sidecars, at least the
/// largest init container's request (counting the sidecars started before it), plus
/// overhead. Sums saturate at the ends of i64; the flag says whether one did.
fn aggregate(pod: &PodTemplate, request: impl Fn(&Container) -> Resources) -> (Resources, bool) {
    let mut saturated = false;
    let mut total = Resources::default();
    for c in &pod.containers {
        saturated |= total.add(&request(c));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in &pod.init_containers {
        let r = request(c);
        if c.restartable {
            saturated |= total.add(&r);
            saturated |= sidecars.add(&r);
            init_peak.max_with(&sidecars);
        } else {
            let mut during = r;
            saturated |= during.add(&sidecars);
            init_peak.max_with(&during);
        }
    }
    total.max_with(&init_peak);
    if let Some(overhead) = &pod.overhead {
        saturated |= total.add(overhead);
    }
    (total, saturated)
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
