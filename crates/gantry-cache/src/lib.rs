//! The scheduler cache: NodeInfos stamped with generations from one global counter, kept
//! in a recency-ordered list so that each cycle's snapshot copies only the nodes that
//! changed since the previous one; pods assumed onto nodes before they are bound.
//!
//! It owns NodeInfos, the cache, snapshots and the DRA store. It depends on `gantry-api`
//! only: never on the framework, the scheduler or a front end.

/// `Clone` field by field, with a `clone_from` that clones each field into the old
/// value's own (reusing its buffers and tables, where a derived `clone_from` drops them and
/// allocates anew), or copies it with the function named after `via`. The fields are named
/// once; both methods destructure the value, so a field left out of the list does not
/// compile.
macro_rules! clone_field_by_field {
    ($type:ident { $($field:ident $(via $copy:path)?),* $(,)? }) => {
        impl Clone for $type {
            fn clone(&self) -> $type {
                let $type { $($field),* } = self;
                $type { $($field: $field.clone()),* }
            }

            fn clone_from(&mut self, source: &$type) {
                let $type { $($field),* } = source;
                $(clone_field_by_field!(@from self.$field, $field $(, $copy)?);)*
            }
        }
    };
    (@from $dst:expr, $src:ident) => {
        $dst.clone_from($src)
    };
    (@from $dst:expr, $src:ident, $copy:path) => {
        $copy(&mut $dst, $src)
    };
}

mod affinity_terms;
mod cache;
mod cluster_state;
mod columns;
mod declared_terms;
mod device_usage;
mod domain_counts;
mod dra_cache;
mod dra_reach;
pub mod dra_shares;
mod dra_state;
mod label_index;
mod node_info;
mod node_tree;
mod pod_groups;
mod pod_selection;
mod snapshot;
pub mod synthetic;

pub use affinity_terms::{AffinityTermCount, AffinityTerms, InternedTerm, TermKind};
pub use cache::{Cache, CacheError};
pub use cluster_state::ClusterState;
pub use columns::{Amount, NodeColumns, NodeFlags};
pub use declared_terms::{DeclaredTerm, DeclaredTerms};
pub use device_usage::{CardSummary, CardUsage, DeviceUsage};
pub use domain_counts::{DomainCounts, PodsPerDomain, SelectionCounts};
pub use dra_cache::DraCache;
pub use dra_state::{AllocatedView, DeviceShares, DeviceUse, DraState};
pub use label_index::PodLabelIndex;
pub use node_info::{ImageState, NodeInfo, PvcKey, next_generation};
pub use node_tree::{NodeTree, zone_key};
pub use pod_groups::{GroupCounts, GroupKey, PodGroupStates, SharedPodGroups, Stage};
pub use pod_selection::{NamespaceScope, PodSelection};
pub use snapshot::{Snapshot, SnapshotError, SnapshotUpdate};
