//! Pods waiting at Permit, and what the plugins ask of the scheduler
//! ([`gantry_framework::handle`]). The scheduler keeps Coscheduling's memory of each
//! group in the cache itself; allowing and rejecting waiting pods and moving pods to the
//! active queue are its caller's, who holds the waiting pods and the queue, and takes
//! those requests with [`Scheduler::take_requests`].

use std::sync::Arc;

use gantry_api::{Pod, Release, Sym};
use gantry_cache::GroupKey;
use gantry_framework::handle::{self, Memory, Request};
use gantry_framework::{CycleState, PermitTimeout, Status};

use crate::binding::unreserve;
use crate::{BindFailure, BindingCycle, FitError, Scheduler};

/// Upstream's `maxTimeout`: no plugin makes a pod wait longer at Permit.
pub const MAX_PERMIT_WAIT: PermitTimeout = PermitTimeout::from_secs(15 * 60);

/// How long a pod waits at Permit, and the plugin whose wait ends first (the framework
/// keeps a timer per waiting plugin; the first to fire rejects the pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PermitWait {
    pub timeout: PermitTimeout,
    pub plugin: &'static str,
}

impl PermitWait {
    /// The waiting plugins' timeouts (each capped at [`MAX_PERMIT_WAIT`]), the shortest
    /// kept.
    pub(crate) fn shorter(
        current: Option<PermitWait>,
        plugin: &'static str,
        timeout: PermitTimeout,
    ) -> PermitWait {
        let timeout = timeout.min(MAX_PERMIT_WAIT);
        match current {
            Some(wait) if wait.timeout <= timeout => wait,
            _ => PermitWait { timeout, plugin },
        }
    }

    /// The rejection when the wait runs out (`waiting_pods_map.go`).
    pub fn timeout_message(&self) -> String {
        format!(
            "rejected due to timeout after waiting {} at plugin {}",
            self.timeout, self.plugin
        )
    }
}

/// Whoever holds the pods waiting at Permit (the simulation, `gantry run`'s loop): what it
/// does for each request the plugins make of them and of the queue.
pub trait PermitWaiters {
    /// The plugins' requests since the last call ([`Scheduler::take_requests`]).
    fn take_requests(&mut self) -> Vec<Request>;
    /// The group's waiting pods, in the order they began to wait.
    fn waiting_members(&self, group: GroupKey) -> Vec<Arc<str>>;
    /// Permit let the pod through: its binding cycle goes on.
    fn allow_waiting(&mut self, uid: &Arc<str>);
    /// The waiting pod is rejected with `status` (see [`Scheduler::reject_waiting`]).
    fn reject_waiting(&mut self, uid: &Arc<str>, status: Status);
    /// Moves the group's pending pods other than `except` to the active queue.
    fn activate_siblings(&mut self, group: GroupKey, except: &str);

    /// Carries out the requests until the plugins ask nothing more (a rejection's
    /// Unreserve may ask again).
    fn serve_requests(&mut self) {
        loop {
            let requests = self.take_requests();
            if requests.is_empty() {
                return;
            }
            for request in requests {
                match request {
                    Request::AllowWaiting { group, .. } => {
                        for uid in self.waiting_members(group) {
                            self.allow_waiting(&uid);
                        }
                    }
                    Request::RejectWaiting {
                        group,
                        plugin,
                        message,
                    } => {
                        for uid in self.waiting_members(group) {
                            let status = Status::unschedulable(message).with_plugin(plugin);
                            self.reject_waiting(&uid, status);
                        }
                    }
                    Request::ActivateSiblings { group, except } => {
                        self.activate_siblings(group, &except);
                    }
                    Request::Remember { .. } => {}
                }
            }
        }
    }
}

