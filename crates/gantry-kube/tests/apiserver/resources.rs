//! The resources the test API server serves, and how their paths read.

/// One served resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    /// `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods`, or `leases.coordination.k8s.io`, as API errors name a resource.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const fn core(plural: &'static str, kind: &'static str, namespaced: bool) -> Resource {
    Resource {
        group: "",
        version: "v1",
        plural,
        kind,
        namespaced,
    }
}

const fn grouped(
    group: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        group,
        version: "v1",
        plural,
        kind,
        namespaced,
    }
}

pub const PODS: Resource = core("pods", "Pod", true);
pub const NODES: Resource = core("nodes", "Node", false);
pub const NAMESPACES: Resource = core("namespaces", "Namespace", false);
pub const SERVICES: Resource = core("services", "Service", true);
pub const REPLICATION_CONTROLLERS: Resource =
    core("replicationcontrollers", "ReplicationController", true);
pub const PVS: Resource = core("persistentvolumes", "PersistentVolume", false);
pub const PVCS: Resource = core("persistentvolumeclaims", "PersistentVolumeClaim", true);
pub const EVENTS: Resource = grouped("events.k8s.io", "events", "Event", true);
pub const PRIORITY_CLASSES: Resource = grouped(
    "scheduling.k8s.io",
    "priorityclasses",
    "PriorityClass",
    false,
);
pub const STORAGE_CLASSES: Resource =
    grouped("storage.k8s.io", "storageclasses", "StorageClass", false);
pub const CSI_NODES: Resource = grouped("storage.k8s.io", "csinodes", "CSINode", false);
pub const CSI_DRIVERS: Resource = grouped("storage.k8s.io", "csidrivers", "CSIDriver", false);
pub const CSI_STORAGE_CAPACITIES: Resource = grouped(
    "storage.k8s.io",
    "csistoragecapacities",
    "CSIStorageCapacity",
    true,
);
pub const LEASES: Resource = grouped("coordination.k8s.io", "leases", "Lease", true);
pub const REPLICA_SETS: Resource = grouped("apps", "replicasets", "ReplicaSet", true);
pub const STATEFUL_SETS: Resource = grouped("apps", "statefulsets", "StatefulSet", true);
pub const PDBS: Resource = grouped(
    "policy",
    "poddisruptionbudgets",
    "PodDisruptionBudget",
    true,
);

pub const DEVICE_CLASSES: Resource =
    grouped("resource.k8s.io", "deviceclasses", "DeviceClass", false);
pub const RESOURCE_SLICES: Resource =
    grouped("resource.k8s.io", "resourceslices", "ResourceSlice", false);
pub const RESOURCE_CLAIMS: Resource =
    grouped("resource.k8s.io", "resourceclaims", "ResourceClaim", true);
pub const RESOURCE_CLAIM_TEMPLATES: Resource = grouped(
    "resource.k8s.io",
    "resourceclaimtemplates",
    "ResourceClaimTemplate",
    true,
);

/// DeviceTaintRules as v1.36 serves them (beta, with DRADeviceTaintRules).
pub const DEVICE_TAINT_RULES: Resource = Resource {
    group: "resource.k8s.io",
    version: "v1beta2",
    plural: "devicetaintrules",
    kind: "DeviceTaintRule",
    namespaced: false,
};

/// v1.36's Workload API (GenericWorkload), alpha.
pub const POD_GROUPS: Resource = Resource {
    group: "scheduling.k8s.io",
    version: "v1alpha2",
    plural: "podgroups",
    kind: "PodGroup",
    namespaced: true,
};

/// scheduler-plugins' PodGroup CRD (Coscheduling).
pub const COSCHEDULING_POD_GROUPS: Resource = Resource {
    group: "scheduling.x-k8s.io",
    version: "v1alpha1",
    plural: "podgroups",
    kind: "PodGroup",
    namespaced: true,
};

pub const ALL: [Resource; 24] = [
    PODS,
    NODES,
    NAMESPACES,
    SERVICES,
    REPLICATION_CONTROLLERS,
    PVS,
    PVCS,
    EVENTS,
    PRIORITY_CLASSES,
    STORAGE_CLASSES,
    CSI_NODES,
    CSI_DRIVERS,
    CSI_STORAGE_CAPACITIES,
    LEASES,
    REPLICA_SETS,
    STATEFUL_SETS,
    PDBS,
    DEVICE_CLASSES,
    RESOURCE_SLICES,
    RESOURCE_CLAIMS,
    RESOURCE_CLAIM_TEMPLATES,
    DEVICE_TAINT_RULES,
    POD_GROUPS,
    COSCHEDULING_POD_GROUPS,
];

/// A request path, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub resource: Resource,
    /// Set for namespaced requests (`/namespaces/{ns}/...`).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Parses `/api/v1/...` and `/apis/{group}/{version}/...`.
pub fn parse(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let find = |plural: &str| {
        ALL.into_iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|r| r.namespaced) => {
            (Some(ns.to_string()), [&[*plural][..], tail].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let resource = find(rest.first()?)?;
    Some(Target {
        resource,
        namespace,
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
    })
}
