//! What kube-scheduler's DynamicResources writes to resource claims, written the same way
//! (`bindClaim`, `Unreserve` and `PostFilter` of v1.35): before a pod's binding, each of
//! its claims gets the allocation Reserve chose (after the delete-protection finalizer,
//! added with a plain update) and the pod in `status.reservedFor`, with a status update
//! conditioned on the claim's resourceVersion, retried on conflict from a fresh read;
//! after a failed binding the pod leaves `reservedFor` again (a strategic-merge patch);
//! a claim DynamicResources' PostFilter frees loses its allocation. The claim for a pod's
//! extended resources backed by devices (DRAExtendedResource) is created first, owned by
//! the pod, and named in the pod's `status.extendedResourceClaimStatus` after its status
//! is written (upstream's `createExtendedResourceClaimInAPI` and
//! `patchPodExtendedResourceClaimStatus`); Unreserve deletes it.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::dra::{AllocatedDevice, Allocation, ResourceClaim};
use gantry_api::dra_binding::Readiness;
use gantry_api::dra_extended::{EXTENDED_RESOURCE_CLAIM_ANNOTATION, RequestMapping};
use gantry_api::labels::{NodeSelector, NodeSelectorOp, NodeSelectorRequirement};
use gantry_api::{Gate, Pod, Release, Sym};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Map, Value, json};

use crate::dra::{self, ClaimStore, FINALIZER};
use crate::watch::Kind;
use crate::writes::api_message;

/// `retry.DefaultRetry`, which upstream's `RetryOnConflict` uses: five attempts, 10 ms
/// apart.
const CONFLICT_ATTEMPTS: usize = 5;
const CONFLICT_PAUSE: Duration = Duration::from_millis(10);

/// A claim the API holds reserved for the pod being bound: Unreserve takes the pod out
/// again if the binding fails.
#[derive(Debug, Clone)]
pub struct Reserved {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    /// Made for the pod's extended resources: Unreserve deletes it.
    pub made_for_pod: bool,
}

#[derive(Clone)]
pub struct ClaimWriter {
    client: Client,
    store: Arc<ClaimStore>,
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

fn has_finalizer(object: &Value) -> bool {
    object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|v| v == FINALIZER))
}

/// `namespace/name`, as upstream's messages name a claim (`klog.KObj`).
fn named(claim: &ResourceClaim) -> String {
    format!("{}/{}", claim.namespace, claim.name)
}

impl ClaimWriter {
    pub fn new(client: Client, store: Arc<ClaimStore>) -> ClaimWriter {
        ClaimWriter { client, store }
    }

