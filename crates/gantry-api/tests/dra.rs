//! Decoding resource.k8s.io/v1 objects and pods' `spec.resourceClaims`.

use std::sync::Arc;

use gantry_api::decode::ClusterObjects;
use gantry_api::dra::*;
use gantry_api::{Release, Sym};

const OBJECTS: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: net}
spec:
  driver: nic.example.com
  nodeSelector:
    nodeSelectorTerms: [{matchExpressions: [{key: rack, operator: In, values: [r1]}]}]
  pool: {name: fabric, generation: 3, resourceSliceCount: 2}
  devices:
  - name: port-0
    attributes:
      speed: {int: 100}
      example.com/healthy: {bool: true}
      firmware: {version: 1.2.3}
    capacity:
      bandwidth: {value: 1500m}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: nic
  namespace: team
  uid: claim-uid
  ownerReferences: [{apiVersion: v1, kind: Pod, name: p, uid: pod-uid, controller: true}]
spec:
  devices:
    requests:
    - name: all-ports
      exactly: {deviceClassName: nic, allocationMode: All}
    - name: two
      exactly:
        deviceClassName: nic
        count: 2
        selectors: [{cel: {expression: 'device.attributes["nic.example.com"].speed >= 100'}}]
    constraints:
    - {matchAttribute: nic.example.com/speed, requests: [two]}
status:
  allocation:
    devices:
      results: [{request: two, driver: nic.example.com, pool: fabric, device: port-0}]
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [n1]}]}]
  reservedFor: [{resource: pods, name: p, uid: pod-uid}]
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: team}
spec:
  containers: [{name: c}]
  resourceClaims:
  - {name: nic, resourceClaimName: nic}
  - {name: gpu, resourceClaimTemplateName: one-gpu}
status:
  resourceClaimStatuses: [{name: gpu, resourceClaimName: p-gpu-x7k2q}]
"#;

fn qualified(domain: &str, id: &str) -> QualifiedName {
    QualifiedName {
        domain: Sym::new(domain),
        id: Sym::new(id),
    }
}

#[test]
fn slices_claims_and_pod_claims_decode() {
    let objects = ClusterObjects::decode(OBJECTS, "dra.yaml").unwrap();
    let slice = &objects.dra.slices[0];
    assert_eq!(slice.pool_generation, 3);
    assert_eq!(slice.pool_slice_count, 2);
    assert!(matches!(&slice.nodes, SliceNodes::Selector(s) if s.terms.len() == 1));
    let device = &slice.devices[0];
    assert_eq!(
        device.attribute(qualified("nic.example.com", "speed")),
        Some(&AttributeValue::Int(100)),
        "a bare name belongs to the driver's domain"
    );
    assert_eq!(
        device.attribute(qualified("example.com", "healthy")),
        Some(&AttributeValue::Bool(true))
    );
    assert_eq!(
        device.attribute(qualified("nic.example.com", "firmware")),
        Some(&AttributeValue::Version(Arc::from("1.2.3")))
    );
    assert_eq!(
        device.capacity,
        [gantry_api::dra::DeviceCapacity::new(
            qualified("nic.example.com", "bandwidth"),
            "bandwidth",
            1500
        )]
    );

    let claim = &objects.dra.claims[0];
    assert_eq!(claim.key().namespace, Sym::new("team"));
    assert_eq!(claim.owner_pod.as_deref(), Some("pod-uid"));
    let exact = |i: usize| claim.spec.requests[i].exact().unwrap();
    assert_eq!(exact(0).mode, AllocationMode::All);
    assert_eq!(exact(1).mode, AllocationMode::ExactCount(2));
    assert_eq!(exact(1).selectors.len(), 1);
    assert_eq!(
        claim.spec.constraints[0].attribute,
        qualified("nic.example.com", "speed")
    );
    assert_eq!(&*claim.spec.constraints[0].requests[0], "two");
    let allocation = claim.allocation.as_ref().unwrap();
    assert_eq!(allocation.devices[0].device.device, Sym::new("port-0"));
    assert!(allocation.node_selector.is_some());
    assert!(claim.is_reserved_for("pod-uid"));
    assert!(claim.can_be_reserved());

    let pod = &objects.pods[0];
    assert_eq!(pod.resource_claims.len(), 2);
    assert_eq!(&*pod.claim_name(&pod.resource_claims[0]), "nic");
    assert_eq!(
        &*pod.claim_name(&pod.resource_claims[1]),
        "p-gpu-x7k2q",
        "the generated name from the pod's status"
    );
    assert!(objects.ignored.is_empty());
}

