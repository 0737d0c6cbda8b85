//! A scheduling attempt and its bind: the binder's re-check, the API's admission, conflicts
//! counted by the plugin that refused, failures retried or given up.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use gantry_api::dra::{ClaimKey, ResourceClaim};
use gantry_api::{Pod, Sym};
use gantry_cache::{GroupKey, Stage};
use gantry_framework::CycleState;
use gantry_scheduler::queue::QueuedPod;
use gantry_scheduler::{Attempt, BindFailure, Binder, GroupOutcome};

use super::{Event, MAX_FAILED_ATTEMPTS, Simulation};
use crate::SimulatedApi;
use crate::api::BindRefusal;
use crate::claims::ClaimChange;
use crate::instance::WatchEvent;
use crate::records::PodStatus;

impl Simulation {
    /// One scheduling cycle of `instance` for a popped pod, and what follows from its
    /// outcome.
    pub(super) fn attempt(&mut self, instance: usize, queued: QueuedPod) {
        self.attempts += 1;
        let Some(index) = self.records.index(&queued.pod.uid) else {
            tracing::error!(pod = %queued.pod.key(), "a queued pod the simulation never created");
            return;
        };
        self.records.history_mut(index).attempts += 1;
        self.instances[instance].scheduler.now = self.clock.as_secs() as i64;
        if self.instances[instance].gang_scheduling
            && let Some(group) = GroupKey::of(&queued.pod)
        {
            self.attempt_group(instance, group, queued);
            return;
        }
        let started = Instant::now();
        let attempt = self.instances[instance].scheduler.schedule_one(&queued.pod);
        self.latencies_us.push(started.elapsed().as_micros() as u64);
        if let Attempt::Scheduled { node, .. } = &attempt {
            self.judge_recorded_node(instance, &queued.pod, *node);
        }
        if let Some(recorded) = self.node_to_follow(&queued.pod, &attempt) {
            self.bind_as_recorded(instance, index, &queued, attempt, recorded);
            self.serve_requests(instance);
            return;
        }
        self.conclude(instance, index, queued, attempt);
        self.serve_requests(instance);
    }

    /// The pod-group cycle of a popped member: the group's other pending members are
    /// taken from the queue and tried with it; each concludes as a single pod's attempt
    /// would, and the group's PodGroupScheduled condition is recorded.
    fn attempt_group(&mut self, instance: usize, group: GroupKey, queued: QueuedPod) {
        let members = self.instances[instance]
            .cache
            .pod_groups()
            .lock()
            .members_at(group, Stage::Unscheduled);
        let popped = queued.pod.uid.clone();
        let members = self.instances[instance].queue.pop_members(queued, &members);
        // The popped pod's attempt is counted already.
        for member in members.iter().filter(|m| m.pod.uid != popped) {
            if let Some(index) = self.records.index(&member.pod.uid) {
                self.attempts += 1;
                self.records.history_mut(index).attempts += 1;
            }
        }
        let pods: Vec<Arc<Pod>> = members.iter().map(|q| q.pod.clone()).collect();
        let started = Instant::now();
        let cycle = self.instances[instance].scheduler.schedule_pod_group(&pods);
        self.latencies_us.push(started.elapsed().as_micros() as u64);
        self.records
            .set_group_outcome(group, &cycle.outcome, self.clock);
        // Alone, an instance's binds follow its decisions; shared, another instance may
        // take a member's room between two binds, so the gang's binds are checked and
        // written together.
        let together = self.instances.len() > 1 && cycle.outcome == GroupOutcome::Scheduled;
        let uids: Vec<Arc<str>> = members.iter().map(|q| q.pod.uid.clone()).collect();
        for (member, _, victims) in cycle.preempted_before_error {
            let preemptor = &members[member].pod;
            if let Some(index) = self.records.index(&preemptor.uid) {
                self.preempt(instance, index, preemptor, victims);
            }
        }
        if !cycle.group_victims.is_empty()
            && let Some(index) = self.records.index(&pods[0].uid)
        {
            self.preempt_for_group(instance, index, &pods[0], group, cycle.group_victims);
        }
        let mut binds = Vec::new();
        for (queued, (_, attempt)) in members.into_iter().zip(cycle.attempts) {
            let Some(index) = self.records.index(&queued.pod.uid) else {
                continue;
            };
            match attempt {
                Attempt::Scheduled {
                    pod,
                    state,
                    wait: None,
                    ..
                } if together => {
                    self.records.placement_mut(index).annotations = written(&pod);
                    binds.push((pod, state, queued));
                }
                attempt => self.conclude(instance, index, queued, attempt),
            }
        }
        let queue = &mut self.instances[instance].queue;
        if pods.iter().any(|pod| queue.is_preempting(pod)) {
            queue.retry_after_backoff(&uids);
        }
        if !binds.is_empty() {
            let due = self.api_calls(instance, self.clock, binds.len(), 1);
            self.push(
                due,
                Event::GangBindDue {
                    instance,
                    members: binds,
                },
            );
        }
    }