impl Scheduler {
    /// Carries out what the plugins asked during the cycle (read from `state`): memory
    /// changes at once, the rest kept for the caller. Requests naming a Coscheduling
    /// group that does not exist do nothing (upstream's plugin returns early for them).
    pub(crate) fn absorb_requests(&mut self, state: &mut CycleState) {
        let requests = handle::take(state);
        if requests.is_empty() {
            return;
        }
        let mut groups = self.cache.pod_groups().lock();
        for request in requests {
            if groups.coscheduling_group(request.group()).is_none() {
                continue;
            }
            let Request::Remember { group, change } = request else {
                self.requests.push(request);
                continue;
            };
            let now = self.clock;
            let memory = groups.coscheduling_memory_mut(group);
            match change {
                Memory::Failed => memory.failed_at = Some(now),
                Memory::Succeeded => memory.failed_at = None,
                Memory::BackOff(duration) => memory.backed_off_until = Some(now + duration),
                Memory::Permitted(duration) => memory.permitted_until = Some(now + duration),
                Memory::Unpermitted => memory.permitted_until = None,
            }
        }
    }

    /// A pod waiting at Permit was rejected (by a plugin, or its wait ran out): upstream's
    /// `handleBindingCycleError` unreserves it and forgets it, and it fails as a fit error
    /// over its node with `status` (which names the rejecting plugin).
    pub fn reject_waiting(
        &mut self,
        pod: &Arc<Pod>,
        state: &mut CycleState,
        status: Status,
    ) -> FitError {
        let node = pod.node_name.unwrap_or_else(|| Sym::new(""));
        let release = match self.profile_for(pod) {
            Some(profile) => {
                unreserve(profile, state, pod, node);
                profile.release
            }
            None => Release::default(),
        };
        if self.assume
            && let Err(e) = self.cache.forget_pod(pod)
        {
            tracing::error!(pod = %pod.key(), error = %e, "could not forget a pod rejected at Permit");
        }
        self.absorb_requests(state);
        FitError {
            num_all_nodes: 1,
            node_statuses: vec![(node, status)],
            release,
            ..FitError::default()
        }
    }

    /// Concludes a binding cycle run apart ([`BindingCycle::finish`]), keeping what its
    /// Unreserve asked of the waiting pods (Coscheduling rejects a failed member's
    /// waiting siblings) for [`Scheduler::take_requests`].
    pub fn finish_binding_cycle(
        &mut self,
        cycle: BindingCycle,
        bound: Result<(), String>,
    ) -> Result<(), BindFailure> {
        let (concluded, mut state) = cycle.finish_keeping_state(bound);
        self.absorb_requests(&mut state);
        concluded
    }

    /// The requests for the waiting pods and the queue since the last call, in order.
    pub fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.requests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_prints_them() {
        let said = |s| PermitTimeout::from_secs(s).to_string();
        assert_eq!(said(4), "4s");
        assert_eq!(said(60), "1m0s");
        assert_eq!(said(90), "1m30s");
        assert_eq!(said(900), "15m0s");
        assert_eq!(said(3600), "1h0m0s");
        assert_eq!(said(0), "0s");
        assert_eq!(said(-5), "-5s");
        assert_eq!(said(-90), "-1m30s");
        let wait = PermitWait {
            timeout: PermitTimeout::from_secs(-5),
            plugin: "Coscheduling",
        };
        assert_eq!(
            wait.timeout_message(),
            "rejected due to timeout after waiting -5s at plugin Coscheduling"
        );
        assert_eq!(wait.timeout.wait(), std::time::Duration::ZERO);
    }

    #[test]
    fn the_shortest_wait_decides_and_none_exceeds_fifteen_minutes() {
        let secs = PermitTimeout::from_secs;
        let first = PermitWait::shorter(None, "A", secs(3600));
        assert_eq!(
            first,
            PermitWait {
                timeout: MAX_PERMIT_WAIT,
                plugin: "A"
            }
        );
        assert_eq!(PermitWait::shorter(Some(first), "B", secs(5)).plugin, "B");
        assert_eq!(
            PermitWait::shorter(Some(first), "B", MAX_PERMIT_WAIT).plugin,
            "A"
        );
    }
}
