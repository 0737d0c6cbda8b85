//! VolumeBinding's storage capacity check, its volume phases and its capacity scoring
//! against real kube-scheduler v1.36.3 (`testdata/storage-1.36`, see its README): claims
//! provisioned only where a CSIStorageCapacity of their class reaches the node and allows
//! their size (when their CSI driver opts in), local volumes matched only in phase
//! Available, and, under StorageCapacityScoring, nodes scored by the share of storage the
//! pod would take. Every pod must land where upstream put it, or wait with upstream's
//! message word for word.

use gantry_api::Release;

use crate::step_corpus::{self, Outcome};

const CORPUS: &str = "storage-1.36";

/// Each pod's node or message, as Gantry decides the scenario as v1.36 under `gates`.
fn decide(name: &str, gates: Option<&str>) -> Vec<Outcome> {
    decide_as(name, Release::parse(Some("1.36"), gates).unwrap())
}

fn decide_as(name: &str, release: Release) -> Vec<Outcome> {
    step_corpus::decide_steps(CORPUS, name, release)
}

fn recorded(name: &str, file: &str) -> Vec<Outcome> {
    step_corpus::recorded(CORPUS, name, file)
}

#[test]
fn storage_capacity_and_volume_phases_decide_as_v1_36_does() {
    let want = recorded("capacity", "expected.jsonl");
    assert_eq!(want.len(), 5);
    assert_eq!(decide("capacity", None), want);
}

/// The same pods with StorageCapacityScoring on and off (its v1.36 default): three of the
/// six land elsewhere.
#[test]
fn storage_capacity_scoring_decides_as_v1_36_does_with_the_gate_on() {
    let on = recorded("capacity-scoring", "expected.jsonl");
    let off = recorded("capacity-scoring", "expected-gate-off.jsonl");
    assert_eq!(on.len(), 6);
    assert_eq!(on.iter().zip(&off).filter(|(a, b)| a != b).count(), 3);
    let name = "capacity-scoring";
    assert_eq!(decide(name, Some("StorageCapacityScoring=true")), on);
    assert_eq!(decide(name, None), off);
}

/// VolumeLimitScaling on and off (its v1.36 default): with it on, a claim of a driver that
/// sets `preventPodSchedulingIfMissing` goes only to a node whose CSINode lists the driver.
#[test]
fn volume_limit_scaling_decides_as_v1_36_does_with_the_gate_on() {
    let name = "volume-limit-scaling";
    let on = recorded(name, "expected.jsonl");
    let off = recorded(name, "expected-gate-off.jsonl");
    assert_eq!(on.len(), 4);
    assert_eq!(on.iter().zip(&off).filter(|(a, b)| a != b).count(), 4);
    assert_eq!(decide(name, Some("VolumeLimitScaling=true")), on);
    assert_eq!(decide(name, None), off);
}

/// v1.37 turns both gates on by default; v1.36.3's code with both on decided each scenario
/// as the files above say (recorded, see the README), and so must Gantry's v1.37.
#[test]
fn v1_37_decides_the_storage_scenarios_as_v1_36_with_its_gates() {
    let v137 = Release::parse(Some("1.37"), None).unwrap();
    for name in ["capacity", "capacity-scoring", "volume-limit-scaling"] {
        assert_eq!(
            decide_as(name, v137),
            recorded(name, "expected.jsonl"),
            "{name}"
        );
    }
}
