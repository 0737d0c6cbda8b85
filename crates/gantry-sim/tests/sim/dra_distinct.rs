//! `distinctAttribute` constraints (DRAConsumableCapacity, beta and on from v1.36) against
//! real kube-scheduler v1.36.3 (`testdata/dra-1.36/distinct`, see its README). Every pod
//! must land where upstream put it, or wait with upstream's message word for word.

use gantry_api::Release;

use crate::step_corpus;

#[test]
fn distinct_attribute_decides_as_v1_36_does() {
    let want = step_corpus::recorded("dra-1.36", "distinct", "expected.jsonl");
    assert_eq!(want.len(), 4);
    for release in ["1.36", "1.37"] {
        let release = Release::parse(Some(release), None).unwrap();
        let got = step_corpus::decide_steps("dra-1.36", "distinct", release);
        assert_eq!(got, want, "{release}");
    }
}

/// v1.35 with the gate on (alpha then) tries a request's devices as permutations (its
/// allocator has no `startLocation`, read in v1.35.4's vendored
/// `allocator_incubating.go`): after gpu-0 and gpu-2 it goes back to gpu-1, which differs
/// from the last device picked, so n1 (more cpu) takes the pod. Derived, not recorded.
#[test]
fn v1_35_tries_permutations_and_places_the_three_on_n1() {
    let release = Release::parse(Some("1.35"), Some("DRAConsumableCapacity=true")).unwrap();
    let got = step_corpus::decide_steps("dra-1.36", "distinct", release);
    assert_eq!(got[0].0, "default/p-three-a");
    assert_eq!(got[0].1.as_deref(), Some("n1"), "{got:?}");
}
