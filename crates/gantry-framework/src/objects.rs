//! API objects other than nodes and pods that plugins read: namespaces (for namespace
//! selectors), services (for the default topology spread selector), PodDisruptionBudgets
//! (for preemption), and the storage objects (for the volume plugins).

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::decode::{ClusterObjects, Namespace, Service};
use gantry_api::{
    CsiNode, LabelSelector, Labels, PersistentVolume, PersistentVolumeClaim, Pod,
    PodDisruptionBudget, StorageClass, Sym,
};
use gantry_cache::PvcKey;

/// The label the API server puts on every namespace, holding its name (so that selectors
/// can pick namespaces by name).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

#[derive(Debug, Clone, Default)]
pub struct ApiObjects {
    /// Labels by namespace, shared so that a plugin can keep them in its cycle state.
    namespaces: HashMap<Sym, Arc<Labels>, RandomState>,
    services: Vec<Service>,
    storage: Arc<StorageObjects>,
    disruption_budgets: Arc<[PodDisruptionBudget]>,
}

/// Claims, volumes, storage classes and CSINodes, indexed by name. Shared behind an `Arc` so
/// that a plugin whose Filter needs lookups can keep it in its cycle state.
#[derive(Debug, Default)]
pub struct StorageObjects {
    pvcs: HashMap<PvcKey, PersistentVolumeClaim, RandomState>,
    /// Shared, so that a plugin can keep the volumes it considers for a pod in its cycle
    /// state without copying them.
    pvs: HashMap<Sym, Arc<PersistentVolume>, RandomState>,
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

    pub fn pv(&self, name: Sym) -> Option<&Arc<PersistentVolume>> {
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
    pub fn pvs_of_class(&self, class: Option<Sym>) -> impl Iterator<Item = &Arc<PersistentVolume>> {
        self.pv_order
            .iter()
            .filter_map(|name| self.pvs.get(name))
            .filter(move |pv| pv.storage_class == class)
    }
}

impl ApiObjects {
    pub fn new(namespaces: &[Namespace], services: &[Service]) -> ApiObjects {
        let mut objects = ApiObjects {
            services: services.to_vec(),
            ..ApiObjects::default()
        };
        for namespace in namespaces {
            objects.namespaces.insert(
                namespace.name,
                with_name_label(namespace.name, &namespace.labels),
            );
        }
        objects
    }

    /// Everything the plugins read from decoded objects. Namespaces that hold pods but
    /// were not given exist too (the API server admits no pod into a missing namespace).
    pub fn from_cluster(cluster: &ClusterObjects) -> ApiObjects {
        let mut objects = ApiObjects::new(&cluster.namespaces, &cluster.services);
        for pod in &cluster.pods {
            objects.ensure_namespace(pod.namespace);
        }
        objects.set_storage(
            &cluster.pvs,
            &cluster.pvcs,
            &cluster.storage_classes,
            &cluster.csi_nodes,
        );
        objects.disruption_budgets = cluster.pdbs.iter().cloned().collect();
        objects
    }

    /// Records a namespace a pod lives in, if no object described it: it has only its
    /// name label, as the API server gives every namespace.
    pub fn ensure_namespace(&mut self, namespace: Sym) {
        self.namespaces
            .entry(namespace)
            .or_insert_with(|| with_name_label(namespace, &Labels::default()));
    }

    /// The namespaces whose labels the selector matches (upstream lists the namespace
    /// objects for a term's `namespaceSelector`), in no particular order.
    pub fn namespaces_selected_by<'a>(
        &'a self,
        selector: &'a LabelSelector,
    ) -> impl Iterator<Item = Sym> + 'a {
        self.namespaces
            .iter()
            .filter(|(_, labels)| selector.matches(labels))
            .map(|(name, _)| *name)
    }

    /// The cluster's PodDisruptionBudgets, in input order.
    pub fn disruption_budgets(&self) -> &[PodDisruptionBudget] {
        &self.disruption_budgets
    }

    pub fn set_disruption_budgets(&mut self, budgets: &[PodDisruptionBudget]) {
        self.disruption_budgets = budgets.into();
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
            pvs: pvs
                .iter()
                .map(|pv| (pv.name, Arc::new(pv.clone())))
                .collect(),
            pv_order,
            classes: classes.iter().map(|c| (c.name, c.clone())).collect(),
            csi_nodes: csi_nodes.iter().map(|c| (c.node_name, c.clone())).collect(),
        });
    }

    pub fn storage(&self) -> &Arc<StorageObjects> {
        &self.storage
    }

    /// The namespace's labels (empty for a namespace never seen).
    pub fn namespace_labels(&self, namespace: Sym) -> &Arc<Labels> {
        static EMPTY: std::sync::LazyLock<Arc<Labels>> =
            std::sync::LazyLock::new(|| Arc::new(Labels::default()));
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

/// The namespace's labels with the name label the API server sets added if missing.
fn with_name_label(namespace: Sym, labels: &Labels) -> Arc<Labels> {
    let name_label = Sym::new(NAMESPACE_NAME_LABEL);
    if labels.get(name_label).is_some() {
        return Arc::new(labels.clone());
    }
    Arc::new(Labels::new(
        labels
            .iter()
            .chain(std::iter::once((name_label, namespace))),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_carry_their_name_label_and_pods_namespaces_exist() {
        let text = r#"
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
kind: Pod
metadata: {name: p, namespace: team-b}
spec: {containers: [{name: c}]}
"#;
        let cluster = ClusterObjects::decode(text, "cluster.yaml").unwrap();
        let objects = ApiObjects::from_cluster(&cluster);
        let name = Sym::new(NAMESPACE_NAME_LABEL);
        let (a, b) = (Sym::new("team-a"), Sym::new("team-b"));
        assert_eq!(objects.namespace_labels(a).get(name), Some(a));
        assert_eq!(
            objects.namespace_labels(a).get(Sym::new("team")),
            Some(Sym::new("a"))
        );
        assert_eq!(objects.namespace_labels(b).get(name), Some(b));
        let selected = |selector: LabelSelector| {
            let mut names: Vec<&str> = objects
                .namespaces_selected_by(&selector)
                .map(|n| n.as_str())
                .collect();
            names.sort_unstable();
            names
        };
        let by_name = LabelSelector::from_pairs([(name, b)]);
        assert_eq!(selected(by_name), ["team-b"]);
        let by_team = LabelSelector::from_pairs([(Sym::new("team"), Sym::new("a"))]);
        assert_eq!(selected(by_team), ["team-a"]);
        assert_eq!(selected(LabelSelector::default()), ["team-a", "team-b"]);
    }
}
