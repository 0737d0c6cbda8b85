//! API objects other than nodes and pods that plugins read: namespaces (for namespace
//! selectors), services (for the default topology spread selector), and the storage
//! objects (for the volume plugins).

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::decode::{Namespace, Service};
use gantry_api::{
    CsiNode, LabelSelector, Labels, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass, Sym,
};
use gantry_cache::PvcKey;

#[derive(Debug, Clone, Default)]
pub struct ApiObjects {
    namespaces: HashMap<Sym, Labels, RandomState>,
    services: Vec<Service>,
    storage: Arc<StorageObjects>,
}

/// Claims, volumes, storage classes and CSINodes, indexed by name. Shared behind an `Arc` so
/// that a plugin whose Filter needs lookups can keep it in its cycle state.
#[derive(Debug, Default)]
pub struct StorageObjects {
    pvcs: HashMap<PvcKey, PersistentVolumeClaim, RandomState>,
    pvs: HashMap<Sym, PersistentVolume, RandomState>,
    /// PV names in input order: upstream lists a class's volumes from an informer cache,
    /// whose order is arbitrary; a fixed order keeps ties deterministic.
    pv_order: Vec<Sym>,
    classes: HashMap<Sym, StorageClass, RandomState>,
    csi_nodes: HashMap<Sym, CsiNode, RandomState>,
}

impl StorageObjects {
    pub fn pvc(&self, namespace: Sym, name: Sym) -> Option<&PersistentVolumeClaim> {
        self.pvcs.get(&PvcKey {
            namespace,
            claim: name,
        })
    }

    pub fn pv(&self, name: Sym) -> Option<&PersistentVolume> {
        self.pvs.get(&name)
    }

    pub fn storage_class(&self, name: Sym) -> Option<&StorageClass> {
        self.classes.get(&name)
    }

    /// The CSINode of the named node.
    pub fn csi_node(&self, node: Sym) -> Option<&CsiNode> {
        self.csi_nodes.get(&node)
    }

    /// The volumes of a class (`None`: no class), in the order they were given.
    pub fn pvs_of_class(&self, class: Option<Sym>) -> impl Iterator<Item = &PersistentVolume> {
        self.pv_order
            .iter()
            .filter_map(|name| self.pvs.get(name))
            .filter(move |pv| pv.storage_class == class)
    }
}

impl ApiObjects {
    pub fn new(namespaces: &[Namespace], services: &[Service]) -> ApiObjects {
        ApiObjects {
            namespaces: namespaces
                .iter()
                .map(|n| (n.name, n.labels.clone()))
                .collect(),
            services: services.to_vec(),
            storage: Arc::default(),
        }
    }

    /// Replaces the storage objects (later objects of the same name win).
    pub fn set_storage(
        &mut self,
        pvs: &[PersistentVolume],
        pvcs: &[PersistentVolumeClaim],
        classes: &[StorageClass],
        csi_nodes: &[CsiNode],
    ) {
        let mut pv_order: Vec<Sym> = pvs.iter().map(|pv| pv.name).collect();
        let mut seen = std::collections::HashSet::<Sym, RandomState>::default();
        pv_order.retain(|name| seen.insert(*name));
        self.storage = Arc::new(StorageObjects {
            pvcs: pvcs
                .iter()
                .map(|c| {
                    let key = PvcKey {
                        namespace: c.namespace,
                        claim: c.name,
                    };
                    (key, c.clone())
                })
                .collect(),
            pvs: pvs.iter().map(|pv| (pv.name, pv.clone())).collect(),
            pv_order,
            classes: classes.iter().map(|c| (c.name, c.clone())).collect(),
            csi_nodes: csi_nodes.iter().map(|c| (c.node_name, c.clone())).collect(),
        });
    }

    pub fn storage(&self) -> &Arc<StorageObjects> {
        &self.storage
    }

    /// The namespace's labels (empty for a namespace never seen).
    pub fn namespace_labels(&self, namespace: Sym) -> &Labels {
        static EMPTY: std::sync::LazyLock<Labels> = std::sync::LazyLock::new(Labels::default);
        self.namespaces.get(&namespace).unwrap_or(&EMPTY)
    }

    /// Upstream's `helper.DefaultSelector`: the selectors of the services in the pod's
    /// namespace that select it, merged. `None` when no service selects the pod.
    pub fn default_selector(&self, pod: &Pod) -> Option<LabelSelector> {
        let mut merged = LabelSelector::default();
        let mut any = false;
        for service in &self.services {
            if service.namespace == pod.namespace
                && !service.selector.is_empty()
                && service.selector.matches(&pod.labels)
            {
                any = true;
                merged
                    .requirements
                    .extend(service.selector.requirements.iter().cloned());
            }
        }
        any.then_some(merged)
    }
}
