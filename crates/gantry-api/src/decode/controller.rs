//! ReplicationControllers, ReplicaSets and StatefulSets: the scheduler reads only their
//! selectors, which give the pods they control their default topology spread constraints
//! (upstream's `helper.DefaultSelector`).

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as k8s;

use super::ObjectError;
use super::object::namespace;
use super::validation::{self, NameRule};
use crate::labels::LabelSelector;
use crate::{OwnerRef, Sym};

/// The controller kinds whose selectors spread their pods by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControllerKind {
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

impl ControllerKind {
    /// The kind of controller an owner reference names. Upstream compares group, version
    /// and kind, so a `ReplicaSet` of another API group is none of these.
    pub fn of_owner(owner: &OwnerRef) -> Option<ControllerKind> {
        match (owner.api_version.as_str(), owner.kind.as_str()) {
            ("v1", "ReplicationController") => Some(ControllerKind::ReplicationController),
            ("apps/v1", "ReplicaSet") => Some(ControllerKind::ReplicaSet),
            ("apps/v1", "StatefulSet") => Some(ControllerKind::StatefulSet),
            _ => None,
        }
    }
}

/// A ReplicationController, ReplicaSet or StatefulSet, reduced to its selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodController {
    pub kind: ControllerKind,
    pub namespace: Sym,
    pub name: Sym,
    /// `None` for a ReplicationController without a selector: it adds nothing to a pod's
    /// default selector (ReplicaSets and StatefulSets must have one).
    pub selector: Option<LabelSelector>,
}

pub(super) fn convert_replication_controller(
    rc: &k8s::ReplicationController,
    object: &str,
) -> Result<PodController, ObjectError> {
    validation::object_meta(&rc.metadata, object, NameRule::Dns1123Subdomain)?;
    let selector = rc.spec.as_ref().and_then(|s| s.selector.as_ref());
    Ok(PodController {
        kind: ControllerKind::ReplicationController,
        namespace: namespace(&rc.metadata),
        name: Sym::new(rc.metadata.name.as_deref().unwrap_or_default()),
        selector: selector.map(|pairs| {
            LabelSelector::from_pairs(pairs.iter().map(|(k, v)| (Sym::new(k), Sym::new(v))))
        }),
    })
}

pub(super) fn convert_replica_set(
    rs: &apps::ReplicaSet,
    object: &str,
) -> Result<PodController, ObjectError> {
    convert_set(
        ControllerKind::ReplicaSet,
        &rs.metadata,
        &rs.spec.selector,
        object,
    )
}

pub(super) fn convert_stateful_set(
    ss: &apps::StatefulSet,
    object: &str,
) -> Result<PodController, ObjectError> {
    convert_set(
        ControllerKind::StatefulSet,
        &ss.metadata,
        &ss.spec.selector,
        object,
    )
}

fn convert_set(
    kind: ControllerKind,
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    object: &str,
) -> Result<PodController, ObjectError> {
    validation::object_meta(metadata, object, NameRule::Dns1123Subdomain)?;
    Ok(PodController {
        kind,
        namespace: namespace(metadata),
        name: Sym::new(metadata.name.as_deref().unwrap_or_default()),
        selector: Some(super::label_selector(selector, object, "spec.selector")?),
    })
}