#[test]
fn bad_dra_fields_are_named() {
    let cases = [
        (
            "{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: c},
              spec: {devices: {requests: [{name: r, exactly: {deviceClassName: x, count: 40}}]}}}",
            "ResourceClaim c: spec.devices.requests[0].exactly.count: must be 1 to 32, not 40",
        ),
        (
            "{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {name: s},
              spec: {driver: d, pool: {name: p, generation: 1, resourceSliceCount: 1}}}",
            "ResourceSlice s: spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
        ),
        (
            "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}],
              resourceClaims: [{name: x}]}}",
            "Pod default/p: spec.resourceClaims[0]: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
        ),
        (
            "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}],
              resourceClaims: [{name: x, resourceClaimName: a, resourceClaimTemplateName: t}]}}",
            "Pod default/p: spec.resourceClaims[0]: at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
        ),
        (
            "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}],
              resourceClaims: [{name: a, resourceClaimName: a}, {name: a, resourceClaimTemplateName: t}]}}",
            "Pod default/p: spec.resourceClaims[1].name: Duplicate value: \"a\"",
        ),
        (
            "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}],
              resourceClaims: [{name: A_1, resourceClaimName: a}]}}",
            "Pod default/p: spec.resourceClaims[0].name: Invalid value: \"A_1\": a lowercase RFC 1123 label",
        ),
        (
            "{apiVersion: v1, kind: Pod, metadata: {name: p},
              spec: {containers: [{name: c, resources: {claims: [{name: zz}]}}],
              resourceClaims: [{name: b, resourceClaimName: b}, {name: a, resourceClaimName: a}]}}",
            "Pod default/p: spec.containers[0].resources.claims[0]: Not found: \"zz\": must be one of the names in pod.spec.resourceClaims: a, b",
        ),
        (
            "{apiVersion: v1, kind: Pod, metadata: {name: p},
              spec: {initContainers: [{name: i, resources: {claims: [{name: zz}]}}], containers: [{name: c}]}}",
            "Pod default/p: spec.initContainers[0].resources.claims[0]: Not found: \"zz\": must be one of the names in pod.spec.resourceClaims which is empty",
        ),
        (
            "{apiVersion: v1, kind: Pod, metadata: {name: p},
              spec: {containers: [{name: c, resources: {claims: [{name: a, request: r}, {name: a}]}}],
              resourceClaims: [{name: a, resourceClaimName: a}]}}",
            "Pod default/p: spec.containers[0].resources.claims[1]: Duplicate value: \"a\"",
        ),
        (
            "{apiVersion: v1, kind: Pod, metadata: {name: p},
              spec: {containers: [{name: c, resources: {claims: [{name: a, request: r}, {name: a, request: r}]}}],
              resourceClaims: [{name: a, resourceClaimName: a}]}}",
            "Pod default/p: spec.containers[0].resources.claims[1]: Duplicate value: \"a/r\"",
        ),
        (
            "{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {name: s},
              spec: {driver: d, nodeName: node-1, pool: {name: p, generation: 1, resourceSliceCount: 1},
              devices: [{name: x, attributes: {v: {version: 1.2.x}}}]}}",
            "ResourceSlice s: spec.devices[0].attributes.v.version: Invalid value: \"1.2.x\": must be a string compatible with semver.org spec 2.0.0",
        ),
        (
            "{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: c},
              spec: {devices: {requests: [{name: r, exactly: {deviceClassName: x, adminAccess: false}},
                                          {name: r, exactly: {deviceClassName: z}}]}}}",
            "ResourceClaim c: spec.devices.requests[1].name: Duplicate value: \"r\"",
        ),
    ];
    // The API server's limits: a selector expression of at most 10 KiB (refused before it
    // is compiled), at most 32 attributes and capacities per device, strings of 64 bytes.
    let long = format!(
        "{{apiVersion: resource.k8s.io/v1, kind: DeviceClass, metadata: {{name: k}},
          spec: {{selectors: [{{cel: {{expression: '{}'}}}}]}}}}",
        "1 + ".repeat(2560) + "1"
    );
    let attributes: Vec<String> = (0..33).map(|i| format!("a{i}: {{int: {i}}}")).collect();
    let many = format!(
        "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: s}},
          spec: {{driver: d, nodeName: node-1, pool: {{name: p, generation: 1, resourceSliceCount: 1}},
          devices: [{{name: x, attributes: {{{}}}}}]}}}}",
        attributes.join(", ")
    );
    let wordy = format!(
        "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: s}},
          spec: {{driver: d, nodeName: node-1, pool: {{name: p, generation: 1, resourceSliceCount: 1}},
          devices: [{{name: x, attributes: {{model: {{string: {}}}}}}}]}}}}",
        "m".repeat(65)
    );
    let limits = [
        (
            long,
            "DeviceClass k: spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes",
        ),
        (
            many,
            "ResourceSlice s: spec.devices[0]: Invalid value: 33: the total number of attributes and capacities must not exceed 32",
        ),
        (
            wordy,
            "ResourceSlice s: spec.devices[0].attributes.model.string: Too long: may not be more than 64 bytes",
        ),
    ];
    let cases = cases.map(|(text, expected)| (text.to_string(), expected));
    for (text, expected) in cases.into_iter().chain(limits) {
        let error = ClusterObjects::decode(&text, "in").unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
    }
}

/// A claim with `firstAvailable` (gate DRAPrioritizedList, on by default from v1.34).
const PRIORITIZED: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: team}
spec:
  devices:
    requests:
    - name: nic
      exactly: {deviceClassName: nic}
    - name: gpu
      firstAvailable:
      - name: big
        deviceClassName: gpu.example.com
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].memory >= 80'}}]
      - {name: small, deviceClassName: gpu.example.com, count: 2}
      - {name: all, deviceClassName: gpu.example.com, allocationMode: All}
      - {name: many, deviceClassName: gpu.example.com, count: 40}
    constraints:
    - {matchAttribute: gpu.example.com/numa, requests: [nic, gpu]}
    - {matchAttribute: gpu.example.com/pcie, requests: [gpu/small]}
