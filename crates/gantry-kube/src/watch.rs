//! Watches of every resource the scheduler reads, converted into Gantry's model as they
//! arrive and sent to the scheduling loop as events: the loop's own cache is the only
//! store (kube's reflector store is not used). A relist (after `410 Gone`, or at start)
//! arrives as one [`Change::Relisted`] with every object, so that the loop can tell what
//! was deleted while the watch was blind.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use futures::StreamExt;
use gantry_api::decode::{Namespace, ObjectError, PodController, PriorityClass, Service, from_k8s};
use gantry_api::dra::{DeviceClass, ResourceClaim, ResourceSlice};
use gantry_api::{
    CsiDriver, CsiNode, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodDisruptionBudget,
    PodGroup, StorageCapacity, StorageClass,
};
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::scheduling::v1 as scheduling;
use k8s_openapi::api::storage::v1 as storage;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;

use crate::Input;
use crate::failure::Outage;
use crate::metrics::KubeMetrics;
use crate::{coscheduling_groups, dra, pod_groups};

/// kube-scheduler's pod watch leaves out pods that finished: they hold nothing.
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// One watched object, converted.
#[derive(Debug, Clone)]
pub enum Object {
    Node(Arc<Node>),
    /// With its `resourceVersion`, which events about it name.
    Pod(Arc<Pod>, Option<Arc<str>>),
    Namespace(Namespace),
    PriorityClass(PriorityClass),
    Service(Service),
    /// A ReplicationController, ReplicaSet or StatefulSet.
    Controller(PodController),
    PersistentVolume(PersistentVolume),
    PersistentVolumeClaim(PersistentVolumeClaim),
    StorageClass(StorageClass),
    CsiNode(CsiNode),
    CsiDriver(CsiDriver),
    StorageCapacity(StorageCapacity),
    PodDisruptionBudget(PodDisruptionBudget),
    /// With its `spec.config`, which allocations carry (as JSON, opaque to Gantry).
    DeviceClass(Arc<DeviceClass>, Arc<[Value]>),
    ResourceSlice(Arc<ResourceSlice>),
    /// With the object as the API sent it: a status write sends it back whole.
    ResourceClaim(Arc<ResourceClaim>, Arc<Value>),
    /// DRADeviceTaintRules: its taint goes to the devices it picks.
    DeviceTaintRule(Arc<gantry_api::dra_taint_rules::DeviceTaintRule>),
    /// With its `PodGroupScheduled` condition, which the next write of it starts from.
    PodGroup(Arc<PodGroup>, Option<Arc<Value>>),
    /// A PodGroup of scheduler-plugins' Coscheduling.
    CoschedulingGroup(Arc<gantry_api::coscheduling::CoschedulingGroup>),
}

/// The kinds watched, for relists and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    Namespace,
    PriorityClass,
    Service,
    ReplicationController,
    ReplicaSet,
    StatefulSet,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CsiNode,
    CsiDriver,
    CsiStorageCapacity,
    PodDisruptionBudget,
    DeviceClass,
    ResourceSlice,
    ResourceClaim,
    DeviceTaintRule,
    PodGroup,
    CoschedulingGroup,
}

impl Kind {
    /// The resource.k8s.io/v1 kinds, watched when a profile runs DynamicResources.
    pub const DRA: [Kind; 3] = [Kind::DeviceClass, Kind::ResourceSlice, Kind::ResourceClaim];

    pub const ALL: [Kind; 21] = [
        Kind::Node,
        Kind::Pod,
        Kind::Namespace,
        Kind::PriorityClass,
        Kind::Service,
        Kind::ReplicationController,
        Kind::ReplicaSet,
        Kind::StatefulSet,
        Kind::PersistentVolume,
        Kind::PersistentVolumeClaim,
        Kind::StorageClass,
        Kind::CsiNode,
        Kind::CsiDriver,
        Kind::CsiStorageCapacity,
        Kind::PodDisruptionBudget,
        Kind::DeviceClass,
        Kind::ResourceSlice,
        Kind::ResourceClaim,
        Kind::DeviceTaintRule,
        Kind::PodGroup,
        Kind::CoschedulingGroup,
    ];

