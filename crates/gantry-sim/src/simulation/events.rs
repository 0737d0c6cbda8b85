//! What happens to the cluster over virtual time: arrivals, timed events, pods created
//! and deleted, drains, and the watch stream that carries each change to every instance.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::{Node, Pod, Sym};
use gantry_framework::{ActionType, ClusterEvent, EventResource};

use super::{Event, GATED, SimError, SimEvent, Simulation};
use crate::api::CatalogChange;
use crate::claims::ClaimChange;
use crate::instance::WatchEvent;
use crate::records::PodStatus;

impl Simulation {
    pub(super) fn deliver_due_events(&mut self) -> Result<(), SimError> {
        while let Some(Reverse((at, seq))) = self.events.peek().copied() {
            if at > self.clock {
                break;
            }
            self.events.pop();
            let event = self
                .payloads
                .remove(&seq)
                .expect("every queued event has a payload");
            match event {
                Event::External(e) => self.apply(e)?,
                Event::BindDue {
                    instance,
                    pod,
                    state,
                    queued,
                } => self.finish_bind(instance, pod, state, queued, None),
                Event::GangBindDue { instance, members } => {
                    self.finish_gang_bind(instance, members)
                }
                Event::BindingConditionsDue {
                    instance,
                    pod,
                    state,
                    queued,
                    by_look,
                } => self.finish_binding_conditions(instance, pod, state, queued, by_look),
                Event::DriverAnswers { claims, answer } => self.driver_answers(&claims, answer),
                Event::Watch(change) => self.deliver(&change),
                Event::PermitTimeout { uid, seq } => self.permit_timeout(&uid, seq),
                // The clock has reached it: the loop pops again.
                Event::LoopFree => {}
                Event::VictimsDeleted {
                    instance,
                    index,
                    preemptor,
                    deleted,
                } => self.victims_deleted(instance, index, &preemptor, deleted),
            }
        }
        Ok(())
    }

    /// A change at the API goes out on the watch: it reaches the instances an event
    /// latency from now (at once without latency, before anything else happens).
    pub(super) fn broadcast(&mut self, change: WatchEvent) {
        if self.options.event_latency.is_zero() {
            self.deliver(&change);
        } else {
            self.push(
                self.clock.saturating_add(self.options.event_latency),
                Event::Watch(change),
            );
        }
    }

    /// Every instance handles the change; a created pod its owner holds back for its
    /// scheduling gates is written as gated.
    fn deliver(&mut self, change: &WatchEvent) {
        for instance in &mut self.instances {
            instance.watch(change, self.clock);
        }
        if let WatchEvent::PodCreated(pod) = change
            && self.instances.iter().any(|i| i.queue.is_gated(&pod.uid))
        {
            self.mark_gated(&pod.uid);
        }
        // Pods a new member, their PodGroup or a claim let into the queue are no longer
        // held.
        let may_release = match change {
            WatchEvent::PodCreated(pod) => pod.scheduling_group.is_some(),
            WatchEvent::PodGroupCreated(_) | WatchEvent::Claim(ClaimChange::Set(_)) => true,
            _ => false,
        };
        if may_release {
            let instances = &self.instances;
            self.records
                .release_held(|uid| !instances.iter().any(|i| i.queue.is_gated(uid)));
        }
    }

    /// The index of the instance whose queue holds the pod (a gang member is its group's
    /// instance's, any other pod its UID's).
    fn owner(&self, uid: &str) -> usize {
        (self.instances.iter())
            .position(|i| i.queue.contains(uid))
            .unwrap_or_else(|| {
                gantry_scheduler::shard::owner(uid, self.options.schedulers) as usize
            })
    }

    /// Sequential mode: submits the next pod that is not gated (to the only instance).
    pub(super) fn submit_next_sequential(&mut self) {
        while let Some(pod) = self.backlog.pop_front() {
            let pod = self.make_template_claims(&pod);
            let uid = pod.uid.clone();
            let queue = &mut self.instances[0].queue;
            queue.add(pod, self.clock);
            if queue.is_gated(&uid) {
                self.mark_gated(&uid);
                continue;
            }
            self.current = Some(uid);
            return;
        }
    }

    /// The pod is held back by PreEnqueue: by its scheduling gates (`gated`), or waiting
    /// for its PodGroup, its gang's quorum or its claims (the plugin's message).
    fn mark_gated(&mut self, uid: &str) {
        let owner = self.owner(uid);
        let Some(i) = self.records.index(uid) else {
            return;
        };
        match self.instances[owner].queue.held_until_event(uid) {
            Some(reason) => self.records.hold_until_event(i, reason),
            None => self.records.set_pending(i, PodStatus::Gated, GATED.into()),
        }
    }