    fn api(&self, namespace: Sym) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            namespace.as_str(),
            &dra::api_resource(Kind::ResourceClaim),
        )
    }

    /// Upstream's `isPodReadyForBinding` over the claims PreBind wrote, as the watch last
    /// showed them: `Ok(true)` once every binding condition is True, `Ok(false)` while some
    /// claim waits (one the watch has not shown yet counts as waiting), else the error
    /// upstream's PreBind returns: a failure condition True, or a claim still pending
    /// `timeout` seconds after its allocation.
    pub fn binding_ready(
        &self,
        claims: &[Arc<ResourceClaim>],
        timeout: i64,
    ) -> Result<bool, String> {
        let now = Timestamp::now().as_second();
        for written in claims {
            let Some(latest) = self.store.latest(written.key()) else {
                return Ok(false);
            };
            let claim =
                dra::decode_claim(&latest, self.store.release()).map_err(|e| e.to_string())?;
            match claim.binding_readiness() {
                Readiness::Ready => {}
                Readiness::Failed(message) => return Err(message),
                Readiness::Pending if claim.binding_timed_out(now, timeout) => {
                    return Err(format!("device binding timeout: claim={}", claim.name));
                }
                Readiness::Pending => return Ok(false),
            }
        }
        Ok(true)
    }

    /// PreBind's writes, claim by claim in the pod's order; the claims the API holds
    /// reserved for the pod so far are pushed to `reserved` (also when a later one fails).
    /// The error is upstream's, one line naming the claim.
    /// `mappings` names the claim made for the pod's extended resources, if any.
    pub async fn reserve(
        &self,
        pod: &Pod,
        claims: &[Arc<ResourceClaim>],
        mappings: Option<&(Arc<str>, Arc<[RequestMapping]>)>,
        reserved: &mut Vec<Reserved>,
    ) -> Result<(), String> {
        for claim in claims {
            let made_for_pod = claim.extended_resource && self.store.latest(claim.key()).is_none();
            let claim = match made_for_pod {
                true => {
                    let uid = self.create_extended(pod, claim).await?;
                    reserved.push(Reserved {
                        namespace: claim.namespace,
                        name: claim.name.clone(),
                        uid: uid.clone(),
                        made_for_pod,
                    });
                    Arc::new(ResourceClaim {
                        uid,
                        ..ResourceClaim::clone(claim)
                    })
                }
                false => claim.clone(),
            };
            self.bind_claim(pod, &claim).await?;
            if made_for_pod {
                let mapped = mappings.filter(|(name, _)| *name == claim.name);
                self.name_in_pod_status(pod, &claim, mapped).await?;
            } else {
                reserved.push(Reserved {
                    namespace: claim.namespace,
                    name: claim.name.clone(),
                    uid: claim.uid.clone(),
                    made_for_pod,
                });
            }
        }
        Ok(())
    }

    /// Upstream's `createExtendedResourceClaimInAPI`: the claim, owned by the pod and
    /// annotated as made for its extended resources, with the requests PreBind set and no
    /// status. Returns the uid the API server gave it.
    async fn create_extended(&self, pod: &Pod, claim: &ResourceClaim) -> Result<Arc<str>, String> {
        let requests: Vec<Value> = (claim.spec.requests.iter())
            .filter_map(|r| {
                let exact = r.exact()?;
                let gantry_api::dra::AllocationMode::ExactCount(count) = exact.mode else {
                    return None;
                };
                Some(json!({"name": &*r.name, "exactly": {
                    "deviceClassName": exact.device_class.as_str(),
                    "allocationMode": "ExactCount",
                    "count": count,
                }}))
            })
            .collect();
        let object = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": &*claim.name,
                "namespace": claim.namespace.as_str(),
                "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
                "ownerReferences": [{
                    "apiVersion": "v1", "kind": "Pod", "name": &*pod.name,
                    "uid": &*pod.uid, "controller": true,
                }],
            },
            "spec": {"devices": {"requests": requests}},
        });
        let failed =
            |e: String| format!("create claim for extended resources {}: {e}", named(claim));
        let dynamic: DynamicObject =
            serde_json::from_value(object).map_err(|e| failed(e.to_string()))?;
        let created = (self.api(claim.namespace))
            .create(&PostParams::default(), &dynamic)
            .await
            .map_err(|e| failed(api_message(e)))?;
        let value =
            dra::to_json(&created, Kind::ResourceClaim).map_err(|e| failed(e.to_string()))?;
        let uid = value["metadata"]["uid"].as_str().unwrap_or_default();
        let uid: Arc<str> = Arc::from(uid);
        self.store
            .written(value)
            .map_err(|e| failed(e.to_string()))?;
        Ok(uid)
    }

    /// Upstream's `patchPodExtendedResourceClaimStatus`: the pod's
    /// `status.extendedResourceClaimStatus` names the claim and which container uses which
    /// of its requests.
    async fn name_in_pod_status(
        &self,
        pod: &Pod,
        claim: &ResourceClaim,
        mappings: Option<&(Arc<str>, Arc<[RequestMapping]>)>,
    ) -> Result<(), String> {
        let Some((_, mappings)) = mappings.filter(|(_, m)| !m.is_empty()) else {
            return Err(format!(
                "nil or empty request mappings, no update of pod {} ExtendedResourceClaimStatus",
                pod.key()
            ));
        };
        let mappings: Vec<Value> = (mappings.iter())
            .map(|m| json!({"containerName": &*m.container, "resourceName": m.resource.as_str(), "requestName": &*m.request}))
            .collect();
        let patch = json!({"status": {"extendedResourceClaimStatus": {
            "requestMappings": mappings,
            "resourceClaimName": &*claim.name,
        }}});
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), pod.namespace.as_str());
        pods.patch_status(
            &pod.name,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .map(|_| ())
        .map_err(|e| {
            format!(
                "update pod {} ExtendedResourceClaimStatus: {}",
                pod.key(),
                api_message(e)
            )
        })
    }

    /// Upstream's `bindClaim`: `want` is the claim as PreBind set it (allocated, and
    /// reserved for the pod).
    async fn bind_claim(&self, pod: &Pod, want: &ResourceClaim) -> Result<(), String> {
        let name = named(want);
        let api = self.api(want.namespace);
        let Some(wanted) = want.allocation.as_deref() else {
            return Err(format!("internal error, no allocation for claim {name}"));
        };
        let mut current = match self.store.latest(want.key()) {
            Some(seen) => Value::clone(&seen),
            None => get(&api, &want.name)
                .await
                .map_err(|e| format!("get claim {name}: {e}"))?,
        };
        let mut conflict = String::new();
        for attempt in 0..CONFLICT_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(CONFLICT_PAUSE).await;
                current = get(&api, &want.name)
                    .await
                    .map_err(|e| format!("get updated claim {name} after conflict: {e}"))?;
            }
            let seen =
                dra::decode_claim(&current, self.store.release()).map_err(|e| e.to_string())?;
            if seen.uid != want.uid || seen.deleting {
                return Err(format!("claim {name} got deleted in the meantime"));
            }
            if seen.is_reserved_for(&pod.uid) {
                return Ok(());
            }
            let allocate = match seen.allocation.as_deref() {
                None => true,
                Some(held) if held == wanted => false,
                Some(_) => {
                    return Err(format!(
                        "claim {name} got allocated elsewhere in the meantime"
                    ));
                }
            };
            if allocate && !has_finalizer(&current) {
                add_finalizer(&mut current);
                match replace(&api, &want.name, &current, false).await {
                    Ok(updated) => current = updated,
                    Err(error) => {
                        let message = format!("add finalizer to claim {name}: {}", error.1);
                        if error.0 {
                            conflict = message;
                            continue;
                        }
                        return Err(message);
                    }
                }
            }
            let allocation =
                allocate.then(|| allocation_json(wanted, &current["spec"], &self.store));
            set_status(&mut current, allocation, pod);
            // Only an allocation written now: the API server refuses any change to one
            // that is set (upstream's PreBind also stamps a reserved allocation that
            // lacks a stamp, which the API server then refuses as immutable).
            if allocate && stamps_allocations(self.store.release()) {
                stamp_allocation(&mut current, Timestamp::now());
            }
            match replace(&api, &want.name, &current, true).await {
                Ok(updated) => {
                    if let Err(error) = self.store.written(updated) {
                        tracing::warn!(%error, "the API's answer to a claim status write does not decode");
                    }
                    return Ok(());
                }
                Err(error) => {
                    let what = if allocate {
                        "add allocation and reservation to"
                    } else {
                        "add reservation to"
                    };
                    let message = format!("{what} claim {name}: {}", error.1);
                    if error.0 {
                        conflict = message;
                        continue;
                    }
                    return Err(message);
                }
            }
        }
        Err(conflict)
    }

    /// Upstream's `Unreserve`: the pod leaves `status.reservedFor` of each claim (the
    /// allocation stays, for the pod's next attempt), with a strategic-merge patch that
    /// needs no current version. Failures are logged, as upstream logs them.
    pub async fn unreserve(&self, pod: &Pod, reserved: &[Reserved]) {
        for claim in reserved {
            if claim.made_for_pod {
                self.delete_made_for_pod(claim).await;
                continue;
            }
            let patch = json!({
                "metadata": {"uid": &*claim.uid},
                "status": {"reservedFor": [{"$patch": "delete", "uid": &*pod.uid}]},
            });
            let written = self
                .api(claim.namespace)
                .patch_status(
                    &claim.name,
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await
                .map_err(api_message)
                .and_then(|o| dra::to_json(&o, Kind::ResourceClaim).map_err(|e| e.to_string()));
            // The cache holds the claim unreserved at once: the pod's next attempt must
            // not take the reservation as already written.
            let kept = written.and_then(|o| self.store.written(o).map_err(|e| e.to_string()));
            if let Err(error) = kept {
                tracing::warn!(
                    claim = %format!("{}/{}", claim.namespace, claim.name),
                    pod = %pod.key(),
                    %error,
                    "could not take the pod out of the claim's status.reservedFor"
                );
            }
        }
    }

    /// PostFilter's deletion of a claim an earlier attempt made for a pod's extended
    /// resources and left behind (upstream's `deleteClaim`, as below).
    pub async fn delete_left_behind(&self, claim: &ResourceClaim) {
        let reserved = Reserved {
            namespace: claim.namespace,
            name: claim.name.clone(),
            uid: claim.uid.clone(),
            made_for_pod: true,
        };
        self.delete_made_for_pod(&reserved).await;
    }

    /// Upstream's `deleteClaim` of the claim made for a pod's extended resources whose
    /// binding failed: the delete-protection finalizer removed (a plain update), then the
    /// claim deleted. Failures are logged, as upstream logs them.
    async fn delete_made_for_pod(&self, claim: &Reserved) {
        let api = self.api(claim.namespace);
        let name = format!("{}/{}", claim.namespace, claim.name);
        let deleted = async {
            let mut current = get(&api, &claim.name).await?;
            if let Some(Value::Array(finalizers)) = current.pointer_mut("/metadata/finalizers") {
                finalizers.retain(|f| f != FINALIZER);
                replace(&api, &claim.name, &current, false)
                    .await
                    .map_err(|e| e.1)?;
            }
            api.delete(&claim.name, &kube::api::DeleteParams::default())
                .await
                .map(|_| ())
                .map_err(api_message)
        };
        if let Err(error) = deleted.await {
            tracing::warn!(claim = %name, %error, "could not delete the claim made for the pod's extended resources");
        }
    }

    /// DynamicResources' PostFilter freed `claim`: its status loses the allocation, the
    /// reservations and the devices' status (one update on the version the cycle saw, as
    /// upstream's; if the claim changed since, or the update conflicts, it stays as it
    /// is and the pod is retried anyway).
    pub async fn deallocate(&self, claim: &ResourceClaim) {
        let name = named(claim);
        let Some(seen) = self.store.latest_if_unchanged(claim) else {
            tracing::info!(claim = %name, "not deallocating the claim: it changed since the scheduling cycle saw it");
            return;
        };
        let mut current = Value::clone(&seen);
        if current["metadata"]["uid"].as_str() != Some(&*claim.uid) {
            return;
        }
        if let Some(status) = current.get_mut("status").and_then(Value::as_object_mut) {
            status.remove("allocation");
            status.remove("reservedFor");
            status.remove("devices");
        }
        match replace(&self.api(claim.namespace), &claim.name, &current, true).await {
            Ok(_) => {
                tracing::info!(claim = %name, "deallocated the claim for a pod that fits nowhere with it")
            }
            Err((_, error)) => {
                tracing::warn!(claim = %name, %error, "could not clear status.allocation")
            }
        }
    }
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Result<Value, String> {
    let object = api.get(name).await.map_err(api_message)?;
    dra::to_json(&object, Kind::ResourceClaim).map_err(|e| e.to_string())
}

/// `PUT` of the whole object (its `status` subresource with `status`), conditioned on
/// the resourceVersion it carries. The error says whether it was a conflict.
async fn replace(
    api: &Api<DynamicObject>,
    name: &str,
    object: &Value,
    status: bool,
) -> Result<Value, (bool, String)> {
    let dynamic: DynamicObject =
        serde_json::from_value(object.clone()).map_err(|e| (false, e.to_string()))?;
    let params = PostParams::default();
    let written = if status {
        api.replace_status(name, &params, &dynamic).await
    } else {
        api.replace(name, &params, &dynamic).await
    };
    match written {
        Ok(updated) => {
            dra::to_json(&updated, Kind::ResourceClaim).map_err(|e| (false, e.to_string()))
        }
        Err(error) => Err((is_conflict(&error), api_message(error))),
    }
}

fn add_finalizer(object: &mut Value) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let finalizers = metadata
        .entry("finalizers")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = finalizers {
        list.push(Value::from(FINALIZER));
    } else {
        *finalizers = json!([FINALIZER]);
    }
}

