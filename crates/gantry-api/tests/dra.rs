//! Decoding resource.k8s.io/v1 objects and pods' `spec.resourceClaims`.

use std::sync::Arc;

use gantry_api::Sym;
use gantry_api::decode::ClusterObjects;
use gantry_api::dra::*;

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
        [(qualified("nic.example.com", "bandwidth"), 1500)]
    );

    let claim = &objects.dra.claims[0];
    assert_eq!(claim.key().namespace, Sym::new("team"));
    assert_eq!(claim.owner_pod.as_deref(), Some("pod-uid"));
    assert_eq!(claim.spec.requests[0].mode, AllocationMode::All);
    assert_eq!(claim.spec.requests[1].mode, AllocationMode::ExactCount(2));
    assert_eq!(claim.spec.requests[1].selectors.len(), 1);
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
            "ResourceSlice s: spec: exactly one of nodeName, nodeSelector and allNodes must be set",
        ),
        (
            "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}],
              resourceClaims: [{name: x}]}}",
            "Pod default/p: spec.resourceClaims[0]: exactly one of resourceClaimName and resourceClaimTemplateName must be set",
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
