//! A gang's binding cycles when instances share the cluster: all members bound together or
//! none. Each member's PreBind runs first; then the binder takes every member's fences at
//! once and the loop re-checks all the placements together (and that the gang's quorum is
//! bound with them); only then are the bindings posted, one after another. Another
//! instance binding onto those nodes waits at their fences meanwhile, so none can take a
//! member's room between two of its bindings.

use std::sync::Arc;
use std::time::Instant;

use gantry_api::Pod;
use gantry_scheduler::BindingCycle;

use super::{ApiWriter, AskLoop, BindDone, BindFailure, Slot};
use crate::Input;

impl ApiWriter {
    /// Binds the gang's members (`cycles`, in the order they were decided) behind the
    /// union of their fences; each member's outcome goes back to the loop as its own
    /// bind's would.
    pub fn bind_gang(&self, mut cycles: Vec<BindingCycle>, fences: Vec<String>) {
        let writer = self.clone();
        let versions: Vec<Option<String>> = (cycles.iter())
            .map(|c| self.versions.of(&c.pod().uid))
            .collect();
        self.runtime.spawn(async move {
            let Some(mut slot) = Slot::take(&writer.permits).await else {
                return;
            };
            let start = Instant::now();
            let results = writer.run_gang_bind(&mut cycles, &fences, &mut slot).await;
            let took = start.elapsed();
            for ((cycle, result), version) in cycles.into_iter().zip(results).zip(versions) {
                writer.metrics.bind(result.is_ok());
                if result.is_ok() {
                    writer.scheduled(cycle.pod(), cycle.node(), version);
                }
                let done = BindDone {
                    cycle,
                    result,
                    took,
                };
                let _ = writer.inputs.send(Input::BindDone(Box::new(done)));
            }
        });
    }

    /// Each member's outcome. A refusal before the first binding is posted refuses every
    /// member (nothing is bound); a binding refused after others were posted (the API
    /// failed, the pod was deleted) fails that member and the ones after it, and is said
    /// once.
    async fn run_gang_bind(
        &self,
        cycles: &mut [BindingCycle],
        fence_names: &[String],
        slot: &mut Slot,
    ) -> Vec<Result<(), BindFailure>> {
        let members = cycles.len();
        let all_fail = |failure: BindFailure| (0..members).map(|_| Err(failure.clone())).collect();
        for cycle in cycles.iter_mut() {
            if let Err(failure) = self.pre_bind(cycle).await {
                let message = format!(
                    "the gang's member {}: {}",
                    cycle.pod().key(),
                    failure.message
                );
                return all_fail(BindFailure { message, ..failure });
            }
        }
        let pods: Vec<Arc<Pod>> = cycles.iter().map(|c| c.pod().clone()).collect();
        let last = pods.last().expect("a gang has members");
        // The next binder waits to see the last member bound: the watch delivers the
        // bindings in the order they were written, so the others are seen before it.
        let asker = AskLoop {
            inputs: self.inputs.clone(),
            pods: pods.clone(),
        };
        let held = match self.take_fences(fence_names, &last.uid, &asker).await {
            Ok(held) => held,
            // The loop's check names the member that no longer fits.
            Err(failure) => return all_fail(failure),
        };
        let mut results = Vec::with_capacity(cycles.len());
        for cycle in cycles.iter() {
            if let Some(Err(failure)) = results.last() {
                let failure: &BindFailure = failure;
                results.push(Err(failure.clone()));
                continue;
            }
            results.push(self.write_binding(cycle, held.as_ref(), slot).await);
        }
        let first_failed = results.iter().position(Result::is_err);
        match first_failed {
            Some(0) => {
                if let (Some(fences), Some(held)) = (&self.fences, held) {
                    fences.release_failed(held).await;
                }
            }
            Some(at) => tracing::error!(
                gang = %pods[0].scheduling_group.map_or("", |g| g.as_str()),
                bound = at,
                of = pods.len(),
                "a gang's binding failed after some of its members were bound; the rest retry"
            ),
            None => {}
        }
        results
    }
}
