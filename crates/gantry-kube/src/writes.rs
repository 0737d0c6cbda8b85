//! Everything Gantry writes to the API, as kube-scheduler writes it: the pod's resource
//! claims (before the binding, see [`claim_writes`](crate::claim_writes)), the binding
//! (with the pod's UID as a precondition), the `Scheduled` and `FailedScheduling` events, the
//! `PodScheduled` condition and `status.nominatedNodeName`, and preemption's victims
//! (their `DisruptionTarget` condition, a `Preempted` event, then their deletion). Each
//! write is a task on the runtime, so the scheduling loop never waits for the network.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use gantry_api::dra::ResourceClaim;
use gantry_api::{Pod, Sym};
use gantry_framework::plugins::dynamic_resources;
use gantry_scheduler::BindingCycle;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod as K8sPod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client};
use serde_json::json;
use tokio::runtime::Handle;
use tokio::sync::{Semaphore, oneshot};

use crate::Input;
use crate::claim_writes::ClaimWriter;
use crate::failure::Outage;
use crate::fence::{self, Fences};
use crate::metrics::KubeMetrics;

/// Binds in flight at once; more wait for a slot (kube-scheduler's binding goroutines are
/// unbounded, but an API server is better served by a bounded number of writers).
pub const MAX_BINDS_IN_FLIGHT: usize = 64;
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
    /// Slots for the writes other than binds.
    writes: Arc<Semaphore>,
    recorders: Arc<HashMap<Sym, Recorder>>,
    metrics: Arc<KubeMetrics>,
    /// With several instances: re-check each placement against the latest cache, at
    /// the node's fence, before binding.
    fences: Option<Fences>,
    claims: ClaimWriter,
    outage: Arc<Outage>,
}

/// The binder's questions to the scheduling loop, for one pod.
struct AskLoop {
    inputs: Sender<Input>,
    pod: Arc<Pod>,
}

impl fence::Loop for AskLoop {
    async fn has_seen(&self, pod_uid: &str) -> bool {
        let (reply, answer) = oneshot::channel();
        let uid = Arc::from(pod_uid);
        if self.inputs.send(Input::Seen { uid, reply }).is_err() {
            return true;
        }
        answer.await.unwrap_or(true)
    }

    async fn check(&self) -> Result<(), String> {
        let (reply, answer) = oneshot::channel();
        let pod = self.pod.clone();
        if self.inputs.send(Input::Check { pod, reply }).is_err() {
            return Err("the scheduler stopped".into());
        }
        answer.await.unwrap_or(Err("the scheduler stopped".into()))
    }
}

fn reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(pod.namespace.to_string()),
        name: Some(pod.name.to_string()),
        uid: Some(pod.uid.to_string()),
        ..ObjectReference::default()
    }
}

