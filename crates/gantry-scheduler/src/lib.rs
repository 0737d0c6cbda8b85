//! Scheduling and binding cycles, preemption, and why pods did not fit.
//!
//! It owns the queue, the cycles, preemption and the messages of a failed fit. It depends
//! on `gantry-api`, `gantry-cache` and `gantry-framework`; the API it binds through is a
//! trait its callers implement, so it never depends on `gantry-sim` or `gantry-kube`.

mod attempt;
mod batch;
mod binding;
pub mod explain;
mod fit_error;
mod framework_runner;
mod group_preemption;
mod host;
mod last_cycle;
pub mod metrics;
mod nominations;
mod own_nodes;
pub mod placement;
mod placement_check;
mod pod_group_cycle;
mod preemption;
pub mod queue;
mod rng;
mod scheduler;
pub mod shard;
mod unschedulable_pods;
mod verdict_memo;
mod waiting;

pub use binding::BindingCycle;
pub use fit_error::FitError;
pub use group_preemption::NOT_SUPPORTED_WITH_CONSTRAINTS;
pub use placement_check::check_placement;
pub use pod_group_cycle::{GroupAttempt, GroupOutcome, NO_PLACEMENTS, POD_GROUP_UNSCHEDULABLE};
// The extension-point runners, for anything that runs the plugins on a cluster view of its
// own (the what-if snapshot).
pub use binding::{run_pre_bind, unreserve};
pub use framework_runner::{PluginTimer, PodFilters, run_annotations, run_pre_filter, run_reserve};
pub use host::num_feasible_nodes_to_find;
pub use last_cycle::{LastCycle, OtherNode};
pub use own_nodes::OTHER_SHARD;
pub use preemption::{NO_VICTIMS, NOT_HELPFUL, POLICY_NEVER};
pub use rng::Rng;
pub use scheduler::{Attempt, BindFailure, Binder, Scheduler};
pub use waiting::{MAX_PERMIT_WAIT, PermitWait, PermitWaiters};
