//! One scheduler instance of the simulation: its own cache, queue and scheduler, kept
//! current by the simulated API's watch stream. With several instances (Gödel's shared
//! state) every instance watches every change, each owns the pods its [`Shard`] gives it,
//! and the stream reaches them an event latency after the change, so an instance may
//! decide on a view that other instances' binds have outdated.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use gantry_api::{Gate, Node, Pod, PodGroup, Sym};
use gantry_cache::{Cache, GroupKey, PodGroupStates};
use gantry_framework::plugins::dynamic_resources::queueing_hint::ClaimChangeHint;
use gantry_framework::{ActionType, ApiObjects, ClusterEvent, EventResource, Profile};
use gantry_scheduler::Scheduler;
use gantry_scheduler::queue::SchedulingQueue;
use gantry_scheduler::shard::Shard;

use crate::api::CatalogChange;
use crate::claims::ClaimChange;

/// A change at the simulated API, as every instance's watch delivers it.
#[derive(Debug, Clone)]
pub(crate) enum WatchEvent {
    /// A pending pod was created: its owner queues it.
    PodCreated(Arc<Pod>),
    /// A pod was bound (it names its node).
    PodBound(Arc<Pod>),
    /// Preemption nominated a pending pod to a node (`status.nominatedNodeName`).
    PodNominated(Arc<Pod>),
    /// A pod that was not bound was deleted.
    PendingPodDeleted(Arc<str>),
    /// A bound pod was deleted (by a scenario, a drain or preemption).
    BoundPodDeleted(Arc<Pod>),
    /// A bound pod changed (marked for deletion).
    BoundPodUpdated(Arc<Pod>),
    NodeAdded(Arc<Node>),
    /// A node changed (a cordon).
    NodeUpdated(Arc<Node>),
    /// A node was deleted, and these pods bound to it with it.
    NodeDeleted {
        name: Sym,
        pods: Vec<Arc<Pod>>,
    },
    /// A ResourceClaim was made, written or deleted.
    Claim(ClaimChange),
    /// A ResourceSlice or DeviceClass was published, changed or withdrawn.
    DraCatalog(CatalogChange),
    /// A PodGroup was created.
    PodGroupCreated(Arc<PodGroup>),
    CoschedulingGroupCreated(Arc<gantry_api::coscheduling::CoschedulingGroup>),
}

pub(crate) struct Instance {
    pub shard: Shard,
    pub cache: Arc<Cache>,
    pub scheduler: Scheduler,
    pub queue: SchedulingQueue,
    /// GangScheduling is on: pods of a PodGroup are scheduled in pod-group cycles, and
    /// every new pending pod is a cluster event (upstream's `EventUnscheduledPodAdd`).
    pub gang_scheduling: bool,
    /// Pods of this instance seen deleted while their binds were in flight: if such a bind
    /// fails, there is nothing to retry (kube-scheduler checks its informer the same way).
    deleted_in_flight: HashSet<Arc<str>>,
}

/// How an instance is made: the same profiles, objects and backoff for every instance.
pub(crate) struct InstanceConfig<'a> {
    pub profiles: &'a [Profile],
    pub objects: &'a ApiObjects,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub assume: bool,
    pub remember_verdicts: bool,
}

impl Instance {
    /// Instance `shard.index` of `shard.count`, with an empty cache, breaking ties with
    /// [`Shard::tie_break_seed`].
    pub fn new(shard: Shard, config: &InstanceConfig<'_>, seed: u64) -> Instance {
        let cache = Arc::new(Cache::new());
        let mut queue = SchedulingQueue::with_backoff(
            config.profiles,
            config.initial_backoff,
            config.max_backoff,
        );
        queue.share_pod_groups(cache.pod_groups().clone());
        queue.share_claims(cache.dra().clone());
        let mut scheduler = Scheduler::new(
            cache.clone(),
            config.profiles.to_vec(),
            config.objects.clone(),
            shard.tie_break_seed(seed),
        );
        scheduler.assume = config.assume;
        scheduler.remember_verdicts = config.remember_verdicts;
        scheduler.random_ties = shard.is_shared();
        Instance {
            shard,
            cache,
            scheduler,
            queue,
            gang_scheduling: config
                .profiles
                .iter()
                .any(|p| p.release.enabled(Gate::GangScheduling)),
            deleted_in_flight: HashSet::new(),
        }
    }

