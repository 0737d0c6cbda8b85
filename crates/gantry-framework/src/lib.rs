//! The scheduling framework: extension points, cycle state, statuses, profiles, and
//! kube-scheduler's default plugins (one file each under `plugins/`).
//!
//! It owns what a plugin sees and decides. It depends on `gantry-api` and `gantry-cache`
//! only: plugins never reach the queue, the binder or an API client.

pub mod config;
mod cycle_state;
pub mod events;
pub mod handle;
mod interface;
mod node_infos;
mod objects;
pub mod plugins;
mod profile;
pub mod signature;
mod status;
mod storage_capacity;

pub use cycle_state::{CycleState, StateData, StateMark};
pub use events::{ActionType, ClusterEvent, EventResource};
pub use interface::*;
pub use node_infos::NodeInfos;
pub use objects::{ApiObjects, StorageObjects};
pub use profile::{Profile, QueueSort, WeightedScorePlugin};
pub use signature::Signature;
pub use status::{Code, Status};
pub use storage_capacity::StorageCapacities;