impl ApiWriter {
    /// `identity` names this instance in events' `reportingInstance`; each profile reports
    /// as its scheduler name, as kube-scheduler's per-profile recorders do.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        runtime: Handle,
        inputs: Sender<Input>,
        scheduler_names: &[Sym],
        identity: &str,
        metrics: Arc<KubeMetrics>,
        fences: Option<Fences>,
        claims: ClaimWriter,
        outage: Arc<Outage>,
    ) -> ApiWriter {
        let recorders = scheduler_names
            .iter()
            .map(|&name| {
                let reporter = Reporter {
                    controller: name.to_string(),
                    instance: Some(format!("{name}-{identity}")),
                };
                (name, Recorder::new(client.clone(), reporter))
            })
            .collect();
        ApiWriter {
            client,
            runtime,
            inputs,
            permits: Arc::new(Semaphore::new(MAX_BINDS_IN_FLIGHT)),
            writes: Arc::new(Semaphore::new(MAX_WRITES_IN_FLIGHT)),
            recorders: Arc::new(recorders),
            metrics,
            fences,
            claims,
            outage,
        }
    }

    fn pods(&self, pod: &Pod) -> Api<K8sPod> {
        Api::namespaced(self.client.clone(), pod.namespace.as_str())
    }

    /// Publishes an event about `pod` through its profile's recorder.
    fn event(&self, pod: &Pod, event: Event) {
        let Some(recorder) = self.recorders.get(&pod.scheduler_name).cloned() else {
            return;
        };
        let regarding = reference(pod);
        let outage = self.outage.clone();
        let slots = self.writes.clone();
        self.runtime.spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else {
                return;
            };
            if let Err(error) = recorder.publish(&event, &regarding).await {
                let what = format!(
                    "could not write the {} event of pod {}",
                    event.reason,
                    regarding.name.as_deref().unwrap_or("")
                );
                write_failed(&outage, &what, error);
            }
        });
    }

    /// The binding cycle's API part: PreBind, the re-check when instances share the
    /// cluster, then `POST pods/{name}/binding`. The result goes back to the loop.
    pub fn bind(&self, mut cycle: BindingCycle) {
        let writer = self.clone();
        self.runtime.spawn(async move {
            let Ok(_permit) = writer.permits.clone().acquire_owned().await else {
                return;
            };
            let start = Instant::now();
            let result = writer.run_bind(&mut cycle).await;
            writer.metrics.bind(result.is_ok());
            if result.is_ok() {
                let pod = cycle.pod();
                let node = cycle.node();
                writer.event(
                    pod,
                    Event {
                        type_: EventType::Normal,
                        reason: "Scheduled".into(),
                        note: Some(format!(
                            "Successfully assigned {}/{} to {node}",
                            pod.namespace, pod.name
                        )),
                        action: "Binding".into(),
                        secondary: None,
                    },
                );
            }
            let took = start.elapsed();
            let _ = writer.inputs.send(Input::BindDone(Box::new(BindDone {
                cycle,
                result,
                took,
            })));
        });
    }

    async fn run_bind(&self, cycle: &mut BindingCycle) -> Result<(), BindFailure> {
        let failure = |message: String| BindFailure {
            message,
            conflict: false,
        };
        cycle.pre_bind().map_err(failure)?;
        let mut held = None;
        if let Some(fences) = &self.fences {
            let asker = AskLoop {
                inputs: self.inputs.clone(),
                pod: cycle.pod().clone(),
            };
            match fences.acquire(cycle.node(), &cycle.pod().uid, &asker).await {
                Ok(fence) => held = Some(fence),
                Err(fence::Refused::Conflict(message)) => {
                    self.metrics.conflict();
                    return Err(BindFailure {
                        message: format!("placement no longer fits: {message}"),
                        conflict: true,
                    });
                }
                Err(fence::Refused::Failed(message)) => {
                    return Err(failure(format!("at the node's bind fence: {message}")));
                }
                Err(fence::Refused::Forbidden(message)) => {
                    let _ = self.inputs.send(Input::Fatal(message.clone()));
                    return Err(failure(message));
                }
            }
        }
        let pod = cycle.pod().clone();
        let claims: Vec<Arc<ResourceClaim>> = cycle.claims_to_write().to_vec();
        let mut reserved = Vec::new();
        let mut bound = Ok(());
        if !claims.is_empty() {
            bound = self
                .claims
                .reserve(&pod, &claims, &mut reserved)
                .await
                .map_err(|e| format!("running PreBind plugin {:?}: {e}", dynamic_resources::NAME));
        }
        if bound.is_ok() {
            bound = self.post_binding(cycle).await;
        }
        if bound.is_err() {
            // Upstream's Unreserve, before the pod is forgotten and retried.
            self.claims.unreserve(&pod, &reserved).await;
            if let (Some(fences), Some(held)) = (&self.fences, held) {
                fences.release_failed(held).await;
            }
        }
        bound.map_err(failure)
    }

    /// DynamicResources' PostFilter freed a claim: its status is written without the
    /// allocation (in the background; the claim's watch event retries the pod).
    pub fn deallocate(&self, claim: Arc<ResourceClaim>) {
        let claims = self.claims.clone();
        self.runtime
            .spawn(async move { claims.deallocate(&claim).await });
    }

    /// `POST pods/{name}/binding`, with the pod's UID as a precondition.
    async fn post_binding(&self, cycle: &BindingCycle) -> Result<(), String> {
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
            .map_err(api_message)
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
        self.event(
            pod,
            Event {
                type_: EventType::Warning,
                reason: "FailedScheduling".into(),
                note: Some(truncate_note(message)),
                action: "Scheduling".into(),
                secondary: None,
            },
        );
        if !write_condition {
            return;
        }
        let mut status = json!({
            "conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "reason": reason,
                "message": message,
                "lastProbeTime": null,
                "lastTransitionTime": now_rfc3339(),
            }]
        });
        if let Some(node) = nominated {
            status["nominatedNodeName"] = json!(node.as_str());
        }
        self.patch_status(pod, json!({ "status": status }));
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

    /// Removes a victim of preemption, as kube-scheduler's `prepareCandidate`: marks it
    /// with the `DisruptionTarget` condition, records a `Preempted` event, deletes it
    /// (only that incarnation: UID precondition).
    pub fn preempt(&self, victim: &Arc<Pod>, preemptor: &Arc<Pod>, node: Sym) {
        let message = format!(
            "{}: preempting to accommodate a higher priority pod",
            preemptor.scheduler_name
        );
        let condition = json!({"status": {"conditions": [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": message,
            "lastTransitionTime": now_rfc3339(),
        }]}});
        let mut event_about = Pod::clone(victim);
        event_about.scheduler_name = preemptor.scheduler_name;
        self.event(
            &event_about,
            Event {
                type_: EventType::Normal,
                reason: "Preempted".into(),
                note: Some(format!("Preempted by pod {} on node {node}", preemptor.uid)),
                action: "Preempting".into(),
                secondary: Some(reference(preemptor)),
            },
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
        self.runtime.spawn(async move {
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
        });
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

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
