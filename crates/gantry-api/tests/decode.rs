//! Decoding real `kubectl get -o yaml` output and rejecting malformed input with errors
//! that name the object and the field.

use gantry_api::decode::{ClusterObjects, ControllerKind, DecodeError, PodController};
use gantry_api::{LabelSelector, ResourceName, Sym, TaintEffect, TolerationOp};

const KUBECTL_DUMP: &str = include_str!("fixtures/kubectl-get-nodes-pods.yaml");

fn object_error(text: &str) -> (String, String, String) {
    match ClusterObjects::decode(text, "input.yaml").unwrap_err() {
        DecodeError::Object { error, .. } => (error.object, error.field, error.message),
        other => panic!("expected an object error, got {other}"),
    }
}

#[test]
fn decodes_a_kubectl_list_with_status_and_managed_fields() {
    let objects = ClusterObjects::decode(KUBECTL_DUMP, "dump.yaml").unwrap();
    assert_eq!(objects.nodes.len(), 1);
    assert_eq!(objects.pods.len(), 1);
    assert!(objects.ignored.is_empty(), "{:?}", objects.ignored);
    // The pod's ReplicaSet, read for its selector (the default spread constraints).
    assert_eq!(
        objects.controllers,
        vec![PodController {
            kind: ControllerKind::ReplicaSet,
            namespace: Sym::new("shop"),
            name: Sym::new("web-7d9c6b5f4"),
            selector: Some(LabelSelector::from_pairs([(
                Sym::new("app"),
                Sym::new("web")
            )])),
        }]
    );
    let owner = objects.pods[0].controller.as_deref().unwrap();
    assert_eq!(
        ControllerKind::of_owner(owner),
        Some(ControllerKind::ReplicaSet)
    );

    let node = &objects.nodes[0];
    assert_eq!(node.name, Sym::new("worker-1"));
    assert!(node.ready);
    assert_eq!(node.allocatable.milli_cpu, 3920);
    assert_eq!(node.allocatable.memory, 15_778_024 * 1024);
    assert_eq!(node.allocatable.pods, 58);
    assert_eq!(node.allocatable.ephemeral_storage, 96_143_180_846);
    assert_eq!(
        node.allocatable.get(ResourceName::parse("nvidia.com/gpu")),
        4
    );
    assert_eq!(
        node.allocatable.get(ResourceName::parse("hugepages-2Mi")),
        1 << 30
    );
    assert_eq!(node.taints.len(), 2);
    assert_eq!(node.taints[1].effect, TaintEffect::PreferNoSchedule);
    assert_eq!(node.taints[1].value, Sym::new(""));
    assert_eq!(node.images[0].names.len(), 2);
    assert_eq!(node.images[0].size_bytes, 57_236_178);
    assert_eq!(
        node.labels.get_str("topology.kubernetes.io/zone"),
        Some(Sym::new("eu-west-1a"))
    );

    let pod = &objects.pods[0];
    assert_eq!(pod.key(), "shop/web-7d9c6b5f4-x2x9q");
    assert_eq!(&*pod.uid, "7a1e7c55-0000-1111-2222-333344445555");
    assert_eq!(pod.node_name, Some(Sym::new("worker-1")));
    assert_eq!(pod.priority, 1000);
    // nginx: 250m, memory defaulted from its 256Mi limit; the proxy sidecar adds 100m and
    // 128Mi; the migrate init container runs before the sidecar starts and peaks at 1 cpu.
    assert_eq!(pod.requests().milli_cpu, 1000);
    assert_eq!(pod.requests().memory, (256 + 128) * 1024 * 1024);
    assert_eq!(pod.host_ports().count(), 1);
    assert_eq!(pod.tolerations.len(), 2);
    assert_eq!(pod.tolerations[0].op, TolerationOp::Exists);
    assert_eq!(pod.affinity.pod_anti_affinity.preferred[0].weight, 100);
    // The claim is kept; the service-account token's projected volume weighs in nothing.
    assert_eq!(pod.volumes.len(), 1);
    assert_eq!(pod.volumes[0].claim_name.as_deref(), Some("web-data"));
    assert_eq!(pod.start_time, Some(1_714_723_202));
    assert_eq!(pod.annotations.len(), 1);
    // matchLabelKeys merged: app=web AND pod-template-hash=7d9c6b5f4.
    let spread = &pod.topology_spread_constraints[0];
    assert_eq!(
        spread.label_selector.as_ref().unwrap().requirements.len(),
        2
    );
}

