//! `gantry sweep`: the experiments of the FGD paper's artifact (hkust-adsl/
//! kubernetes-scheduler-simulator) on Gantry's implementation of its six policies. A trace
//! (openb node and pod CSVs) is imported ([`trace`]), each (trace, policy, seed) is
//! simulated on a compact node state with the policies of `gantry_framework::plugins::openb`
//! ([`engine`]), and the per-experiment lines are merged into the published curves
//! ([`analysis`]), which shards write and merges join byte for byte ([`output`]).
//! docs/upstream-rules.md §18 lists the rules and where each comes from.

pub mod analysis;
pub mod engine;
pub mod manifests;
pub mod output;
pub mod report;
pub mod sweep;
pub mod trace;

pub use engine::{Line, Workload};
pub use sweep::Sweep;
pub use trace::{NodeTrace, PodTrace, TraceError};