    /// The binding cycles of a gang's members, all or none: the gang's quorum is bound
    /// with them, and the API admits them together (as a binder holding every member's
    /// node fence would), before any is bound. One refusal refuses them all, and each goes
    /// back to the queue as after a refused bind.
    pub(super) fn finish_gang_bind(
        &mut self,
        instance: usize,
        members: Vec<(Arc<Pod>, Box<CycleState>, QueuedPod)>,
    ) {
        let pods: Vec<Arc<Pod>> = members.iter().map(|(pod, ..)| pod.clone()).collect();
        let mut verdict = (self.instances[instance].scheduler.check_quorum(&pods))
            .map_err(|message| (gantry_framework::plugins::gang_scheduling::NAME, message));
        if verdict.is_ok()
            && let Err(refusal) = self.api.admits_together(&pods)
        {
            let plugin = match &refusal {
                BindRefusal::Constraint { plugin, .. } => *plugin,
                BindRefusal::OverCommit { .. } => "capacity",
                _ => "",
            };
            verdict = Err((
                plugin,
                format!("the gang's binds, checked together: {refusal}"),
            ));
        }
        for (pod, state, queued) in members {
            self.finish_bind(instance, pod, state, queued, Some(verdict.clone()));
        }
    }

    /// What follows from an attempt's outcome: a bind due, victims evicted, the pod back
    /// in the queue, or given up.
    fn conclude(&mut self, instance: usize, index: usize, queued: QueuedPod, attempt: Attempt) {
        let now = self.clock;
        if let Attempt::Unschedulable { fit_error, .. } = &attempt
            && let Some(claim) = &fit_error.claim_to_deallocate
            && let Some(change) = self.api.claims.deallocate(claim)
        {
            // DynamicResources' PostFilter freed a claim that kept the pod off a node.
            self.publish_claims(vec![change]);
        }
        if let Attempt::Unschedulable { fit_error, .. } = &attempt
            && let Some(claim) = &fit_error.claim_to_delete
            && let Some(change) = self.api.claims.delete_left_behind(claim)
        {
            // DynamicResources' PostFilter deleted a claim an earlier attempt left behind.
            self.publish_claims(vec![change]);
        }
        match attempt {
            Attempt::Scheduled {
                pod,
                state,
                wait: Some(wait),
                ..
            } => {
                self.records.placement_mut(index).annotations = written(&pod);
                self.start_waiting(instance, pod, state, queued, wait);
            }
            Attempt::Scheduled { pod, state, .. } => {
                // Saturating: the clock may stand at the end of time (a backoff of
                // i64::MAX seconds has expired).
                let due = self.api_calls(instance, now, 1, 1);
                self.records.placement_mut(index).annotations = written(&pod);
                self.push(
                    due,
                    Event::BindDue {
                        instance,
                        pod,
                        state,
                        queued,
                    },
                );
            }
            Attempt::Unschedulable {
                fit_error,
                nominated: Some((node, victims)),
            } => {
                self.preempt(instance, index, &queued.pod, victims);
                let anew = queued.pod.nominated_node_name != Some(node);
                self.write_failure(instance, index, fit_error.to_string(), anew);
                let retry = self.nominate(queued, node);
                self.instances[instance].queue.add_unschedulable(
                    retry,
                    fit_error.rejecting_plugins(),
                    now,
                );
            }
            Attempt::Unschedulable {
                fit_error,
                nominated: None,
            } => {
                self.write_failure(instance, index, fit_error.to_string(), false);
                if self.options.sequential {
                    self.withdraw(instance, &queued.pod);
                } else {
                    self.instances[instance].queue.add_unschedulable(
                        queued,
                        fit_error.rejecting_plugins(),
                        now,
                    );
                }
            }
            Attempt::Error(message) => {
                if self.options.sequential {
                    self.records.set_reason(index, message);
                    self.withdraw(instance, &queued.pod);
                } else {
                    self.fail(instance, index, queued, message);
                }
            }
            Attempt::GroupRejected {
                message,
                nominated,
                preempted,
            } => {
                if let Some((_, victims)) = preempted {
                    self.preempt(instance, index, &queued.pod, victims);
                }
                let anew = nominated.is_some_and(|n| queued.pod.nominated_node_name != Some(n));
                self.write_failure(instance, index, message, anew);
                let queued = match nominated {
                    Some(node) => self.nominate(queued, node),
                    None => queued,
                };
                if self.options.sequential {
                    self.withdraw(instance, &queued.pod);
                } else {
                    // No plugin in particular rejected it: any cluster event retries it.
                    self.instances[instance]
                        .queue
                        .add_unschedulable(queued, Vec::new(), now);
                }
            }
        }
    }

