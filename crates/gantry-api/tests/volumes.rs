//! Pod volumes as VolumeRestrictions reads them: claims, and the in-tree disks that two
//! pods on one node may not both mount.

use std::sync::Arc;

use gantry_api::Disk;
use gantry_api::decode::ClusterObjects;

#[test]
fn in_tree_disks_decode_with_api_defaults() {
    let text = r#"
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  containers: [{name: c}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: claim-1, readOnly: true}}
  - {name: gce, gcePersistentDisk: {pdName: disk-1, readOnly: true}}
  - {name: ebs, awsElasticBlockStore: {volumeID: vol-1}}
  - {name: iscsi, iscsi: {targetPortal: "127.0.0.1:3260", iqn: "iqn.2016-12.server:storage.target01", lun: 0}}
  - {name: rbd, rbd: {monitors: [a, b], image: img}}
  - {name: scratch, emptyDir: {}}
"#;
    let objects = ClusterObjects::decode(text, "pod.yaml").unwrap();
    let volumes = &objects.pods[0].volumes;
    assert_eq!(volumes[0].claim_name.as_deref(), Some("claim-1"));
    assert!(volumes[0].read_only && volumes[0].disk.is_none());
    let disks: Vec<Option<&Disk>> = volumes[1..].iter().map(|v| v.disk.as_ref()).collect();
    assert_eq!(
        disks,
        [
            Some(&Disk::GcePersistentDisk {
                pd_name: Arc::from("disk-1"),
                read_only: true
            }),
            Some(&Disk::AwsElasticBlockStore {
                volume_id: Arc::from("vol-1")
            }),
            Some(&Disk::Iscsi {
                iqn: Arc::from("iqn.2016-12.server:storage.target01"),
                read_only: false
            }),
            Some(&Disk::Rbd {
                monitors: [Arc::from("a"), Arc::from("b")].into(),
                pool: Arc::from("rbd"),
                image: Arc::from("img"),
                read_only: false
            }),
            None,
        ]
    );
}

#[test]
fn host_paths_and_disk_backed_empty_dirs_are_local_storage() {
    let text = r#"
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  containers: [{name: c}]
  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: tmp, emptyDir: {medium: ""}}
  - {name: cache, emptyDir: {medium: Memory}}
  - {name: logs, hostPath: {path: /var/log}}
  - {name: data, persistentVolumeClaim: {claimName: claim-1}}
  - {name: conf, configMap: {name: c}}
"#;
    let objects = ClusterObjects::decode(text, "pod.yaml").unwrap();
    let local: Vec<(&str, bool)> = objects.pods[0]
        .volumes
        .iter()
        .map(|v| (&*v.name, v.local))
        .collect();
    // The in-memory emptyDir and the configMap weigh in nothing and are not kept.
    assert_eq!(
        local,
        [
            ("scratch", true),
            ("tmp", true),
            ("logs", true),
            ("data", false)
        ]
    );
}
