//! Binding conditions (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus): a
//! device's conditions as the API server validates them (upstream's
//! `validation_resourceslice_test.go` rows, carried over), kept or dropped by the gates,
//! and a claim's readiness for binding as upstream's `isClaimReadyForBinding` and
//! `isClaimTimeout` judge it (the claims of `dynamicresources_test.go`: bound, failed,
//! timed out).

mod common;

use common::decode;
use gantry_api::dra::ResourceClaim;
use gantry_api::dra_binding::Readiness;
use gantry_api::{Release, Sym};

/// A slice of one device with these binding fields (YAML flow text).
fn slice(binding: &str) -> String {
    format!(
        "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: s}},
          spec: {{driver: d, nodeName: node-a, pool: {{name: p, generation: 1, resourceSliceCount: 1}},
                 devices: [{{name: g, {binding}}}]}}}}"
    )
}

#[test]
fn binding_conditions_are_validated_as_the_api_server_validates_them() {
    let name_error = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    let cases: [(&str, &str); 9] = [
        (
            "bindingConditions: [example.com/condition1, condition2], bindingFailureConditions: [example.com/condition3, condition4]",
            "",
        ),
        (
            "bindingConditions: [c1, c2, c3, c4, c5], bindingFailureConditions: [c6, c7]",
            "spec.devices[0].bindingConditions: Too many: 5: must have at most 4 items",
        ),
        (
            "bindingConditions: [c1, c2], bindingFailureConditions: [c3, c4, c5, c6, c7]",
            "spec.devices[0].bindingFailureConditions: Too many: 5: must have at most 4 items",
        ),
        (
            "bindingConditions: [condition1, 'condition2!'], bindingFailureConditions: [c3, c4]",
            "spec.devices[0].bindingConditions[1]: Invalid value: \"condition2!\": ",
        ),
        (
            "bindingConditions: [c1, c2], bindingFailureConditions: ['condition3!', c4]",
            "spec.devices[0].bindingFailureConditions[0]: Invalid value: \"condition3!\": ",
        ),
        (
            "bindingFailureConditions: [c1, c2]",
            "spec.devices[0].bindingConditions: Invalid value: null: bindingConditions are required to use bindingFailureConditions",
        ),
        (
            "bindingConditions: [c1, c2]",
            "spec.devices[0].bindingFailureConditions: Invalid value: null: bindingFailureConditions are required to use bindingConditions",
        ),
        (
            "bindingConditions: [condition1, condition1], bindingFailureConditions: [c2, c3]",
            "spec.devices[0].bindingConditions[1]: Duplicate value: \"condition1\"",
        ),
        (
            "bindingConditions: [condition1, condition2], bindingFailureConditions: [condition1, c3]",
            "spec.devices[0].bindingFailureConditions[0]: Invalid value: \"condition1\": bindingFailureConditions must not overlap with bindingConditions",
        ),
    ];
    for (binding, expected) in cases {
        let got = decode(&slice(binding), Release::default());
        match expected {
            "" => {
                let objects = got.unwrap();
                let device = &objects.dra.slices[0].devices[0];
                let conditions = &device.binding.as_ref().expect("kept").conditions;
                assert_eq!(conditions[0], Sym::new("example.com/condition1"));
            }
            expected => {
                let error = got.unwrap_err();
                assert!(error.contains(expected), "{error}\n  expected: {expected}");
                if expected.ends_with(": ") {
                    assert!(error.contains(name_error), "{error}");
                }
            }
        }
    }
}

/// Served from v1.36, where both gates are on (the first needs the second: a release with
/// DRAResourceClaimDeviceStatus off and DRADeviceBindingConditions on is refused); the API
/// server drops the fields while the gate is off
/// (`dropDisabledDRADeviceBindingConditionsFields`), and so does decoding: the device is
/// then an ordinary one.
#[test]
fn binding_conditions_follow_both_gates() {
    let yaml =
        slice("bindingConditions: [ready], bindingFailureConditions: [failed], bindsToNode: true");
    let kept = decode(&yaml, Release::at(36)).unwrap();
    let device = &kept.dra.slices[0].devices[0];
    assert!(device.binding.is_some() && device.binds_to_node);
    assert!(kept.dra.slices[0].binding_conditions);
    for release in [
        Release::at(35),
        Release::parse(Some("1.36"), Some("DRADeviceBindingConditions=false")).unwrap(),
    ] {
        let dropped = decode(&yaml, release).unwrap();
        let device = &dropped.dra.slices[0].devices[0];
        assert!(
            device.binding.is_none() && !device.binds_to_node,
            "{release}"
        );
        assert!(!dropped.dra.slices[0].binding_conditions, "{release}");
    }
}

