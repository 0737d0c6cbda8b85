//! Everything Gantry writes to the API, as kube-scheduler writes it: the pod's resource
//! claims (before the binding, see [`claim_writes`](crate::claim_writes)), the binding
//! (with the pod's UID as a precondition), the `Scheduled` and `FailedScheduling` events, the
//! `PodScheduled` condition and `status.nominatedNodeName`, and preemption's victims
//! (their `DisruptionTarget` condition, a `Preempted` event, then their deletion). Each
//! write is a task on the runtime, so the scheduling loop never waits for the network.

use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use gantry_api::dra::ResourceClaim;
use gantry_api::{Pod, PodGroup, Release, Sym};
use gantry_cache::GroupKey;
use gantry_framework::plugins::{dynamic_resources, volume_binding};
use gantry_scheduler::BindingCycle;
use gantry_scheduler::queue;
use gantry_scheduler::shard::HOPS_ANNOTATION;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod as K8sPod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::json;
use tokio::runtime::Handle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::Input;
use crate::claim_writes::ClaimWriter;
use crate::events::{EventRecord, Events, PodVersions};
use crate::failure::Outage;
use crate::fence::{self, Fences};
use crate::metrics::KubeMetrics;
use crate::pod_groups;
use crate::volume_writes::VolumeWriter;

mod gang;

/// Binds in flight at once; more wait for a slot (kube-scheduler's binding goroutines are
/// unbounded, but an API server is better served by a bounded number of writers).
pub const MAX_BINDS_IN_FLIGHT: usize = 64;

/// A bind's place among the binds in flight ([`MAX_BINDS_IN_FLIGHT`]), given up while the
/// bind waits on a driver (binding conditions may take minutes): kube-scheduler's binding
/// goroutines wait without holding anything, so waiting binds must not hold back others.
pub(crate) struct Slot {
    permits: Arc<Semaphore>,
    held: Option<OwnedSemaphorePermit>,
}

impl Slot {
    /// A place, once one is free; `None` if the writer is shutting down.
    pub(crate) async fn take(permits: &Arc<Semaphore>) -> Option<Slot> {
        let held = permits.clone().acquire_owned().await.ok()?;
        Some(Slot {
            permits: permits.clone(),
            held: Some(held),
        })
    }

    /// Runs `wait` without the place, then takes one again.
    async fn while_waiting<T>(&mut self, wait: impl Future<Output = T>) -> T {
        self.held = None;
        let out = wait.await;
        self.held = self.permits.clone().acquire_owned().await.ok();
        out
    }
}

/// How often PreBind looks again at claims waiting for their binding conditions.
const BINDING_POLL: Duration =
    Duration::from_secs(gantry_api::dra_binding::BINDING_POLL_INTERVAL_SECONDS as u64);
/// Other writes in flight at once (events, pod conditions, preemption): a backlog's
/// thousands of events wait for a slot rather than each taking a task and, over plain
/// HTTP, a connection.
pub const MAX_WRITES_IN_FLIGHT: usize = 16;

/// `PodScheduled=False` reasons, as kube-scheduler writes them.
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";
pub const REASON_SCHEDULER_ERROR: &str = "SchedulerError";

/// How a bind ended when it did not bind.
#[derive(Debug, Clone)]
pub struct BindFailure {
    pub message: String,
    /// The binder's re-check refused the placement (another instance took the room).
    pub conflict: bool,
    /// The binding was sent but no answer came back (the connection failed), or the
    /// server failed it (5xx: a timeout, a restart): it may have been written.
    pub outcome_unknown: bool,
}

impl BindFailure {
    fn plain(message: String) -> BindFailure {
        BindFailure {
            message,
            conflict: false,
            outcome_unknown: false,
        }
    }

    /// The binder's re-check refused the placement.
    fn conflict(message: String) -> BindFailure {
        BindFailure {
            message: format!("placement no longer fits: {message}"),
            conflict: true,
            outcome_unknown: false,
        }
    }
}

/// The outcome of one binding cycle's API part, sent back to the scheduling loop, which
/// concludes the cycle (the cache is written by the loop only).
pub struct BindDone {
    pub cycle: BindingCycle,
    pub result: Result<(), BindFailure>,
    pub took: Duration,
}

