//! Dynamic resource allocation (resource.k8s.io/v1) as the watches report it: device
//! classes, resource slices and resource claims, decoded into Gantry's model and fed to
//! the cache; and the claims as the API last sent them (whole, with their
//! resourceVersion), which the binders need to write a claim's status back.
//!
//! The claims are kept where the scheduling loop (applying watch events) and the binders
//! (applying their own writes, upstream's `AssumeClaimAfterAPICall`) both reach them, under
//! one lock that also covers the cache's update: a watch event older than a binder's write
//! is ignored, as upstream's assume cache ignores it, so that the cache never goes back to
//! a claim without the allocation just written.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use gantry_api::decode::{ClusterObjects, DecodeError, ObjectError};
use gantry_api::dra::{ClaimKey, DeviceClass, DraObjects, ResourceClaim, ResourceSlice};
use gantry_api::dra_taint_rules::DeviceTaintRule;
use gantry_api::{Pod, Release, Sym};
use gantry_cache::Cache;
use gantry_framework::plugins::dynamic_resources::queueing_hint::ClaimChangeHint;
use gantry_framework::{ActionType, ClusterEvent, EventResource};
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use parking_lot::Mutex;
use serde_json::Value;

use crate::watch::{Kind, Object};

/// The one version of resource.k8s.io Gantry reads and writes.
pub const GROUP: &str = "resource.k8s.io";
pub const VERSION: &str = "v1";

/// The finalizer kube-scheduler adds to a claim before it allocates it
/// (`resourceapi.Finalizer`).
pub const FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// How kube addresses a DRA kind (one of `Kind::DRA`).
pub fn api_resource(kind: Kind) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: kind.kind().into(),
        plural: kind.name().into(),
    }
}

/// `Kind namespace/name` (or `Kind name`), as decoding errors name objects.
fn label(kind: Kind, object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or("(unnamed)");
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{} {ns}/{name}", kind.kind()),
        None => format!("{} {name}", kind.kind()),
    }
}

/// The object as JSON, with the `kind` and `apiVersion` a list's items lack.
pub fn to_json(object: &DynamicObject, kind: Kind) -> Result<Value, ObjectError> {
    let mut value = serde_json::to_value(object).map_err(|e| ObjectError {
        object: format!(
            "{} {}",
            kind.kind(),
            object.metadata.name.as_deref().unwrap_or("(unnamed)")
        ),
        field: "(the whole object)".into(),
        message: e.to_string(),
    })?;
    if let Value::Object(map) = &mut value {
        map.insert(
            "apiVersion".into(),
            Value::from(format!("{GROUP}/{VERSION}")),
        );
        map.insert("kind".into(), Value::from(kind.kind()));
    }
    Ok(value)
}

/// Decodes one DRA object of `kind` as a manifest of it decodes (the same checks, the
/// same errors), as `release`'s API server stores it.
fn decode(kind: Kind, value: &Value, release: Release) -> Result<DraObjects, ObjectError> {
    let object = label(kind, value);
    let whole = |message: String| ObjectError {
        object: object.clone(),
        field: "(the whole object)".into(),
        message,
    };
    let text = serde_json::to_string(value).map_err(|e| whole(e.to_string()))?;
    let mut objects = ClusterObjects::for_release(release);
    match objects.decode_more(&text, &object) {
        Ok(()) => Ok(objects.dra),
        Err(DecodeError::Object { error, .. }) => Err(error),
        Err(other) => Err(whole(other.to_string())),
    }
}

fn missing(kind: Kind, value: &Value) -> ObjectError {
    ObjectError {
        object: label(kind, value),
        field: "kind".into(),
        message: format!("did not decode as a {}", kind.kind()),
    }
}

/// A claim from its JSON (a watch event, or the API's answer to a write).
pub fn decode_claim(value: &Value, release: Release) -> Result<ResourceClaim, ObjectError> {
    decode(Kind::ResourceClaim, value, release)?
        .claims
        .pop()
        .ok_or_else(|| missing(Kind::ResourceClaim, value))
}