#[test]
fn decodes_multi_document_yaml_and_json() {
    let yaml = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: 2, memory: 1Gi}}\n---\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: 0.5}}}]}\n";
    let objects = ClusterObjects::decode(yaml, "a.yaml").unwrap();
    assert_eq!(
        objects.nodes[0].allocatable.milli_cpu, 2000,
        "bare numbers are quantities"
    );
    assert_eq!(objects.pods[0].requests().milli_cpu, 500);
    assert_eq!(objects.pods[0].key(), "default/p");

    let json = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"j"},"status":{"capacity":{"cpu":"1"}}}"#;
    let objects = ClusterObjects::decode(json, "a.json").unwrap();
    assert_eq!(
        objects.nodes[0].allocatable.milli_cpu, 1000,
        "allocatable defaults to capacity"
    );
}

#[test]
fn malformed_quantity_names_object_and_field() {
    let (object, field, message) = object_error(
        "kind: Pod\nmetadata: {name: web, namespace: shop}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {cpu: 1x}}\n",
    );
    assert_eq!(object, "Pod shop/web");
    assert_eq!(field, "spec.containers[0].resources.requests.cpu");
    assert!(message.contains("1x"), "{message}");
}

/// Only cpu is kept in thousandths: an exbibyte of memory fits in int64 as bytes (the API
/// server takes it), a cpu amount past int64 millicores does not.
#[test]
fn large_quantities_fit_in_their_own_units() {
    let objects = ClusterObjects::decode(
        "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 1Ei, pods: '110'}}\n",
        "node.yaml",
    )
    .unwrap();
    assert_eq!(objects.nodes[0].allocatable.memory, 1 << 60);
    let (_, field, message) = object_error(
        "kind: Pod\nmetadata: {name: web, namespace: shop}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {cpu: 1e16}}\n",
    );
    assert_eq!(field, "spec.containers[0].resources.requests.cpu");
    assert!(message.contains("too large"), "{message}");
}

#[test]
fn wrong_types_and_bad_enums_name_the_field() {
    let (object, field, _) = object_error(
        "kind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: a, effect: Sometimes}]}\n",
    );
    assert_eq!(
        (object.as_str(), field.as_str()),
        ("Node n1", "spec.taints[0].effect")
    );

    let (object, field, _) =
        object_error("kind: Node\nmetadata: {name: n1}\nspec: {unschedulable: maybe}\n");
    assert_eq!(
        (object.as_str(), field.as_str()),
        ("Node n1", "spec.unschedulable")
    );

    let (_, field, _) = object_error(
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions: [{key: gpus, operator: Gt, values: [a]}]\n",
    );
    assert_eq!(
        field,
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values"
    );

    let (_, field, _) = object_error(
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  topologySpreadConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]\n",
    );
    assert_eq!(field, "spec.topologySpreadConstraints[0].maxSkew");

    let (object, field, _) =
        object_error("kind: Pod\nmetadata: {namespace: x}\nspec: {containers: [{name: c}]}\n");
    assert_eq!(
        (object.as_str(), field.as_str()),
        ("Pod (document 1)", "metadata.name")
    );

    let (object, field, _) = object_error("apiVersion: v1\nmetadata: {name: x}\n");
    assert_eq!((object.as_str(), field.as_str()), ("document 1", "kind"));
}

#[test]
fn syntax_errors_name_the_source() {
    let err = ClusterObjects::decode("kind: [unclosed", "broken.yaml").unwrap_err();
    assert!(
        matches!(err, DecodeError::Syntax { ref source_name, .. } if source_name == "broken.yaml")
    );
}

#[test]
fn priority_class_names_resolve_to_values() {
    let mut objects = ClusterObjects::decode(
        "kind: PriorityClass\napiVersion: scheduling.k8s.io/v1\nmetadata: {name: high}\nvalue: 1000\npreemptionPolicy: Never\n---\nkind: Pod\nmetadata: {name: p}\nspec: {priorityClassName: high, containers: [{name: c}]}\n---\nkind: Pod\nmetadata: {name: q}\nspec: {priorityClassName: nope, containers: [{name: c}]}\n",
        "x.yaml",
    )
    .unwrap();
    let err = objects.resolve_priorities().unwrap_err();
    assert_eq!(
        (err.object.as_str(), err.field.as_str()),
        ("Pod default/q", "spec.priorityClassName")
    );
    let mut objects2 = ClusterObjects::decode(
        "kind: PriorityClass\napiVersion: scheduling.k8s.io/v1\nmetadata: {name: high}\nvalue: 1000\npreemptionPolicy: Never\n---\nkind: Pod\nmetadata: {name: p}\nspec: {priorityClassName: high, containers: [{name: c}]}\n",
        "x.yaml",
    )
    .unwrap();
    objects2.resolve_priorities().unwrap();
    assert_eq!(objects2.pods[0].priority, 1000);
    assert_eq!(
        objects2.pods[0].preemption_policy,
        gantry_api::PreemptionPolicy::Never
    );
}

