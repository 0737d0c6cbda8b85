//! What plugins ask of the scheduler beyond their statuses. Upstream's plugins act through
//! the framework handle: `IterateOverWaitingPods` to allow or reject pods waiting at
//! Permit, `PodsToActivate` to move pods to the active queue. Here plugins never reach
//! the queue or the waiting pods: they leave requests in the cycle state, and the
//! scheduler carries them out once the plugin has returned.

use std::sync::Arc;
use std::time::Duration;

use gantry_cache::GroupKey;

use crate::CycleState;

/// One request of a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Allow the group's pods waiting at Permit (`waitingPod.Allow(plugin)`).
    AllowWaiting {
        group: GroupKey,
        plugin: &'static str,
    },
    /// Reject the group's pods waiting at Permit (`waitingPod.Reject(plugin, message)`).
    RejectWaiting {
        group: GroupKey,
        plugin: &'static str,
        message: &'static str,
    },
    /// Move the group's pending pods other than `except` to the active queue.
    ActivateSiblings { group: GroupKey, except: Arc<str> },
    /// Change what Coscheduling remembers of the group, at the cycle's time.
    Remember { group: GroupKey, change: Memory },
}

impl Request {
    /// The group the request is about.
    pub fn group(&self) -> GroupKey {
        match self {
            Request::AllowWaiting { group, .. }
            | Request::RejectWaiting { group, .. }
            | Request::ActivateSiblings { group, .. }
            | Request::Remember { group, .. } => *group,
        }
    }
}

/// A change to Coscheduling's memory of a group (`gantry_cache::CoschedulingMemory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// The group failed now (`MarkPodGroupScheduleFailure`).
    Failed,
    /// The failure is forgotten (`ClearPodGroupScheduleFailure`).
    Succeeded,
    /// PreFilter refuses the group for this long (`BackoffPodGroup`).
    BackOff(Duration),
    /// The minResources check passed and holds for this long (`permittedPG.Add`).
    Permitted(Duration),
    /// The check is to be made again (`DeletePermittedPodGroup`).
    Unpermitted,
}

const KEY: &str = "FrameworkHandle";

#[derive(Debug, Clone, Default)]
struct Requests(Vec<Request>);

/// Leaves a request for the scheduler.
pub fn ask(state: &mut CycleState, request: Request) {
    match state.read_mut::<Requests>(KEY) {
        Some(requests) => requests.0.push(request),
        None => state.write(KEY, Requests(vec![request])),
    }
}

/// The requests left since the last call, in the order they were made.
pub fn take(state: &mut CycleState) -> Vec<Request> {
    state
        .read_mut::<Requests>(KEY)
        .map(|requests| std::mem::take(&mut requests.0))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::Sym;

    #[test]
    fn requests_are_taken_once_in_order() {
        let group = GroupKey {
            namespace: Sym::new("default"),
            name: Sym::new("g"),
        };
        let mut state = CycleState::new();
        assert!(take(&mut state).is_empty());
        ask(
            &mut state,
            Request::Remember {
                group,
                change: Memory::Failed,
            },
        );
        ask(&mut state, Request::AllowWaiting { group, plugin: "P" });
        assert_eq!(
            take(&mut state),
            vec![
                Request::Remember {
                    group,
                    change: Memory::Failed
                },
                Request::AllowWaiting { group, plugin: "P" }
            ]
        );
        assert!(take(&mut state).is_empty());
    }
}
