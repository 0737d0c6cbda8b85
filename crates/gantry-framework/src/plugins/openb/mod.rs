//! The FGD simulator's six scoring policies (hkust-adsl/kubernetes-scheduler-simulator,
//! the artifact of "Beware of Fragmentation", USENIX ATC '23) on its node model: Random,
//! DotProduct, GpuClustering, GpuPacking, BestFit and FGD (fragmentation gradient
//! descent). `model` and `policy` hold the formulas as pure functions; `plugins` makes
//! them score plugins on HAMi's card model, and `gantry sweep` runs the same functions
//! over a compact cluster state.

pub mod model;
pub mod plugins;
pub mod policy;
#[cfg(test)]
mod tests;

pub use model::{Frag, NodeRes, PodRes, TypicalPods};
pub use plugins::{FgdArgs, OpenbScore};
pub use policy::{Affinity, CardChoice, Policy};