status:
  allocation:
    devices:
      results: [{request: gpu/small, driver: gpu.example.com, pool: p, device: d0}]
"#;

#[test]
fn first_available_decodes_with_the_gate_on() {
    let objects = ClusterObjects::decode(PRIORITIZED, "claim.yaml").unwrap();
    let claim = &objects.dra.claims[0];
    assert_eq!(
        claim.spec.requests[0].exact().unwrap().device_class,
        Sym::new("nic")
    );
    assert!(claim.spec.requests[0].first_available().is_empty());
    let gpu = &claim.spec.requests[1];
    assert!(gpu.exact().is_none());
    let subs = gpu.first_available();
    let names: Vec<&str> = subs.iter().map(|s| &*s.name).collect();
    assert_eq!(names, ["big", "small", "all", "many"]);
    assert_eq!(subs[0].device_class, Sym::new("gpu.example.com"));
    assert_eq!(subs[0].selectors.len(), 1);
    assert_eq!(
        subs[0].mode,
        AllocationMode::ExactCount(1),
        "count defaults to 1"
    );
    assert_eq!(subs[1].mode, AllocationMode::ExactCount(2));
    assert_eq!(subs[2].mode, AllocationMode::All);
    assert_eq!(
        subs[3].mode,
        AllocationMode::ExactCount(40),
        "the API server takes any count above zero; the allocator skips what cannot fit"
    );
    assert_eq!(&*claim.spec.constraints[1].requests[0], "gpu/small");
    let allocation = claim.allocation.as_ref().unwrap();
    assert_eq!(&*allocation.devices[0].request, "gpu/small");
    assert!(is_subrequest_ref(&allocation.devices[0].request));
    assert!(!is_subrequest_ref("gpu") && !is_subrequest_ref("a/b/c"));
}

/// With the gate off the API server drops `firstAvailable` on create (as upstream's
/// `dropDisabledDRAPrioritizedListFields`); a request left with neither field is then
/// refused, one that also has `exactly` keeps it.
#[test]
fn first_available_is_dropped_with_the_gate_off() {
    let off = Release::parse(Some("1.34"), Some("DRAPrioritizedList=false")).unwrap();
    let mut objects = ClusterObjects::for_release(off);
    let error = objects
        .decode_more(PRIORITIZED, "claim.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "ResourceClaim team/gpu: spec.devices.requests[1]: Required value: exactly one of `exactly` or `firstAvailable` is required"
        ),
        "{error}"
    );
    let both = "{apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate, metadata: {name: t},
        spec: {spec: {devices: {requests: [{name: r, exactly: {deviceClassName: c},
          firstAvailable: [{name: s, deviceClassName: d}]}]}}}}";
    let mut objects = ClusterObjects::for_release(off);
    objects.decode_more(both, "t.yaml").unwrap();
    let request = &objects.dra.templates[0].spec.requests[0];
    assert_eq!(request.exact().unwrap().device_class, Sym::new("c"));
    assert!(request.first_available().is_empty());
    // v1.33 had the gate off by default; the field is dropped there too.
    let mut objects = ClusterObjects::for_release(Release::at(33));
    assert!(objects.decode_more(both, "t.yaml").is_ok());
    // With the gate on, both fields are refused.
    let error = ClusterObjects::decode(both, "t.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "ResourceClaimTemplate t: spec.spec.devices.requests[0]: Invalid value: \"null\": exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
        ),
        "{error}"
    );
}

/// `distinctAttribute` (DRAConsumableCapacity, beta and on from v1.36) is read as a
/// constraint; with the gate off the API server drops it, and a constraint left with
/// neither attribute is refused as it refuses it; with both, `matchAttribute` is kept.
#[test]
fn distinct_attribute_follows_its_gate() {
    let claim = |constraint: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {{name: c, namespace: team}},
              spec: {{devices: {{requests: [{{name: r, exactly: {{deviceClassName: gpu, count: 2}}}}],
                constraints: [{constraint}]}}}}}}"
        )
    };
    let decoded = ClusterObjects::decode(
        &claim("{distinctAttribute: gpu.example.com/numa}"),
        "c.yaml",
    )
    .unwrap();
    let constraint = &decoded.dra.claims[0].spec.constraints[0];
    assert_eq!(constraint.kind, ConstraintKind::Distinct);
    assert_eq!(constraint.attribute, qualified("gpu.example.com", "numa"));
    let both =
        claim("{distinctAttribute: gpu.example.com/numa, matchAttribute: gpu.example.com/pcie}");
    let decoded = ClusterObjects::decode(&both, "c.yaml").unwrap();
    let constraint = &decoded.dra.claims[0].spec.constraints[0];
    assert_eq!(constraint.kind, ConstraintKind::Match);
    assert_eq!(constraint.attribute, qualified("gpu.example.com", "pcie"));

    let error = ClusterObjects::decode(&claim("{requests: [r]}"), "c.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            r#"ResourceClaim team/c: spec.devices.constraints[0]: Required value: exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set"#
        ),
        "{error}"
    );
    let off = Release::parse(Some("1.36"), Some("DRAConsumableCapacity=false")).unwrap();
    for release in [off, Release::at(35)] {
        let mut objects = ClusterObjects::for_release(release);
        let error = objects
            .decode_more(
                &claim("{distinctAttribute: gpu.example.com/numa}"),
                "c.yaml",
            )
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "ResourceClaim team/c: spec.devices.constraints[0].matchAttribute: Required value"
            ),
            "{release}: {error}"
        );
    }
}