pub fn decode_claim_object(
    object: &DynamicObject,
    release: Release,
) -> Result<Object, ObjectError> {
    let value = to_json(object, Kind::ResourceClaim)?;
    let claim = decode_claim(&value, release)?;
    Ok(Object::ResourceClaim(Arc::new(claim), Arc::new(value)))
}

pub fn decode_slice(object: &DynamicObject, release: Release) -> Result<Object, ObjectError> {
    let value = to_json(object, Kind::ResourceSlice)?;
    let slice = decode(Kind::ResourceSlice, &value, release)?
        .slices
        .pop()
        .ok_or_else(|| missing(Kind::ResourceSlice, &value))?;
    Ok(Object::ResourceSlice(slice))
}

pub fn decode_device_class(
    object: &DynamicObject,
    release: Release,
) -> Result<Object, ObjectError> {
    let value = to_json(object, Kind::DeviceClass)?;
    let class = decode(Kind::DeviceClass, &value, release)?
        .device_classes
        .pop()
        .ok_or_else(|| missing(Kind::DeviceClass, &value))?;
    let configs: Arc<[Value]> = value["spec"]["config"]
        .as_array()
        .map_or_else(Vec::new, Clone::clone)
        .into();
    Ok(Object::DeviceClass(Arc::new(class), configs))
}

/// The versions of resource.k8s.io a DeviceTaintRule may be served in, newest first
/// (v1alpha3 in v1.35, v1beta2 in v1.36, GA from v1.37).
pub const TAINT_RULE_VERSIONS: [&str; 3] = ["v1", "v1beta2", "v1alpha3"];

/// How kube addresses DeviceTaintRules in `version`.
pub fn taint_rule_resource(version: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: Kind::DeviceTaintRule.kind().into(),
        plural: Kind::DeviceTaintRule.name().into(),
    }
}

/// A DeviceTaintRule as the watch of `version` sends it, checked as a manifest of it is.
pub fn decode_taint_rule(object: &DynamicObject, version: &str) -> Result<Object, ObjectError> {
    let mut value = to_json(object, Kind::DeviceTaintRule)?;
    value["apiVersion"] = Value::from(format!("{GROUP}/{version}"));
    let rule = gantry_api::dra_taint_rules::decode(&value, &label(Kind::DeviceTaintRule, &value))?;
    Ok(Object::DeviceTaintRule(Arc::new(rule)))
}