/// Sets `status.allocation` (when given) and appends the pod to `status.reservedFor`.
/// Whether the release's PreBind stamps the allocations it reserves with
/// `allocationTimestamp` (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus,
/// both on from v1.36: upstream's `bindClaim`), from which a device's binding conditions
/// time out.
fn stamps_allocations(release: Release) -> bool {
    release.enabled(Gate::DRADeviceBindingConditions)
        && release.enabled(Gate::DRAResourceClaimDeviceStatus)
}

/// Sets the claim's `status.allocation.allocationTimestamp` to `now`, unless it has one.
fn stamp_allocation(object: &mut Value, now: Timestamp) {
    let Some(Value::Object(allocation)) = object.pointer_mut("/status/allocation") else {
        return;
    };
    if !allocation.contains_key("allocationTimestamp") {
        let stamp = serde_json::to_value(meta::Time(now)).unwrap_or(Value::Null);
        allocation.insert("allocationTimestamp".into(), stamp);
    }
}

fn set_status(object: &mut Value, allocation: Option<Value>, pod: &Pod) {
    let Value::Object(root) = object else { return };
    let status = root
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if !status.is_object() {
        *status = Value::Object(Map::new());
    }
    let Value::Object(status) = status else {
        return;
    };
    if let Some(allocation) = allocation {
        status.insert("allocation".into(), allocation);
    }
    let consumer = json!({"resource": "pods", "name": &*pod.name, "uid": &*pod.uid});
    match status.get_mut("reservedFor") {
        Some(Value::Array(list)) => list.push(consumer),
        _ => {
            status.insert("reservedFor".into(), json!([consumer]));
        }
    }
}