/// DeviceTaintRules (DRADeviceTaintRules: GA and on in v1.37; v1.36 with the gate on):
/// each rule's taint is appended to the devices its selector picks, after the device's
/// own, whether the rule is read before or after the slice (upstream's tracker,
/// `applyPatches`); no selector picks every device; a bad taint is refused at its field.
#[test]
fn device_taint_rules_taint_the_devices_they_pick() {
    let slice = |name: &str, driver: &str, pool: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: {name}}},
              spec: {{driver: {driver}, nodeName: node-1, pool: {{name: {pool}, generation: 1, resourceSliceCount: 1}},
              devices: [{{name: g0, taints: [{{key: own, effect: NoExecute}}]}}, {{name: g1}}]}}}}"
        )
    };
    let rule = |name: &str, selector: &str, effect: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1beta2, kind: DeviceTaintRule, metadata: {{name: {name}}},
              spec: {{{selector} taint: {{key: example.com/{name}, value: x, effect: {effect}}}}}}}"
        )
    };
    let text = [
        slice("a", "gpu.example.com", "p1"),
        rule(
            "g1-of-p1",
            "deviceSelector: {driver: gpu.example.com, pool: p1, device: g1},",
            "NoSchedule",
        ),
        rule("everything", "", "NoExecute"),
        slice("b", "nic.example.com", "p1"),
    ]
    .join("\n---\n");
    let taints_of = |objects: &ClusterObjects, slice: usize, device: usize| -> Vec<String> {
        let slice = &objects.dra.slices[slice];
        slice.devices[device]
            .taints
            .iter()
            .map(|t| t.to_string())
            .collect()
    };
    for release in [
        Release::at(37),
        Release::parse(Some("1.36"), Some("DRADeviceTaintRules=true")).unwrap(),
    ] {
        let mut objects = ClusterObjects::for_release(release);
        objects.decode_more(&text, "o.yaml").unwrap();
        assert!(objects.warnings.is_empty(), "{:?}", objects.warnings);
        assert_eq!(
            taints_of(&objects, 0, 0),
            ["own:NoExecute", "example.com/everything=x:NoExecute"]
        );
        assert_eq!(
            taints_of(&objects, 0, 1),
            [
                "example.com/g1-of-p1=x:NoSchedule",
                "example.com/everything=x:NoExecute"
            ]
        );
        // Read after both rules: only the one without a selector picks it.
        assert_eq!(
            taints_of(&objects, 1, 0),
            ["own:NoExecute", "example.com/everything=x:NoExecute"]
        );
        assert_eq!(
            taints_of(&objects, 1, 1),
            ["example.com/everything=x:NoExecute"]
        );
    }
    let error = ClusterObjects::decode(&rule("bad", "", "Sometimes"), "o.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("DeviceTaintRule bad: spec.taint.effect: Unsupported value: \"Sometimes\""),
        "{error}"
    );
    let error = ClusterObjects::decode(
        "{apiVersion: resource.k8s.io/v2, kind: DeviceTaintRule, metadata: {name: r}, spec: {taint: {key: k, effect: NoSchedule}}}",
        "o.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("DeviceTaintRule r: apiVersion:"), "{error}");
}

/// Objects read apart and put together (a live import lists kind by kind) are tainted
/// as if read together: a rule taints the other side's slices in either order.
#[test]
fn taint_rules_reach_slices_read_apart() {
    let read = |text: &str| {
        let mut objects = ClusterObjects::for_release(Release::at(37));
        objects.decode_more(text, "o.yaml").unwrap();
        objects.dra
    };
    let slice = "{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {name: s},
        spec: {driver: d.example.com, nodeName: n1, pool: {name: p, generation: 1, resourceSliceCount: 1},
        devices: [{name: g}]}}";
    let rule = "{apiVersion: resource.k8s.io/v1, kind: DeviceTaintRule, metadata: {name: r},
        spec: {taint: {key: example.com/broken, effect: NoSchedule}}}";
    for (first, second) in [(slice, rule), (rule, slice)] {
        let mut together = read(first);
        together.extend(read(second));
        let taints: Vec<String> = (together.slices[0].devices[0].taints.iter())
            .map(|t| t.to_string())
            .collect();
        assert_eq!(taints, ["example.com/broken:NoSchedule"]);
    }
}

/// `adminAccess` is kept while DRAAdminAccess is on (GA and locked from v1.36) and dropped
/// while it is off (v1.33's default, `dropDisabledDRAAdminAccessFields`); an allocation
/// result given for admin access keeps its flag whatever the gate.
#[test]
fn admin_access_follows_its_gate() {
    let claim = "{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: c},
        spec: {devices: {requests: [{name: r, exactly: {deviceClassName: x, adminAccess: true}}]}},
        status: {allocation: {devices: {results: [
          {request: r, driver: d, pool: p, device: g, adminAccess: true}]}}}}";
    let admin_of = |release: Release| {
        let mut objects = ClusterObjects::for_release(release);
        objects.decode_more(claim, "c.yaml").unwrap();
        let claim = &objects.dra.claims[0];
        let allocation = claim.allocation.as_ref().unwrap();
        (
            claim.spec.requests[0].exact().unwrap().admin_access,
            allocation.devices[0].admin_access,
            allocation.held_devices().count(),
        )
    };
    assert_eq!(admin_of(Release::at(36)), (true, true, 0));
    assert_eq!(admin_of(Release::at(33)), (false, true, 0));
    assert!(Release::parse(Some("1.36"), Some("DRAAdminAccess=false")).is_err());
}