#[derive(Clone)]
pub struct ApiWriter {
    client: Client,
    runtime: Handle,
    inputs: Sender<Input>,
    permits: Arc<Semaphore>,
    events: Events,
    /// The pods' `resourceVersion`s as the watch last showed them (the loop notes them).
    pub versions: PodVersions,
    /// Decides the text of the `Preempted` event.
    release: Release,
    /// Slots for the writes other than binds and events.
    writes: Arc<Semaphore>,
    metrics: Arc<KubeMetrics>,
    /// With several instances: re-check each placement against the latest cache, at
    /// the node's fence, before binding.
    fences: Option<Fences>,
    claims: ClaimWriter,
    volumes: VolumeWriter,
    outage: Arc<Outage>,
}

/// The binder's questions to the scheduling loop, for one pod or a gang's members bound
/// together.
struct AskLoop {
    inputs: Sender<Input>,
    pods: Vec<Arc<Pod>>,
}

impl fence::Loop for AskLoop {
    async fn has_seen(&self, pod_uid: &str, fence_version: Option<&str>) -> bool {
        let (reply, answer) = oneshot::channel();
        let uid = Arc::from(pod_uid);
        let fence_version = fence_version.map(Arc::from);
        let seen = Input::Seen {
            uid,
            fence_version,
            reply,
        };
        if self.inputs.send(seen).is_err() {
            return true;
        }
        answer.await.unwrap_or(true)
    }

    async fn check(&self) -> Result<(), String> {
        let (reply, answer) = oneshot::channel();
        let pods = self.pods.clone();
        if self.inputs.send(Input::Check { pods, reply }).is_err() {
            return Err("the scheduler stopped".into());
        }
        answer.await.unwrap_or(Err("the scheduler stopped".into()))
    }
}

/// The pod as an event's `regarding` or `related` object, at `version`.
/// Who preempted, as the victims' condition and event name it (upstream's
/// `ExecutorPreemptor`): a pod, or a pod group (workload-aware preemption).
pub struct Preemptor {
    pub scheduler_name: Sym,
    /// `pod` or `podgroup` (upstream's `Type()`).
    pub kind: &'static str,
    pub uid: Arc<str>,
    /// The node the preemption nominated, or `cluster` for a pod group's.
    pub node: String,
    /// The event's related object.
    pub related: ObjectReference,
    /// What the loop's queue holds back until the deletions are done: the pod, or every
    /// member of the group.
    pub held: queue::Preemptor,
}

impl Preemptor {
    pub fn pod(pod: &Arc<Pod>, node: Sym) -> Preemptor {
        Preemptor {
            scheduler_name: pod.scheduler_name,
            kind: "pod",
            uid: pod.uid.clone(),
            node: node.to_string(),
            related: reference(pod, None),
            held: queue::Preemptor::Pod(pod.uid.clone()),
        }
    }

    /// A pod group's members preempting as one; `None` if the API gave the group no uid.
    pub fn group(group: &PodGroup, members: &[Arc<Pod>]) -> Option<Preemptor> {
        let uid = group.uid.clone()?;
        Some(Preemptor {
            scheduler_name: members.first()?.scheduler_name,
            kind: "podgroup",
            uid: uid.clone(),
            node: "cluster".into(),
            related: ObjectReference {
                api_version: Some(format!("{}/{}", pod_groups::GROUP, pod_groups::VERSION)),
                kind: Some("PodGroup".into()),
                namespace: Some(group.namespace.to_string()),
                name: Some(group.name.to_string()),
                uid: Some(uid.to_string()),
                ..ObjectReference::default()
            },
            held: queue::Preemptor::Group(GroupKey::of_group(group)),
        })
    }
}

fn reference(pod: &Pod, version: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(pod.namespace.to_string()),
        name: Some(pod.name.to_string()),
        uid: Some(pod.uid.to_string()),
        resource_version: version,
        ..ObjectReference::default()
    }
}

/// How the binders and the loop's writes reach the API.
pub struct WriterSetup {
    pub client: Client,
    pub runtime: Handle,
    pub inputs: Sender<Input>,
    /// Names this instance in events' `reportingInstance`.
    pub identity: String,
    pub metrics: Arc<KubeMetrics>,
    pub fences: Option<Fences>,
    pub claims: ClaimWriter,
    pub release: Release,
    /// The pause between tries of an event write (client-go: 10 s).
    pub event_retry: Duration,
    /// Where writes that did not reach the API server are reported.
    pub outage: Arc<Outage>,
}