#[test]
fn parity_scenarios_decode() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/parity");
    let mut count = 0;
    for entry in std::fs::read_dir(root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for file in ["cluster.yaml", "pods.yaml"] {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            let objects = ClusterObjects::decode(&text, file).unwrap();
            assert!(
                objects.ignored.is_empty(),
                "{}: {:?}",
                dir.display(),
                objects.ignored
            );
            count += 1;
        }
    }
    assert!(count >= 26);
}

proptest::proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = ClusterObjects::decode(&text, "fuzz.yaml");
    }

    #[test]
    fn mutated_manifests_never_panic(cut in 0usize..4000, insert in "[\\[\\]{}:,\\-'\" a-z0-9\n]{0,6}") {
        let mut text = KUBECTL_DUMP.to_string();
        let at = cut.min(text.len());
        let at = (0..=at).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.insert_str(at, &insert);
        let _ = ClusterObjects::decode(&text, "fuzz.yaml");
    }
}

const STORAGE: &str = r#"
apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-pv-1
  labels: {topology.kubernetes.io/zone: eu-west-1a}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  claimRef: {namespace: shop, name: data-db-0}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [worker-1]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data-db-0
  namespace: shop
  annotations: {volume.beta.kubernetes.io/storage-class: legacy, volume.kubernetes.io/selected-node: worker-1}
spec:
  storageClassName: local
  accessModes: [ReadWriteOncePod]
  resources: {requests: {storage: 1Gi}}
  volumeName: local-pv-1
status: {phase: Bound}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [eu-west-1a, eu-west-1b]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: standard}
provisioner: ebs.csi.aws.com
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: worker-1}
spec:
  drivers:
  - {name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}
  - {name: efs.csi.aws.com, nodeID: i-1}
"#;

#[test]
fn decodes_storage_objects() {
    use gantry_api::storage::{AccessMode, ClaimPhase, VolumeBindingMode};

    let objects = ClusterObjects::decode(STORAGE, "storage.yaml").unwrap();
    assert!(objects.ignored.is_empty(), "{:?}", objects.ignored);

    let pv = &objects.pvs[0];
    assert_eq!(pv.name, Sym::new("local-pv-1"));
    assert_eq!(pv.capacity, 100 << 30);
    assert_eq!(pv.access_modes.as_slice(), [AccessMode::ReadWriteOnce]);
    assert_eq!(pv.storage_class, Some(Sym::new("local")));
    assert_eq!(pv.csi_driver, Some(Sym::new("ebs.csi.aws.com")));
    let claim_ref = pv.claim_ref.unwrap();
    assert_eq!(
        (claim_ref.namespace, claim_ref.name),
        (Sym::new("shop"), Sym::new("data-db-0"))
    );
    let worker = gantry_api::Labels::from_strs([("kubernetes.io/hostname", "worker-1")]);
    let other = gantry_api::Labels::from_strs([("kubernetes.io/hostname", "worker-2")]);
    assert!(pv.fits_node(&worker) && !pv.fits_node(&other));

    let pvc = &objects.pvcs[0];
    assert_eq!(
        (pvc.namespace, pvc.name),
        (Sym::new("shop"), Sym::new("data-db-0"))
    );
    assert_eq!(
        pvc.storage_class,
        Some(Sym::new("legacy")),
        "the beta annotation wins"
    );
    assert_eq!(pvc.requested, 1 << 30);
    assert_eq!(pvc.access_modes.as_slice(), [AccessMode::ReadWriteOncePod]);
    assert_eq!(pvc.phase, ClaimPhase::Bound);
    assert!(pvc.is_bound());
    assert_eq!(pvc.selected_node, Some(Sym::new("worker-1")));

    let (local, standard) = (&objects.storage_classes[0], &objects.storage_classes[1]);
    assert_eq!(local.binding_mode, VolumeBindingMode::WaitForFirstConsumer);
    assert!(!local.can_provision());
    let zone = |z| gantry_api::Labels::from_strs([("topology.kubernetes.io/zone", z)]);
    assert!(local.allows_node(&zone("eu-west-1b")) && !local.allows_node(&zone("us-east-1a")));
    assert_eq!(standard.binding_mode, VolumeBindingMode::Immediate);
    assert!(standard.can_provision() && standard.allows_node(&zone("anywhere")));

    let csi = &objects.csi_nodes[0];
    assert_eq!(csi.node_name, Sym::new("worker-1"));
    assert_eq!(csi.limit(Sym::new("ebs.csi.aws.com")), Some(25));
    assert_eq!(csi.limit(Sym::new("efs.csi.aws.com")), None);
}