/// Device taints and tolerations (DRADeviceTaints): kept from v1.36 (beta, on), dropped
/// at v1.35 (alpha, off) as the API server drops them, and validated as
/// `validateDeviceTaint` and `validateDeviceToleration` do (an unset operator is `Equal`).
#[test]
fn device_taints_and_tolerations_follow_their_gate() {
    let objects = "{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {name: s},
        spec: {driver: d, nodeName: node-1, pool: {name: p, generation: 1, resourceSliceCount: 1},
        devices: [{name: g, taints: [{key: example.com/broken, value: 'yes', effect: NoSchedule}]}]}}
---
{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: c},
        spec: {devices: {requests: [{name: r, exactly: {deviceClassName: x,
          tolerations: [{key: example.com/broken, value: 'yes'}, {operator: Exists, effect: NoExecute}]}},
          {name: f, firstAvailable: [{name: s, deviceClassName: x, tolerations: [{operator: Exists}]}]}]}}}";
    let decoded = |release: Release| {
        let mut decoded = ClusterObjects::for_release(release);
        decoded.decode_more(objects, "o.yaml").unwrap();
        decoded
    };
    let v136 = decoded(Release::at(36));
    let taints = &v136.dra.slices[0].devices[0].taints;
    assert_eq!(
        taints,
        &[DeviceTaint {
            key: Sym::new("example.com/broken"),
            value: Sym::new("yes"),
            effect: TaintEffect::NoSchedule
        }]
    );
    let requests = &v136.dra.claims[0].spec.requests;
    let exact = &requests[0].exact().unwrap().tolerations;
    assert_eq!(exact.len(), 2);
    assert!(!exact[0].exists && exact[0].tolerates(&taints[0]));
    assert!(exact[1].exists && exact[1].key.is_none() && !exact[1].tolerates(&taints[0]));
    assert!(requests[1].first_available()[0].tolerations[0].tolerates(&taints[0]));
    // Taint rules are off in v1.36 (beta, off by default), and the decoder says so.
    let rule =
        "{apiVersion: resource.k8s.io/v1beta2, kind: DeviceTaintRule, metadata: {name: broken},
        spec: {taint: {key: k, effect: NoSchedule}}}";
    let mut with_rule = ClusterObjects::for_release(Release::at(36));
    with_rule.decode_more(rule, "r.yaml").unwrap();
    assert_eq!(with_rule.warnings.len(), 1);
    assert!(
        with_rule.warnings[0].message.contains(
            "DRADeviceTaintRules is off in v1.36: the taint this rule gives devices is not applied"
        ),
        "{:?}",
        with_rule.warnings
    );
    let v135 = decoded(Release::at(35));
    assert!(v135.dra.slices[0].devices[0].taints.is_empty());
    assert!(
        v135.dra.claims[0].spec.requests[0]
            .exact()
            .unwrap()
            .tolerations
            .is_empty()
    );
    let error = |text: &str| {
        ClusterObjects::decode(text, "o.yaml")
            .unwrap_err()
            .to_string()
    };
    let slice = |taint: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: s}},
            spec: {{driver: d, nodeName: node-1, pool: {{name: p, generation: 1, resourceSliceCount: 1}},
            devices: [{{name: g, taints: [{taint}]}}]}}}}"
        )
    };
    assert!(
        error(&slice("{key: k, effect: Sometimes}")).contains(
            "spec.devices[0].taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoExecute\", \"NoSchedule\", \"None\""
        ),
        "{}",
        error(&slice("{key: k, effect: Sometimes}"))
    );
    assert!(error(&slice("{key: k}")).contains("spec.devices[0].taints[0].effect: Required value"));
    let claim = "{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: c},
        spec: {devices: {requests: [{name: r, exactly: {deviceClassName: x,
          tolerations: [{key: k, operator: Exists, value: v}]}}]}}}";
    assert!(
        error(claim).contains(
            "spec.devices.requests[0].exactly.tolerations[0].value: Invalid value: \"v\": must be empty for operator `Exists`"
        ),
        "{}",
        error(claim)
    );
}

