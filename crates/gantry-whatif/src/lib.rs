//! What-if questions on a forkable snapshot of the cluster: how many nodes of a template
//! pending pods need, whether a node can be drained, whether a gang fits, and what stands
//! in a pending pod's way. The snapshot forks (nested to any depth), reverts and commits,
//! and the scheduler's own plugins read every fork through `ClusterState`.
//!
//! It owns ClusterSnapshot and the questions asked of it. It depends on `gantry-api`,
//! `gantry-cache`, `gantry-framework` and `gantry-scheduler` (whose runners it reuses);
//! never on `gantry-sim`, `gantry-kube` or the command line.

mod basic;
pub mod bench;
pub mod counterfactual;
mod delta;
pub mod drain;
pub mod estimator;
pub mod gang;
mod node_index;
mod snapshot;
mod store;

pub use basic::BasicStore;
pub use delta::DeltaStore;
pub use snapshot::{ClusterSnapshot, Destinations, SchedulingError, with_dynamic_resources};
pub use store::{DraCatalog, SnapshotStore, StoreError, StoreKind};
