//! Simulation: a cluster loaded from manifests, driven through the real scheduler with an
//! in-process API standing in for Kubernetes.

mod api;
pub mod bench;
mod sequential;

pub use api::SimulatedApi;
pub use sequential::{Placement, SequentialRun, run_sequential};