    fn apply(&mut self, event: SimEvent) -> Result<(), SimError> {
        let now = self.clock;
        match event {
            SimEvent::CreatePod(pod) => self.create_pod(pod, now)?,
            SimEvent::DeletePod(key) => self.delete_pod(&key),
            SimEvent::MarkTerminating(key) => {
                let uid = self.records.uid_of(&key);
                if let Some(pod) = uid.and_then(|uid| self.api.mark_terminating(&uid)) {
                    self.broadcast(WatchEvent::BoundPodUpdated(pod));
                }
            }
            SimEvent::AddNode(node) => {
                if self.api.node(node.name).is_some() {
                    return Err(SimError::DuplicateNode(node.name.to_string()));
                }
                self.api.add_node(node.clone());
                self.broadcast(WatchEvent::NodeAdded(node));
            }
            SimEvent::UpdateNode(node) => {
                if self.api.node(node.name).is_none() {
                    tracing::warn!(node = %node.name, "updating a node the simulation does not hold");
                    return Ok(());
                }
                self.api.add_node(node.clone());
                self.broadcast(WatchEvent::NodeUpdated(node));
            }
            SimEvent::DeleteNode(name) => {
                let pods = self.api.delete_node(name);
                self.broadcast(WatchEvent::NodeDeleted {
                    name,
                    pods: pods.clone(),
                });
                for pod in &pods {
                    self.release_claims(pod);
                }
            }
            SimEvent::DrainNode { node, recreate } => self.drain(node, recreate),
            SimEvent::PlacedElsewhere(pod) => self.placed_elsewhere(pod),
            SimEvent::CreateCoschedulingGroup(group) => {
                self.broadcast(WatchEvent::CoschedulingGroupCreated(group));
            }
            SimEvent::CreatePodGroup(group) => {
                let key = gantry_cache::GroupKey::of_group(&group);
                self.records.add_group(key, self.clock);
                self.broadcast(WatchEvent::PodGroupCreated(group));
            }
            SimEvent::CreateClaim(claim) => {
                let change = self.api.claims.create(claim);
                self.publish_claims(change.into_iter().collect());
            }
            SimEvent::DeleteClaim(key) => {
                let change = self.api.claims.delete_by_user(key);
                self.publish_claims(change.into_iter().collect());
            }
            SimEvent::SetResourceSlice(slice) => {
                self.change_catalog(CatalogChange::SetSlice(slice))
            }
            SimEvent::DeleteResourceSlice(name) => {
                self.change_catalog(CatalogChange::DeleteSlice(name));
            }
            SimEvent::SetDeviceClass(class) => self.change_catalog(CatalogChange::SetClass(class)),
            SimEvent::Storage(change) => self.change_storage(change),
            SimEvent::DeleteDeviceClass(name) => {
                self.change_catalog(CatalogChange::DeleteClass(name));
            }
        }
        Ok(())
    }

    /// A new pod: queued by its owner, unless it is another scheduler's (never queued, as
    /// upstream leaves it alone) or gated (held, never tried).
    fn create_pod(&mut self, pod: Arc<Pod>, now: Duration) -> Result<(), SimError> {
        let index = self.records.arrive(&pod, now)?;
        if self.instances[0].scheduler.profile_for(&pod).is_none() {
            let reason = format!(
                "schedulerName {:?} matches no profile",
                pod.scheduler_name.as_str()
            );
            self.records
                .set_pending(index, PodStatus::OtherScheduler, reason);
            return Ok(());
        }
        if self.options.sequential {
            self.backlog.push_back(pod);
            return Ok(());
        }
        let pod = self.make_template_claims(&pod);
        self.broadcast(WatchEvent::PodCreated(pod));
        Ok(())
    }

    /// The claim controller makes the pod's claims from its templates before the
    /// scheduler sees the pod; returns the pod naming them.
    fn make_template_claims(&mut self, pod: &Arc<Pod>) -> Arc<Pod> {
        let (pod, made) = self.api.claims.make_template_claims(pod);
        self.publish_claims(made);
        pod
    }