    /// The scheduling loop writes a pod's failure: its `PodScheduled=False` condition with
    /// `message`, and a node it is `nominated_anew` to. Where either changes its status,
    /// the loop itself sends the patch (`updatePod` in `handleSchedulingFailure`, v1.28 to
    /// v1.37; SchedulerAsyncAPICalls, which would queue it, is off): where the simulation
    /// models the scheduler's client, its next cycle waits for the patch, its token and its
    /// round trip.
    fn write_failure(
        &mut self,
        instance: usize,
        index: usize,
        message: String,
        nominated_anew: bool,
    ) {
        let changed = self.records.placements()[index].reason.as_deref() != Some(&message);
        self.records.set_reason(index, message);
        if !(changed || nominated_anew) {
            return;
        }
        if self.options.client_rate.is_none() {
            return;
        }
        let done = self.api_calls(instance, self.clock, 1, 1);
        if done > self.clock {
            self.loop_waits_until[instance] = done;
            self.push(done, Event::LoopFree);
        }
    }

    /// The pod as nominated to `node`, which the other instances learn.
    fn nominate(&mut self, mut queued: QueuedPod, node: Sym) -> QueuedPod {
        let mut nominated = Pod::clone(&queued.pod);
        nominated.nominated_node_name = Some(node);
        queued.pod = Arc::new(nominated);
        if self.instances.len() > 1 {
            self.broadcast(WatchEvent::PodNominated(queued.pod.clone()));
        }
        queued
    }

    /// An attempt errored or its bind failed: back off and retry, or give the pod up once
    /// it has failed `MAX_FAILED_ATTEMPTS` times.
    fn fail(&mut self, instance: usize, index: usize, queued: QueuedPod, reason: String) {
        let history = self.records.history_mut(index);
        history.failures += 1;
        if history.failures < MAX_FAILED_ATTEMPTS {
            self.records.set_reason(index, reason);
            self.instances[instance]
                .queue
                .add_backoff(queued, self.clock);
            return;
        }
        self.records.set_pending(
            index,
            PodStatus::GivenUp,
            format!("given up after {MAX_FAILED_ATTEMPTS} failed attempts; the last: {reason}"),
        );
        self.withdraw(instance, &queued.pod);
    }

    /// The pod is no longer worked on: it holds nothing, and sequential mode moves on.
    pub(super) fn withdraw(&mut self, instance: usize, pod: &Pod) {
        self.instances[instance].scheduler.clear_nomination(pod);
        if self.current.as_deref() == Some(&*pod.uid) {
            self.current = None;
        }
    }