impl ApiWriter {
    /// Each profile reports its pods' events as its scheduler name, as kube-scheduler's
    /// per-profile recorders do.
    pub fn new(setup: WriterSetup) -> ApiWriter {
        let events = {
            let _entered = setup.runtime.enter();
            Events::start(setup.client.clone(), &setup.identity, setup.event_retry)
        };
        ApiWriter {
            volumes: VolumeWriter::new(setup.client.clone(), Duration::from_secs(1)),
            client: setup.client,
            runtime: setup.runtime,
            inputs: setup.inputs,
            permits: Arc::new(Semaphore::new(MAX_BINDS_IN_FLIGHT)),
            events,
            versions: PodVersions::default(),
            release: setup.release,
            metrics: setup.metrics,
            fences: setup.fences,
            claims: setup.claims,
            writes: Arc::new(Semaphore::new(MAX_WRITES_IN_FLIGHT)),
            outage: setup.outage,
        }
    }

    fn pods(&self, pod: &Pod) -> Api<K8sPod> {
        Api::namespaced(self.client.clone(), pod.namespace.as_str())
    }

    /// Queues an event about `pod` (at `version`), reported by its profile.
    fn event(
        &self,
        pod: &Pod,
        version: Option<String>,
        what: EventText,
        related: Option<ObjectReference>,
    ) {
        self.events.record(EventRecord {
            type_: what.type_,
            reason: what.reason,
            action: what.action,
            note: what.note,
            regarding: reference(pod, version),
            related,
            controller: pod.scheduler_name.to_string(),
        });
    }

    /// The `Scheduled` event of a pod bound to `node` (named at `version`).
    pub fn scheduled(&self, pod: &Pod, node: Sym, version: Option<String>) {
        let note = format!(
            "Successfully assigned {}/{} to {node}",
            pod.namespace, pod.name
        );
        self.event(
            pod,
            version,
            EventText::normal("Scheduled", "Binding", note),
            None,
        );
    }

    /// The binding cycle's API part: PreBind, the re-check behind `fences` when instances
    /// share the cluster, then `POST pods/{name}/binding`. The result goes back to the loop.
    pub fn bind(&self, mut cycle: BindingCycle, fences: Vec<String>) {
        let writer = self.clone();
        // The event names the pod as it was decided (kube-scheduler: the assumed pod).
        let version = self.versions.of(&cycle.pod().uid);
        self.runtime.spawn(async move {
            let Some(mut slot) = Slot::take(&writer.permits).await else {
                return;
            };
            let start = Instant::now();
            let result = writer.run_bind(&mut cycle, &fences, &mut slot).await;
            writer.metrics.bind(result.is_ok());
            if result.is_ok() {
                writer.scheduled(cycle.pod(), cycle.node(), version);
            }
            let took = start.elapsed();
            let _ = writer.inputs.send(Input::BindDone(Box::new(BindDone {
                cycle,
                result,
                took,
            })));
        });
    }

    async fn run_bind(
        &self,
        cycle: &mut BindingCycle,
        fence_names: &[String],
        slot: &mut Slot,
    ) -> Result<(), BindFailure> {
        self.pre_bind(cycle).await?;
        let asker = AskLoop {
            inputs: self.inputs.clone(),
            pods: vec![cycle.pod().clone()],
        };
        let held = self
            .take_fences(fence_names, &cycle.pod().uid, &asker)
            .await?;
        let bound = self.write_binding(cycle, held.as_ref(), slot).await;
        if bound.is_err()
            && let (Some(fences), Some(held)) = (&self.fences, held)
        {
            fences.release_failed(held).await;
        }
        bound
    }

    /// PreBind: the plugins' own, then VolumeBinding's, before the fences, as it may
    /// wait long for a provisioner (volumes are the pod's own; a volume another pod's
    /// binder took meanwhile fails the conditioned update).
    async fn pre_bind(&self, cycle: &mut BindingCycle) -> Result<(), BindFailure> {
        cycle.pre_bind().map_err(BindFailure::plain)?;
        let volumes = cycle.volumes_to_write();
        if !volumes.is_empty() {
            self.volumes
                .bind(cycle.pod(), cycle.node(), &volumes)
                .await
                .map_err(|e| {
                    BindFailure::plain(format!(
                        "running PreBind plugin {:?}: {e}",
                        volume_binding::NAME
                    ))
                })?;
        }
        Ok(())
    }