#[test]
fn malformed_storage_objects_name_the_field() {
    let (object, field, message) = object_error(
        "kind: PersistentVolumeClaim\nmetadata: {name: c, namespace: ns}\nspec:\n  resources: {requests: {storage: 1Zz}}\n",
    );
    assert_eq!(object, "PersistentVolumeClaim ns/c");
    assert_eq!(field, "spec.resources.requests.storage");
    assert!(!message.is_empty());

    let (object, field, message) = object_error(
        "kind: PersistentVolume\nmetadata: {name: v}\nspec: {accessModes: [ReadWriteSometimes]}\n",
    );
    assert_eq!(
        (object.as_str(), field.as_str()),
        ("PersistentVolume v", "spec.accessModes[0]")
    );
    assert!(message.contains("ReadWriteSometimes"), "{message}");

    let (object, field, _) = object_error(
        "kind: StorageClass\nmetadata: {name: s}\nprovisioner: p\nvolumeBindingMode: Later\n",
    );
    assert_eq!(
        (object.as_str(), field.as_str()),
        ("StorageClass s", "volumeBindingMode")
    );

    let (object, field, _) = object_error(
        "kind: CSINode\nmetadata: {name: node-1}\nspec:\n  drivers: [{name: d, nodeID: x, allocatable: {count: -1}}]\n",
    );
    assert_eq!(
        (object.as_str(), field.as_str()),
        ("CSINode node-1", "spec.drivers[0].allocatable.count")
    );
}

#[test]
fn hami_gpu_annotations_decode_or_name_the_annotation() {
    let cluster = ClusterObjects::decode(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/gpu/cluster.yaml"
        ))
        .unwrap(),
        "cluster.yaml",
    )
    .unwrap();
    let b = &cluster.nodes[1];
    let gpus = b.gpus.as_ref().unwrap();
    assert_eq!(gpus.cards.len(), 2);
    assert!(gpus.cards[1].cordoned && !gpus.cards[0].cordoned);
    assert_eq!(b.annotation("hami.io/device-cordon"), Some("GPU-b1"));
    let serve = &cluster.pods[0];
    assert_eq!(serve.annotation("hami.io/vgpu-node"), Some("gpu-a"));
    // A zero amount is remembered: HAMi tells `gpucores: 0` from none.
    let pod = ClusterObjects::decode(
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpucores: 0}}\n",
        "pod.yaml",
    )
    .unwrap()
    .pods
    .remove(0);
    let c = &pod.containers[0];
    assert!(c.names_resource(Sym::new("nvidia.com/gpucores")));
    assert!(!c.names_resource(Sym::new("nvidia.com/gpumem")));

    let (object, field, message) = object_error(
        "kind: Node\nmetadata:\n  name: n1\n  annotations: {hami.io/node-nvidia-register: '[{\"id\": 1}]'}\n",
    );
    assert_eq!(object, "Node n1");
    assert_eq!(
        field,
        r#"metadata.annotations["hami.io/node-nvidia-register"]"#
    );
    assert!(
        message.starts_with("not HAMi's JSON list of cards"),
        "{message}"
    );
}

#[test]
fn replicas_of_one_controller_share_their_template() {
    let pod = |name: &str, owner: &str, cpu: &str| {
        format!(
            "kind: Pod\napiVersion: v1\nmetadata: {{name: {name}, labels: {{app: web}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: {owner}, uid: uid-{owner}, controller: true}}]}}\nspec: {{nodeName: n1, containers: [{{name: c, resources: {{requests: {{cpu: {cpu}}}}}}}]}}\n"
        )
    };
    let text = [
        pod("web-a", "web", "100m"),
        pod("web-b", "web", "100m"),
        pod("web-c", "web", "200m"),
        pod("other-a", "other", "100m"),
        pod("web-d", "web", "200m"),
    ]
    .join("---\n");
    let mut objects = ClusterObjects::decode(&text, "x.yaml").unwrap();
    objects.resolve_priorities().unwrap();
    let pods = &objects.pods;
    assert!(
        pods[1].shares_template(&pods[0]),
        "same controller, same spec"
    );
    assert!(
        !pods[2].shares_template(&pods[0]),
        "same controller, another spec"
    );
    assert!(
        !pods[3].shares_template(&pods[0]),
        "another controller: the owner reference is part of the template"
    );
    assert!(
        pods[4].shares_template(&pods[2]),
        "equal to the controller's second template"
    );
    assert_eq!((&*pods[1].name, &*pods[1].uid), ("web-b", "default/web-b"));
}

