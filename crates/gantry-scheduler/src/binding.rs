//! The binding cycle: PreBind, the bind itself, then PostBind on success or Unreserve and
//! forgetting the assumed pod on failure. [`Scheduler::bind`](crate::Scheduler::bind) runs
//! it in one call; [`BindingCycle`] runs it apart from the scheduler, so that a binder
//! writing to a real API server works concurrently with the next scheduling cycle.

use std::sync::Arc;
use std::time::Instant;

use gantry_api::{Pod, Sym};
use gantry_cache::Cache;
use gantry_framework::{CycleState, Profile};

use crate::BindFailure;

/// Runs the PreBind plugins; the first failure aborts the binding cycle.
pub fn run_pre_bind(
    profile: Option<&Profile>,
    state: &mut CycleState,
    pod: &Pod,
    node: Sym,
) -> Result<(), String> {
    for plugin in profile.into_iter().flat_map(|p| &p.pre_bind) {
        let status = plugin.pre_bind(state, pod, node);
        if !status.is_success() {
            return Err(format!(
                "running PreBind plugin {:?}: {}",
                plugin.name(),
                status.message()
            ));
        }
    }
    Ok(())
}

/// What follows the bind: on success the assumed pod's binding is finished (its expiry
/// clock starts) and PostBind runs; on failure Unreserve runs and the assumed pod is
/// forgotten, so its room is free again (the failure says whether it was).
pub(crate) fn conclude(
    profile: Option<&Profile>,
    cache: &Cache,
    assume: bool,
    state: &mut CycleState,
    pod: &Arc<Pod>,
    node: Sym,
    bound: Result<(), String>,
) -> Result<(), BindFailure> {
    match bound {
        Ok(()) => {
            if assume {
                cache.finish_binding(&pod.uid, Instant::now());
            }
            for plugin in profile.into_iter().flat_map(|p| &p.post_bind) {
                plugin.post_bind(state, pod, node);
            }
            Ok(())
        }
        Err(message) => {
            if let Some(profile) = profile {
                unreserve(profile, state, pod, node);
            }
            let forgotten = assume
                && match cache.forget_pod(pod) {
                    Ok(()) => true,
                    // Its room is taken, where it is bound: nothing to free.
                    Err(landed @ gantry_cache::CacheError::BoundElsewhere { .. }) => {
                        tracing::info!(pod = %pod.key(), "{landed}");
                        false
                    }
                    Err(forget) => {
                        tracing::error!(pod = %pod.key(), error = %forget, "could not forget assumed pod");
                        false
                    }
                };
            Err(BindFailure { message, forgotten })
        }
    }
}

/// Unreserve runs in the reverse order of Reserve, as upstream.
pub fn unreserve(profile: &Profile, state: &mut CycleState, pod: &Pod, node: Sym) {
    for plugin in profile.reserve.iter().rev() {
        plugin.unreserve(state, pod, node);
    }
}

/// One pod's binding cycle, detached from the scheduler (`Send`): call
/// [`pre_bind`](Self::pre_bind), bind through the API, then [`finish`](Self::finish) with
/// the outcome.
pub struct BindingCycle {
    pub(crate) pod: Arc<Pod>,
    pub(crate) node: Sym,
    pub(crate) state: Box<CycleState>,
    /// The pod's profile (plugins are shared, not copied).
    pub(crate) profile: Option<Profile>,
    pub(crate) cache: Arc<Cache>,
    pub(crate) assume: bool,
}

impl BindingCycle {
    /// The assumed pod, naming its node.
    pub fn pod(&self) -> &Arc<Pod> {
        &self.pod
    }

    pub fn node(&self) -> Sym {
        self.node
    }

    /// The pod's profile, for a binder that re-checks the placement before binding.
    pub fn profile(&self) -> Option<&Profile> {
        self.profile.as_ref()
    }

    pub fn pre_bind(&mut self) -> Result<(), String> {
        run_pre_bind(self.profile.as_ref(), &mut self.state, &self.pod, self.node)
    }

    /// The claims PreBind set for the pod (allocated, reserved for it), which the binder
    /// writes before the bind; empty for a pod without claims.
    pub fn claims_to_write(&self) -> &[Arc<gantry_api::dra::ResourceClaim>] {
        gantry_framework::plugins::dynamic_resources::bound_claims(&self.state)
    }

    /// How long the binder waits, once it has written the claims, for their binding
    /// conditions, in seconds (DRADeviceBindingConditions); `None` when nothing waits.
    pub fn binding_wait(&self) -> Option<i64> {
        gantry_framework::plugins::dynamic_resources::binding_wait(&self.state)
    }

    /// The claim made for the pod's extended resources (among `claims_to_write`, which
    /// the binder creates) and which container uses which of its requests, which the
    /// binder writes in the pod's `status.extendedResourceClaimStatus`.
    pub fn extended_resource_mappings(
        &self,
    ) -> Option<(Arc<str>, Arc<[gantry_api::dra_extended::RequestMapping]>)> {
        gantry_framework::plugins::dynamic_resources::extended_resource_mappings(&self.state)
    }

    /// The volumes Reserve promised to the pod's claims and the claims to provision on
    /// its node, which the binder writes before the bind; empty for most pods.
    pub fn volumes_to_write(&self) -> gantry_framework::plugins::volume_binding::VolumeWrites {
        gantry_framework::plugins::volume_binding::volume_writes(&self.state)
    }

    /// Concludes the cycle with the bind's result (see `conclude`).
    pub fn finish(self, bound: Result<(), String>) -> Result<(), BindFailure> {
        self.finish_keeping_state(bound).0
    }

    /// [`Self::finish`], giving back the cycle's state (what its plugins asked for).
    pub(crate) fn finish_keeping_state(
        mut self,
        bound: Result<(), String>,
    ) -> (Result<(), BindFailure>, Box<CycleState>) {
        let concluded = conclude(
            self.profile.as_ref(),
            &self.cache,
            self.assume,
            &mut self.state,
            &self.pod,
            self.node,
            bound,
        );
        (concluded, self.state)
    }
}
