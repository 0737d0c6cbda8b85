//! Extended resources backed by devices (DRAExtendedResource, KEP-5004: alpha in v1.34,
//! beta and on from v1.36, GA in v1.37). A pod asking for `example.com/gpu: 1` on a node
//! whose allocatable has no `example.com/gpu` gets a device of the class that names
//! `example.com/gpu` as its `extendedResourceName` (or of the class `c` for the implicit
//! name `deviceclass.resource.kubernetes.io/c`): DynamicResources allocates a claim it
//! makes for the pod, with one request per container, as upstream's
//! `extendeddynamicresources.go` and the class cache `extendedresourcecache.go` do.

use std::collections::HashMap;
use std::sync::Arc;

use crate::dra::{AllocationMode, DeviceClass, DeviceRequest};
use crate::pod::Container;
use crate::{Pod, Sym};

/// The prefix of a class's implicit extended resource name (`ResourceDeviceClassPrefix`).
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The annotation (value `"true"`) that marks the claim the scheduler made for a pod's
/// extended resources (`ExtendedResourceClaimAnnotation`).
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";

/// Upstream's `IsDRAExtendedResourceName`: an extended resource name (with a domain
/// other than `kubernetes.io`), or a class's implicit name.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    let extended =
        name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.");
    extended || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// Whether the pod asks for any extended resource a class could serve (the cheap test
/// before looking for classes).
pub fn asks_for_extended_resources(pod: &Pod) -> bool {
    pod.requests()
        .scalars()
        .any(|(name, amount)| amount > 0 && is_dra_extended_resource_name(name.as_str()))
}

/// Where a pod's `claim_statuses` keep the claim its `status.extendedResourceClaimStatus`
/// names: an entry of this name (not a valid entry name, so no `spec.resourceClaims` entry
/// has it), which costs pods without one nothing.
pub const EXTENDED_RESOURCE_CLAIM_STATUS: &str = "<extended-resources>";

/// The key of the claim made for the pod's extended resources: the one its status names
/// (a pod read from a cluster, whose API server named the claim), else the name Gantry
/// gives it.
pub fn extended_claim_key(pod: &Pod) -> crate::dra::ClaimKey {
    let named = (pod.claim_statuses.iter().flat_map(|s| s.iter()))
        .find(|s| &*s.name == EXTENDED_RESOURCE_CLAIM_STATUS);
    crate::dra::ClaimKey {
        namespace: pod.namespace,
        name: match named {
            Some(status) => Sym::new(&status.claim),
            None => Sym::new(&extended_claim_name(pod)),
        },
    }
}

/// Which class serves each extended resource name: upstream's `ExtendedResourceCache`
/// after the classes were added in name order (the order the API lists them in).
#[derive(Debug, Clone, Default)]
pub struct ExtendedResourceClasses {
    by_resource: HashMap<Sym, Arc<DeviceClass>, foldhash::fast::FixedState>,
}

impl ExtendedResourceClasses {
    /// Adds every class as upstream's `updateResourceName2class` does: a class takes an
    /// explicit name from another only if it is newer (or as old, with a smaller name);
    /// a class that loses that contest is skipped whole, implicit name included (an
    /// upstream quirk, kept).
    pub fn new<'a>(classes: impl IntoIterator<Item = &'a Arc<DeviceClass>>) -> Self {
        let mut classes: Vec<&Arc<DeviceClass>> = classes.into_iter().collect();
        classes.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        let mut by_resource = HashMap::default();
        for class in classes {
            if let Some(name) = class.extended_resource_name
                && let Some(holder) = by_resource.get(&name)
            {
                let holder: &Arc<DeviceClass> = holder;
                let older = class.created < holder.created;
                let same_age_larger =
                    class.created == holder.created && class.name.as_str() >= holder.name.as_str();
                if older || same_age_larger {
                    continue;
                }
            }
            if let Some(name) = class.extended_resource_name {
                by_resource.insert(name, class.clone());
            }
            by_resource.insert(implicit_name(class.name), class.clone());
        }
        ExtendedResourceClasses { by_resource }
    }

    /// The class serving `resource`, if any.
    pub fn class_for(&self, resource: Sym) -> Option<&Arc<DeviceClass>> {
        self.by_resource.get(&resource)
    }

    /// The pod's extended resources some class serves, with the class, sorted by name;
    /// empty for most pods (no extended resources at all).
    pub fn requested_by(&self, pod: &Pod) -> Vec<ExtendedRequest> {
        let mut found: Vec<ExtendedRequest> = pod
            .requests()
            .scalars()
            .filter(|(name, amount)| *amount > 0 && is_dra_extended_resource_name(name.as_str()))
            .filter_map(|(resource, _)| {
                let class = self.class_for(resource)?;
                Some(ExtendedRequest {
                    resource,
                    class: class.name,
                })
            })
            .collect();
        found.sort_by(|a, b| a.resource.as_str().cmp(b.resource.as_str()));
        found
    }
}

/// `deviceclass.resource.kubernetes.io/<class>`.
pub fn implicit_name(class: Sym) -> Sym {
    Sym::new(&format!("{DEVICE_CLASS_PREFIX}{class}"))
}

/// One extended resource a pod asks for that a class serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtendedRequest {
    pub resource: Sym,
    pub class: Sym,
}

/// Which claim request serves a container's extended resource
/// (`status.extendedResourceClaimStatus.requestMappings[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMapping {
    pub container: Arc<str>,
    pub resource: Sym,
    pub request: Arc<str>,
}