/// One device of an allocation in the wire form; `adminAccess` is set only for admin
/// access, the binding conditions only for a device that has them, `shareID` and
/// `consumedCapacity` only for a share of a shared device, as upstream's allocator sets
/// them.
fn result_json(d: &AllocatedDevice) -> Value {
    let mut result = json!({
        "request": &*d.request,
        "driver": d.device.driver.as_str(),
        "pool": d.device.pool.as_str(),
        "device": d.device.device.as_str(),
    });
    if d.admin_access {
        result["adminAccess"] = json!(true);
    }
    if let Some(binding) = &d.binding {
        let names =
            |list: &[gantry_api::Sym]| json!(list.iter().map(|c| c.as_str()).collect::<Vec<_>>());
        result["bindingConditions"] = names(&binding.conditions);
        result["bindingFailureConditions"] = names(&binding.failure_conditions);
    }
    let Some(share) = &d.share else {
        return result;
    };
    result["shareID"] = json!(&*share.id);
    if !share.consumed.is_empty() {
        let amounts: serde_json::Map<String, Value> = (share.consumed.iter())
            .map(|(key, milli)| {
                let text = gantry_api::QuantityFormat::BinarySI.canonical(*milli);
                (key.as_str().to_string(), json!(text))
            })
            .collect();
        result["consumedCapacity"] = Value::Object(amounts);
    }
    result
}

