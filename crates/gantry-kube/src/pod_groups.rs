//! PodGroups of `scheduling.k8s.io/v1alpha2` (v1.36's Workload API, GenericWorkload) as
//! `gantry run` watches and writes them: decoded as a manifest of one decodes, and the
//! `PodGroupScheduled` condition a pod-group cycle writes, as kube-scheduler v1.36's
//! `updatePodGroupCondition` (`schedule_one_podgroup.go`) writes it.

use std::sync::Arc;

use gantry_api::decode::{ClusterObjects, DecodeError, ObjectError};
use gantry_api::{PodGroup, Release};
use gantry_scheduler::GroupOutcome;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use crate::watch::Object;

pub const GROUP: &str = "scheduling.k8s.io";
pub const VERSION: &str = "v1alpha2";
/// The condition type the scheduler writes (`schedulingapi.PodGroupScheduled`).
pub const CONDITION: &str = "PodGroupScheduled";

/// How kube addresses PodGroups.
pub fn api_resource() -> ApiResource {
    api_resource_of(GROUP, VERSION)
}

/// How kube addresses the PodGroups of an API group and version.
pub(crate) fn api_resource_of(group: &str, version: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    }
}

/// A watched PodGroup, with its `PodGroupScheduled` condition as the API last showed it.
pub fn decode(object: &DynamicObject, release: Release) -> Result<Object, ObjectError> {
    let (mut objects, value) = decode_one(object, &format!("{GROUP}/{VERSION}"), release)?;
    let group = objects
        .pod_groups
        .pop()
        .ok_or_else(|| not_a_pod_group(object))?;
    let condition = scheduled_condition(&value["status"]);
    Ok(Object::PodGroup(Arc::new(group), condition.map(Arc::new)))
}

/// A watched PodGroup of `api_version` decoded as a manifest of it decodes (its
/// `apiVersion` and `kind` set, which a watch's items may lack), with the object as JSON.
pub(crate) fn decode_one(
    object: &DynamicObject,
    api_version: &str,
    release: Release,
) -> Result<(ClusterObjects, Value), ObjectError> {
    let name = object_name(object);
    let whole = |message: String| ObjectError {
        object: name.clone(),
        field: "(the whole object)".into(),
        message,
    };
    let mut value = serde_json::to_value(object).map_err(|e| whole(e.to_string()))?;
    if let Value::Object(map) = &mut value {
        map.insert("apiVersion".into(), Value::from(api_version));
        map.insert("kind".into(), Value::from("PodGroup"));
    }
    let text = serde_json::to_string(&value).map_err(|e| whole(e.to_string()))?;
    let mut objects = ClusterObjects::for_release(release);
    match objects.decode_more(&text, &name) {
        Ok(()) => Ok((objects, value)),
        Err(DecodeError::Object { error, .. }) => Err(error),
        Err(other) => Err(whole(other.to_string())),
    }
}

/// `PodGroup namespace/name`, as errors name the object.
fn object_name(object: &DynamicObject) -> String {
    format!(
        "PodGroup {}/{}",
        object.metadata.namespace.as_deref().unwrap_or(""),
        object.metadata.name.as_deref().unwrap_or("(unnamed)")
    )
}

/// An object of the PodGroup resource that did not decode to one.
pub(crate) fn not_a_pod_group(object: &DynamicObject) -> ObjectError {
    ObjectError {
        object: object_name(object),
        field: "kind".into(),
        message: "did not decode as a PodGroup".into(),
    }
}

/// The `PodGroupScheduled` condition of a PodGroup's status, if it has one.
fn scheduled_condition(status: &Value) -> Option<Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == CONDITION)
        .cloned()
}

/// The condition a group cycle's outcome sets, after `existing`, as upstream's
/// `updatePodGroupCondition` and apimachinery's `SetStatusCondition` make it: never back
/// from `True` to `False` (a later cycle for extra pods does not undo the group's
/// scheduling), `lastTransitionTime` kept unless the status changes, and `None` when
/// nothing would change (upstream then writes nothing).
pub fn next_condition(
    existing: Option<&Value>,
    outcome: &GroupOutcome,
    group: &PodGroup,
    now: &str,
) -> Option<Value> {
    let (status, reason, message) = match outcome {
        GroupOutcome::Scheduled => ("True", "Scheduled", ""),
        GroupOutcome::Unschedulable(message) => ("False", "Unschedulable", message.as_str()),
        GroupOutcome::Error(message) => ("False", "SchedulerError", message.as_str()),
    };
    let existing_status = existing.and_then(|c| c["status"].as_str());
    if existing_status == Some("True") && status != "True" {
        return None;
    }
    let transition = match existing {
        Some(c) if existing_status == Some(status) => c["lastTransitionTime"].clone(),
        _ => Value::from(now),
    };
    let mut condition = json!({
        "type": CONDITION,
        "status": status,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    });
    // Go's `omitempty`: a group without a generation (v1.36.2's API server sets none)
    // gets a condition without one.
    if group.generation != 0 {
        condition["observedGeneration"] = Value::from(group.generation);
    }
    let generation = |c: &Value| c["observedGeneration"].as_i64().unwrap_or(0);
    let unchanged = existing.is_some_and(|c| {
        ["status", "reason", "message"]
            .iter()
            .all(|field| c[field] == condition[field])
            && generation(c) == group.generation
    });
    (!unchanged).then_some(condition)
}

