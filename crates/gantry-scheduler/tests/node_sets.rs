//! Whole scheduling cycles on small clusters read from YAML: the nodes PreFilter narrows
//! to (and the failure messages that count only them), volumes assumed for a pod, and a
//! snapshot inconsistency failing its cycle.

use std::sync::Arc;

use gantry_api::decode::ClusterObjects;
use gantry_api::{Pod, Release, Sym};
use gantry_cache::Cache;
use gantry_framework::ApiObjects;
use gantry_framework::plugins::default_profile_for;
use gantry_scheduler::{Attempt, Scheduler};

const NODES: &str = r#"
kind: List
items:
- kind: Node
  metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
  status: {allocatable: {cpu: "1", memory: 4Gi, pods: "110"}}
- kind: Node
  metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
  status: {allocatable: {cpu: "1", memory: 4Gi, pods: "110"}}
- kind: Node
  metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}
  status: {allocatable: {cpu: "1", memory: 4Gi, pods: "110"}}
- kind: StorageClass
  metadata: {name: local}
  provisioner: kubernetes.io/no-provisioner
  volumeBindingMode: WaitForFirstConsumer
- kind: PersistentVolume
  metadata: {name: on-n1}
  spec:
    capacity: {storage: 10Gi}
    accessModes: [ReadWriteOnce]
    storageClassName: local
    nodeAffinity:
      required:
        nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n1]}]
- kind: PersistentVolume
  metadata: {name: on-n2}
  spec:
    capacity: {storage: 10Gi}
    accessModes: [ReadWriteOnce]
    storageClassName: local
    claimRef: {namespace: default, name: bound-to-n2}
    nodeAffinity:
      required:
        nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n2]}]