/// The tolerations of the request a result names (`<request>` or
/// `<request>/<subrequest>`) in the claim's spec, when it has any.
fn request_tolerations<'s>(spec: &'s Value, request: &str) -> Option<&'s Value> {
    let (name, sub) = match request.split_once('/') {
        Some((name, sub)) => (name, Some(sub)),
        None => (request, None),
    };
    let found = spec["devices"]["requests"]
        .as_array()?
        .iter()
        .find(|r| r["name"] == name)?;
    let tolerations = match sub {
        None => &found["exactly"]["tolerations"],
        Some(sub) => &found["firstAvailable"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == sub)?["tolerations"],
    };
    tolerations
        .as_array()
        .filter(|list| !list.is_empty())
        .map(|_| tolerations)
}

/// An allocation in resource.k8s.io/v1's wire form: the devices, the configuration the
/// allocator copies from the requests' classes and from the claim (as upstream's
/// allocator orders them), and where the claim can be used.
pub fn allocation_json(allocation: &Allocation, spec: &Value, store: &ClaimStore) -> Value {
    let results: Vec<Value> = (allocation.devices.iter())
        .map(|d| {
            let mut result = result_json(d);
            // Upstream's allocator copies the request's tolerations into each result.
            if let Some(tolerations) = request_tolerations(spec, &d.request) {
                result["tolerations"] = tolerations.clone();
            }
            result
        })
        .collect();
    let mut devices = Map::new();
    devices.insert("results".into(), Value::Array(results));
    let config = allocation_config(spec, &allocation.devices, &|class| {
        store.class_configs(class)
    });
    if !config.is_empty() {
        devices.insert("config".into(), Value::Array(config));
    }
    let mut out = Map::new();
    out.insert("devices".into(), Value::Object(devices));
    if let Some(selector) = &allocation.node_selector {
        out.insert("nodeSelector".into(), node_selector_json(selector));
    }
    Value::Object(out)
}

