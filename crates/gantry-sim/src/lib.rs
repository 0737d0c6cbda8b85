//! Simulation: a cluster loaded from manifests, driven through the real scheduler with an
//! in-process API standing in for Kubernetes, on a virtual clock.

mod api;
pub mod bench;
pub mod scenario;
mod simulation;

pub use api::SimulatedApi;
pub use simulation::{Placement, Sample, SimEvent, SimOptions, Simulation, Summary};