/// Upstream's test claim `allocationResultWithBindingConditions` (condition `condition`,
/// failure condition `failed`), allocated at `stamp`, with the device's status
/// conditions `status` (none: no status entry).
fn claim(stamp: &str, status: &str) -> ResourceClaim {
    let devices = match status {
        "" => String::new(),
        conditions => format!(
            "devices: [{{driver: d, pool: p, device: instance-1, conditions: [{conditions}]}}],"
        ),
    };
    let yaml = format!(
        "{{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {{name: c, namespace: default}},
          spec: {{devices: {{requests: [{{name: req-1, exactly: {{deviceClassName: x}}}}]}}}},
          status: {{{devices}
            allocation: {{allocationTimestamp: '{stamp}', devices: {{results: [{{request: req-1, driver: d, pool: p, device: instance-1,
              bindingConditions: [condition], bindingFailureConditions: [failed]}}]}}}}}}}}"
    );
    decode(&yaml, Release::default())
        .unwrap()
        .dra
        .claims
        .remove(0)
}

const TRUE: &str = "status: 'True', lastTransitionTime: '2026-01-01T00:00:00Z'";
const FALSE: &str = "status: 'False', lastTransitionTime: '2026-01-01T00:00:00Z'";

#[test]
fn a_claim_is_ready_failed_or_pending_as_upstream_judges_it() {
    let at = "2026-01-01T00:00:00Z";
    let bound = claim(
        at,
        &format!("{{type: condition, {TRUE}, reason: R}}, {{type: failed, {FALSE}, reason: R}}"),
    );
    let failed = claim(
        at,
        &format!(
            "{{type: condition, {FALSE}, reason: R}}, {{type: failed, {TRUE}, reason: Broken, message: 'no link'}}"
        ),
    );
    let no_status = claim(at, "");
    let empty_status = claim(at, &format!("{{type: other, {TRUE}, reason: R}}"));
    let readiness = |c: &ResourceClaim| c.binding_readiness();
    assert_eq!(readiness(&bound), Readiness::Ready);
    assert_eq!(
        readiness(&failed),
        Readiness::Failed(
            "device binding failed: claim=c, reason=Broken, message=\"no link\"".to_string()
        )
    );
    assert_eq!(readiness(&no_status), Readiness::Pending);
    assert_eq!(readiness(&empty_status), Readiness::Pending);
    assert!(
        no_status
            .allocation
            .as_ref()
            .unwrap()
            .has_binding_conditions()
    );
    assert_eq!(no_status.allocated_at(), Some(1_767_225_600));
}

/// `isClaimTimeout`: the allocation's timestamp plus the timeout strictly before now
/// (upstream's case: allocated ten minutes ago, the default timeout of ten minutes, and
/// its clock a little later).
#[test]
fn a_claim_times_out_only_after_the_timeout() {
    let pending = claim("2026-01-01T00:00:00Z", "");
    let stamp = 1_767_225_600;
    assert!(!pending.binding_timed_out(stamp + 600, 600));
    assert!(pending.binding_timed_out(stamp + 601, 600));
    assert!(!pending.binding_timed_out(stamp + 601, 700));
    // Without binding conditions, or a timestamp, nothing times out.
    let mut plain = pending.clone();
    let mut allocation = gantry_api::dra::Allocation::clone(plain.allocation.as_ref().unwrap());
    allocation.devices[0].binding = None;
    plain.allocation = Some(std::sync::Arc::new(allocation));
    assert!(!plain.binding_timed_out(stamp + 10_000, 600));
    let mut unstamped = pending.clone();
    unstamped.binding_status = None;
    assert!(!unstamped.binding_timed_out(stamp + 10_000, 600));
}

/// With the gates off a claim's binding fields are not read: nothing waits for them.
#[test]
fn with_the_gates_off_a_claim_waits_for_nothing() {
    let yaml = "{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: c, namespace: default},
        status: {allocation: {allocationTimestamp: '2026-01-01T00:00:00Z', devices: {results: [{request: r, driver: d, pool: p, device: g,
          bindingConditions: [condition], bindingFailureConditions: [failed]}]}}}}";
    let claim = decode(yaml, Release::at(35)).unwrap().dra.claims.remove(0);
    assert!(!claim.allocation.as_ref().unwrap().has_binding_conditions());
    assert_eq!(claim.allocated_at(), None);
}