    /// Takes the turn behind `fence_names` (none when alone), naming `last` as the pod
    /// the next binder waits to see bound; `asker` re-checks the placements under them.
    async fn take_fences(
        &self,
        fence_names: &[String],
        last: &str,
        asker: &AskLoop,
    ) -> Result<Option<fence::Held>, BindFailure> {
        let Some(fences) = self.fences.as_ref().filter(|_| !fence_names.is_empty()) else {
            return Ok(None);
        };
        match fences.acquire(fence_names, last, asker).await {
            Ok(fence) => Ok(Some(fence)),
            Err(fence::Refused::Conflict(message)) => {
                self.metrics.conflict();
                Err(BindFailure::conflict(message))
            }
            Err(fence::Refused::Failed(message)) => Err(BindFailure::plain(format!(
                "at the node's bind fence: {message}"
            ))),
            Err(fence::Refused::Forbidden(message)) => {
                let _ = self.inputs.send(Input::Fatal(message.clone()));
                Err(BindFailure::plain(message))
            }
        }
    }

    /// Behind the fences (if any): DynamicResources' PreBind (the claims reserved), then
    /// `POST pods/{name}/binding`; on failure the claims are given back (upstream's
    /// Unreserve, before the pod is forgotten and retried).
    async fn write_binding(
        &self,
        cycle: &BindingCycle,
        held: Option<&fence::Held>,
        slot: &mut Slot,
    ) -> Result<(), BindFailure> {
        let pod = cycle.pod().clone();
        let claims: Vec<Arc<ResourceClaim>> = cycle.claims_to_write().to_vec();
        let mut reserved = Vec::new();
        let mut bound = Ok(());
        if !claims.is_empty() {
            let mappings = cycle.extended_resource_mappings();
            bound = self
                .claims
                .reserve(&pod, &claims, mappings.as_ref(), &mut reserved)
                .await
                .map_err(|e| {
                    BindFailure::plain(format!(
                        "running PreBind plugin {:?}: {e}",
                        dynamic_resources::NAME
                    ))
                });
        }
        if bound.is_ok()
            && let Some(timeout) = cycle.binding_wait()
        {
            bound = self
                .await_binding_conditions(cycle, held.is_some(), timeout, slot)
                .await;
        }
        if bound.is_ok() && held.is_some_and(|h| !h.may_bind()) {
            // Waiters pass a fence after a while: a binding sent later could land
            // unseen by them.
            self.metrics.conflict();
            bound = Err(BindFailure::conflict(format!(
                "its fences were held longer than {:?} before the binding",
                fence::BIND_DEADLINE
            )));
        }
        if bound.is_ok() {
            // Upstream's wording for a failed Bind plugin.
            bound = self.post_binding(cycle).await.map_err(|error| {
                let outcome_unknown = match &error {
                    kube::Error::Api(status) => status.code >= 500,
                    _ => true,
                };
                if outcome_unknown {
                    // Said once a minute while the server is away, not once per pod.
                    self.outage
                        .failed(&format!("could not bind pod {}", pod.key()), &error);
                }
                BindFailure {
                    outcome_unknown,
                    ..BindFailure::plain(format!(
                        "running Bind plugin \"DefaultBinder\": {}",
                        api_message(error)
                    ))
                }
            });
        }
        if bound.is_err() {
            self.claims.unreserve(&pod, &reserved).await;
        }
        bound
    }