/// The requests of a pod's extended-resource claim for the resources `served` (those a
/// node leaves to devices), sorted by name, and which container uses which: upstream's
/// `createRequestsAndMappings`. Containers are numbered init containers first; a request
/// is named `container-<index>-request-<index of the resource among the container's
/// requests, sorted by name>`. Containers that run alongside each other (sidecars and
/// regular containers) get a request each; an init container that runs before them first
/// reuses the requests of those after it, then asks for what is missing, and all such
/// init containers share the largest of their requests.
pub fn requests_and_mappings(
    pod: &Pod,
    served: &[ExtendedRequest],
) -> (Vec<DeviceRequest>, Vec<RequestMapping>) {
    let containers: Vec<&Container> = pod
        .init_containers
        .iter()
        .chain(pod.containers.iter())
        .collect();
    let inits = pod.init_containers.len();
    let short_lived = |i: usize| i < inits && !containers[i].restartable;
    let mut requests: Vec<DeviceRequest> = Vec::new();
    let mut mappings = Vec::new();
    for want in served {
        let mut long_lived: Vec<Option<(Arc<str>, i64)>> = vec![None; containers.len()];
        let mut long_lived_mappings = Vec::new();
        for (i, container) in containers.iter().enumerate() {
            if short_lived(i) {
                continue;
            }
            let (request, mapped) = container_request(i, container, want.resource, &[]);
            long_lived[i] = request;
            long_lived_mappings.extend(mapped);
        }
        let mut largest_short: Option<(Arc<str>, i64)> = None;
        let mut short_names: Vec<Arc<str>> = Vec::new();
        let mut short_mappings: Vec<RequestMapping> = Vec::new();
        for (i, container) in containers.iter().enumerate() {
            if !short_lived(i) {
                continue;
            }
            let (request, mapped) =
                container_request(i, container, want.resource, &long_lived[i..]);
            if let Some((name, count)) = request {
                short_names.push(name.clone());
                if largest_short.as_ref().is_none_or(|(_, c)| *c < count) {
                    largest_short = Some((name, count));
                }
            }
            short_mappings.extend(mapped);
        }
        if let Some((largest, _)) = &largest_short
            && short_names.len() > 1
        {
            for mapping in &mut short_mappings {
                if short_names.contains(&mapping.request) {
                    mapping.request = largest.clone();
                }
            }
        }
        let exact = |(name, count): (Arc<str>, i64)| {
            DeviceRequest::exactly(
                &name,
                want.class,
                Vec::new(),
                AllocationMode::ExactCount(u32::try_from(count).unwrap_or(u32::MAX)),
            )
        };
        requests.extend(largest_short.map(exact));
        requests.extend(long_lived.into_iter().flatten().map(exact));
        mappings.extend(long_lived_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

/// Upstream's `createResourceRequestAndMappings` for container `index`: the request it
/// needs beyond what `reusable` (requests of containers after it) gives, and its mappings.
fn container_request(
    index: usize,
    container: &Container,
    resource: Sym,
    reusable: &[Option<(Arc<str>, i64)>],
) -> (Option<(Arc<str>, i64)>, Vec<RequestMapping>) {
    let wanted = container.requests.scalar(resource);
    if wanted == 0 {
        return (None, Vec::new());
    }
    let mapping = |request: &Arc<str>| RequestMapping {
        container: container.name.clone(),
        resource,
        request: request.clone(),
    };
    let mut mappings = Vec::new();
    let mut sum = 0;
    for (name, count) in reusable.iter().flatten() {
        sum += count;
        mappings.push(mapping(name));
        if sum >= wanted {
            return (None, mappings);
        }
    }
    let name: Arc<str> = Arc::from(format!(
        "container-{index}-request-{}",
        resource_index(container, resource)
    ));
    mappings.push(mapping(&name));
    (Some((name, wanted - sum)), mappings)
}

/// The position of `resource` among the names of the container's `resources.requests`
/// (after the API's defaulting from limits), sorted.
fn resource_index(container: &Container, resource: Sym) -> usize {
    let target = resource.as_str();
    let mut names: Vec<&str> = Vec::new();
    if !container.cpu_unset {
        names.push(crate::resources::CPU);
    }
    if !container.memory_unset {
        names.push(crate::resources::MEMORY);
    }
    if container.requests.ephemeral_storage > 0 {
        names.push("ephemeral-storage");
    }
    names.extend(container.requests.scalars().map(|(name, _)| name.as_str()));
    names.extend(container.zero_requests.iter().map(|name| name.as_str()));
    names.sort_unstable();
    names.dedup();
    names.iter().position(|n| *n == target).unwrap_or(0)
}

/// Upstream's `utilrand.String` alphabet, which the API server's generated names use.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The name Gantry gives the claim for a pod's extended resources: the `generateName`
/// upstream's PreBind sends, `<pod>-extended-resources-`, cut to 58 bytes as the API
/// server cuts it, and five characters derived from the pod's uid (the API server draws
/// them at random; deriving them keeps runs repeatable and lets every front end find the
/// claim of a pod it has not seen bound).
pub fn extended_claim_name(pod: &Pod) -> String {
    let mut name = format!("{}-extended-resources-", pod.name);
    if name.len() > 58 {
        let mut cut = 58;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    // FNV-1a of the uid: stable across runs and platforms.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in pod.uid.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    for _ in 0..5 {
        name.push(ALPHANUMS[(hash % ALPHANUMS.len() as u64) as usize] as char);
        hash /= ALPHANUMS.len() as u64;
    }
    name
}
