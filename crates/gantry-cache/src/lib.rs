//! The scheduler cache: NodeInfos stamped with generations from one global counter, kept
//! in a recency-ordered list so that each cycle's snapshot copies only the nodes that
//! changed since the previous one; pods assumed onto nodes before they are bound.

mod affinity_terms;
mod cache;
mod cluster_state;
mod columns;
mod declared_terms;
mod device_usage;
mod domain_counts;
mod dra_state;
mod label_index;
mod node_info;
mod node_tree;
mod pod_selection;
mod snapshot;
pub mod synthetic;

pub use affinity_terms::{AffinityTermCount, AffinityTerms, InternedTerm, TermKind};
pub use cache::{Cache, CacheError};
pub use cluster_state::ClusterState;
pub use columns::{Amount, NodeColumns, NodeFlags};
pub use declared_terms::{DeclaredTerm, DeclaredTerms};
pub use device_usage::{CardUsage, DeviceUsage};
pub use domain_counts::{DomainCounts, PodsPerDomain, SelectionCounts};
pub use dra_state::DraState;
pub use label_index::PodLabelIndex;
pub use node_info::{ImageState, NodeInfo, PvcKey, next_generation};
pub use node_tree::{NodeTree, zone_key};
pub use pod_selection::{NamespaceScope, PodSelection};
pub use snapshot::{Snapshot, SnapshotError, SnapshotUpdate};
