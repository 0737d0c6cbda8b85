//! Consumable capacity (DRAConsumableCapacity) as the API server reads it: shared
//! devices, request policies, capacity requests and the shares of allocation results,
//! validated as v1.36.2's `validation.go` validates them (and, with DRAFractionalCapacityRange,
//! as v1.37's table has it) and dropped with the gate off.

use gantry_api::decode::ClusterObjects;
use gantry_api::dra_capacity::{RequestPolicy, ValidAmounts};
use gantry_api::{Release, Sym};

const GI: i64 = 1024 * 1024 * 1024 * 1000;

fn slice(device: &str) -> String {
    format!(
        "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: s}},
           spec: {{driver: gpu.example.com, nodeName: n1, pool: {{name: p, generation: 1, resourceSliceCount: 1}},
                  devices: [{device}]}}}}"
    )
}

fn decode(release: Release, text: &str) -> Result<ClusterObjects, String> {
    let mut objects = ClusterObjects::for_release(release);
    objects
        .decode_more(text, "objects.yaml")
        .map_err(|e| e.to_string())?;
    Ok(objects)
}

const SHARED_GPU: &str = "{name: gpu-0, allowMultipleAllocations: true, capacity: {memory: {value: 40Gi,
    requestPolicy: {default: 1Gi, validRange: {min: 1Gi, max: 40Gi, step: 1Gi}}}, cores: {value: '100'}}}";

const CLAIM: &str = "
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: share, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu, capacity: {requests: {memory: 10Gi}}}
    - name: alt
      firstAvailable:
      - {name: small, deviceClassName: gpu, capacity: {requests: {cores: '10'}}}
status:
  allocation:
    devices:
      results:
      - request: gpu
        driver: gpu.example.com
        pool: p
        device: gpu-0
        shareID: 1c7b8c6e-8a55-4c2a-9d7e-3f6a1e0b2c4d
        consumedCapacity: {memory: 10Gi, cores: '100'}
";

#[test]
fn shared_devices_policies_and_shares_decode_with_the_gate_on() {
    let objects = decode(
        Release::at(36),
        &format!("{}\n---\n{CLAIM}", slice(SHARED_GPU)),
    )
    .unwrap();
    let device = &objects.dra.slices[0].devices[0];
    assert!(device.allow_multiple_allocations);
    let memory = device
        .capacity
        .iter()
        .find(|c| c.key == Sym::new("memory"))
        .unwrap();
    assert_eq!((memory.key, memory.value), (Sym::new("memory"), 40 * GI));
    assert_eq!(
        memory.request_policy.as_deref(),
        Some(&RequestPolicy {
            default: Some(GI),
            valid: ValidAmounts::Range {
                min: GI,
                max: Some(40 * GI),
                step: Some(GI)
            }
        })
    );
    let cores = device
        .capacity
        .iter()
        .find(|c| c.key == Sym::new("cores"))
        .unwrap();
    assert_eq!(cores.request_policy, None);
    let claim = &objects.dra.claims[0];
    let exact = claim.spec.requests[0].exact().unwrap();
    assert_eq!(exact.capacity, vec![(Sym::new("memory"), 10 * GI)]);
    let sub = &claim.spec.requests[1].first_available()[0];
    assert_eq!(sub.capacity, vec![(Sym::new("cores"), 10_000)]);
    let result = &claim.allocation.as_ref().unwrap().devices[0];
    assert_eq!(
        result.share.as_ref().map(|s| &*s.id),
        Some("1c7b8c6e-8a55-4c2a-9d7e-3f6a1e0b2c4d")
    );
    assert_eq!(
        result.share.as_ref().unwrap().consumed,
        vec![(Sym::new("cores"), 100_000), (Sym::new("memory"), 10 * GI)]
    );
    // A share holds no device alone.
    let allocation = claim.allocation.as_ref().unwrap();
    assert_eq!(allocation.held_devices().count(), 0);
    assert_eq!(allocation.shares().count(), 1);
}

/// With the gate off the API server drops `allowMultipleAllocations`, request policies
/// and capacity requests; a share written while it was on is kept (its fields are in
/// use), and counts as the whole device.
#[test]
fn the_gate_off_drops_the_fields_but_keeps_written_shares() {
    let off = Release::parse(Some("1.36"), Some("DRAConsumableCapacity=false")).unwrap();
    for release in [off, Release::at(35)] {
        let objects = decode(release, &format!("{}\n---\n{CLAIM}", slice(SHARED_GPU))).unwrap();
        let device = &objects.dra.slices[0].devices[0];
        assert!(!device.allow_multiple_allocations, "{release}");
        assert!(device.capacity.iter().all(|c| c.request_policy.is_none()));
        let claim = &objects.dra.claims[0];
        assert!(claim.spec.requests[0].exact().unwrap().capacity.is_empty());
        let result = &claim.allocation.as_ref().unwrap().devices[0];
        assert!(result.share.is_some(), "{release}");
    }
}

