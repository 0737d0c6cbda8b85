//! ReplicationControllers, ReplicaSets and StatefulSets: the scheduler reads only their
//! selectors, which give the pods they control their default topology spread constraints
//! (upstream's `helper.DefaultSelector`).

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as k8s;

use std::collections::BTreeMap;

use super::object::{labels, namespace};
use super::validation::{self, NameRule};
use super::{ObjectError, field_error};
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
    let spec = rc.spec.as_ref();
    let template = spec.and_then(|s| s.template.as_ref());
    let template_labels = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    // Defaulting: a controller without a selector selects its template's labels.
    let pairs = spec
        .and_then(|s| s.selector.as_ref())
        .filter(|pairs| !pairs.is_empty())
        .or(template_labels)
        .filter(|pairs| !pairs.is_empty())
        .ok_or_else(|| field_error(object, "spec.selector", validation::required("")))?;
    let selector = LabelSelector::from_pairs(pairs.iter().map(|(k, v)| (Sym::new(k), Sym::new(v))));
    if template.is_some() {
        check_template_labels(&selector, template_labels, object)?;
    }
    Ok(PodController {
        kind: ControllerKind::ReplicationController,
        namespace: namespace(&rc.metadata),
        name: Sym::new(rc.metadata.name.as_deref().unwrap_or_default()),
        selector: Some(selector),
    })
}

/// The template's pods must be the controller's own (`ValidatePodTemplateSpecForReplicaSet`
/// and its kin): a selector that does not match the template's labels is refused.
fn check_template_labels(
    selector: &LabelSelector,
    template_labels: Option<&BTreeMap<String, String>>,
    object: &str,
) -> Result<(), ObjectError> {
    if selector.is_empty() || selector.matches(&labels(template_labels)) {
        return Ok(());
    }
    // Go prints the labels with %#v: `map[string]string{"a":"b", "c":"d"}`.
    let shown: Vec<String> = template_labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k:?}:{v:?}"))
        .collect();
    Err(field_error(
        object,
        "spec.template.metadata.labels",
        format!(
            "Invalid value: map[string]string{{{}}}: `selector` does not match template `labels`",
            shown.join(", ")
        ),
    ))
}

pub(super) fn convert_replica_set(
    rs: &apps::ReplicaSet,
    object: &str,
) -> Result<PodController, ObjectError> {
    convert_set(
        ControllerKind::ReplicaSet,
        &rs.metadata,
        &rs.spec.selector,
        rs.spec.template.as_ref(),
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
        Some(&ss.spec.template),
        object,
    )
}

fn convert_set(
    kind: ControllerKind,
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    template: Option<&k8s::PodTemplateSpec>,
    object: &str,
) -> Result<PodController, ObjectError> {
    validation::object_meta(metadata, object, NameRule::Dns1123Subdomain)?;
    let written = selector.match_labels.as_ref().map_or(0, BTreeMap::len)
        + selector.match_expressions.as_ref().map_or(0, Vec::len);
    if written == 0 {
        let kind = match kind {
            ControllerKind::StatefulSet => "statefulset",
            _ => "deployment", // upstream's ReplicaSet message says so
        };
        return Err(field_error(
            object,
            "spec.selector",
            format!("empty selector is invalid for {kind}"),
        ));
    }
    let selector = super::label_selector(selector, object, &"spec.selector")?;
    // A dump trimmed of templates still says which pods the controller owns.
    if let Some(template) = template {
        let template_labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref());
        check_template_labels(&selector, template_labels, object)?;
    }
    Ok(PodController {
        kind,
        namespace: namespace(metadata),
        name: Sym::new(metadata.name.as_deref().unwrap_or_default()),
        selector: Some(selector),
    })
}