/// Upstream's `validateDeviceSubRequest`, `validateSet` and `validateRequestNameRef`.
#[test]
fn bad_subrequests_are_named() {
    let claim = |requests: &str, constraints: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {{name: c}},
              spec: {{devices: {{requests: [{requests}], constraints: [{constraints}]}}}}}}"
        )
    };
    let subs = |list: &str| claim(&format!("{{name: r, firstAvailable: [{list}]}}"), "");
    let nine: Vec<String> = (0..9)
        .map(|i| format!("{{name: s{i}, deviceClassName: c}}"))
        .collect();
    let cases = [
        (
            subs("{name: a, deviceClassName: c}, {name: b}"),
            "ResourceClaim c: spec.devices.requests[0].firstAvailable[1].deviceClassName: Required value",
        ),
        (
            subs("{name: A, deviceClassName: c}"),
            "spec.devices.requests[0].firstAvailable[0].name: Invalid value: \"A\": a lowercase RFC 1123 label",
        ),
        (
            subs("{name: a, deviceClassName: Bad_Class}"),
            "spec.devices.requests[0].firstAvailable[0].deviceClassName: Invalid value: \"Bad_Class\": a lowercase RFC 1123 subdomain",
        ),
        (
            subs("{name: a, deviceClassName: c, count: 0}"),
            "spec.devices.requests[0].firstAvailable[0].count: Invalid value: 0: must be greater than zero",
        ),
        (
            subs("{name: a, deviceClassName: c, allocationMode: All, count: 2}"),
            "spec.devices.requests[0].firstAvailable[0].count: Invalid value: 2: must not be specified when allocationMode is 'All'",
        ),
        (
            subs("{name: a, deviceClassName: c, allocationMode: Some}"),
            "spec.devices.requests[0].firstAvailable[0].allocationMode: Unsupported value: \"Some\": supported values: \"All\", \"ExactCount\"",
        ),
        (
            subs("{name: a, deviceClassName: c, selectors: [{}]}"),
            "spec.devices.requests[0].firstAvailable[0].selectors[0].cel: required",
        ),
        (
            subs("{name: a, deviceClassName: c}, {name: a, deviceClassName: d}"),
            "spec.devices.requests[0].firstAvailable[1]: Duplicate value: \"a\"",
        ),
        (
            subs(&nine.join(", ")),
            "spec.devices.requests[0].firstAvailable: Too many: 9: must have at most 8 items",
        ),
        (
            subs("{name: a, deviceClassName: c, tolerations: [{operator: Never}]}"),
            "spec.devices.requests[0].firstAvailable[0].tolerations[0].operator: Unsupported value: \"Never\": supported values: \"Equal\", \"Exists\"",
        ),
        (
            claim("{name: r}", ""),
            "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required",
        ),
        (
            claim(
                "{name: r, firstAvailable: [{name: a, deviceClassName: c}]}",
                "{matchAttribute: d.example.com/a, requests: [r/b]}",
            ),
            "spec.devices.constraints[0].requests[0]: Invalid value: \"r/b\": must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
        ),
        (
            claim(
                "{name: r, exactly: {deviceClassName: c}}",
                "{matchAttribute: d.example.com/a, requests: [r/a]}",
            ),
            "spec.devices.constraints[0].requests[0]: Invalid value: \"r/a\": must be the name",
        ),
        (
            claim(
                "{name: r, exactly: {deviceClassName: c}}",
                "{matchAttribute: d.example.com/a, requests: [x]}",
            ),
            "spec.devices.constraints[0].requests[0]: Invalid value: \"x\": must be the name",
        ),
    ];
    for (text, expected) in cases {
        let error = ClusterObjects::decode(&text, "in").unwrap_err().to_string();
        assert!(error.contains(expected), "{error}\n  expected: {expected}");
    }
}

/// A device's version attribute is what the API server's `semverRe` takes (semver.org 2.0.0's
/// own examples of valid and invalid versions).
#[test]
fn version_attributes_are_semantic_versions() {
    let slice = |version: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: s}},
              spec: {{driver: d, nodeName: node-1, pool: {{name: p, generation: 1, resourceSliceCount: 1}},
              devices: [{{name: x, attributes: {{v: {{version: '{version}'}}}}}}]}}}}"
        )
    };
    let valid = [
        "1.2.3",
        "0.0.0",
        "10.20.30",
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-0.3.7",
        "1.0.0-x.7.z.92",
        "1.0.0-x-y-z.--",
        "1.0.0+20130313144700",
        "1.0.0-beta+exp.sha.5114f85",
        "1.0.0+21AF26D3----117B344092BD",
        "1.0.0-0A.is.legal",
    ];
    let invalid = [
        "1.2",
        "1.2.x",
        "01.2.3",
        "1.02.3",
        "1.2.03",
        "1.2.3-01",
        "1.2.3-",
        "1.2.3+",
        "1.2.3-a..b",
        "v1.2.3",
        "1.2.3.4",
        "1.2.3+a+b",
        "1.2.3-a_b",
        "",
        "-1.2.3",
    ];
    for version in valid {
        let objects = ClusterObjects::decode(&slice(version), "in");
        assert!(objects.is_ok(), "{version:?}: {:?}", objects.err());
    }
    for version in invalid {
        let error = ClusterObjects::decode(&slice(version), "in")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("must be a string compatible with semver.org spec 2.0.0"),
            "{version:?}: {error}"
        );
    }
}

/// Partitionable devices (DRAPartitionableDevices): a slice's `sharedCounters` and a
/// device's `consumesCounters` kept from v1.36 (beta, on), validated as the API server
/// validates them, and dropped while the gate is off (v1.35's default).
#[test]
fn counters_follow_their_gate_and_are_validated() {
    let objects = "
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: counters}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0
    counters: {memory: {value: 40Gi}, slices: {value: '7'}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: partitions}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 2}
  devices:
  - name: gpu-0-1g
    consumesCounters:
    - counterSet: gpu-0
      counters: {memory: {value: 10Gi}, slices: {value: '1'}}