- kind: PersistentVolumeClaim
  metadata: {name: bound-to-n2, namespace: default}
  spec: {storageClassName: local, volumeName: on-n2, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  status: {phase: Bound}
- kind: PersistentVolumeClaim
  metadata: {name: first, namespace: default}
  spec: {storageClassName: local, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
- kind: PersistentVolumeClaim
  metadata: {name: second, namespace: default}
  spec: {storageClassName: local, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"#;

fn scheduler(extra: &str) -> (Scheduler, Arc<Cache>, ClusterObjects) {
    scheduler_as(extra, Release::default())
}

fn scheduler_as(extra: &str, release: Release) -> (Scheduler, Arc<Cache>, ClusterObjects) {
    let mut cluster = ClusterObjects::decode(NODES, "nodes.yaml").unwrap();
    cluster.merge(ClusterObjects::decode(extra, "pods.yaml").unwrap());
    let cache = Arc::new(Cache::new());
    for node in &cluster.nodes {
        cache.add_node(Arc::new(node.clone()));
    }
    let objects = ApiObjects::from_cluster(&cluster);
    let scheduler = Scheduler::new(
        cache.clone(),
        vec![default_profile_for("default-scheduler", release)],
        objects,
        1,
    );
    (scheduler, cache, cluster)
}

fn pending(cluster: &ClusterObjects, name: &str) -> Arc<Pod> {
    let pod = cluster.pods.iter().find(|p| &*p.name == name).unwrap();
    Arc::new(pod.clone())
}

fn failure(attempt: Attempt) -> String {
    match attempt {
        Attempt::Unschedulable { fit_error, .. } => fit_error.to_string(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

const PODS: &str = r#"
kind: List
items:
- kind: Pod
  metadata: {name: only-n1-too-big, namespace: default}
  spec:
    containers: [{name: c, resources: {requests: {cpu: "2"}}}]
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchFields: [{key: metadata.name, operator: In, values: [n1]}]
- kind: Pod
  metadata: {name: n1-with-a-volume-on-n2, namespace: default}
  spec:
    containers: [{name: c}]
    volumes: [{name: data, persistentVolumeClaim: {claimName: bound-to-n2}}]
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchFields: [{key: metadata.name, operator: In, values: [n1]}]
- kind: Pod
  metadata: {name: volume-on-n2, namespace: default}
  spec:
    containers: [{name: c}]
    volumes: [{name: data, persistentVolumeClaim: {claimName: bound-to-n2}}]
- kind: Pod
  metadata: {name: first, namespace: default}
  spec:
    containers: [{name: c}]
    volumes: [{name: data, persistentVolumeClaim: {claimName: first}}]
- kind: Pod
  metadata: {name: second, namespace: default}
  spec:
    containers: [{name: c}]
    volumes: [{name: data, persistentVolumeClaim: {claimName: second}}]
"#;

/// v1.28: the nodes a PreFilter result leaves out are neither checked nor counted, and
/// preemption may try them.
#[test]
fn a_narrowed_pod_fails_with_only_its_nodes_counted() {
    let (mut scheduler, _, cluster) = scheduler_as(PODS, Release::at(28));
    let message = failure(scheduler.schedule_one(&pending(&cluster, "only-n1-too-big")));
    assert_eq!(
        message,
        "0/3 nodes are available: 1 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
    );
    let Attempt::Scheduled { node, .. } =
        scheduler.schedule_one(&pending(&cluster, "volume-on-n2"))
    else {
        panic!("the bound local volume's node fits");
    };
    assert_eq!(node, Sym::new("n2"));
}

/// v1.30: counted as filtered out by the PreFilter result; v1.31: left uncounted, and
/// preemption leaves them alone; from v1.32: counted as not satisfying the plugin. The
/// node that is too small can never fit (v1.34): preemption cannot help anywhere.
#[test]
fn the_nodes_a_pre_filter_leaves_out_as_each_release_reports_them() {
    let message = |minor| {
        let (mut scheduler, _, cluster) = scheduler_as(PODS, Release::at(minor));
        failure(scheduler.schedule_one(&pending(&cluster, "only-n1-too-big")))
    };
    assert_eq!(
        message(30),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node is filtered out by the prefilter result. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    );
    assert_eq!(
        message(31),
        "0/3 nodes are available: 1 Insufficient cpu. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    );
    assert_eq!(
        message(35),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

/// v1.28 to v1.31: VolumeBinding narrows to the bound local volume's host too, and the
/// two node sets share none. From v1.32 it does not narrow: its Filter says why.
#[test]
fn node_sets_with_nothing_in_common_name_both_plugins() {
    let (mut scheduler, _, cluster) = scheduler_as(PODS, Release::at(28));
    let message = failure(scheduler.schedule_one(&pending(&cluster, "n1-with-a-volume-on-n2")));
    assert_eq!(
        message,
        "0/3 nodes are available: node(s) didn't satisfy plugin(s) [NodeAffinity VolumeBinding] simultaneously. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
    );
    let (mut scheduler, _, cluster) = scheduler_as(PODS, Release::default());
    let message = failure(scheduler.schedule_one(&pending(&cluster, "n1-with-a-volume-on-n2")));
    assert_eq!(
        message,
        "0/3 nodes are available: 1 node(s) didn't match PersistentVolume's node affinity, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

/// The one free local volume goes to the first pod; once that pod is assumed with it,
/// the second pod's claim finds none (upstream's assumed bindings).
#[test]
fn a_volume_assumed_for_one_pod_is_not_offered_to_the_next() {
    let (mut scheduler, _, cluster) = scheduler(PODS);
    let Attempt::Scheduled { node, .. } = scheduler.schedule_one(&pending(&cluster, "first"))
    else {
        panic!("the free volume fits the first pod");
    };
    assert_eq!(node, Sym::new("n1"));
    let message = failure(scheduler.schedule_one(&pending(&cluster, "second")));
    assert!(
        message.starts_with(
            "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
        ),
        "{message}"
    );
}

#[test]
fn an_inconsistent_snapshot_fails_the_cycle_and_the_next_one_recovers() {
    let (mut scheduler, cache, cluster) = scheduler(PODS);
    let pod = pending(&cluster, "volume-on-n2");
    cache.lose_node_from_recency_list(Sym::new("n3"));
    let attempt = scheduler.schedule_one(&pod);
    let Attempt::Error(message) = attempt else {
        panic!("expected an error attempt, got {attempt:?}");
    };
    assert!(
        message.starts_with("snapshot state is not consistent"),
        "{message}"
    );
    assert!(matches!(
        scheduler.schedule_one(&pod),
        Attempt::Scheduled { .. }
    ));
}

/// Assuming a pod records its node without copying its spec.
#[test]
fn the_assumed_pod_shares_the_queued_pods_template() {
    let (mut scheduler, cache, cluster) = scheduler(PODS);
    let pod = pending(&cluster, "volume-on-n2");
    let Attempt::Scheduled { pod: assumed, .. } = scheduler.schedule_one(&pod) else {
        panic!("expected a placement");
    };
    assert!(assumed.shares_template(&pod));
    assert_eq!(assumed.node_name, Some(Sym::new("n2")));
    assert!(cache.is_assumed(&assumed.uid));
}
