//! PodGroups of scheduler-plugins' Coscheduling (`scheduling.x-k8s.io/v1alpha1`, a CRD) as
//! `gantry run` watches them, when a profile enables Coscheduling: decoded as a manifest of
//! one decodes. Their `status` is the PodGroup controller's to write, not the scheduler's.

use std::sync::Arc;

use gantry_api::Release;
use gantry_api::decode::ObjectError;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;

use crate::pod_groups::{api_resource_of, decode_one, not_a_pod_group};
use crate::watch::Object;

pub const GROUP: &str = "scheduling.x-k8s.io";
pub const VERSION: &str = "v1alpha1";

/// How kube addresses scheduler-plugins' PodGroups.
pub fn api_resource() -> ApiResource {
    api_resource_of(GROUP, VERSION)
}

/// A watched Coscheduling PodGroup.
pub fn decode(object: &DynamicObject, release: Release) -> Result<Object, ObjectError> {
    let (mut objects, _) = decode_one(object, &format!("{GROUP}/{VERSION}"), release)?;
    let group = (objects.coscheduling_groups.pop()).ok_or_else(|| not_a_pod_group(object))?;
    Ok(Object::CoschedulingGroup(Arc::new(group)))
}
