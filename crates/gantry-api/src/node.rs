//! The node as the scheduler sees it.

use std::sync::Arc;

use crate::gpu::NodeDevices;
use crate::{Labels, Resources, Sym};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: Sym,
    /// Empty when the taint has no value.
    pub value: Sym,
    pub effect: TaintEffect,
}

/// An image present on a node, with every name it is known by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerImage {
    pub names: Vec<Sym>,
    pub size_bytes: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: Sym,
    pub uid: Arc<str>,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub capacity: Resources,
    pub allocatable: Resources,
    pub images: Vec<ContainerImage>,
    /// The Ready condition is True. Upstream's scheduler filters not-ready nodes through
    /// the taints the node lifecycle controller adds, not through this flag: it is kept
    /// for reports.
    pub ready: bool,
    pub annotations: Arc<[(Arc<str>, Arc<str>)]>,
    /// The cards HAMi registered on the node (`hami.io/node-nvidia-register`), if any.
    pub gpus: Option<Arc<NodeDevices>>,
    /// The known features of `status.declaredFeatures` (NodeDeclaredFeatures).
    pub declared_features: crate::node_features::NodeFeatures,
}

impl Node {
    /// A ready node with no labels, taints or images: the start of a builder chain.
    pub fn new(name: &str, allocatable: Resources) -> Node {
        Node {
            name: Sym::new(name),
            uid: Arc::from(name),
            labels: Labels::default(),
            taints: Vec::new(),
            unschedulable: false,
            capacity: allocatable.clone(),
            allocatable,
            images: Vec::new(),
            ready: true,
            annotations: Arc::from([]),
            gpus: None,
            declared_features: Default::default(),
        }
    }

    /// The value of the annotation `key`, if the node has it.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        find_annotation(&self.annotations, key)
    }

    pub fn with_labels<'a>(mut self, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Node {
        let existing: Vec<(Sym, Sym)> = self.labels.iter().collect();
        let added = pairs.into_iter().map(|(k, v)| (Sym::new(k), Sym::new(v)));
        // Later pairs win: put them first, since Labels keeps the first of equal keys.
        self.labels = Labels::new(added.chain(existing));
        self
    }

    pub fn with_taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Node {
        self.taints.push(Taint {
            key: Sym::new(key),
            value: Sym::new(value),
            effect,
        });
        self
    }

    pub fn with_image(mut self, name: &str, size_bytes: i64) -> Node {
        self.images.push(ContainerImage {
            names: vec![Sym::new(name)],
            size_bytes,
        });
        self
    }

    pub fn unschedulable(mut self) -> Node {
        self.unschedulable = true;
        self
    }
}

/// One annotation of an object: key and value.
pub type Annotation = (Arc<str>, Arc<str>);

/// Looks an annotation up in an object's (short) list of them.
pub(crate) fn find_annotation<'a>(
    annotations: &'a [(Arc<str>, Arc<str>)],
    key: &str,
) -> Option<&'a str> {
    annotations
        .iter()
        .find(|(k, _)| &**k == key)
        .map(|(_, v)| &**v)
}