fn resource_version(object: &Value) -> Option<u64> {
    object["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

/// Whether `new` is an older version than `kept` (both with numeric resourceVersions,
/// as upstream's assume cache compares them; otherwise the newcomer wins).
fn is_older(new: &Value, kept: &Value) -> bool {
    matches!((resource_version(new), resource_version(kept)), (Some(n), Some(k)) if n < k)
}

struct SeenClaim {
    claim: Arc<ResourceClaim>,
    object: Arc<Value>,
    /// The queue has been told about this version (a binder's write is not: its watch
    /// event is, when it arrives).
    announced: bool,
    /// The version the watch delivered last (a binder's write is not one): what a claim
    /// event's queueing hint compares with, as upstream's informer does.
    watched: Option<Arc<ResourceClaim>>,
}

/// The claims as the API last sent them, and the device classes' configurations, shared
/// by the scheduling loop and the binders.
pub struct ClaimStore {
    cache: Arc<Cache>,
    release: Release,
    claims: Mutex<HashMap<ClaimKey, SeenClaim>>,
    class_configs: Mutex<HashMap<Sym, Arc<[Value]>>>,
}

impl ClaimStore {
    pub fn new(cache: Arc<Cache>, release: Release) -> ClaimStore {
        ClaimStore {
            cache,
            release,
            claims: Mutex::new(HashMap::new()),
            class_configs: Mutex::new(HashMap::new()),
        }
    }

    pub fn release(&self) -> Release {
        self.release
    }

    /// A claim as the watch shows it: kept and given to the cache, unless the version
    /// kept is newer (a binder's write the watch has not caught up with yet). Returns
    /// what the queue hears about, if anything changed for scheduling.
    pub fn observe(&self, claim: Arc<ResourceClaim>, object: Arc<Value>) -> Option<ActionType> {
        self.observe_with_hint(claim, object)
            .map(|(action, _)| action)
    }

    /// [`Self::observe`], with which pods the change concerns (DynamicResources' hint).
    pub fn observe_with_hint(
        &self,
        claim: Arc<ResourceClaim>,
        object: Arc<Value>,
    ) -> Option<(ActionType, ClaimChangeHint)> {
        let mut claims = self.claims.lock();
        let key = claim.key();
        let previous = claims.get(&key).and_then(|seen| seen.watched.clone());
        let hint = ClaimChangeHint::new(previous.as_deref(), &claim, false);
        let action = match claims.get_mut(&key) {
            Some(seen) if is_older(&object, &seen.object) => return None,
            Some(seen) if seen.claim == claim => {
                // Only metadata moved (or this confirms a binder's write).
                seen.object = object;
                seen.watched = Some(claim);
                return (!std::mem::replace(&mut seen.announced, true))
                    .then_some((ActionType::UPDATE, hint));
            }
            Some(_) => ActionType::UPDATE,
            None => ActionType::ADD,
        };
        self.cache.dra().set_claim(claim.clone());
        claims.insert(
            key,
            SeenClaim {
                watched: Some(claim.clone()),
                claim,
                object,
                announced: true,
            },
        );
        Some((action, hint))
    }

    /// The API's answer to a binder's status write: the cache holds it from now on
    /// (upstream's `AssumeClaimAfterAPICall`), not only once the watch delivers it.
    pub fn written(&self, object: Value) -> Result<(), ObjectError> {
        let claim = Arc::new(decode_claim(&object, self.release)?);
        let object = Arc::new(object);
        let mut claims = self.claims.lock();
        let key = claim.key();
        if claims
            .get(&key)
            .is_some_and(|seen| is_older(&object, &seen.object))
        {
            return Ok(());
        }
        self.cache
            .assume_written_claims(std::slice::from_ref(&claim));
        let watched = claims.get(&key).and_then(|seen| seen.watched.clone());
        claims.insert(
            key,
            SeenClaim {
                watched,
                claim,
                object,
                announced: false,
            },
        );
        Ok(())
    }

    pub fn deleted(&self, key: ClaimKey) -> bool {
        self.deleted_with_hint(key).is_some()
    }

    /// [`Self::deleted`], with which pods the deletion concerns (DynamicResources' hint):
    /// `None` when the claim was not known.
    pub fn deleted_with_hint(&self, key: ClaimKey) -> Option<ClaimChangeHint> {
        let seen = self.claims.lock().remove(&key)?;
        self.cache.dra().remove_claim(key);
        let last = seen.watched.unwrap_or(seen.claim);
        Some(ClaimChangeHint::new(Some(&last), &last, true))
    }

    /// A complete list: claims missing from it were deleted.
    fn relist(&self, listed: Vec<(Arc<ResourceClaim>, Arc<Value>)>) -> Option<ActionType> {
        let keep: HashSet<ClaimKey> = listed.iter().map(|(c, _)| c.key()).collect();
        let gone: Vec<ClaimKey> = self
            .claims
            .lock()
            .keys()
            .filter(|k| !keep.contains(k))
            .copied()
            .collect();
        let mut action = None;
        for key in gone {
            if self.deleted(key) {
                action = Some(or(action, ActionType::DELETE));
            }
        }
        for (claim, object) in listed {
            if let Some(a) = self.observe(claim, object) {
                action = Some(or(action, a));
            }
        }
        action
    }

    /// The claim's JSON as last seen (watch or write), for a status write.
    pub fn latest(&self, key: ClaimKey) -> Option<Arc<Value>> {
        self.claims.lock().get(&key).map(|s| s.object.clone())
    }

    /// The claim's JSON as last seen, if that is still the claim `seen` (what a
    /// scheduling cycle decided on): PostFilter's deallocation is written on the version
    /// the cycle saw, as upstream's, never on one where a pod has reserved it since.
    pub fn latest_if_unchanged(&self, seen: &ResourceClaim) -> Option<Arc<Value>> {
        self.claims
            .lock()
            .get(&seen.key())
            .filter(|latest| *latest.claim == *seen)
            .map(|latest| latest.object.clone())
    }

    /// Whether every claim of the pod has been seen reserved for it: its binder wrote
    /// them before the binding, so another instance waits for them as for the binding.
    pub fn all_reserved_for(&self, pod: &Pod) -> bool {
        let claims = self.claims.lock();
        pod.resource_claims.iter().all(|entry| {
            let key = ClaimKey {
                namespace: pod.namespace,
                name: Sym::new(&pod.claim_name(entry)),
            };
            claims
                .get(&key)
                .is_some_and(|seen| seen.claim.is_reserved_for(&pod.uid))
        })
    }

    /// The `spec.config` of a device class, as last seen.
    pub fn class_configs(&self, class: &str) -> Option<Arc<[Value]>> {
        self.class_configs.lock().get(&Sym::new(class)).cloned()
    }
}

fn or(action: Option<ActionType>, more: ActionType) -> ActionType {
    action.map_or(more, |a| a.or(more))
}

/// The DRA objects the scheduling loop applies: classes and slices by name (to tell what a
/// relist dropped), claims in the shared [`ClaimStore`].
/// What the queue hears of a DRA object's change: the event, and for a claim which pods
/// it concerns (DynamicResources' queueing hint).
pub struct DraEvent {
    pub event: ClusterEvent,
    pub claim: Option<ClaimChangeHint>,
}

pub struct DraMirror {
    pub store: Arc<ClaimStore>,
    cache: Arc<Cache>,
    classes: HashMap<Sym, Arc<DeviceClass>>,
    /// As the API sends them, before the rules' taints.
    slices: HashMap<Sym, Arc<ResourceSlice>>,
    /// DeviceTaintRules by name (sorted: their taints go on in this order).
    rules: BTreeMap<String, Arc<DeviceTaintRule>>,
}

impl DraMirror {
    pub fn new(cache: Arc<Cache>, store: Arc<ClaimStore>) -> DraMirror {
        DraMirror {
            store,
            cache,
            classes: HashMap::new(),
            slices: HashMap::new(),
            rules: BTreeMap::new(),
        }
    }

    /// Applies a DRA object (applied, or `deleted`); returns the event the queue hears,
    /// if anything changed. Other objects are not the mirror's: `None`.
    pub fn apply(&mut self, object: Object, deleted: bool) -> Option<DraEvent> {
        let (resource, action) = match object {
            Object::DeviceClass(class, configs) => (
                EventResource::DeviceClass,
                self.class(class, configs, deleted)?,
            ),
            Object::ResourceSlice(slice) => {
                (EventResource::ResourceSlice, self.slice(slice, deleted)?)
            }
            Object::DeviceTaintRule(rule) => {
                (EventResource::ResourceSlice, self.rule(rule, deleted)?)
            }
            Object::ResourceClaim(claim, object) => {
                let (action, hint) = if deleted {
                    let hint = self.store.deleted_with_hint(claim.key())?;
                    (ActionType::DELETE, hint)
                } else {
                    self.store.observe_with_hint(claim, object)?
                };
                return Some(DraEvent {
                    event: ClusterEvent::new(EventResource::ResourceClaim, action),
                    claim: Some(hint),
                });
            }
            _ => return None,
        };
        Some(DraEvent {
            event: ClusterEvent::new(resource, action),
            claim: None,
        })
    }

    fn class(
        &mut self,
        class: Arc<DeviceClass>,
        configs: Arc<[Value]>,
        deleted: bool,
    ) -> Option<ActionType> {
        let name = class.name;
        if deleted {
            self.classes.remove(&name)?;
            self.cache.dra().remove_device_class(name);
            self.store.class_configs.lock().remove(&name);
            return Some(ActionType::DELETE);
        }
        let configs_changed = self
            .store
            .class_configs
            .lock()
            .insert(name, configs.clone())
            .is_none_or(|old| old != configs);
        let action = match self.classes.insert(name, class.clone()) {
            Some(old) if old == class => return configs_changed.then_some(ActionType::UPDATE),
            Some(_) => ActionType::UPDATE,
            None => ActionType::ADD,
        };
        self.cache.dra().set_device_class(class);
        Some(action)
    }

    fn slice(&mut self, slice: Arc<ResourceSlice>, deleted: bool) -> Option<ActionType> {
        let name = slice.name;
        if deleted {
            self.slices.remove(&name)?;
            self.cache.remove_resource_slice(name);
            return Some(ActionType::DELETE);
        }
        let action = match self.slices.insert(name, slice.clone()) {
            Some(old) if old == slice => return None,
            Some(_) => ActionType::UPDATE,
            None => ActionType::ADD,
        };
        self.cache.set_resource_slice(self.patched(slice));
        Some(action)
    }

    /// The slice with the rules' taints, as upstream's tracker hands it to the scheduler.
    fn patched(&self, slice: Arc<ResourceSlice>) -> Arc<ResourceSlice> {
        let rules = self.rules.values().map(|r| &**r);
        match gantry_api::dra_taint_rules::apply(rules, &slice) {
            Some(patched) => Arc::new(patched),
            None => slice,
        }
    }

    /// Gives the cache every slice again, with the rules' taints as they are now (in name
    /// order, so that runs repeat).
    fn repatch_all(&self) {
        let mut slices: Vec<Arc<ResourceSlice>> = self.slices.values().cloned().collect();
        slices.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        for slice in slices {
            self.cache.set_resource_slice(self.patched(slice));
        }
    }

    /// A rule added, changed or deleted: every slice is given to the cache again with the
    /// rules' taints as they are now (those it did not pick are unchanged there).
    fn rule(&mut self, rule: Arc<DeviceTaintRule>, deleted: bool) -> Option<ActionType> {
        let name = rule.name.as_str().to_string();
        if deleted {
            self.rules.remove(&name)?;
        } else if self.rules.insert(name, rule.clone()).as_ref() == Some(&rule) {
            return None;
        }
        self.repatch_all();
        Some(ActionType::UPDATE)
    }

    /// A complete list of one DRA kind: what it does not list was deleted. Returns the
    /// event the queue hears (one, however many objects changed).
    pub fn relist(
        &mut self,
        kind: Kind,
        objects: Vec<Object>,
    ) -> Option<(EventResource, ActionType)> {
        let resource = match kind {
            Kind::DeviceClass => EventResource::DeviceClass,
            Kind::ResourceSlice | Kind::DeviceTaintRule => EventResource::ResourceSlice,
            Kind::ResourceClaim => EventResource::ResourceClaim,
            _ => return None,
        };
        if kind == Kind::ResourceClaim {
            let listed = objects
                .into_iter()
                .filter_map(|o| match o {
                    Object::ResourceClaim(claim, object) => Some((claim, object)),
                    _ => None,
                })
                .collect();
            return self.store.relist(listed).map(|a| (resource, a));
        }
        let listed: HashSet<Sym> = objects.iter().filter_map(name_of).collect();
        if kind == Kind::DeviceTaintRule {
            let listed: Vec<Arc<DeviceTaintRule>> = (objects.into_iter())
                .filter_map(|o| match o {
                    Object::DeviceTaintRule(rule) => Some(rule),
                    _ => None,
                })
                .collect();
            let rules: BTreeMap<String, Arc<DeviceTaintRule>> = (listed.iter())
                .map(|r| (r.name.as_str().to_string(), r.clone()))
                .collect();
            if rules == self.rules {
                return None;
            }
            self.rules = rules;
            self.repatch_all();
            return Some((resource, ActionType::UPDATE));
        }
        let gone: Vec<Object> = if kind == Kind::DeviceClass {
            let no_configs: Arc<[Value]> = Arc::from(Vec::new());
            self.classes
                .values()
                .filter(|c| !listed.contains(&c.name))
                .map(|c| Object::DeviceClass(c.clone(), no_configs.clone()))
                .collect()
        } else {
            self.slices
                .values()
                .filter(|s| !listed.contains(&s.name))
                .map(|s| Object::ResourceSlice(s.clone()))
                .collect()
        };
        let changes = gone
            .into_iter()
            .map(|o| (o, true))
            .chain(objects.into_iter().map(|o| (o, false)));
        let mut action = None;
        for (object, deleted) in changes {
            if let Some(changed) = self.apply(object, deleted) {
                action = Some(or(action, changed.event.action));
            }
        }
        action.map(|a| (resource, a))
    }
}

/// The name of a device class or a slice.
fn name_of(object: &Object) -> Option<Sym> {
    match object {
        Object::DeviceClass(class, _) => Some(class.name),
        Object::ResourceSlice(slice) => Some(slice.name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claim_json(resource_version: &str, allocated: bool) -> Value {
        let mut claim = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default", "uid": "u-1",
                         "resourceVersion": resource_version},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}},
        });
        if allocated {
            claim["status"] = json!({"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-0", "device": "gpu-0"}]}}});
        }
        claim
    }

    fn observe(store: &ClaimStore, object: Value) -> Option<ActionType> {
        let claim = decode_claim(&object, store.release()).unwrap();
        store.observe(Arc::new(claim), Arc::new(object))
    }

    fn allocated_in_cache(cache: &Cache) -> bool {
        cache.dra().claims()[0].allocation.is_some()
    }

    #[test]
    fn a_watch_event_older_than_a_write_does_not_undo_it() {
        let cache = Arc::new(Cache::new());
        let store = ClaimStore::new(cache.clone(), Release::default());
        assert_eq!(
            observe(&store, claim_json("5", false)),
            Some(ActionType::ADD)
        );
        store.written(claim_json("6", true)).unwrap();
        assert!(allocated_in_cache(&cache));
        // The watch was behind the write: its older version is ignored.
        assert_eq!(observe(&store, claim_json("5", false)), None);
        assert!(allocated_in_cache(&cache));
        assert_eq!(
            store
                .latest(ClaimKey {
                    namespace: Sym::new("default"),
                    name: Sym::new("c"),
                })
                .unwrap()["metadata"]["resourceVersion"],
            "6"
        );
        // The write's own event tells the queue once; a newer version wins.
        assert_eq!(
            observe(&store, claim_json("6", true)),
            Some(ActionType::UPDATE)
        );
        assert_eq!(observe(&store, claim_json("6", true)), None);
        assert_eq!(
            observe(&store, claim_json("7", false)),
            Some(ActionType::UPDATE)
        );
        assert!(!allocated_in_cache(&cache));
    }

    /// PostFilter deallocates the claim a cycle saw; once a pod has reserved it since
    /// (the watch delivered the reservation), there is nothing to write on.
    #[test]
    fn a_deallocation_is_written_only_on_the_claim_the_cycle_saw() {
        let cache = Arc::new(Cache::new());
        let store = ClaimStore::new(cache.clone(), Release::default());
        observe(&store, claim_json("5", true));
        let seen = cache.dra().claims()[0].clone();
        assert!(store.latest_if_unchanged(&seen).is_some());
        let mut reserved = claim_json("6", true);
        reserved["status"]["reservedFor"] =
            json!([{"resource": "pods", "name": "p", "uid": "pod-1"}]);
        observe(&store, reserved);
        assert!(store.latest_if_unchanged(&seen).is_none());
    }

    #[test]
    fn a_relist_removes_the_claims_it_does_not_show() {
        let cache = Arc::new(Cache::new());
        let store = ClaimStore::new(cache.clone(), Release::default());
        observe(&store, claim_json("5", true));
        assert_eq!(store.relist(Vec::new()), Some(ActionType::DELETE));
        assert!(cache.dra().claims().is_empty());
        assert_eq!(store.relist(Vec::new()), None);
    }

    #[test]
    fn an_undecodable_claim_is_an_error_naming_the_object_and_field() {
        let mut claim = claim_json("5", false);
        claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"] =
            json!({"requests": {"memory": "lots"}});
        let error = decode_claim(&claim, Release::default()).unwrap_err();
        assert_eq!(error.object, "ResourceClaim default/c");
        assert!(
            error.field == "spec.devices.requests[0].exactly.capacity.requests.memory",
            "{error}"
        );
    }
}