    /// DynamicResources' PreBind wait (DRADeviceBindingConditions): the event
    /// `BindingConditionsPending`, then the claims as the watch shows them, at once and
    /// every five seconds, for at most `timeout` seconds; the error is upstream's. The
    /// bind's slot is given up meanwhile. Instances sharing the cluster (`fenced`) do not
    /// wait: they would hold their node fences longer than the others trust them, so such
    /// a pod is refused there, saying why.
    async fn await_binding_conditions(
        &self,
        cycle: &BindingCycle,
        fenced: bool,
        timeout: i64,
        slot: &mut Slot,
    ) -> Result<(), BindFailure> {
        let failed = |e: &str| {
            BindFailure::plain(format!(
                "running PreBind plugin {:?}: {e}",
                dynamic_resources::NAME
            ))
        };
        if fenced {
            return Err(failed(
                "waiting for binding conditions is not supported with several instances sharing the cluster",
            ));
        }
        let pod = cycle.pod();
        let note = format!(
            "waiting for binding conditions for device on node {}",
            cycle.node()
        );
        let what = EventText::normal("BindingConditionsPending", "Scheduling", note);
        self.event(pod, self.versions.of(&pod.uid), what, None);
        let deadline = Instant::now() + Duration::from_secs(timeout.max(0).unsigned_abs());
        let waited = slot.while_waiting(async {
            loop {
                match self.claims.binding_ready(cycle.claims_to_write(), timeout) {
                    Ok(true) => return Ok(()),
                    Ok(false) => {}
                    Err(message) => return Err(message),
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err("device binding timeout: context deadline exceeded".to_string());
                }
                tokio::time::sleep(left.min(BINDING_POLL)).await;
            }
        });
        waited.await.map_err(|message| failed(&message))
    }