/// The strategic-merge patch of the status subresource that sets `condition` (conditions
/// merge by `type`).
pub fn status_patch(condition: &Value) -> Value {
    json!({ "status": { "conditions": [condition] } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> PodGroup {
        let mut group = PodGroup::gang("default", "trainer", 4);
        group.generation = 3;
        group
    }

    const NOW: &str = "2026-12-04T10:00:00Z";
    const EARLIER: &str = "2026-12-04T09:00:00Z";

    fn unschedulable() -> GroupOutcome {
        GroupOutcome::Unschedulable("pod group is unschedulable".into())
    }

    #[test]
    fn a_first_condition_is_written_whole() {
        let condition = next_condition(None, &unschedulable(), &group(), NOW).unwrap();
        assert_eq!(
            condition,
            json!({"type": "PodGroupScheduled", "status": "False", "observedGeneration": 3,
                "lastTransitionTime": NOW, "reason": "Unschedulable",
                "message": "pod group is unschedulable"})
        );
        // As the API server stores most: no generation, none observed.
        let mut unversioned = group();
        unversioned.generation = 0;
        let condition = next_condition(None, &unschedulable(), &unversioned, NOW).unwrap();
        assert_eq!(condition.get("observedGeneration"), None);
        assert_eq!(
            next_condition(Some(&condition), &unschedulable(), &unversioned, NOW),
            None
        );
        let scheduled = next_condition(None, &GroupOutcome::Scheduled, &group(), NOW).unwrap();
        assert_eq!(scheduled["reason"], "Scheduled");
        assert_eq!(scheduled["message"], "");
        let error = GroupOutcome::Error("failed to schedule other pod from a pod group: x".into());
        let failed = next_condition(None, &error, &group(), NOW).unwrap();
        assert_eq!(failed["reason"], "SchedulerError");
    }

    #[test]
    fn scheduled_is_never_undone() {
        let existing = next_condition(None, &GroupOutcome::Scheduled, &group(), EARLIER).unwrap();
        assert_eq!(
            next_condition(Some(&existing), &unschedulable(), &group(), NOW),
            None
        );
    }

    #[test]
    fn the_same_condition_is_not_written_twice_and_a_change_keeps_or_moves_the_time() {
        let existing = next_condition(None, &unschedulable(), &group(), EARLIER).unwrap();
        assert_eq!(
            next_condition(Some(&existing), &unschedulable(), &group(), NOW),
            None
        );
        // Same status, new message: the transition time stays.
        let other = GroupOutcome::Unschedulable("pod group is waiting".into());
        let changed = next_condition(Some(&existing), &other, &group(), NOW).unwrap();
        assert_eq!(changed["lastTransitionTime"], EARLIER);
        // A new generation alone is a change.
        let mut newer = group();
        newer.generation = 4;
        let regenerated = next_condition(Some(&existing), &unschedulable(), &newer, NOW).unwrap();
        assert_eq!(regenerated["observedGeneration"], 4);
        // False to True moves it.
        let scheduled =
            next_condition(Some(&existing), &GroupOutcome::Scheduled, &group(), NOW).unwrap();
        assert_eq!(scheduled["lastTransitionTime"], NOW);
    }

    #[test]
    fn a_watched_group_keeps_its_condition() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "trainer", "namespace": "default", "generation": 2},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
            "status": {"conditions": [{"type": "Other", "status": "True"},
                {"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable"}]}
        }))
        .unwrap();
        let Ok(Object::PodGroup(group, condition)) = decode(&object, Release::at(36)) else {
            panic!("did not decode");
        };
        assert_eq!(group.min_count(), Some(4));
        assert_eq!(group.generation, 2);
        assert_eq!(condition.unwrap()["reason"], "Unschedulable");
    }

    #[test]
    fn an_invalid_group_is_refused_naming_the_field() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "trainer", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}
        }))
        .unwrap();
        let Err(error) = decode(&object, Release::at(36)) else {
            panic!("decoded");
        };
        assert_eq!(error.field, "spec.schedulingPolicy.gang.minCount");
        assert!(error.object.contains("default/trainer"), "{error:?}");
    }
}