/// Upstream's validation of request policies and share IDs, message for message.
#[test]
fn bad_policies_and_share_ids_are_named_as_the_api_server_names_them() {
    let device = |capacity: &str| {
        slice(&format!(
            "{{name: g, allowMultipleAllocations: true, capacity: {{memory: {{value: 10Gi, requestPolicy: {capacity}}}}}}}"
        ))
    };
    let at = "spec.devices[0].capacity.memory.requestPolicy";
    let cases = [
        (
            slice("{name: g, capacity: {memory: {value: 10Gi, requestPolicy: {default: 1Gi}}}}"),
            format!("{at}: Forbidden: allowMultipleAllocations must be true"),
        ),
        (
            device("{default: 1Gi, validValues: [1Gi], validRange: {min: 1Gi}}"),
            format!(
                "{at}: Forbidden: exactly one policy can be specified, cannot specify \"validValues\" and \"validRange\" at the same time"
            ),
        ),
        (
            device("{validValues: [1Gi]}"),
            format!("{at}.default: Required value: required when validValues is defined"),
        ),
        (
            device("{validRange: {min: 1Gi}}"),
            format!("{at}.default: Required value: required when validRange is defined"),
        ),
        (
            device("{default: 1Gi, validValues: [2Gi, 1Gi]}"),
            format!(
                "{at}.validValues[1]: Invalid value: \"1Gi\": values must be sorted in ascending order"
            ),
        ),
        (
            device("{default: 1Gi, validValues: [1Gi, 20Gi]}"),
            format!(
                "{at}.validValues[1]: Invalid value: \"20Gi\": option is larger than capacity value: 10Gi"
            ),
        ),
        (
            device("{default: 1Gi, validValues: [1Gi, 1Gi]}"),
            format!("{at}.validValues[1]: Duplicate value: \"1073741824\""),
        ),
        (
            device("{default: 3Gi, validValues: [1Gi, 2Gi]}"),
            format!(
                "{at}.validValues: Invalid value: \"3Gi\": default value is not valid according to the requestPolicy"
            ),
        ),
        (
            device(&format!(
                "{{default: 1, validValues: [{}]}}",
                (1..=11)
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            format!("{at}.validValues: Too many: 11: must have at most 10 items"),
        ),
        (
            device("{default: 20Gi, validRange: {min: 20Gi}}"),
            format!(
                "{at}.validRange.min: Invalid value: \"20Gi\": min is larger than capacity value: 10Gi"
            ),
        ),
        (
            device("{default: 1Gi, validRange: {min: 2Gi}}"),
            format!("{at}.validRange.min: Invalid value: \"1Gi\": default is less than min: 2Gi"),
        ),
        (
            device("{default: 4Gi, validRange: {min: 4Gi, max: 2Gi}}"),
            format!("{at}.validRange.max: Invalid value: \"4Gi\": min is larger than max: 2Gi"),
        ),
        (
            device("{default: 1Gi, validRange: {min: 1Gi, max: 20Gi}}"),
            format!(
                "{at}.validRange.max: Invalid value: \"20Gi\": max is larger than capacity value: 10Gi"
            ),
        ),
        (
            device("{default: 8Gi, validRange: {min: 1Gi, max: 4Gi}}"),
            format!("{at}.validRange.max: Invalid value: \"8Gi\": default is more than max: 4Gi"),
        ),
        (
            device("{default: 6Gi, validRange: {min: 6Gi, step: 6Gi}}"),
            format!(
                "{at}.validRange.step: Invalid value: \"6Gi\": one step 12Gi is larger than capacity value: 10Gi"
            ),
        ),
        (
            device("{default: 2Gi, validRange: {min: 1Gi, step: 2Gi}}"),
            format!(
                "{at}.validRange.step: Invalid value: \"2Gi\": value is not a multiple of a given step (2Gi) from (1Gi)"
            ),
        ),
        (
            device("{default: 1Gi, validRange: {min: 1Gi, step: '0'}}"),
            format!("{at}.validRange.step: Invalid value: \"0\": must be at least one whole unit"),
        ),
    ];
    for (text, expected) in cases {
        let error = decode(Release::at(36), &text).unwrap_err();
        assert!(error.contains(&expected), "{error}\n  expected: {expected}");
    }
    // A policy with only a default is not checked against the capacity (upstream).
    assert!(decode(Release::at(36), &device("{default: 20Gi}")).is_ok());
    let share = |id: &str| CLAIM.replace("1c7b8c6e-8a55-4c2a-9d7e-3f6a1e0b2c4d", id);
    let results = "status.allocation.devices.results[0].shareID";
    for (id, detail) in [
        ("abc", "error validating uid: invalid UUID length: 3".to_string()),
        (
            "1C7B8C6E-8A55-4C2A-9D7E-3F6A1E0B2C4D",
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters".to_string(),
        ),
    ] {
        let error = decode(Release::at(36), &share(id)).unwrap_err();
        let expected = format!("{results}: Invalid value: \"{id}\": {detail}");
        assert!(error.contains(&expected), "{error}\n  expected: {expected}");
    }
}

/// DRAFractionalCapacityRange (beta and on in v1.37): the rows of v1.37's
/// `validation_device_capacity_test.go` that set the gate, each decoded with it on (v1.37)
/// and off (v1.37 with the gate off, and v1.36, where it does not exist).
#[test]
fn fractional_ranges_and_values_are_validated_in_thousandths_from_v1_37() {
    let device = |value: &str, policy: &str| {
        slice(&format!(
            "{{name: g, allowMultipleAllocations: true, capacity: {{memory: {{value: '{value}', requestPolicy: {policy}}}}}}}"
        ))
    };
    let at = "spec.devices[0].capacity.memory.requestPolicy";
    let on = Release::at(37);
    let offs = [
        Release::parse(Some("1.37"), Some("DRAFractionalCapacityRange=false")).unwrap(),
        Release::at(36),
    ];
    // (device, with the gate on, with it off): None where it decodes.
    let cases = [
        (
            // valid-fractional-values
            device("10Gi", "{default: 100m, validValues: [100m, 200m, '1']}"),
            None,
            Some(format!("{at}.validValues[1]: Duplicate value: \"1\"")),
        ),
        (
            // valid-range-fractional-step
            device(
                "1",
                "{default: 200m, validRange: {min: 200m, max: '1', step: 100m}}",
            ),
            None,
            None,
        ),
        (
            // invalid-range-fractional-step-not-aligned; fractional-range-gate-disabled-misaligned
            device(
                "1",
                "{default: 250m, validRange: {min: 200m, max: '1', step: 100m}}",
            ),
            Some(format!(
                "{at}.validRange.step: Invalid value: \"250m\": value is not a multiple of a given step (100m) from (200m)"
            )),
            None,
        ),
        (
            // fractional-too-fine-precision
            device("1", "{default: 20u, validRange: {min: 10u}}"),
            Some(format!(
                "{at}.validRange.default: Invalid value: \"20u\": value cannot be represented as a milli value"
            )),
            None,
        ),
        (
            // invalid-options-duplicate-normalized, either way
            device("10Gi", "{default: 1Ki, validValues: [1Ki, '1024']}"),
            Some(format!("{at}.validValues[1]: Duplicate value: \"1024\"")),
            Some(format!("{at}.validValues[1]: Duplicate value: \"1024\"")),
        ),
        (
            // A whole range keeps whole units: its default rounds up onto the step.
            device("10", "{default: 1500m, validRange: {min: '1', step: '1'}}"),
            None,
            None,
        ),
        (
            // Gantry's own: a zero step divides by zero upstream.
            device("1", "{default: 100m, validRange: {min: 100m, step: '0'}}"),
            Some(format!(
                "{at}.validRange.step: Invalid value: \"0\": must be greater than zero"
            )),
            Some(format!(
                "{at}.validRange.step: Invalid value: \"0\": must be at least one whole unit"
            )),
        ),
    ];
    for (text, gate_on, gate_off) in cases {
        let releases = std::iter::once((on, &gate_on)).chain(offs.iter().map(|r| (*r, &gate_off)));
        for (release, expected) in releases {
            match (decode(release, &text), expected) {
                (Ok(_), None) => {}
                (Err(error), Some(expected)) => {
                    assert!(
                        error.contains(expected.as_str()),
                        "{release}: {error}\n  expected: {expected}"
                    )
                }
                (got, expected) => panic!(
                    "{release}: {text}\n  got {:?}\n  expected {expected:?}",
                    got.err()
                ),
            }
        }
    }
}