    /// The binding cycle of a pod `instance` decided earlier. With several instances the
    /// binder first re-checks the placement against the instance's latest cache (unless
    /// `checked` brings the verdict of its gang's check). A bound pod goes out on the
    /// watch; a refused one is forgotten and retried after backoff.
    pub(super) fn finish_bind(
        &mut self,
        instance: usize,
        pod: Arc<Pod>,
        mut state: Box<CycleState>,
        popped: QueuedPod,
        checked: Option<Result<(), (&'static str, String)>>,
    ) {
        let Some(index) = self.records.index(&pod.uid) else {
            tracing::error!(pod = %pod.key(), "a bind for a pod the simulation never created");
            return;
        };
        let shared = self.instances.len() > 1;
        let binder_instance = &mut self.instances[instance];
        let check = match pod.node_name {
            _ if checked.is_some() => checked.expect("checked above"),
            Some(node) if shared => binder_instance.scheduler.check_placement(&pod).map_err(
                |status| {
                    let message = status.message();
                    let message = format!(
                        "re-checked against the latest cache, node {node} no longer fits: {message}"
                    );
                    (status.plugin(), message)
                },
            ),
            _ => Ok(()),
        };
        let mut binder = ApiBinder {
            api: &mut self.api,
            check,
            refused: None,
            claims_written: Vec::new(),
        };
        let scheduler = &mut binder_instance.scheduler;
        let pre_bound = scheduler.pre_bind(&pod, &mut state, &mut binder);
        if let Ok(Some(timeout)) = pre_bound {
            // The claims are written; the binding waits for their conditions.
            let claims_written = std::mem::take(&mut binder.claims_written);
            self.serve_requests(instance);
            for change in claims_written {
                self.broadcast(WatchEvent::Claim(change));
            }
            self.await_binding_conditions(instance, pod, state, popped, timeout);
            return;
        }
        let wrote_claims = !binder.claims_written.is_empty();
        let pre_bound = pre_bound.map(|_| ());
        let bound = scheduler.complete_bind(&pod, &mut state, &mut binder, pre_bound);
        let refused = binder.refused.take();
        let claims_written = std::mem::take(&mut binder.claims_written);
        let outcome = BindOutcome {
            bound,
            refused,
            claims_written,
            wrote_claims,
        };
        self.after_bind(instance, index, pod, popped, outcome);
    }

    /// What follows a binding cycle: the claims it wrote go out on the watch (given
    /// back if the bind failed), and the pod is bound, or forgotten and retried.
    pub(super) fn after_bind(
        &mut self,
        instance: usize,
        index: usize,
        pod: Arc<Pod>,
        popped: QueuedPod,
        outcome: BindOutcome,
    ) {
        let now = self.clock;
        let BindOutcome {
            bound,
            refused,
            claims_written,
            wrote_claims,
        } = outcome;
        self.serve_requests(instance);
        for change in claims_written {
            self.broadcast(WatchEvent::Claim(change));
        }
        if bound.is_err() && wrote_claims {
            // Unreserve takes the pod out of the claims it was written into (their
            // allocations stay, as upstream's do, until the pod's PostFilter frees them).
            let changes = self.api.claims.unreserve(&pod);
            self.publish_claims(changes);
        }
        match bound {
            Ok(()) => {
                if let Some(node) = pod.node_name {
                    self.records.set_bound(index, node, now);
                }
                if self.current.as_deref() == Some(&*pod.uid) {
                    self.current = None;
                }
                self.broadcast(WatchEvent::PodBound(pod));
            }
            Err(failure) => {
                self.count_conflict(&pod, refused);
                let binder_instance = &mut self.instances[instance];
                if failure.forgotten {
                    binder_instance.queue.assumed_pod_forgotten(now);
                }
                let deleted = binder_instance.take_deleted_in_flight(&pod.uid);
                // Back as submitted: the next attempt writes its own annotations.
                self.records.placement_mut(index).annotations.clear();
                if deleted {
                    self.withdraw(instance, &pod);
                    return;
                }
                let mut pending = Pod::clone(&pod);
                pending.node_name = None;
                pending.bind_annotations = None;
                let queued = QueuedPod {
                    pod: Arc::new(pending),
                    timestamp: now,
                    initial_attempt: Some(now),
                    unschedulable_plugins: Vec::new(),
                    cycle: 0,
                    ..popped
                };
                self.fail(
                    instance,
                    index,
                    queued,
                    format!("binding rejected: {failure}"),
                );
            }
        }
    }

    /// Counts a refused bind as a conflict when its decision was outdated (the binder's
    /// re-check or the API's admission refused it, or the API found no room left on the
    /// node), under the plugin that refused it.
    fn count_conflict(&mut self, pod: &Pod, refused: Option<Refused>) {
        let (plugin, would_overcommit) = match refused {
            Some(Refused::ByBinder(plugin)) => {
                self.conflicts.binder += 1;
                let over = pod
                    .node_name
                    .is_some_and(|node| self.api.would_overcommit(pod, node));
                (plugin, over)
            }
            Some(Refused::ByApi(BindRefusal::OverCommit { .. })) => {
                self.conflicts.api += 1;
                ("capacity", true)
            }
            Some(Refused::ByApi(BindRefusal::Constraint { plugin, .. })) => {
                self.conflicts.api += 1;
                let over = pod
                    .node_name
                    .is_some_and(|node| self.api.would_overcommit(pod, node));
                (plugin, over)
            }
            Some(Refused::ByApi(_)) | None => return,
        };
        let plugin = if plugin.is_empty() { "other" } else { plugin };
        *self
            .conflicts
            .by_plugin
            .entry(plugin.to_string())
            .or_default() += 1;
        if would_overcommit {
            self.conflicts.overcommits_prevented += 1;
        }
    }
}

/// The annotations the scheduler wrote on the pod when it assumed it.
fn written(assumed: &Pod) -> BTreeMap<String, String> {
    assumed
        .bind_annotations
        .iter()
        .flat_map(|written| written.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Who refused a bind.
pub(super) enum Refused {
    /// The binder's re-check against its instance's latest cache, by this plugin (empty
    /// when none spoke).
    ByBinder(&'static str),
    ByApi(BindRefusal),
}

/// The scheduler's Binder over the simulated API, which first applies the binder's own
/// verdict on the placement (reached before the bind): a refused placement never reaches
/// the API.
pub(super) struct ApiBinder<'a> {
    pub(super) api: &'a mut SimulatedApi,
    /// The binder's verdict: the refusing plugin and the message.
    pub(super) check: Result<(), (&'static str, String)>,
    pub(super) refused: Option<Refused>,
    /// Claim statuses PreBind wrote, for the watch.
    pub(super) claims_written: Vec<ClaimChange>,
}

/// How a binding cycle ended, for [`Simulation::after_bind`].
pub(super) struct BindOutcome {
    pub(super) bound: Result<(), BindFailure>,
    pub(super) refused: Option<Refused>,
    /// Claim statuses written, for the watch.
    pub(super) claims_written: Vec<ClaimChange>,
    /// The cycle wrote claims (now or before it waited), which a failure gives back.
    pub(super) wrote_claims: bool,
}

impl Binder for ApiBinder<'_> {
    fn write_claims(
        &mut self,
        pod: &Arc<Pod>,
        claims: &[Arc<ResourceClaim>],
        allocated_now: &[ClaimKey],
    ) -> Result<(), String> {
        if let Err((plugin, message)) = &self.check {
            self.refused = Some(Refused::ByBinder(plugin));
            return Err(message.clone());
        }
        if self.api.was_deleted(&pod.uid) {
            // Its claims went with it; the bind would be refused for the same reason.
            let refusal = BindRefusal::Deleted(pod.key());
            let message = refusal.to_string();
            self.refused = Some(Refused::ByApi(refusal));
            return Err(message);
        }
        match self.api.write_claims(claims, allocated_now) {
            Ok(changes) => {
                self.api.admit_claim_changes(&changes);
                self.claims_written.extend(changes);
                Ok(())
            }
            Err(refusal) => {
                let message = refusal.to_string();
                self.refused = Some(Refused::ByApi(BindRefusal::Constraint {
                    pod: pod.key(),
                    node: pod.node_name.unwrap_or_else(|| Sym::new("")),
                    plugin: gantry_framework::plugins::dynamic_resources::NAME,
                    message: message.clone(),
                }));
                Err(message)
            }
        }
    }

    fn bind(&mut self, pod: &Arc<Pod>, _node: Sym) -> Result<(), String> {
        if let Err((plugin, message)) = &self.check {
            self.refused = Some(Refused::ByBinder(plugin));
            return Err(message.clone());
        }
        self.api.bind(pod).map_err(|refusal| {
            let message = refusal.to_string();
            self.refused = Some(Refused::ByApi(refusal));
            message
        })
    }
}
