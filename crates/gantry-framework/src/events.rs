//! Cluster events, and which of them can make a pod that a plugin rejected schedulable
//! again (upstream's `EventsToRegister`): the queue moves a rejected pod back only on
//! the events its rejecting plugins registered.

/// The kind of object an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventResource {
    /// A pod bound to a node (pending pods do not change what fits).
    AssignedPod,
    /// A pending pod (its own update: labels, scheduling gates).
    UnscheduledPod,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CsiNode,
    CsiDriver,
    CsiStorageCapacity,
    Namespace,
    Service,
    ResourceClaim,
    ResourceSlice,
    DeviceClass,
    /// A PodGroup (GenericWorkload).
    PodGroup,
}

/// What happened to the object; combine with `|` in registrations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActionType(u8);

impl ActionType {
    pub const ADD: ActionType = ActionType(1);
    pub const UPDATE: ActionType = ActionType(2);
    pub const DELETE: ActionType = ActionType(4);
    pub const ALL: ActionType = ActionType(7);

    pub const fn or(self, other: ActionType) -> ActionType {
        ActionType(self.0 | other.0)
    }

    pub fn intersects(self, other: ActionType) -> bool {
        self.0 & other.0 != 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    pub resource: EventResource,
    pub action: ActionType,
}

impl ClusterEvent {
    pub const fn new(resource: EventResource, action: ActionType) -> ClusterEvent {
        ClusterEvent { resource, action }
    }

    /// Whether this registration covers `event`.
    pub fn covers(&self, event: &ClusterEvent) -> bool {
        self.resource == event.resource && self.action.intersects(event.action)
    }
}

/// What a plugin that does not say otherwise registers: everything.
pub const ALL_EVENTS: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::AssignedPod, ActionType::ALL),
    ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ALL),
    ClusterEvent::new(EventResource::Node, ActionType::ALL),
    ClusterEvent::new(EventResource::PersistentVolume, ActionType::ALL),
    ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::ALL),
    ClusterEvent::new(EventResource::StorageClass, ActionType::ALL),
    ClusterEvent::new(EventResource::CsiNode, ActionType::ALL),
    ClusterEvent::new(EventResource::CsiDriver, ActionType::ALL),
    ClusterEvent::new(EventResource::CsiStorageCapacity, ActionType::ALL),
    ClusterEvent::new(EventResource::Namespace, ActionType::ALL),
    ClusterEvent::new(EventResource::Service, ActionType::ALL),
    ClusterEvent::new(EventResource::ResourceClaim, ActionType::ALL),
    ClusterEvent::new(EventResource::ResourceSlice, ActionType::ALL),
    ClusterEvent::new(EventResource::DeviceClass, ActionType::ALL),
    ClusterEvent::new(EventResource::PodGroup, ActionType::ALL),
];

/// Node added or updated: what most node-property filters register.
pub const NODE_ADD_OR_UPDATE: &[ClusterEvent] = &[ClusterEvent::new(
    EventResource::Node,
    ActionType::ADD.or(ActionType::UPDATE),
)];

/// NodePorts, NodeResourcesFit: room frees up when a pod goes or a node comes or grows.
pub const POD_DELETE_OR_NODE_ADD_OR_UPDATE: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
    ClusterEvent::new(EventResource::Node, ActionType::ADD.or(ActionType::UPDATE)),
];

/// InterPodAffinity: any change to bound pods, or new or relabelled nodes.
pub const ANY_POD_OR_NODE_ADD_OR_UPDATE: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::AssignedPod, ActionType::ALL),
    ClusterEvent::new(EventResource::Node, ActionType::ADD.or(ActionType::UPDATE)),
];

/// PodTopologySpread: any change to bound pods or nodes shifts the domain counts.
pub const ANY_POD_OR_NODE: &[ClusterEvent] = &[
    ClusterEvent::new(EventResource::AssignedPod, ActionType::ALL),
    ClusterEvent::new(EventResource::Node, ActionType::ALL),
];

/// SchedulingGates: only the pod's own update (its gates removed) helps.
pub const UNSCHEDULED_POD_UPDATE: &[ClusterEvent] = &[ClusterEvent::new(
    EventResource::UnscheduledPod,
    ActionType::UPDATE,
)];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_cover_matching_actions_only() {
        let reg = ClusterEvent::new(EventResource::Node, ActionType::ADD.or(ActionType::UPDATE));
        assert!(reg.covers(&ClusterEvent::new(EventResource::Node, ActionType::UPDATE)));
        assert!(!reg.covers(&ClusterEvent::new(EventResource::Node, ActionType::DELETE)));
        assert!(!reg.covers(&ClusterEvent::new(
            EventResource::AssignedPod,
            ActionType::ADD
        )));
    }
}
