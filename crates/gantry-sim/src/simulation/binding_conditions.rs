//! The wait of a binding cycle for its claims' binding conditions
//! (DRADeviceBindingConditions): PreBind has written the claims; the simulated drivers
//! answer on them after a while (see [`DriverBinding`](crate::driver_binding)); PreBind's
//! look that settles the wait (every five seconds, for at most the binding timeout) ends
//! it, and the binding cycle goes on, or fails with upstream's error.

use std::sync::Arc;
use std::time::Duration;

use gantry_api::Pod;
use gantry_api::dra::ClaimKey;
use gantry_api::dra_binding::{BINDING_POLL_INTERVAL_SECONDS, Readiness};
use gantry_framework::CycleState;
use gantry_framework::plugins::dynamic_resources;
use gantry_scheduler::queue::QueuedPod;

use super::binding::{ApiBinder, BindOutcome};
use super::{Event, Simulation};
use crate::driver_binding::Answer;

impl Simulation {
    /// PreBind wrote the pod's claims and waits for their binding conditions, at most
    /// `timeout` seconds: the drivers' answer and PreBind's settling look are due.
    pub(super) fn await_binding_conditions(
        &mut self,
        instance: usize,
        pod: Arc<Pod>,
        state: Box<CycleState>,
        queued: QueuedPod,
        timeout: i64,
    ) {
        let driver = self.options.driver_binding;
        let mut wait = driver.wait(timeout);
        // A claim allocated before this binding (its pod's earlier attempt) times out
        // at its own allocation time plus the timeout: the first look past that ends
        // the wait, if it comes first (upstream's `isPodReadyForBinding`).
        let start = self.clock.as_secs_f64();
        let expiry = (dynamic_resources::bound_claims(&state).iter())
            .filter(|c| c.binding_readiness() != Readiness::Ready)
            .filter_map(|c| c.allocated_at())
            .min()
            .map(|at| at.saturating_add(timeout) as f64);
        if let Some(expiry) = expiry {
            let poll = BINDING_POLL_INTERVAL_SECONDS as f64;
            let looks = ((expiry - start) / poll).floor().max(-1.0) + 1.0;
            wait = wait.min(Duration::from_secs_f64(looks * poll));
        }
        if let Some((after, answer)) = driver.answer() {
            let claims = (dynamic_resources::bound_claims(&state).iter())
                .map(|c| c.key())
                .collect();
            let at = self.clock.saturating_add(Duration::from_secs(after));
            self.push(at, Event::DriverAnswers { claims, answer });
        }
        self.push(
            self.clock.saturating_add(wait),
            Event::BindingConditionsDue {
                instance,
                pod,
                state,
                queued,
                by_look: wait.subsec_nanos() == 0
                    && (wait.as_secs()).is_multiple_of(BINDING_POLL_INTERVAL_SECONDS as u64),
            },
        );
    }

    /// The simulated drivers set the conditions of the devices of these claims.
    pub(super) fn driver_answers(&mut self, claims: &[ClaimKey], answer: Answer) {
        let changes = self.api.claims.answer_binding_conditions(claims, answer);
        self.publish_claims(changes);
    }

    /// PreBind's settling look at the claims (upstream's `isPodReadyForBinding`, claims
    /// in order): a failure condition fails the binding, a claim still pending has timed
    /// out; otherwise the pod is bound.
    pub(super) fn finish_binding_conditions(
        &mut self,
        instance: usize,
        pod: Arc<Pod>,
        mut state: Box<CycleState>,
        popped: QueuedPod,
        by_look: bool,
    ) {
        let Some(index) = self.records.index(&pod.uid) else {
            tracing::error!(pod = %pod.key(), "a bind for a pod the simulation never created");
            return;
        };
        let waited = (self.binding_conditions_met(&state, by_look))
            .map_err(|e| format!("running PreBind plugin {:?}: {e}", dynamic_resources::NAME));
        let mut binder = ApiBinder {
            api: &mut self.api,
            check: Ok(()),
            refused: None,
            claims_written: Vec::new(),
        };
        let scheduler = &mut self.instances[instance].scheduler;
        let bound = scheduler.complete_bind(&pod, &mut state, &mut binder, waited);
        let outcome = BindOutcome {
            bound,
            refused: binder.refused.take(),
            claims_written: std::mem::take(&mut binder.claims_written),
            wrote_claims: true,
        };
        self.after_bind(instance, index, pod, popped, outcome);
    }

    /// Whether the claims PreBind wrote are ready for binding now, as the API holds them;
    /// the error upstream's PreBind returns if not.
    fn binding_conditions_met(&self, state: &CycleState, by_look: bool) -> Result<(), String> {
        for written in dynamic_resources::bound_claims(state) {
            let Some(claim) = self.api.claims.get(written.key()) else {
                return Err(format!(
                    "resourceclaims.resource.k8s.io {:?} not found",
                    &*written.name
                ));
            };
            match claim.binding_readiness() {
                Readiness::Ready => {}
                Readiness::Failed(message) => return Err(message),
                // Still pending at the end. A look ended the wait (the timeout a whole
                // number of five-second periods, or an older claim's timeout passed):
                // it found the claim past its timeout (what the recordings show first);
                // otherwise the wait's context ran out.
                Readiness::Pending if by_look => {
                    return Err(format!("device binding timeout: claim={}", claim.name));
                }
                Readiness::Pending => {
                    return Err("device binding timeout: context deadline exceeded".to_string());
                }
            }
        }
        Ok(())
    }
}
