//! Scheduling and binding cycles, preemption, and why pods did not fit.

pub mod explain;
mod fit_error;
mod framework_runner;
pub mod metrics;
mod preemption;
pub mod queue;
mod rng;
mod scheduler;

pub use fit_error::FitError;
pub use preemption::{NO_VICTIMS, NOT_HELPFUL, POLICY_NEVER};
pub use rng::Rng;
pub use scheduler::{
    Attempt, BindFailure, Binder, Scheduler, num_feasible_nodes_to_find, select_host,
};
