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
}

impl Container {
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptionPolicy {
    PreemptLowerPriority,
    Never,
}

/// A pod. Shared as `Arc<Pod>` everywhere, never deep-copied on the scheduling path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    pub labels: Labels,
    pub annotations: Arc<[(Arc<str>, Arc<str>)]>,
    pub priority: i32,
    pub priority_class_name: Option<Sym>,
    pub preemption_policy: PreemptionPolicy,
    pub scheduler_name: Sym,
    pub node_name: Option<Sym>,
    pub nominated_node_name: Option<Sym>,
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
    /// Set when the pod has a deletion timestamp.
    pub terminating: bool,
    /// `status.startTime` in seconds since the epoch (preemption prefers younger victims).
    pub start_time: Option<i64>,
    requests: Resources,
    non_zero_requests: Resources,
}

impl Pod {
    /// A pod with no containers: the start of a builder chain (see the `with_*` methods).
    pub fn new(namespace: &str, name: &str) -> Pod {
        Pod {
            namespace: Sym::new(namespace),
            name: Arc::from(name),
            uid: Arc::from(format!("{namespace}/{name}")),
            labels: Labels::default(),
            annotations: Arc::from([]),
            priority: 0,
            priority_class_name: None,
            preemption_policy: PreemptionPolicy::PreemptLowerPriority,
            scheduler_name: Sym::new(DEFAULT_SCHEDULER_NAME),
            node_name: None,
            nominated_node_name: None,
            node_selector: Labels::default(),
            scheduling_gates: Vec::new(),
            tolerations: Vec::new(),
            affinity: Affinity::default(),
            topology_spread_constraints: Vec::new(),
            containers: Vec::new(),
            init_containers: Vec::new(),
            overhead: None,
            volumes: Vec::new(),
            terminating: false,
            start_time: None,
            requests: Resources::default(),
            non_zero_requests: Resources::default(),
        }
    }

    /// `namespace/name`, as kube-scheduler names pods in messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

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
    /// changing containers; the decoder and builders do.
    pub fn update_requests(&mut self) {
        self.requests = aggregate(self, |c| c.requests.clone());
        self.non_zero_requests = aggregate(self, Container::non_zero_requests);
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

/// Upstream's `PodRequests`: the sum over regular containers and sidecars, at least the
/// largest init container's request (counting the sidecars started before it), plus overhead.
fn aggregate(pod: &Pod, request: impl Fn(&Container) -> Resources) -> Resources {
    let mut total = Resources::default();
    for c in &pod.containers {
        total.add(&request(c));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in &pod.init_containers {
        let r = request(c);
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
    if let Some(overhead) = &pod.overhead {
        total.add(overhead);
    }
    total
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