    /// Hands a pod that fits none of this shard's nodes on to the next shard (shards
    /// dividing the nodes): `hops` is written on the pod, conditioned on the version the
    /// watch last showed, so that a view gone stale hands nothing on twice (a refused
    /// write leaves the pod here; its retry hands it on again).
    pub fn hand_off(&self, pod: &Pod, hops: u64) {
        let mut metadata = json!({
            "uid": pod.uid.as_ref(),
            "annotations": { HOPS_ANNOTATION: hops.to_string() },
        });
        if let Some(version) = self.versions.of(&pod.uid) {
            metadata["resourceVersion"] = json!(version);
        }
        let api = self.pods(pod);
        let name = pod.name.to_string();
        let key = pod.key();
        let slots = self.writes.clone();
        let outage = self.outage.clone();
        let metrics = self.metrics.clone();
        self.runtime.spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else {
                return;
            };
            let patch = json!({ "metadata": metadata });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => metrics.handed_on(),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    tracing::debug!(pod = %key, "pod changed before it was handed on; it is tried again here");
                }
                Err(error) => write_failed(
                    &outage,
                    &format!("could not hand pod {key} on to the next shard"),
                    error,
                ),
            }
        });
    }

    /// A node was deleted: its fence goes too (in the background).
    pub fn delete_node_fence(&self, node: Sym) {
        if let Some(fences) = self.fences.clone() {
            let name = crate::fence_scope::node_fence(node);
            self.runtime
                .spawn(async move { fences.delete(&name).await });
        }
    }

    /// DynamicResources' PostFilter freed a claim: its status is written without the
    /// allocation (in the background; the claim's watch event retries the pod).
    pub fn deallocate(&self, claim: Arc<ResourceClaim>) {
        let claims = self.claims.clone();
        self.runtime
            .spawn(async move { claims.deallocate(&claim).await });
    }

    /// DynamicResources' PostFilter deletes a claim an earlier attempt made for the pod's
    /// extended resources and left behind (in the background; its watch event retries
    /// the pod).
    pub fn delete_left_behind(&self, claim: Arc<ResourceClaim>) {
        let claims = self.claims.clone();
        self.runtime
            .spawn(async move { claims.delete_left_behind(&claim).await });
    }

    /// `POST pods/{name}/binding`, with the pod's UID as a precondition.
    async fn post_binding(&self, cycle: &BindingCycle) -> Result<(), kube::Error> {
        let pod = cycle.pod();
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(pod.name.to_string()),
                namespace: Some(pod.namespace.to_string()),
                // The API server refuses the bind if the pod was re-created meanwhile.
                uid: Some(pod.uid.to_string()),
                // Merged into the pod's annotations by the API server (HAMi's cards).
                annotations: pod.bind_annotations.as_ref().map(|written| {
                    written
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                }),
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                kind: Some("Node".into()),
                name: Some(cycle.node().to_string()),
                ..ObjectReference::default()
            },
        };
        self.pods(pod)
            .create_subresource::<Binding, serde_json::Value>(
                "binding",
                &pod.name,
                &PostParams::default(),
                &binding,
            )
            .await
            .map(|_| ())
    }

    /// What kube-scheduler writes when a pod could not be scheduled: a `FailedScheduling`
    /// event, and the `PodScheduled=False` condition with the same message (plus the
    /// nominated node when preemption made room). `first` says whether the condition is
    /// new (its transition time is set then).
    pub fn report_failure(
        &self,
        pod: &Arc<Pod>,
        message: &str,
        reason: &'static str,
        nominated: Option<Sym>,
        write_condition: bool,
    ) {
        let what = EventText {
            type_: "Warning",
            reason: "FailedScheduling",
            action: "Scheduling",
            note: truncate_note(message),
        };
        self.event(pod, self.versions.of(&pod.uid), what, None);
        if !write_condition {
            return;
        }
        let mut condition = json!({
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": null,
            "lastTransitionTime": now_rfc3339(),
        });
        self.observe_generation(&mut condition, pod);
        let mut status = json!({ "conditions": [condition] });
        if let Some(node) = nominated {
            status["nominatedNodeName"] = json!(node.as_str());
        }
        self.patch_status(pod, json!({ "status": status }));
    }

    /// `observedGeneration` on a condition about `pod`, where the release writes it
    /// (PodObservedGenerationTracking, v1.34 on) and the pod has a generation (upstream's
    /// zero is left out of the JSON).
    fn observe_generation(&self, condition: &mut serde_json::Value, pod: &Pod) {
        if self.release.conditions_observe_generation() && pod.generation != 0 {
            condition["observedGeneration"] = json!(pod.generation);
        }
    }

    fn patch_status(&self, pod: &Pod, patch: serde_json::Value) {
        let api = self.pods(pod);
        let name = pod.name.to_string();
        let outage = self.outage.clone();
        let slots = self.writes.clone();
        self.runtime.spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else {
                return;
            };
            let params = PatchParams::default();
            if let Err(error) = api
                .patch_status(&name, &params, &Patch::Strategic(&patch))
                .await
            {
                write_failed(
                    &outage,
                    &format!("could not update the status of pod {name}"),
                    error,
                );
            }
        });
    }

    /// Sets a PodGroup's `PodGroupScheduled` condition (see [`crate::pod_groups`]) with a
    /// strategic-merge patch of its status, as upstream's `PatchPodGroupStatus`.
    pub fn pod_group_condition(&self, group: &PodGroup, condition: &serde_json::Value) {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            group.namespace.as_str(),
            &pod_groups::api_resource(),
        );
        let name = group.name.to_string();
        let patch = pod_groups::status_patch(condition);
        let outage = self.outage.clone();
        let slots = self.writes.clone();
        self.runtime.spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else {
                return;
            };
            if let Err(error) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                write_failed(
                    &outage,
                    &format!("could not update the status of PodGroup {name}"),
                    error,
                );
            }
        });
    }

    /// Removes a victim of preemption, as kube-scheduler's `prepareCandidate` (the
    /// scheduling cycle's preemption, SchedulerAsyncPreemption off).
    pub fn preempt(&self, victim: &Arc<Pod>, preemptor: &Preemptor) {
        self.runtime.spawn(self.remove_victim(victim, preemptor));
    }

    /// Removes preemption's victims in the background, as kube-scheduler's
    /// `prepareCandidateAsync` (SchedulerAsyncPreemption): all but the last together, then
    /// the last; the loop, whose queue holds the preemptor (every member of a group) back
    /// meanwhile, is told when the last one's deletion begins and when it is done.
    pub fn preempt_in_background(&self, victims: &[Arc<Pod>], preemptor: &Preemptor) {
        let Some((last, first)) = victims.split_last() else {
            return;
        };
        let first: Vec<_> = (first.iter())
            .map(|victim| self.remove_victim(victim, preemptor))
            .collect();
        let last_victim = last.uid.clone();
        let last = self.remove_victim(last, preemptor);
        let (inputs, held) = (self.inputs.clone(), preemptor.held.clone());
        self.runtime.spawn(async move {
            futures::future::join_all(first).await;
            let deleting = Input::PreemptionDeletingLastVictim {
                preemptor: held.clone(),
                victim: last_victim,
            };
            let _ = inputs.send(deleting);
            last.await;
            let _ = inputs.send(Input::PreemptionDone(held));
        });
    }

    /// What removing a victim takes: it is marked with the `DisruptionTarget` condition,
    /// a `Preempted` event is recorded, and it is deleted (only that incarnation: UID
    /// precondition). The event is recorded at once; the writes when the future runs.
    fn remove_victim(
        &self,
        victim: &Arc<Pod>,
        preemptor: &Preemptor,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let message = format!(
            "{}: preempting to accommodate a higher priority {}",
            preemptor.scheduler_name, preemptor.kind
        );
        let mut disruption = json!({
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": message,
            "lastTransitionTime": now_rfc3339(),
        });
        self.observe_generation(&mut disruption, victim);
        let condition = json!({"status": {"conditions": [disruption]}});
        let mut event_about = Pod::clone(victim);
        event_about.scheduler_name = preemptor.scheduler_name;
        let note = if self.release.preempted_event_names_preemptor() {
            format!(
                "Preempted by {} {} on node {}",
                preemptor.kind, preemptor.uid, preemptor.node
            )
        } else {
            format!("Preempted by a pod on node {}", preemptor.node)
        };
        let mut related = preemptor.related.clone();
        if related.kind.as_deref() == Some("Pod") {
            related.resource_version = self.versions.of(&preemptor.uid);
        }
        let what = EventText::normal("Preempted", "Preempting", note);
        self.event(
            &event_about,
            self.versions.of(&victim.uid),
            what,
            Some(related),
        );
        let api = self.pods(victim);
        let name = victim.name.to_string();
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(victim.uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        // In this order, as upstream: the condition tells the victim's controller why.
        let outage = self.outage.clone();
        let slots = self.writes.clone();
        async move {
            let Ok(_slot) = slots.acquire_owned().await else {
                return;
            };
            let patch = Patch::Strategic(&condition);
            if let Err(error) = api
                .patch_status(&name, &PatchParams::default(), &patch)
                .await
            {
                write_failed(
                    &outage,
                    &format!("could not mark preemption victim {name}"),
                    error,
                );
            }
            match api.delete(&name, &params).await {
                Ok(_) => tracing::info!(pod = %name, "deleted preemption victim"),
                Err(error) => write_failed(
                    &outage,
                    &format!("could not delete preemption victim {name}"),
                    error,
                ),
            }
        }
    }
}