    /// The Kubernetes kind (`Node`, `ResourceClaim`).
    pub fn kind(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::Namespace => "Namespace",
            Kind::PriorityClass => "PriorityClass",
            Kind::Service => "Service",
            Kind::ReplicationController => "ReplicationController",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::StatefulSet => "StatefulSet",
            Kind::PersistentVolume => "PersistentVolume",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim",
            Kind::StorageClass => "StorageClass",
            Kind::CsiNode => "CSINode",
            Kind::CsiDriver => "CSIDriver",
            Kind::CsiStorageCapacity => "CSIStorageCapacity",
            Kind::PodDisruptionBudget => "PodDisruptionBudget",
            Kind::DeviceClass => "DeviceClass",
            Kind::ResourceSlice => "ResourceSlice",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::DeviceTaintRule => "DeviceTaintRule",
            Kind::PodGroup | Kind::CoschedulingGroup => "PodGroup",
        }
    }

    /// The resource's plural, as paths and metrics name it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Node => "nodes",
            Kind::Pod => "pods",
            Kind::Namespace => "namespaces",
            Kind::PriorityClass => "priorityclasses",
            Kind::Service => "services",
            Kind::ReplicationController => "replicationcontrollers",
            Kind::ReplicaSet => "replicasets",
            Kind::StatefulSet => "statefulsets",
            Kind::PersistentVolume => "persistentvolumes",
            Kind::PersistentVolumeClaim => "persistentvolumeclaims",
            Kind::StorageClass => "storageclasses",
            Kind::CsiNode => "csinodes",
            Kind::CsiDriver => "csidrivers",
            Kind::CsiStorageCapacity => "csistoragecapacities",
            Kind::PodDisruptionBudget => "poddisruptionbudgets",
            Kind::DeviceClass => "deviceclasses",
            Kind::ResourceSlice => "resourceslices",
            Kind::ResourceClaim => "resourceclaims",
            Kind::DeviceTaintRule => "devicetaintrules",
            Kind::PodGroup => "podgroups",
            // Beside v1.36's own PodGroups, metrics and messages tell the CRD's apart.
            Kind::CoschedulingGroup => "podgroups.scheduling.x-k8s.io",
        }
    }
}

/// What a watch saw.
#[derive(Debug)]
pub enum Change {
    Applied(Object),
    Deleted(Object),
    /// A complete list of the kind (after a relist): objects missing from it are gone.
    Relisted(Kind, Vec<Object>),
}

/// Which optional kinds a run watches: each only when scheduling reads it, as a cluster
/// that does not serve it would never list it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Optional {
    /// resource.k8s.io/v1 (a profile runs DynamicResources).
    pub dra: bool,
    /// scheduling.k8s.io/v1alpha2 PodGroups (GenericWorkload is on).
    pub pod_groups: bool,
    /// scheduler-plugins' PodGroups (a profile enables Coscheduling).
    pub coscheduling_groups: bool,
    /// DeviceTaintRules, in the resource.k8s.io version the server serves them in
    /// (DRADeviceTaintRules is on and a profile runs DynamicResources).
    pub taint_rules: Option<&'static str>,
}