    /// A storage object changes at the API: every instance's objects (and admission's)
    /// are replaced by the API's, and the queues hear of it.
    fn change_storage(&mut self, change: crate::StorageChange) {
        use crate::StorageChange::*;
        let resource = match &change {
            SetClaim(_) | DeleteClaim(..) => EventResource::PersistentVolumeClaim,
            SetVolume(_) | DeleteVolume(_) => EventResource::PersistentVolume,
            SetClass(_) | DeleteClass(_) => EventResource::StorageClass,
            SetCsiNode(_) | DeleteCsiNode(_) => EventResource::CsiNode,
        };
        let action = match &change {
            SetClaim(_) | SetVolume(_) | SetClass(_) | SetCsiNode(_) => {
                ActionType::ADD.or(ActionType::UPDATE)
            }
            _ => ActionType::DELETE,
        };
        self.storage.apply(change);
        for instance in &mut self.instances {
            self.storage.write_to(instance.scheduler.objects_mut());
            instance
                .queue
                .on_event(ClusterEvent::new(resource, action), self.clock);
        }
        self.api.change_storage(&self.storage);
    }

    /// A slice or device class changes at the API, and on the watch.
    fn change_catalog(&mut self, change: CatalogChange) {
        self.api.change_catalog(&change);
        self.broadcast(WatchEvent::DraCatalog(change));
    }

    /// Claim changes at the API: admission's cache and the watch.
    pub(super) fn publish_claims(&mut self, changes: Vec<ClaimChange>) {
        self.api.admit_claim_changes(&changes);
        for change in changes {
            self.broadcast(WatchEvent::Claim(change));
        }
    }

    /// The pod is gone: the claim controller and the garbage collector release its
    /// claims.
    fn release_claims(&mut self, pod: &Pod) {
        if pod.resource_claims.is_empty()
            && !gantry_api::dra_extended::asks_for_extended_resources(pod)
        {
            return;
        }
        let changes = self.api.claims.release(pod);
        self.publish_claims(changes);
    }

    /// A pod bound outside the simulation joins its node (the replayer holds it until
    /// its node exists). A pod the simulation saw arrive says so on its line; one created
    /// bound is the cluster's, as the pods bound at the start are.
    fn placed_elsewhere(&mut self, pod: Arc<Pod>) {
        let Some(node) = pod.node_name.filter(|n| self.api.node(*n).is_some()) else {
            return;
        };
        match self.records.index(&pod.uid) {
            Some(index) => self.records.bound_elsewhere(index, node),
            None => self.records.add_bound(&pod),
        }
        self.api.add_bound_pod(pod.clone());
        self.broadcast(WatchEvent::PodBound(pod));
    }

    /// Deletes a pod by `namespace/name`: a bound one leaves its node; a pending one is
    /// written as deleted, and its bind, if one is in flight, will be refused.
    fn delete_pod(&mut self, key: &str) {
        let Some(uid) = self.records.uid_of(key) else {
            tracing::warn!(pod = %key, "deleting a pod the simulation does not know");
            return;
        };
        // As at the API server, a pod created later may take the name again.
        self.records.release_name(key);
        self.backlog.retain(|p| p.uid != uid);
        if self.current.as_ref() == Some(&uid) {
            self.current = None;
        }
        self.delete_waiting(&uid);
        if self.delete_bound(&uid) {
            return;
        }
        let Some(index) = self.records.index(&uid) else {
            return;
        };
        let status = self.records.histories()[index].status;
        if matches!(status, PodStatus::Pending | PodStatus::Gated) {
            self.records.set_pending(
                index,
                PodStatus::Pending,
                "deleted before it was scheduled".into(),
            );
            self.api.delete_unbound(uid.clone());
            self.broadcast(WatchEvent::PendingPodDeleted(uid.clone()));
            let changes = self.api.claims.delete_owned_by(&uid);
            self.publish_claims(changes);
        }
    }

    /// Cordons the node and evicts its pods, in the order they were bound.
    fn drain(&mut self, node: Sym, recreate: bool) {
        let now = self.clock;
        let Some(current) = self.api.node(node).cloned() else {
            return;
        };
        let mut cordoned = Node::clone(&current);
        cordoned.unschedulable = true;
        let cordoned = Arc::new(cordoned);
        self.api.add_node(cordoned.clone());
        self.broadcast(WatchEvent::NodeUpdated(cordoned));
        for pod in self.api.pods_on(node) {
            self.delete_bound(&pod.uid);
            if recreate {
                let mut again = Pod::clone(&pod);
                again.node_name = None;
                again.name = Arc::from(format!("{}-r{}", pod.name, self.seq));
                again.uid = Arc::from(format!("{}/{}", again.namespace, again.name));
                self.schedule(now, SimEvent::CreatePod(Arc::new(again)));
            }
        }
    }

    /// Deletes the pod if it is bound; returns whether it was.
    pub(super) fn delete_bound(&mut self, uid: &str) -> bool {
        let Some(pod) = self.api.delete_pod(uid) else {
            return false;
        };
        self.broadcast(WatchEvent::BoundPodDeleted(pod.clone()));
        self.release_claims(&pod);
        true
    }
}
