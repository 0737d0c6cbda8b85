//! Extended resources backed by devices (DRAExtendedResource, beta and on from v1.36, GA
//! in v1.37) against real kube-scheduler v1.36.3 (`testdata/dra-1.36/extended`, see its
//! README): a pod asking for `example.com/gpu` gets GPUs of the class naming it on nodes
//! without the resource in their allocatable, and the node's device plugin's where it has
//! it. Every pod must land where upstream put it, or wait with upstream's message word for
//! word, and every claim the scheduler made must hold upstream's requests (one per
//! container, named by container and resource index), mappings and devices.

use gantry_api::Release;

use crate::step_corpus;

#[test]
fn extended_resources_get_devices_as_v1_36_gives_them() {
    let want = step_corpus::recorded("dra-1.36", "extended", "expected.jsonl");
    let want_claims = step_corpus::recorded_lines("dra-1.36", "extended", "claims.jsonl");
    assert_eq!((want.len(), want_claims.len()), (8, 5));
    for release in ["1.36", "1.37"] {
        let release = Release::parse(Some(release), None).unwrap();
        let (got, claims) = step_corpus::decide_steps_and_claims("dra-1.36", "extended", release);
        assert_eq!(got, want, "{release}");
        assert_eq!(claims, want_claims, "{release}");
    }
}

/// With the gate off (recorded too) only the device plugin's GPU serves `example.com/gpu`.
#[test]
fn without_the_gate_only_the_device_plugin_serves_them() {
    let want = step_corpus::recorded("dra-1.36", "extended", "expected-gate-off.jsonl");
    let release = Release::parse(Some("1.36"), Some("DRAExtendedResource=false")).unwrap();
    let (got, claims) = step_corpus::decide_steps_and_claims("dra-1.36", "extended", release);
    assert_eq!(got, want);
    assert_eq!(claims, Vec::<String>::new());
}

/// With NodeResourcesFit disabled (recorded with its `config.yaml`), DynamicResources
/// alone judges the pod's extended resources: a node lacking one that no class serves
/// gets `cannot fit resource`, and the node that has it gives the served one from devices.
#[test]
fn a_resource_nothing_serves_is_the_nodes_or_nothing() {
    let want = step_corpus::recorded("dra-1.36", "extended-without-fit", "expected.jsonl");
    let want_claims =
        step_corpus::recorded_lines("dra-1.36", "extended-without-fit", "claims.jsonl");
    assert_eq!((want.len(), want_claims.len()), (2, 1));
    let release = Release::parse(Some("1.36"), None).unwrap();
    let (got, claims) =
        step_corpus::decide_steps_and_claims("dra-1.36", "extended-without-fit", release);
    assert_eq!(got, want);
    assert_eq!(claims, want_claims);
}