#[test]
fn volumes_that_do_not_weigh_in_scheduling_do_not_keep_replicas_apart() {
    // As the API server writes replicas: each with its own service-account token volume.
    let pod = |name: &str, token: &str| {
        format!(
            "kind: Pod\napiVersion: v1\nmetadata: {{name: {name}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: uid-web, controller: true}}]}}\nspec:\n  nodeName: n1\n  containers: [{{name: c}}]\n  volumes:\n  - {{name: {token}, projected: {{sources: [{{serviceAccountToken: {{path: token}}}}]}}}}\n  - {{name: config, configMap: {{name: web-config}}}}\n  - {{name: scratch, emptyDir: {{}}}}\n  - {{name: shm, emptyDir: {{medium: Memory}}}}\n  - {{name: data, persistentVolumeClaim: {{claimName: shared-data}}}}\n"
        )
    };
    let text = [
        pod("web-a", "kube-api-access-abcde"),
        pod("web-b", "kube-api-access-fghij"),
    ]
    .join("---\n");
    let mut objects = ClusterObjects::decode(&text, "x.yaml").unwrap();
    objects.resolve_priorities().unwrap();
    let pods = &objects.pods;
    let names: Vec<&str> = pods[0].volumes.iter().map(|v| &*v.name).collect();
    assert_eq!(names, ["scratch", "data"], "local data and claims are kept");
    assert!(pods[1].shares_template(&pods[0]));
}

#[test]
fn an_ephemeral_volume_uses_the_claim_named_after_pod_and_volume() {
    let text = "kind: Pod\napiVersion: v1\nmetadata: {name: web-0, uid: pod-uid}\nspec:\n  containers: [{name: c}]\n  volumes:\n  - {name: scratch, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce]}}}}\n  - {name: data, persistentVolumeClaim: {claimName: data}}\n---\nkind: PersistentVolumeClaim\napiVersion: v1\nmetadata: {name: web-0-scratch, ownerReferences: [{apiVersion: v1, kind: Pod, name: web-0, uid: pod-uid, controller: true}]}\nspec: {accessModes: [ReadWriteOnce]}\n";
    let objects = ClusterObjects::decode(text, "x.yaml").unwrap();
    let volumes = &objects.pods[0].volumes;
    let claims: Vec<(Option<&str>, bool)> = volumes
        .iter()
        .map(|v| (v.claim_name.as_deref(), v.ephemeral))
        .collect();
    assert_eq!(
        claims,
        [(Some("web-0-scratch"), true), (Some("data"), false)]
    );
    assert_eq!(volumes[0].persistent_claim(), None);
    assert_eq!(volumes[1].persistent_claim(), Some("data"));
    assert_eq!(objects.pvcs[0].controller_uid.as_deref(), Some("pod-uid"));
}

/// CSIDrivers and CSIStorageCapacities, as VolumeBinding's capacity check reads them; a
/// quantity that does not parse names its field.
#[test]
fn csi_drivers_and_storage_capacities_decode() {
    let yaml = r#"
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi.example.com}
spec: {storageCapacity: true}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {name: fast-n2, namespace: storage}
storageClassName: fast
nodeTopology: {matchLabels: {kubernetes.io/hostname: n2}}
capacity: 100Gi
maximumVolumeSize: 5Gi
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {name: nowhere}
storageClassName: fast
"#;
    let objects = ClusterObjects::decode(yaml, "capacity.yaml").unwrap();
    assert_eq!(objects.csi_drivers.len(), 1);
    assert!(objects.csi_drivers[0].storage_capacity);
    let [reaching, nowhere] = &objects.storage_capacities[..] else {
        panic!("{:?}", objects.storage_capacities)
    };
    assert_eq!(reaching.key, "storage/fast-n2");
    assert_eq!(reaching.capacity, Some(100 << 30));
    assert!(reaching.allows(5 << 30) && !reaching.allows((5 << 30) + 1));
    let n2 = gantry_api::Labels::from_strs([("kubernetes.io/hostname", "n2")]);
    assert!(reaching.reaches(&n2));
    assert!(
        !nowhere.reaches(&n2) && !nowhere.allows(1),
        "no topology, no size"
    );
    let bad = yaml.replace("capacity: 100Gi", "capacity: lots");
    let error = ClusterObjects::decode(&bad, "capacity.yaml").unwrap_err();
    assert!(error.to_string().contains("capacity"), "{error}");
}