    /// Applies one watch event as kube-scheduler's event handlers would.
    pub fn watch(&mut self, event: &WatchEvent, now: Duration) {
        match event {
            WatchEvent::PodCreated(pod) => {
                let group = GroupKey::of(pod);
                if PodGroupStates::is_member(pod) {
                    self.cache.pod_groups().lock().add_member(pod.clone());
                }
                if self.shard.owns_pod(pod, self.gang_scheduling) {
                    self.queue.add(pod.clone(), now);
                }
                if self.gang_scheduling {
                    if let Some(group) = group {
                        self.queue.requeue_gated_members(group);
                    }
                    self.on_event(EventResource::UnscheduledPod, ActionType::ADD, now);
                }
            }
            WatchEvent::CoschedulingGroupCreated(group) => {
                self.cache
                    .pod_groups()
                    .lock()
                    .set_coscheduling_group(group.clone(), now.as_nanos() as i128);
                self.on_event(EventResource::PodGroup, ActionType::ADD, now);
            }
            WatchEvent::PodGroupCreated(group) => {
                self.cache.pod_groups().lock().set_group(group.clone());
                self.queue.requeue_gated_members(GroupKey::of_group(group));
                self.on_event(EventResource::PodGroup, ActionType::ADD, now);
            }
            WatchEvent::PodNominated(pod) => {
                if !self.shard.owns_pod(pod, self.gang_scheduling) {
                    self.scheduler.note_nomination(pod.clone());
                }
            }
            WatchEvent::PodBound(pod) => {
                self.scheduler.clear_nomination(pod);
                // New to this cache, or the confirmation of a pod this instance assumed.
                if let Err(e) = self.cache.add_pod(pod.clone()) {
                    tracing::error!(pod = %pod.key(), error = %e, "watch event for a bound pod was refused by the cache");
                }
                self.on_event(EventResource::AssignedPod, ActionType::ADD, now);
            }
            WatchEvent::PendingPodDeleted(uid) => {
                let owned = {
                    let mut groups = self.cache.pod_groups().lock();
                    let owned = match groups.group_of(uid) {
                        Some(group) if self.gang_scheduling => {
                            self.shard.owns_group(group.namespace, group.name)
                        }
                        _ => self.shard.owns(uid),
                    };
                    groups.remove_member(uid);
                    owned
                };
                self.scheduler.forget_nomination(uid);
                if owned && !self.queue.delete(uid) {
                    self.deleted_in_flight.insert(uid.clone());
                }
            }
            WatchEvent::BoundPodDeleted(pod) => {
                if let Err(e) = self.cache.remove_pod(pod) {
                    tracing::warn!(pod = %pod.key(), error = %e, "deleted pod was not in the cache");
                }
                self.scheduler.clear_nomination(pod);
                self.queue.victim_gone(&pod.uid);
                self.on_event(EventResource::AssignedPod, ActionType::DELETE, now);
            }
            WatchEvent::BoundPodUpdated(pod) => {
                if let Err(e) = self.cache.update_pod(pod.clone()) {
                    tracing::warn!(pod = %pod.key(), error = %e, "updated pod was not in the cache");
                }
                self.on_event(EventResource::AssignedPod, ActionType::UPDATE, now);
            }
            WatchEvent::NodeAdded(node) => {
                self.cache.add_node(node.clone());
                self.on_event(EventResource::Node, ActionType::ADD, now);
            }
            WatchEvent::NodeUpdated(node) => {
                self.cache.update_node(node.clone());
                self.on_event(EventResource::Node, ActionType::UPDATE, now);
            }
            WatchEvent::NodeDeleted { name, pods } => {
                for pod in pods {
                    let _ = self.cache.remove_pod(pod);
                    self.queue.victim_gone(&pod.uid);
                }
                if let Err(e) = self.cache.remove_node(*name) {
                    tracing::warn!(node = %name, error = %e, "deleting a node the cache does not hold");
                }
                self.on_event(EventResource::Node, ActionType::DELETE, now);
                self.on_event(EventResource::AssignedPod, ActionType::DELETE, now);
            }
            WatchEvent::DraCatalog(change) => {
                let resource = match change {
                    CatalogChange::SetSlice(_) | CatalogChange::DeleteSlice(_) => {
                        EventResource::ResourceSlice
                    }
                    CatalogChange::SetClass(_) | CatalogChange::DeleteClass(_) => {
                        EventResource::DeviceClass
                    }
                };
                let action = match change {
                    CatalogChange::SetSlice(_) | CatalogChange::SetClass(_) => {
                        ActionType::ADD.or(ActionType::UPDATE)
                    }
                    _ => ActionType::DELETE,
                };
                change.apply(&self.cache);
                self.on_event(resource, action, now);
            }
            WatchEvent::Claim(change) => {
                let (key, action) = match change {
                    ClaimChange::Set(claim) => {
                        (claim.key(), ActionType::ADD.or(ActionType::UPDATE))
                    }
                    ClaimChange::Deleted(key) => (*key, ActionType::DELETE),
                };
                let old = self.cache.dra().claim(key);
                crate::api::apply_claim_changes(&self.cache, std::slice::from_ref(change));
                let hint = match change {
                    ClaimChange::Set(claim) => ClaimChangeHint::new(old.as_deref(), claim, false),
                    ClaimChange::Deleted(_) => match &old {
                        Some(old) => ClaimChangeHint::new(Some(old), old, true),
                        None => return,
                    },
                };
                let event = ClusterEvent::new(EventResource::ResourceClaim, action);
                (self.queue).on_event_for(event, now, |pod| hint.concerns(pod));
                if matches!(change, ClaimChange::Set(_)) {
                    self.queue.requeue_gated_claim_users();
                }
            }
        }
    }

    fn on_event(&mut self, resource: EventResource, action: ActionType, now: Duration) {
        self.queue
            .on_event(ClusterEvent::new(resource, action), now);
    }

    /// The pod was deleted while its binding cycle was held (waiting at Permit).
    pub fn note_deleted_in_flight(&mut self, uid: Arc<str>) {
        self.deleted_in_flight.insert(uid);
    }

    /// Whether this instance saw the pod deleted while its bind was in flight (and stops
    /// tracking it: the bind has concluded).
    pub fn take_deleted_in_flight(&mut self, uid: &str) -> bool {
        self.deleted_in_flight.remove(uid)
    }
}