/// Starts one watch per kind on the runtime (the optional kinds only as `optional`
/// says); each ends when `stop` turns true. Returns the kinds watched.
pub fn spawn_all(
    client: &Client,
    inputs: &Sender<Input>,
    metrics: &Arc<KubeMetrics>,
    stop: &watch::Receiver<bool>,
    outage: &Arc<Outage>,
    release: gantry_api::Release,
    optional: Optional,
) -> Vec<Kind> {
    let all = |c: &Client| c.clone();
    let pods_config = watcher::Config::default().fields(POD_FIELD_SELECTOR);
    let plain = watcher::Config::default;
    let ctx = |kind| WatchContext {
        kind,
        inputs: inputs.clone(),
        metrics: metrics.clone(),
        stop: stop.clone(),
        outage: outage.clone(),
    };
    spawn(
        ctx(Kind::Node),
        Api::<core::Node>::all(all(client)),
        plain(),
        |o| from_k8s::node(o).map(|n| Object::Node(Arc::new(n))),
    );
    spawn(
        ctx(Kind::Pod),
        Api::<core::Pod>::all(all(client)),
        pods_config,
        move |o| {
            let version = o.metadata.resource_version.as_deref().map(Arc::from);
            from_k8s::pod(o, release).map(|(p, _)| Object::Pod(Arc::new(p), version))
        },
    );
    spawn(
        ctx(Kind::Namespace),
        Api::<core::Namespace>::all(all(client)),
        plain(),
        |o| from_k8s::namespace(o).map(Object::Namespace),
    );
    spawn(
        ctx(Kind::PriorityClass),
        Api::<scheduling::PriorityClass>::all(all(client)),
        plain(),
        |o| from_k8s::priority_class(o).map(Object::PriorityClass),
    );
    spawn(
        ctx(Kind::Service),
        Api::<core::Service>::all(all(client)),
        plain(),
        |o| from_k8s::service(o).map(Object::Service),
    );
    spawn(
        ctx(Kind::ReplicationController),
        Api::<core::ReplicationController>::all(all(client)),
        plain(),
        |o| from_k8s::replication_controller(o).map(Object::Controller),
    );
    spawn(
        ctx(Kind::ReplicaSet),
        Api::<apps::ReplicaSet>::all(all(client)),
        plain(),
        |o| from_k8s::replica_set(o).map(Object::Controller),
    );
    spawn(
        ctx(Kind::StatefulSet),
        Api::<apps::StatefulSet>::all(all(client)),
        plain(),
        |o| from_k8s::stateful_set(o).map(Object::Controller),
    );
    spawn(
        ctx(Kind::PersistentVolume),
        Api::<core::PersistentVolume>::all(all(client)),
        plain(),
        |o| from_k8s::persistent_volume(o).map(Object::PersistentVolume),
    );
    spawn(
        ctx(Kind::PersistentVolumeClaim),
        Api::<core::PersistentVolumeClaim>::all(all(client)),
        plain(),
        |o| from_k8s::persistent_volume_claim(o).map(Object::PersistentVolumeClaim),
    );
    spawn(
        ctx(Kind::StorageClass),
        Api::<storage::StorageClass>::all(all(client)),
        plain(),
        |o| from_k8s::storage_class(o).map(Object::StorageClass),
    );
    spawn(
        ctx(Kind::CsiNode),
        Api::<storage::CSINode>::all(all(client)),
        plain(),
        |o| from_k8s::csi_node(o).map(Object::CsiNode),
    );
    spawn(
        ctx(Kind::CsiDriver),
        Api::<storage::CSIDriver>::all(all(client)),
        plain(),
        |o| from_k8s::csi_driver(o).map(Object::CsiDriver),
    );
    spawn(
        ctx(Kind::CsiStorageCapacity),
        Api::<storage::CSIStorageCapacity>::all(all(client)),
        plain(),
        |o| from_k8s::storage_capacity(o).map(Object::StorageCapacity),
    );
    spawn(
        ctx(Kind::PodDisruptionBudget),
        Api::<policy::PodDisruptionBudget>::all(all(client)),
        plain(),
        |o| from_k8s::pod_disruption_budget(o).map(Object::PodDisruptionBudget),
    );
    let mut watched: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| {
            !Kind::DRA.contains(k)
                && !matches!(
                    k,
                    Kind::PodGroup | Kind::CoschedulingGroup | Kind::DeviceTaintRule
                )
        })
        .collect();
    if optional.pod_groups {
        spawn(
            ctx(Kind::PodGroup),
            Api::<DynamicObject>::all_with(all(client), &pod_groups::api_resource()),
            plain(),
            move |o| pod_groups::decode(o, release),
        );
        watched.push(Kind::PodGroup);
    }
    if optional.coscheduling_groups {
        spawn(
            ctx(Kind::CoschedulingGroup),
            Api::<DynamicObject>::all_with(all(client), &coscheduling_groups::api_resource()),
            plain(),
            move |o| coscheduling_groups::decode(o, release),
        );
        watched.push(Kind::CoschedulingGroup);
    }
    if !optional.dra {
        return watched;
    }
    watched.extend(Kind::DRA);
    let dynamic =
        |kind: Kind| Api::<DynamicObject>::all_with(all(client), &dra::api_resource(kind));
    spawn(
        ctx(Kind::DeviceClass),
        dynamic(Kind::DeviceClass),
        plain(),
        move |o| dra::decode_device_class(o, release),
    );
    spawn(
        ctx(Kind::ResourceSlice),
        dynamic(Kind::ResourceSlice),
        plain(),
        move |o| dra::decode_slice(o, release),
    );
    spawn(
        ctx(Kind::ResourceClaim),
        dynamic(Kind::ResourceClaim),
        plain(),
        move |o| dra::decode_claim_object(o, release),
    );
    if let Some(version) = optional.taint_rules {
        let resource = dra::taint_rule_resource(version);
        spawn(
            ctx(Kind::DeviceTaintRule),
            Api::<DynamicObject>::all_with(all(client), &resource),
            plain(),
            move |o| dra::decode_taint_rule(o, version),
        );
        watched.push(Kind::DeviceTaintRule);
    }
    watched
}

