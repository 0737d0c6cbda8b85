//! API objects other than nodes and pods that plugins read: namespaces (for namespace
//! selectors), services and the pods' controllers (for the default topology spread
//! selector), PodDisruptionBudgets (for preemption), and the storage objects (for the
//! volume plugins).

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::decode::{ClusterObjects, ControllerKind, Namespace, PodController, Service};
use gantry_api::labels::Requirement;
use gantry_api::{
    CsiNode, LabelSelector, Labels, PersistentVolume, PersistentVolumeClaim, Pod,
    PodDisruptionBudget, StorageClass, Sym, Volume,
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
    /// ReplicationControllers, ReplicaSets and StatefulSets by kind, namespace and name:
    /// their selectors (`None`: they have none).
    controllers: HashMap<(ControllerKind, Sym, Sym), Option<LabelSelector>, RandomState>,
    storage: Arc<StorageObjects>,
    storage_capacities: Arc<crate::StorageCapacities>,
    disruption_budgets: Arc<[PodDisruptionBudget]>,
    /// The PodGroups and their members, as the scheduler's cache holds them (shared with
    /// it: [`ApiObjects::share_pod_groups`]).
    pod_groups: gantry_cache::SharedPodGroups,
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

    /// The claims the pod's volumes use, ephemeral volumes' included, in volume order:
    /// each volume with its claim in the pod's namespace, `None` where there is none (a
    /// name never interned names none). VolumeBinding and NodeVolumeLimits read these.
    pub fn claims_of<'a>(
        &'a self,
        pod: &'a Pod,
    ) -> impl Iterator<Item = (&'a Volume, Option<&'a PersistentVolumeClaim>)> + 'a {
        pod.volumes.iter().filter_map(move |v| {
            let name = v.claim_name.as_deref()?;
            Some((v, Sym::get(name).and_then(|n| self.pvc(pod.namespace, n))))
        })
    }

    /// As [`Self::claims_of`], for `persistentVolumeClaim` volumes only, by claim name:
    /// what VolumeZone and VolumeRestrictions read (upstream's leave ephemeral volumes
    /// out).
    pub fn persistent_claims_of<'a>(
        &'a self,
        pod: &'a Pod,
    ) -> impl Iterator<Item = (&'a str, Option<&'a PersistentVolumeClaim>)> + 'a {
        self.claims_of(pod)
            .filter(|(v, _)| !v.ephemeral)
            .map(|(v, claim)| (v.claim_name.as_deref().unwrap_or_default(), claim))
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
    /// Reads the PodGroups from `groups` (the cache's) from now on.
    pub fn share_pod_groups(&mut self, groups: gantry_cache::SharedPodGroups) {
        self.pod_groups = groups;
    }

    pub fn pod_groups(&self) -> &gantry_cache::SharedPodGroups {
        &self.pod_groups
    }

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
        objects.set_storage_capacities(&cluster.csi_drivers, &cluster.storage_capacities);
        objects.disruption_budgets = cluster.pdbs.iter().cloned().collect();
        objects.set_controllers(&cluster.controllers);
        objects
    }

    /// Replaces the ReplicationControllers, ReplicaSets and StatefulSets (a later one of
    /// the same kind and name wins).
    pub fn set_controllers(&mut self, controllers: &[PodController]) {
        self.controllers = controllers
            .iter()
            .map(|c| ((c.kind, c.namespace, c.name), c.selector.clone()))
            .collect();
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

    /// Replaces the CSIDrivers and CSIStorageCapacities.
    pub fn set_storage_capacities(
        &mut self,
        drivers: &[gantry_api::CsiDriver],
        capacities: &[gantry_api::StorageCapacity],
    ) {
        self.storage_capacities = Arc::new(crate::StorageCapacities::new(drivers, capacities));
    }

    pub fn storage_capacities(&self) -> &Arc<crate::StorageCapacities> {
        &self.storage_capacities
    }

    /// The namespace's labels (empty for a namespace never seen).
    pub fn namespace_labels(&self, namespace: Sym) -> &Arc<Labels> {
        static EMPTY: std::sync::LazyLock<Arc<Labels>> =
            std::sync::LazyLock::new(|| Arc::new(Labels::default()));
        self.namespaces.get(&namespace).unwrap_or(&EMPTY)
    }

    /// Upstream's `helper.DefaultSelector`: the selectors of the services in the pod's
    /// namespace that select it, merged, and the selector of the ReplicationController,
    /// ReplicaSet or StatefulSet that controls it (found by the owner reference's name,
    /// whether or not it selects the pod). `None` when that leaves nothing to select by.
    pub fn default_selector(&self, pod: &Pod) -> Option<LabelSelector> {
        // Services and a ReplicationController give label maps, merged key by key (a
        // later value wins, as `labels.Merge`); a set's requirements are added after.
        let mut merged: Vec<Requirement> = Vec::new();
        let mut merge = |selector: &LabelSelector| {
            for requirement in &selector.requirements {
                match merged.iter_mut().find(|r| r.key == requirement.key) {
                    Some(existing) => *existing = requirement.clone(),
                    None => merged.push(requirement.clone()),
                }
            }
        };
        // A service without a selector selects nothing; one with an empty selector
        // selects every pod and adds nothing.
        for service in &self.services {
            if service.namespace == pod.namespace && service.selector.matches(&pod.labels) {
                merge(&service.selector);
            }
        }
        let owner = pod.controller.as_deref();
        let controller = owner.and_then(|owner| {
            let kind = ControllerKind::of_owner(owner)?;
            let selector = self
                .controllers
                .get(&(kind, pod.namespace, Sym::get(&owner.name)?))?;
            Some((kind, selector.as_ref()?))
        });
        match controller {
            Some((ControllerKind::ReplicationController, selector)) => merge(selector),
            Some((ControllerKind::ReplicaSet | ControllerKind::StatefulSet, selector)) => {
                merged.extend(selector.requirements.iter().cloned());
            }
            None => {}
        }
        (!merged.is_empty()).then_some(LabelSelector {
            requirements: merged,
        })
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

/// Upstream's `ephemeral.VolumeIsForPod`: an ephemeral volume's claim must have been
/// created for the pod (the pod controls it); a claim of that name made otherwise is not
/// the pod's.
pub fn ephemeral_claim_is_for_pod(claim: &PersistentVolumeClaim, pod: &Pod) -> Result<(), String> {
    if claim.namespace == pod.namespace && claim.controller_uid.as_deref() == Some(&*pod.uid) {
        return Ok(());
    }
    Err(format!(
        "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
        claim.namespace, claim.name, pod.namespace, pod.name
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

    /// The controllers and services of one namespace, read from manifests as `kubectl`
    /// prints them, and the default selector each pod gets from them.
    fn default_selectors(pods: &str) -> Vec<Option<Vec<Requirement>>> {
        let objects = r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs1, namespace: default}
spec:
  selector: {matchExpressions: [{key: foo, operator: Exists}]}
  template: {metadata: {labels: {foo: tar}}, spec: {containers: [{name: c, image: i}]}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: i}]}}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: old, namespace: default}
spec:
  selector: {app: legacy, tier: back}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {selector: {app: web, tier: front}}
---
apiVersion: v1
kind: Service
metadata: {name: elsewhere, namespace: other}
spec: {selector: {app: db}}
---
"#;
        let cluster = ClusterObjects::decode(&format!("{objects}{pods}"), "cluster.yaml").unwrap();
        assert_eq!(cluster.controllers.len(), 3);
        let objects = ApiObjects::from_cluster(&cluster);
        cluster
            .pods
            .iter()
            .map(|pod| objects.default_selector(pod).map(|s| s.requirements))
            .collect()
    }

    fn owned_pod(labels: &str, api_version: &str, kind: &str, owner: &str) -> String {
        let name = format!("p-{owner}-{}-{kind}", api_version.replace('/', "-")).to_lowercase();
        format!(
            "kind: Pod\napiVersion: v1\nmetadata:\n  name: {name}\n  namespace: default\n  \
             labels: {labels}\n  ownerReferences:\n  - {{apiVersion: {api_version}, kind: {kind}, \
             name: {owner}, uid: u, controller: true}}\nspec: {{containers: [{{name: c}}]}}\n---\n"
        )
    }

    fn is(key: &str, value: &str) -> Requirement {
        LabelSelector::from_pairs([(Sym::new(key), Sym::new(value))]).requirements[0].clone()
    }

    #[test]
    fn a_controller_s_selector_joins_the_services_in_the_default_selector() {
        let exists_foo = Requirement {
            key: Sym::new("foo"),
            op: gantry_api::labels::SelectorOp::Exists,
            values: Default::default(),
        };
        let pods = [
            // Upstream's "system default constraints and a replicaset": the ReplicaSet's
            // selector, though no service selects the pod.
            owned_pod("{foo: tar, baz: sup}", "apps/v1", "ReplicaSet", "rs1"),
            // "... a replicaset that doesn't match": the owner names another one.
            owned_pod("{foo: bar, baz: sup}", "apps/v1", "ReplicaSet", "rs2"),
            // A ReplicaSet of another group is not one (upstream compares the GVK).
            owned_pod("{foo: tar}", "extensions/v1beta1", "ReplicaSet", "rs1"),
            // A StatefulSet's requirements follow the services' (none here: the one
            // selecting app=db is in another namespace).
            owned_pod("{app: db}", "apps/v1", "StatefulSet", "db"),
            // Services' maps merge, then a set's requirements are added.
            owned_pod(
                "{app: web, tier: front, foo: x}",
                "apps/v1",
                "ReplicaSet",
                "rs1",
            ),
            // A ReplicationController's map merges over the services' (its value wins).
            owned_pod(
                "{app: web, tier: front}",
                "v1",
                "ReplicationController",
                "old",
            ),
            // Found by name, whether or not it selects the pod; a Job adds nothing.
            owned_pod("{app: web, tier: front}", "batch/v1", "Job", "rs1"),
        ];
        let pods: Vec<String> = (pods.iter().enumerate())
            .map(|(i, pod)| pod.replace("name: p-", &format!("name: p{i}-")))
            .collect();
        let got = default_selectors(&pods.concat());
        assert_eq!(
            got,
            vec![
                Some(vec![exists_foo.clone()]),
                None,
                None,
                Some(vec![is("app", "db")]),
                Some(vec![is("app", "web"), is("tier", "front"), exists_foo]),
                Some(vec![is("app", "legacy"), is("tier", "back")]),
                Some(vec![is("app", "web"), is("tier", "front")]),
            ]
        );
    }
}
