//! DeviceTaintRules (DRADeviceTaintRules: beta and off in v1.36, GA and on in v1.37)
//! against real kube-scheduler v1.36.3 with the gate on and with it off
//! (`testdata/dra-1.36/taint-rules`, see its README). Every pod must land where upstream
//! put it, or wait with upstream's message word for word.

use gantry_api::Release;

use crate::step_corpus;

#[test]
fn taint_rules_decide_as_v1_36_does_with_the_gate_on() {
    let want = step_corpus::recorded("dra-1.36", "taint-rules", "expected.jsonl");
    assert_eq!(want.len(), 4);
    let on = Release::parse(Some("1.36"), Some("DRADeviceTaintRules=true")).unwrap();
    let got = step_corpus::decide_steps("dra-1.36", "taint-rules", on);
    assert_eq!(got, want);
    // v1.37 has the gate on by default (derived: its tracker's `applyPatches` is read as
    // v1.36.3's, not recorded).
    let got = step_corpus::decide_steps("dra-1.36", "taint-rules", Release::at(37));
    assert_eq!(got, want);
}

#[test]
fn without_the_gate_the_rules_taint_nothing() {
    let want = step_corpus::recorded("dra-1.36", "taint-rules", "expected-gate-off.jsonl");
    let got = step_corpus::decide_steps("dra-1.36", "taint-rules", Release::at(36));
    assert_eq!(got, want);
}

/// A rule without a `deviceSelector` taints every device, as v1.36.3's tracker applies it
/// (`applyPatches` matches all when the selector is nil), though the API's documentation
/// says such a rule matches none: only the pod tolerating both taints is placed.
#[test]
fn a_rule_without_a_selector_taints_every_device() {
    let want = step_corpus::recorded("dra-1.36", "taint-rule-without-selector", "expected.jsonl");
    let on = Release::parse(Some("1.36"), Some("DRADeviceTaintRules=true")).unwrap();
    let got = step_corpus::decide_steps("dra-1.36", "taint-rule-without-selector", on);
    assert_eq!(got, want);
}
