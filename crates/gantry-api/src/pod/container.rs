//! A pod's containers (requests, host ports) and volumes (claims, disks that conflict).

use std::sync::Arc;

use smallvec::SmallVec;

use super::requests::View;
use crate::resources::{DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
use crate::{ResourceName, Resources, Sym};

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
    pub(super) fn spec(&self) -> View<'_> {
        View {
            requests: &self.requests,
            cpu_unset: self.cpu_unset,
            memory_unset: self.memory_unset,
        }
    }

    /// What the container holds on its node: the resized requests if any, else the spec's.
    pub(super) fn held(&self) -> View<'_> {
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