struct WatchContext {
    kind: Kind,
    inputs: Sender<Input>,
    metrics: Arc<KubeMetrics>,
    stop: watch::Receiver<bool>,
    outage: Arc<Outage>,
}

fn spawn<K>(
    ctx: WatchContext,
    api: Api<K>,
    config: watcher::Config,
    convert: impl Fn(&K) -> Result<Object, ObjectError> + Send + 'static,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    tokio::spawn(async move {
        let WatchContext {
            kind,
            inputs,
            metrics,
            mut stop,
            outage,
        } = ctx;
        // Retries every failure (500s, dropped connections) with exponential backoff;
        // 410 Gone restarts with a fresh list.
        let mut stream = watcher(api, config).default_backoff().boxed();
        let mut relist: Option<Vec<Object>> = None;
        loop {
            let event = tokio::select! {
                _ = stop.wait_for(|stopped| *stopped) => return,
                event = stream.next() => event,
            };
            let Some(event) = event else { return };
            let change = match event {
                Err(error) => {
                    metrics.watch_error(kind);
                    report(&outage, kind, error);
                    continue;
                }
                Ok(watcher::Event::Init) => {
                    relist = Some(Vec::new());
                    continue;
                }
                Ok(watcher::Event::InitApply(object)) => {
                    if let (Some(list), Some(object)) =
                        (relist.as_mut(), converted(&object, &convert))
                    {
                        list.push(object);
                    }
                    continue;
                }
                Ok(watcher::Event::InitDone) => {
                    metrics.relisted(kind);
                    Change::Relisted(kind, relist.take().unwrap_or_default())
                }
                Ok(watcher::Event::Apply(object)) => match converted(&object, &convert) {
                    Some(object) => Change::Applied(object),
                    None => continue,
                },
                Ok(watcher::Event::Delete(object)) => match converted(&object, &convert) {
                    Some(object) => Change::Deleted(object),
                    None => continue,
                },
            };
            if inputs.send(Input::Watch(change)).is_err() {
                return;
            }
        }
    });
}

/// Converts an object; one that does not decode is logged (naming the object and the
/// field) and skipped, never a reason to stop watching.
fn converted<K>(
    object: &K,
    convert: &impl Fn(&K) -> Result<Object, ObjectError>,
) -> Option<Object> {
    match convert(object) {
        Ok(object) => Some(object),
        Err(error) => {
            tracing::warn!(%error, "ignoring an object that does not decode");
            None
        }
    }
}

/// A failed list or watch (retried with backoff), through the outage report: at most
/// one line a minute however many watches fail.
fn report(outage: &Outage, kind: Kind, error: watcher::Error) {
    let what = format!("listing and watching {}", kind.name());
    match error {
        watcher::Error::InitialListFailed(error)
        | watcher::Error::WatchStartFailed(error)
        | watcher::Error::WatchFailed(error) => {
            outage.failed(&what, &error);
        }
        watcher::Error::WatchError(status) => {
            outage.failed(&what, &kube::Error::Api(status));
        }
        other => tracing::warn!(resource = kind.name(), error = %other, "watch failed; retrying"),
    }
}
