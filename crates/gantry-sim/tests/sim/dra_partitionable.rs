//! Partitionable devices (DRAPartitionableDevices, beta and on from v1.36) against real
//! kube-scheduler v1.36.3 (`testdata/dra-1.36`, see its README): partitions of one GPU
//! share its counters, so a node whose GPU is partly taken refuses the partitions that no
//! longer fit, and a whole GPU fits only where no partition is taken. Every pod must land
//! where upstream put it, or wait with upstream's message word for word.

use gantry_api::Release;

use crate::step_corpus;

#[test]
fn partitions_share_their_gpu_counters_as_v1_36_decides() {
    let want = step_corpus::recorded("dra-1.36", "partitionable", "expected.jsonl");
    assert_eq!(want.len(), 8);
    for release in ["1.36", "1.37"] {
        let release = Release::parse(Some(release), None).unwrap();
        let got = step_corpus::decide_steps("dra-1.36", "partitionable", release);
        assert_eq!(got, want, "{release}");
    }
}

/// The pods that wait are tried once: another pod's claim made, allocated or reserved
/// helps none of them (DynamicResources' queueing hint), so, as real kube-scheduler
/// v1.36.2 on a real API server, each gets one `FailedScheduling` (it got three tries
/// while any event moved them).
#[test]
fn a_pod_no_device_fits_is_tried_once_while_others_take_theirs() {
    let release = Release::parse(Some("1.36"), None).unwrap();
    let sim = step_corpus::run_steps("dra-1.36", "partitionable", release);
    let tries: Vec<(String, u32)> = (sim.placements().iter().zip(sim.histories()))
        .filter(|(p, _)| p.node.is_none())
        .map(|(p, h)| (p.pod.to_string(), h.attempts))
        .collect();
    assert_eq!(
        tries,
        [
            ("default/p-whole-b".to_string(), 1),
            ("default/p-three-1g".to_string(), 1)
        ]
    );
}

/// With the gate off (v1.35's default) the API server drops the counters, so partitions
/// are devices like any other: the same pods all get one, and the whole GPUs go first.
#[test]
fn without_the_gate_partitions_are_independent_devices() {
    let release = Release::parse(Some("1.36"), Some("DRAPartitionableDevices=false")).unwrap();
    let got = step_corpus::decide_steps("dra-1.36", "partitionable", release);
    assert!(got.iter().all(|(_, node, _)| node.is_some()), "{got:?}");
}

/// Per-device node selection: one pool of network-attached accelerators, each reachable
/// from the nodes it names, sharing the fabric's counters across nodes: after two pods on
/// two nodes, the third fits nowhere.
#[test]
fn per_device_nodes_and_a_shared_counter_set_decide_as_v1_36_does() {
    let want = step_corpus::recorded("dra-1.36", "per-device-nodes", "expected.jsonl");
    assert_eq!(want.len(), 3);
    for release in ["1.36", "1.37"] {
        let release = Release::parse(Some(release), None).unwrap();
        let got = step_corpus::decide_steps("dra-1.36", "per-device-nodes", release);
        assert_eq!(got, want, "{release}");
    }
}
