//! Devices shared by capacity (DRAConsumableCapacity, beta and on from v1.36) against
//! real kube-scheduler v1.36.3 (`testdata/dra-1.36/shared`, see its README). Every pod
//! must land where upstream put it, or wait with upstream's message word for word, and
//! every claim must get the share upstream gave it: the same GPU, taking the same
//! amounts (a request rounded up to the policy's step, the default for a claim naming
//! none, and the whole of a capacity without a policy that the claim does not name).

use gantry_api::Release;

use crate::step_corpus;

#[test]
fn shared_gpus_are_divided_as_v1_36_divides_them() {
    let want = step_corpus::recorded("dra-1.36", "shared", "expected.jsonl");
    let want_claims = step_corpus::recorded_lines("dra-1.36", "shared", "claims.jsonl");
    assert_eq!((want.len(), want_claims.len()), (8, 6));
    for release in ["1.36", "1.37"] {
        let release = Release::parse(Some(release), None).unwrap();
        let (got, claims) = step_corpus::decide_steps_and_claims("dra-1.36", "shared", release);
        assert_eq!(got, want, "{release}");
        assert_eq!(claims, want_claims, "{release}");
    }
}

/// With the gate off the API server drops `allowMultipleAllocations`, the request
/// policies and the claims' capacity requests: each GPU is one claim's, so three pods get
/// one and the rest wait. Derived (the recorder's fake clientset has no API server
/// strategy to drop the fields), not recorded.
#[test]
fn without_the_gate_each_gpu_is_one_claims() {
    let release = Release::parse(Some("1.36"), Some("DRAConsumableCapacity=false")).unwrap();
    let (got, claims) = step_corpus::decide_steps_and_claims("dra-1.36", "shared", release);
    let placed = got.iter().filter(|(_, node, _)| node.is_some()).count();
    assert_eq!(placed, 3, "{got:?}");
    assert!(
        claims.iter().all(|c| c.contains("\"shared\":false")),
        "{claims:?}"
    );
}