";
    let decode = |release: Release| {
        let mut decoded = ClusterObjects::for_release(release);
        decoded.decode_more(objects, "gpu.yaml").unwrap();
        decoded.dra.slices
    };
    let v136 = decode(Release::at(36));
    let gi = 1024 * 1024 * 1024 * 1000_i64;
    assert_eq!(
        v136[0].shared_counters,
        vec![CounterSet {
            name: Sym::new("gpu-0"),
            counters: vec![(Sym::new("memory"), 40 * gi), (Sym::new("slices"), 7000)],
        }]
    );
    let consumption = &v136[1].devices[0].consumes_counters;
    assert_eq!(consumption[0].counter_set, Sym::new("gpu-0"));
    assert_eq!(consumption[0].counters[0], (Sym::new("memory"), 10 * gi));
    let v135 = decode(Release::at(35));
    assert!(v135[0].shared_counters.is_empty());
    assert!(v135[1].devices[0].consumes_counters.is_empty());
}

#[test]
fn bad_counters_are_named_as_the_api_server_names_them() {
    let slice = |spec: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: s}},
               spec: {{driver: d, nodeName: n1, pool: {{name: p, generation: 1, resourceSliceCount: 1}}, {spec}}}}}"
        )
    };
    let error = |spec: &str| {
        ClusterObjects::decode(&slice(spec), "s.yaml")
            .unwrap_err()
            .to_string()
    };
    let set = |name: &str| format!("{{name: {name}, counters: {{c: {{value: '1'}}}}}}");
    let nine: Vec<String> = (0..9).map(|i| set(&format!("s{i}"))).collect();
    let consuming = |n: usize| {
        let devices: Vec<String> = (0..n)
            .map(|i| format!("{{name: d{i}, consumesCounters: [{{counterSet: s, counters: {{c: {{value: '1'}}}}}}]}}"))
            .collect();
        format!("devices: [{}]", devices.join(", "))
    };
    let plain = |n: usize| {
        let devices: Vec<String> = (0..n).map(|i| format!("{{name: d{i}}}")).collect();
        format!("devices: [{}]", devices.join(", "))
    };
    let cases = [
        (
            format!("sharedCounters: [{}], devices: [{{name: g}}]", set("a")),
            "ResourceSlice s: spec: Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed".to_string(),
        ),
        (
            format!("sharedCounters: [{}]", nine.join(", ")),
            "spec.sharedCounters: Too many: 9: must have at most 8 items".to_string(),
        ),
        (
            format!("sharedCounters: [{}, {}]", set("a"), set("a")),
            "spec.sharedCounters[1]: Duplicate value: \"a\"".to_string(),
        ),
        (
            "sharedCounters: [{name: a, counters: {}}]".to_string(),
            "spec.sharedCounters[0].counters: Required value".to_string(),
        ),
        (
            "sharedCounters: [{name: A_b, counters: {c: {value: '1'}}}]".to_string(),
            "spec.sharedCounters[0].name: Invalid value: \"A_b\": a lowercase RFC 1123 label".to_string(),
        ),
        (
            "sharedCounters: [{name: a, counters: {Mem: {value: '1'}}}]".to_string(),
            "spec.sharedCounters[0].counters: Invalid value: \"Mem\"".to_string(),
        ),
        (
            "devices: [{name: g, consumesCounters: [{counterSet: a, counters: {c: {value: '1'}}}, {counterSet: b, counters: {c: {value: '1'}}}, {counterSet: c, counters: {c: {value: '1'}}}]}]".to_string(),
            "spec.devices[0].consumesCounters: Too many: 3: must have at most 2 items".to_string(),
        ),
        (
            "devices: [{name: g, consumesCounters: [{counterSet: '', counters: {c: {value: '1'}}}]}]".to_string(),
            "spec.devices[0].consumesCounters[0].counterSet: Required value".to_string(),
        ),
        (
            consuming(65),
            "spec.devices: Too many: 65: must have at most 64 items".to_string(),
        ),
        (
            plain(129),
            "spec.devices: Too many: 129: must have at most 128 items".to_string(),
        ),
    ];
    for (spec, expected) in cases {
        let error = error(&spec);
        assert!(error.contains(&expected), "{error}\n  expected: {expected}");
    }
    // 65 devices that consume counters are within the plain limit once the gate drops them.
    let off = Release::parse(Some("1.36"), Some("DRAPartitionableDevices=false")).unwrap();
    let mut objects = ClusterObjects::for_release(off);
    assert!(
        objects
            .decode_more(&slice(&consuming(65)), "s.yaml")
            .is_ok()
    );
    assert!(ClusterObjects::decode(&slice(&plain(128)), "s.yaml").is_ok());
}

