//! DynamicResources' events and its queueing hint for a claim's change, as v1.36.3
//! registers them (`EventsToRegister`, `isSchedulableAfterClaimChange`,
//! `dynamicresources.go`): a pod it rejected is tried again when a node comes or changes,
//! a device class or slice is added or changed, the pod's own status names its claims, or
//! a claim changes in a way that can help it: one of its own claims is created or its
//! status changes, or any claim is deallocated (its devices are free again). Another
//! pod's claim being made, allocated or reserved helps nobody: before, any event at all
//! moved such pods, and a real API server saw one `FailedScheduling` more per step.

use std::sync::Arc;

use gantry_api::dra::ResourceClaim;
use gantry_api::{Pod, Sym};

use crate::events::{ActionType, ClusterEvent, EventResource};

const ADD_OR_UPDATE: ActionType = ActionType::ADD.or(ActionType::UPDATE);

/// v1.36.3's registrations. A claim's deletion is registered too: upstream's claim
/// controller deallocates an allocated claim (an update) before it goes, which Gantry's
/// watches and the simulation show as the deletion alone.
pub const EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::Node, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::ResourceClaim, ActionType::ALL),
    // `UpdatePodGeneratedResourceClaim`: the pod's own status naming its claims.
    ClusterEvent::new(EventResource::UnscheduledPod, ActionType::UPDATE),
    ClusterEvent::new(EventResource::DeviceClass, ADD_OR_UPDATE),
    ClusterEvent::new(EventResource::ResourceSlice, ADD_OR_UPDATE),
];

/// Which pods a claim's change concerns (upstream's `isSchedulableAfterClaimChange`).
#[derive(Debug, Clone)]
pub struct ClaimChangeHint {
    namespace: Sym,
    name: Arc<str>,
    /// An allocated claim lost its allocation (or went): every pod may fit now.
    freed: bool,
    /// Created, or its status changed (allocation, reservations, binding conditions):
    /// the pods using it may fit now. A change elsewhere (a finalizer) helps nobody.
    relevant_to_users: bool,
}

impl ClaimChangeHint {
    /// `old`: the claim as it was, if known; `new`: as it is (or was, when `deleted`).
    pub fn new(old: Option<&ResourceClaim>, new: &ResourceClaim, deleted: bool) -> Self {
        let was_allocated = old.is_some_and(|c| c.allocation.is_some());
        let freed = was_allocated && (deleted || new.allocation.is_none());
        let status_changed = old.is_none_or(|old| {
            old.allocation != new.allocation
                || old.reserved_for != new.reserved_for
                || old.binding_status != new.binding_status
        });
        ClaimChangeHint {
            namespace: new.namespace,
            name: new.name.clone(),
            freed,
            relevant_to_users: !deleted && status_changed,
        }
    }

    /// Whether the change may let `pod` in.
    pub fn concerns(&self, pod: &Pod) -> bool {
        self.freed
            || (self.relevant_to_users
                && pod.namespace == self.namespace
                && (pod.resource_claims.iter()).any(|entry| pod.claim_name(entry) == self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::dra::{
        Allocation, ClaimConsumer, ClaimSource, ClaimSpec, PodResourceClaim, ResourceClaimStatus,
    };

    fn claim(name: &str) -> ResourceClaim {
        let spec = ClaimSpec {
            requests: Vec::new(),
            constraints: Vec::new(),
        };
        ResourceClaim::unallocated(Sym::new("default"), name, name, spec)
    }

    fn allocated(name: &str) -> ResourceClaim {
        ResourceClaim {
            allocation: Some(Arc::new(Allocation {
                devices: Vec::new(),
                node_selector: None,
            })),
            ..claim(name)
        }
    }

    /// A pod using claim `gpu` by name, and `made` through a template entry its status
    /// names `p-made-x1`.
    fn pod() -> Pod {
        let mut pod = Pod::new("default", "p");
        pod.resource_claims = Box::new([
            PodResourceClaim {
                name: Arc::from("a"),
                source: ClaimSource::Claim(Arc::from("gpu")),
            },
            PodResourceClaim {
                name: Arc::from("made"),
                source: ClaimSource::Template(Sym::new("t")),
            },
        ]);
        pod.claim_statuses = Some(Arc::from([ResourceClaimStatus {
            name: Arc::from("made"),
            claim: Arc::from("p-made-x1"),
        }]));
        pod
    }

    #[test]
    fn a_claim_change_concerns_its_users_and_a_deallocation_everyone() {
        let pod = pod();
        let concerns = |old: Option<&ResourceClaim>, new: &ResourceClaim, deleted: bool| {
            ClaimChangeHint::new(old, new, deleted).concerns(&pod)
        };
        // Upstream's rows (`isSchedulableAfterClaimChange`, v1.36.3).
        assert!(concerns(None, &claim("gpu"), false), "its claim created");
        assert!(
            concerns(None, &claim("p-made-x1"), false),
            "its template's claim"
        );
        assert!(
            !concerns(None, &claim("other"), false),
            "another pod's claim created"
        );
        let reserved = ResourceClaim {
            reserved_for: vec![ClaimConsumer {
                name: Arc::from("q"),
                uid: Arc::from("q"),
            }],
            ..allocated("other")
        };
        assert!(
            !concerns(Some(&claim("other")), &allocated("other"), false),
            "another pod's claim allocated"
        );
        assert!(
            !concerns(Some(&allocated("other")), &reserved, false),
            "and reserved"
        );
        assert!(
            concerns(Some(&reserved), &claim("other"), false),
            "any claim deallocated frees devices"
        );
        assert!(
            concerns(Some(&claim("gpu")), &allocated("gpu"), false),
            "its status changed"
        );
        let finalized = ResourceClaim {
            deleting: true,
            ..claim("gpu")
        };
        assert!(
            !concerns(Some(&claim("gpu")), &finalized, false),
            "its status as before: a finalizer or a deletion timestamp"
        );
        // Deleted: as the claim controller's deallocation, when it held devices.
        assert!(concerns(Some(&reserved), &reserved, true));
        assert!(!concerns(Some(&claim("gpu")), &claim("gpu"), true));
        let elsewhere = ResourceClaim {
            namespace: Sym::new("other-ns"),
            ..claim("gpu")
        };
        assert!(
            !concerns(None, &elsewhere, false),
            "a claim of that name elsewhere"
        );
    }
}
