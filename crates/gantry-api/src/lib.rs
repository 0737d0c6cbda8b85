//! Gantry's object model: the parts of Kubernetes nodes and pods a scheduler reads, in
//! compact form (interned strings, fixed resource vectors), and decoding of real Kubernetes
//! JSON/YAML into it.
//!
//! It owns the types every other crate shares, and depends on no Gantry crate: it is the
//! bottom of the stack.

pub mod coscheduling;
pub mod decode;
pub mod dra;
pub mod dra_binding;
pub mod dra_capacity;
pub mod dra_counters;
mod dra_decode;
pub mod dra_device_lists;
pub mod dra_extended;
mod dra_nodes;
pub mod dra_taint_rules;
pub mod dra_taints;
pub mod gpu;
mod intern;
pub mod labels;
mod node;
pub mod node_features;
mod pod;
pub mod pod_group;
pub mod policy;
pub mod quantity;
pub mod release;
pub mod resources;
pub mod rng;
pub mod small_copy;
pub mod storage;
pub mod trace;

pub use intern::Sym;
pub use labels::{LabelSelector, Labels, NodeSelector, NodeSelectorTerm};
pub use node::{Annotation, ContainerImage, Node, Taint, TaintEffect};
pub use pod::*;
pub use pod_group::{GroupConstraints, GroupPolicy, GroupPreemption, PodGroup};
pub use policy::PodDisruptionBudget;
pub use quantity::{Quantity, QuantityFormat};
pub use release::{Gate, LeftOutNodes, Release};
pub use resources::{ResourceName, Resources};
pub use storage::{
    AccessMode, ClaimPhase, ClaimRef, CsiDriver, CsiNode, CsiNodeDriver, PersistentVolume,
    PersistentVolumeClaim, StorageCapacity, StorageClass, VolumeBindingMode,
};