/// Per-device node selection (DRAPartitionableDevices): with `perDeviceNodeSelection` each
/// device says where it is reachable; validated as the API server validates it, and with
/// the gate off the fields are dropped, which leaves the slice without any node field.
#[test]
fn per_device_node_selection_follows_its_gate_and_is_validated() {
    let slice = |spec: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: s}},
               spec: {{driver: d, pool: {{name: p, generation: 1, resourceSliceCount: 1}}, {spec}}}}}"
        )
    };
    let good = slice(
        "perDeviceNodeSelection: true, devices: [{name: a, nodeName: n1}, {name: b, allNodes: true},
         {name: c, nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: rack, operator: In, values: [r1]}]}]}}]",
    );
    let objects = ClusterObjects::decode(&good, "s.yaml").unwrap();
    let SliceNodes::PerDevice(nodes) = &objects.dra.slices[0].nodes else {
        panic!("per-device nodes expected");
    };
    assert_eq!(nodes[0], SliceNodes::Node(Sym::new("n1")));
    assert_eq!(nodes[1], SliceNodes::All);
    assert!(matches!(&nodes[2], SliceNodes::Selector(s) if s.terms.len() == 1));
    assert_eq!(
        objects.dra.slices[0].node_name(),
        None,
        "shared, not local to a node"
    );

    let off = Release::parse(Some("1.36"), Some("DRAPartitionableDevices=false")).unwrap();
    let error = ClusterObjects::for_release(off)
        .decode_more(&good, "s.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("spec: Required value: exactly one of"),
        "{error}"
    );

    let error = |spec: &str| {
        ClusterObjects::decode(&slice(spec), "s.yaml")
            .unwrap_err()
            .to_string()
    };
    let per_device = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
    let cases = [
        (
            "perDeviceNodeSelection: true, devices: [{name: a}]".to_string(),
            format!("spec.devices[0]: Required value: {per_device}"),
        ),
        (
            "perDeviceNodeSelection: true, devices: [{name: a, nodeName: n1, allNodes: true}]".to_string(),
            format!("spec.devices[0]: Invalid value: \"{{`nodeName`, `allNodes`}}\": {per_device}, but multiple fields are set"),
        ),
        (
            "perDeviceNodeSelection: true, devices: [{name: a, nodeName: ''}]".to_string(),
            "spec.devices[0].nodeName: Invalid value: \"\": must not be empty".to_string(),
        ),
        (
            "nodeName: n1, devices: [{name: a, nodeName: n1}]".to_string(),
            "spec.devices[0]: Invalid value: \"null\": `nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec".to_string(),
        ),
        (
            "nodeName: n1, allNodes: true".to_string(),
            "spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set".to_string(),
        ),
        (
            "nodeName: n1, perDeviceNodeSelection: false".to_string(),
            "spec.perDeviceNodeSelection: Invalid value: false: must be either unset or set to true".to_string(),
        ),
        (
            "nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Exists}]}, {matchExpressions: [{key: b, operator: Exists}]}]}".to_string(),
            "spec.nodeSelector.nodeSelectorTerms: Invalid value: must have exactly one node selector term".to_string(),
        ),
    ];
    for (spec, expected) in cases {
        let error = error(&spec);
        assert!(error.contains(&expected), "{error}\n  expected: {expected}");
    }
}

/// Nodes publishing equal devices share one list (read once, judged once); a slice whose
/// devices differ anywhere, or that a DeviceTaintRule taints, has its own, and the others
/// keep theirs untainted.
#[test]
fn equal_device_lists_are_shared_and_a_taint_unshares_one() {
    let slice = |node: &str, memory: &str| {
        format!(
            "{{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {{name: {node}-gpus}},
              spec: {{driver: gpu.example.com, nodeName: {node}, pool: {{name: {node}, generation: 1, resourceSliceCount: 1}},
              devices: [{{name: g0, attributes: {{model: {{string: A100}}}}, capacity: {{memory: {{value: {memory}}}}}}}, {{name: g1}}]}}}}"
        )
    };
    let rule = "{apiVersion: resource.k8s.io/v1beta2, kind: DeviceTaintRule, metadata: {name: n3},
      spec: {deviceSelector: {pool: n3}, taint: {key: example.com/broken, effect: NoSchedule}}}";
    let text = [
        slice("n1", "80Gi"),
        slice("n2", "80Gi"),
        slice("n3", "80Gi"),
        slice("n4", "40Gi"),
        rule.to_string(),
    ]
    .join("\n---\n");
    let objects = ClusterObjects::decode(&text, "o.yaml").unwrap();
    let devices: Vec<&Arc<[Device]>> = objects.dra.slices.iter().map(|s| &s.devices).collect();
    assert!(Arc::ptr_eq(devices[0], devices[1]));
    assert!(
        !Arc::ptr_eq(devices[0], devices[2]),
        "tainted after reading"
    );
    assert!(!Arc::ptr_eq(devices[0], devices[3]), "another capacity");
    assert_eq!(devices[2][0].taints.len(), 1);
    assert!(devices[0].iter().all(|d| d.taints.is_empty()));
    assert_eq!(devices[0], devices[1]);
    // Read apart (as a live import reads object by object), then put together.
    let mut first = ClusterObjects::decode(&slice("n1", "80Gi"), "a.yaml").unwrap();
    let second = ClusterObjects::decode(&slice("n2", "80Gi"), "b.yaml").unwrap();
    first.dra.extend(second.dra);
    let (a, b) = (&first.dra.slices[0], &first.dra.slices[1]);
    assert!(Arc::ptr_eq(&a.devices, &b.devices));
    assert_eq!((a.name.as_str(), b.name.as_str()), ("n1-gpus", "n2-gpus"));
}

/// One device name twice in a slice is refused, as the API server's `validateSet` refuses
/// it (`pkg/apis/resource/validation/validation.go`, v1.36.2), at the second one.
#[test]
fn a_device_name_twice_in_a_slice_is_refused() {
    let text = "{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {name: x},
      spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1},
      devices: [{name: a}, {name: b}, {name: a}]}}";
    let error = ClusterObjects::decode(text, "o.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("ResourceSlice x: spec.devices[2]: Duplicate value: \"a\""),
        "{error}"
    );
}