/// Each request's class (for `firstAvailable`, the chosen subrequest's) and the name the
/// results give it.
fn request_class(request: &Value, results: &[AllocatedDevice]) -> Option<(String, String)> {
    let name = request["name"].as_str()?;
    if let Some(class) = request["exactly"]["deviceClassName"].as_str() {
        return Some((class.to_string(), name.to_string()));
    }
    let prefix = format!("{name}/");
    let chosen = results
        .iter()
        .find_map(|r| r.request.strip_prefix(prefix.as_str()))?;
    let sub = request["firstAvailable"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == chosen)?;
    Some((
        sub["deviceClassName"].as_str()?.to_string(),
        format!("{name}/{chosen}"),
    ))
}

/// Upstream's "Populate configs" (`allocator_incubating.go`): each class's configs once,
/// listing every request that uses the class, then the claim's configs for the requests
/// they name (once per request named, as upstream appends them).
fn allocation_config(
    spec: &Value,
    results: &[AllocatedDevice],
    class_configs: &dyn Fn(&str) -> Option<Arc<[Value]>>,
) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let requests = spec["devices"]["requests"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let mut class_ranges: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    for request in requests {
        let Some((class, request_name)) = request_class(request, results) else {
            continue;
        };
        if let Some((_, range)) = class_ranges.iter().find(|(c, _)| *c == class) {
            for entry in &mut out[range.clone()] {
                if let Some(Value::Array(names)) = entry.get_mut("requests") {
                    names.push(Value::from(request_name.as_str()));
                }
            }
            continue;
        }
        let start = out.len();
        for config in class_configs(&class).iter().flat_map(|c| c.iter()) {
            let mut entry = config.as_object().cloned().unwrap_or_default();
            entry.insert("source".into(), Value::from("FromClass"));
            entry.insert("requests".into(), json!([request_name]));
            out.push(Value::Object(entry));
        }
        class_ranges.push((class, start..out.len()));
    }
    for config in spec["devices"]["config"].as_array().into_iter().flatten() {
        let named: Vec<&str> = config["requests"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut entry = config.as_object().cloned().unwrap_or_default();
        entry.insert("source".into(), Value::from("FromClaim"));
        let entry = Value::Object(entry);
        if named.is_empty() {
            out.push(entry);
            continue;
        }
        for request in requests {
            let Some(name) = request["name"].as_str() else {
                continue;
            };
            if named.contains(&name) {
                out.push(entry.clone());
                continue;
            }
            let chosen = request_class(request, results)
                .map(|(_, request_name)| request_name)
                .filter(|n| n.contains('/'));
            if chosen.is_some_and(|n| named.contains(&n.as_str())) {
                out.push(entry.clone());
            }
        }
    }
    out
}

fn requirement_json(r: &NodeSelectorRequirement) -> Value {
    let operator = match r.op {
        NodeSelectorOp::In => "In",
        NodeSelectorOp::NotIn => "NotIn",
        NodeSelectorOp::Exists => "Exists",
        NodeSelectorOp::DoesNotExist => "DoesNotExist",
        NodeSelectorOp::Gt => "Gt",
        NodeSelectorOp::Lt => "Lt",
    };
    let mut out = Map::new();
    out.insert("key".into(), Value::from(r.key.as_str()));
    out.insert("operator".into(), Value::from(operator));
    if !r.values.is_empty() {
        let values: Vec<Value> = r.values.iter().map(|v| Value::from(v.as_str())).collect();
        out.insert("values".into(), Value::Array(values));
    }
    Value::Object(out)
}

fn node_selector_json(selector: &NodeSelector) -> Value {
    let terms: Vec<Value> = selector
        .terms
        .iter()
        .map(|t| {
            let mut term = Map::new();
            if !t.match_expressions.is_empty() {
                let list = t.match_expressions.iter().map(requirement_json).collect();
                term.insert("matchExpressions".into(), Value::Array(list));
            }
            if !t.match_fields.is_empty() {
                let list = t.match_fields.iter().map(requirement_json).collect();
                term.insert("matchFields".into(), Value::Array(list));
            }
            Value::Object(term)
        })
        .collect();
    json!({ "nodeSelectorTerms": terms })
}

#[cfg(test)]
mod tests {
    use gantry_api::dra::DeviceId;

    use super::*;

    fn result(request: &str) -> AllocatedDevice {
        AllocatedDevice::exclusive(
            Arc::from(request),
            DeviceId {
                driver: Sym::new("gpu.example.com"),
                pool: Sym::new("node-0"),
                device: Sym::new("gpu-0"),
            },
        )
    }

    /// As upstream's allocator: a class's configs once, naming every request of the class
    /// (a subrequest as `<request>/<subrequest>`), then the claim's, once per request
    /// they name.
    #[test]
    fn configs_are_copied_from_the_classes_and_the_claim_as_upstream_orders_them() {
        let spec = json!({"devices": {
            "requests": [
                {"name": "a", "exactly": {"deviceClassName": "gpu"}},
                {"name": "b", "exactly": {"deviceClassName": "gpu"}},
                {"name": "c", "firstAvailable": [
                    {"name": "big", "deviceClassName": "big-gpu"},
                    {"name": "small", "deviceClassName": "gpu"}]},
            ],
            "config": [
                {"opaque": {"driver": "d", "parameters": {"all": true}}},
                {"requests": ["a", "c/small"], "opaque": {"driver": "d", "parameters": {"some": true}}},
            ],
        }});
        let results = [result("a"), result("b"), result("c/small")];
        let classes = |class: &str| -> Option<Arc<[Value]>> {
            match class {
                "gpu" => Some(Arc::from(vec![
                    json!({"opaque": {"driver": "d", "parameters": {"g": 1}}}),
                    json!({"opaque": {"driver": "d", "parameters": {"g": 2}}}),
                ])),
                "big-gpu" => Some(Arc::from(vec![json!({"opaque": {"driver": "d"}})])),
                _ => None,
            }
        };
        let config = allocation_config(&spec, &results, &classes);
        let all = ["a", "b", "c/small"];
        let some = json!({"requests": ["a", "c/small"], "source": "FromClaim",
            "opaque": {"driver": "d", "parameters": {"some": true}}});
        assert_eq!(
            Value::Array(config),
            json!([
                {"source": "FromClass", "requests": all, "opaque": {"driver": "d", "parameters": {"g": 1}}},
                {"source": "FromClass", "requests": all, "opaque": {"driver": "d", "parameters": {"g": 2}}},
                {"source": "FromClaim", "opaque": {"driver": "d", "parameters": {"all": true}}},
                some,
                some,
            ])
        );
    }

    #[test]
    fn results_carry_their_requests_tolerations() {
        let tolerate = json!([{"key": "k", "operator": "Exists"}]);
        let spec = json!({"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "gpu", "tolerations": tolerate}},
            {"name": "b", "exactly": {"deviceClassName": "gpu"}},
            {"name": "c", "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu"},
                {"name": "small", "deviceClassName": "gpu", "tolerations": tolerate}]},
        ]}});
        assert_eq!(request_tolerations(&spec, "a"), Some(&tolerate));
        assert_eq!(request_tolerations(&spec, "b"), None);
        assert_eq!(request_tolerations(&spec, "c/big"), None);
        assert_eq!(request_tolerations(&spec, "c/small"), Some(&tolerate));
        assert_eq!(request_tolerations(&spec, "missing"), None);
    }

    /// From v1.36 (DRADeviceBindingConditions and DRAResourceClaimDeviceStatus on) an
    /// allocation is stamped when reserved, once; v1.35 writes none.
    #[test]
    fn allocations_are_stamped_as_v1_36_stamps_them() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        let mut claim = json!({"status": {"allocation": {"devices": {"results": []}}}});
        stamp_allocation(&mut claim, at("2026-12-05T12:00:00Z"));
        stamp_allocation(&mut claim, at("2026-12-05T12:30:00Z"));
        assert_eq!(
            claim["status"]["allocation"]["allocationTimestamp"],
            json!("2026-12-05T12:00:00Z")
        );
        let mut unallocated = json!({"status": {}});
        stamp_allocation(&mut unallocated, at("2026-12-05T12:00:00Z"));
        assert_eq!(unallocated, json!({"status": {}}));
        assert!(stamps_allocations(Release::at(36)) && stamps_allocations(Release::at(37)));
        assert!(!stamps_allocations(Release::at(35)));
        let off = Release::parse(Some("1.36"), Some("DRADeviceBindingConditions=false")).unwrap();
        assert!(!stamps_allocations(off));
    }

    #[test]
    fn admin_access_is_written_only_where_given() {
        let plain = result("a");
        assert_eq!(
            result_json(&plain),
            json!({"request": "a", "driver": "gpu.example.com", "pool": "node-0", "device": "gpu-0"})
        );
        let admin = AllocatedDevice {
            admin_access: true,
            ..plain
        };
        assert_eq!(result_json(&admin)["adminAccess"], json!(true));
        let share = AllocatedDevice {
            share: Some(Arc::new(gantry_api::dra::DeviceShare {
                id: Arc::from("7c1e4f0a-1b2c-4d3e-8f00-000000000001"),
                consumed: vec![
                    (Sym::new("memory"), 10 * (1 << 30) * 1000),
                    (Sym::new("cores"), 500),
                ],
            })),
            ..result("a")
        };
        assert_eq!(
            result_json(&share),
            json!({"request": "a", "driver": "gpu.example.com", "pool": "node-0", "device": "gpu-0",
                "shareID": "7c1e4f0a-1b2c-4d3e-8f00-000000000001",
                "consumedCapacity": {"memory": "10Gi", "cores": "500m"}})
        );
    }

    #[test]
    fn a_node_selector_is_written_in_the_wire_form() {
        let selector = NodeSelector {
            terms: vec![gantry_api::NodeSelectorTerm {
                match_expressions: vec![
                    NodeSelectorRequirement::parse("zone", "In", &["a".into()], false).unwrap(),
                    NodeSelectorRequirement::parse("gpu", "Exists", &[], false).unwrap(),
                ],
                match_fields: vec![
                    NodeSelectorRequirement::parse("metadata.name", "In", &["n".into()], true)
                        .unwrap(),
                ],
            }],
        };
        assert_eq!(
            node_selector_json(&selector),
            json!({"nodeSelectorTerms": [{
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]},
                    {"key": "gpu", "operator": "Exists"}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}],
            }]})
        );
    }

    #[test]
    fn the_pod_joins_reserved_for_after_those_already_there() {
        let mut claim = json!({"metadata": {"name": "c"}, "status": {"reservedFor": [
            {"resource": "pods", "name": "other", "uid": "u-0"}]}});
        let mut pod = Pod::new("default", "p");
        pod.uid = Arc::from("u-1");
        set_status(&mut claim, None, &pod);
        assert_eq!(
            claim["status"]["reservedFor"],
            json!([{"resource": "pods", "name": "other", "uid": "u-0"},
                   {"resource": "pods", "name": "p", "uid": "u-1"}])
        );
        assert!(claim["status"].get("allocation").is_none());
    }
}
