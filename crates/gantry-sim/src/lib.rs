//! Simulation: a cluster loaded from manifests, driven through the real scheduler with an
//! in-process API standing in for Kubernetes, on a virtual clock.
//!
//! It owns the simulated API, the discrete-event loop, scenarios and benchmarks. It depends
//! on the crates below the scheduler and on `gantry-scheduler`; never on `gantry-kube`,
//! `gantry-whatif` or the command line.

pub mod alloc_counter;
mod api;
mod api_client;
pub mod bench;
mod claim_shares;
mod claims;
pub mod dra_bench;
pub mod driver_binding;
pub mod gang_bench;
mod gpu_report;
mod instance;
mod latency;
pub mod multi_bench;
mod records;
pub mod replay;
pub mod replay_bench;
mod replay_decode;
mod replay_taints;
pub mod scenario;
mod simulation;
pub mod step_outcomes;
mod storage;

pub use api::{BindRefusal, ClusterTotals, SimulatedApi};
pub use gpu_report::GpuReport;
pub use latency::BindLatency;
pub use records::{
    DuplicatePod, GroupCondition, GroupRecord, NodeName, Placement, PodHistory, PodName, PodStatus,
};
pub use simulation::{
    GATED, GUARD_BASE_STEPS, GUARD_STEPS_PER_EVENT, MAX_FAILED_ATTEMPTS, MAX_SCHEDULERS, Sample,
    SimError, SimEvent, SimOptions, Simulation, Summary,
};
pub use storage::StorageChange;