/// What an event says.
struct EventText {
    type_: &'static str,
    reason: &'static str,
    action: &'static str,
    note: String,
}

impl EventText {
    fn normal(reason: &'static str, action: &'static str, note: String) -> EventText {
        EventText {
            type_: "Normal",
            reason,
            action,
            note,
        }
    }
}

/// A write the API refused is logged with its message; one that did not reach the API
/// server goes to the outage report (one line a minute, however many writes fail).
fn write_failed(outage: &Outage, what: &str, error: kube::Error) {
    match error {
        kube::Error::Api(status) => tracing::warn!("{what}: {}", status.message),
        other => {
            outage.failed(what, &other);
        }
    }
}

/// The API server's message for a failed call (its Status message when it sent one).
pub fn api_message(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message,
        other => other.to_string(),
    }
}

/// Event notes are limited to 1 KiB; kube-scheduler cuts longer messages and ends them
/// with " ...".
fn truncate_note(message: &str) -> String {
    const MAX: usize = 1024;
    if message.len() <= MAX {
        return message.to_string();
    }
    const SUFFIX: &str = " ...";
    let mut end = MAX - SUFFIX.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{SUFFIX}", &message[..end])
}

/// Now as RFC 3339 in UTC, to the second, as Kubernetes writes times.
pub(crate) fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod group's preemption is the group's: the loop's queue holds back every member by
    /// it (one created meanwhile too), and the victims' events name the PodGroup; a group
    /// the API gave no uid cannot be named.
    #[test]
    fn a_pod_groups_preemptor_is_the_group() {
        let mut group = PodGroup::gang("default", "g", 2);
        let member = Arc::new(Pod::new("default", "g-0"));
        assert!(Preemptor::group(&group, std::slice::from_ref(&member)).is_none());
        group.uid = Some(Arc::from("pg-uid"));
        let preemptor = Preemptor::group(&group, &[member]).unwrap();
        assert_eq!(
            preemptor.held,
            queue::Preemptor::Group(GroupKey::of_group(&group))
        );
        assert_eq!(
            (preemptor.kind, preemptor.node.as_str()),
            ("podgroup", "cluster")
        );
        assert_eq!(preemptor.related.kind.as_deref(), Some("PodGroup"));
        assert_eq!(preemptor.related.uid.as_deref(), Some("pg-uid"));
    }
}
