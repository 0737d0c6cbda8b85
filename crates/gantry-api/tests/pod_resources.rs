//! Pod-level resources, in-place resize and sidecar host ports as the API server and the
//! scheduler of each release see them: decoded, defaulted and validated from manifests.

use gantry_api::decode::{ClusterObjects, DecodeError};
use gantry_api::resources::{DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
use gantry_api::{Pod, Release, Resources};

const MI: i64 = 1024 * 1024;

fn release(version: &str, gates: Option<&str>) -> Release {
    Release::parse(Some(version), gates).unwrap()
}

fn decode_as(release: Release, text: &str) -> Result<Pod, DecodeError> {
    let mut objects = ClusterObjects::for_release(release);
    objects.decode_more(text, "input.yaml")?;
    assert_eq!(objects.pods.len(), 1);
    Ok(objects.pods.remove(0))
}

fn pod_as(release: Release, text: &str) -> Pod {
    decode_as(release, text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn pod(text: &str) -> Pod {
    pod_as(Release::default(), text)
}

/// The field and message of the error decoding `text` at v1.35 gives.
fn refused(text: &str) -> (String, String) {
    match decode_as(Release::default(), text) {
        Err(DecodeError::Object { error, .. }) => {
            assert_eq!(error.object, "Pod default/web");
            (error.field, error.message)
        }
        other => panic!("expected an object error for\n{text}\ngot {other:?}"),
    }
}

/// A pod `default/web` with `spec` (flow YAML inside `spec: {...}`) and `status`.
fn manifest(spec: &str, status: &str) -> String {
    format!("kind: Pod\nmetadata: {{name: web}}\nspec: {{{spec}}}\nstatus: {{{status}}}\n")
}

fn cpu_memory(r: &Resources) -> (i64, i64) {
    (r.milli_cpu, r.memory)
}

#[test]
fn pod_level_requests_replace_the_aggregate_and_are_dropped_with_the_gate_off() {
    let text = manifest(
        "resources: {requests: {cpu: '2', memory: 1Gi}}, containers: [
            {name: a, resources: {requests: {cpu: 500m, memory: 100Mi}}},
            {name: b}]",
        "",
    );
    let on = pod(&text);
    assert_eq!(cpu_memory(on.requests()), (2000, 1024 * MI));
    // NodeResourcesFit's score reads the containers' defaulted aggregate (500m + 100m,
    // 100Mi + 200Mi): upstream's Fit scorer skips pod-level requests.
    assert_eq!(cpu_memory(on.non_zero_requests()), (600, 300 * MI));
    assert_eq!(cpu_memory(on.non_zero_usage()), (2000, 1024 * MI));
    // v1.33: the gate is off by default, the API server drops spec.resources.
    for off in [
        release("1.33", None),
        release("1.35", Some("PodLevelResources=false")),
    ] {
        let dropped = pod_as(off, &text);
        assert!(dropped.pod_level.is_none(), "{off}");
        assert_eq!(cpu_memory(dropped.requests()), (500, 100 * MI), "{off}");
        assert_eq!(
            cpu_memory(dropped.non_zero_usage()),
            (
                500 + DEFAULT_MILLI_CPU_REQUEST,
                100 * MI + DEFAULT_MEMORY_REQUEST
            ),
            "{off}"
        );
    }
    // The gate on in v1.32 by flag: honoured.
    let v132 = pod_as(release("1.32", Some("PodLevelResources=true")), &text);
    assert_eq!(cpu_memory(v132.requests()), (2000, 1024 * MI));
}

#[test]
fn pod_level_requests_default_as_the_api_server_defaults_them() {
    // pkg/apis/core/v1/defaults.go defaultPodRequests (cases of defaults_test.go
    // TestPodLevelResourcesDefaults): with pod-level limits, a resource the containers
    // request defaults to their aggregate, any other limited one to its limit.
    let pod = pod(&manifest(
        "resources: {limits: {cpu: '2', memory: 1Gi}}, containers: [
            {name: a, resources: {requests: {cpu: 300m}}},
            {name: b, resources: {requests: {cpu: 200m}}}]",
        "",
    ));
    assert_eq!(cpu_memory(pod.requests()), (500, 1024 * MI));
    let level = pod.pod_level.as_deref().unwrap();
    assert_eq!(cpu_memory(&level.requests), (500, 1024 * MI));
    // Requests only: nothing defaulted, memory missing at both levels.
    let pod = self::pod(&manifest(
        "resources: {requests: {cpu: '1'}}, containers: [{name: a}]",
        "",
    ));
    assert_eq!(cpu_memory(pod.requests()), (1000, 0));
    assert_eq!(
        cpu_memory(pod.non_zero_usage()),
        (1000, DEFAULT_MEMORY_REQUEST)
    );
    // Limits only: requests follow them.
    let pod = self::pod(&manifest(
        "resources: {limits: {cpu: 1500m}}, containers: [{name: a}]",
        "",
    ));
    assert_eq!(cpu_memory(pod.requests()), (1500, 0));
}

#[test]
fn pod_level_resources_are_validated_as_the_api_server_validates_them() {
    // pkg/apis/core/validation validatePodResources, rows after validation_test.go
    // TestValidatePodResourceConsistency and TestValidatePodSpec's pod-level cases.
    let rows: &[(&str, &str, &str, &str)] = &[
        (
            "unsupported resource",
            "resources: {requests: {ephemeral-storage: 1Gi}}, containers: [{name: a}]",
            "spec.resources.requests.ephemeral-storage",
            "Unsupported value: \"ephemeral-storage\": supported values: \"cpu\", \"hugepages-\", \"memory\"",
        ),
        (
            "extended resource",
            "resources: {limits: {example.com/gpu: '1'}}, containers: [{name: a}]",
            "spec.resources.limits.example.com/gpu",
            "Unsupported value: \"example.com/gpu\": supported values: \"cpu\", \"hugepages-\", \"memory\"",
        ),
        (
            "request above limit",
            "resources: {requests: {cpu: '2'}, limits: {cpu: 1500m}}, containers: [{name: a}]",
            "spec.resources.requests",
            "Invalid value: \"2\": must be less than or equal to cpu limit of 1500m",
        ),
        (
            "aggregate container requests above the pod's",
            "resources: {requests: {memory: 1Gi}}, containers: [
                {name: a, resources: {requests: {memory: 600Mi}}},
                {name: b, resources: {requests: {memory: 600Mi}}}]",
            "spec.resources.requests.memory",
            "Invalid value: \"1Gi\": must be greater than or equal to aggregate container requests of 1200Mi",
        ),
        (
            "sidecar counted in the aggregate",
            "resources: {requests: {cpu: 500m}}, initContainers: [
                {name: s, restartPolicy: Always, resources: {requests: {cpu: 300m}}}],
             containers: [{name: a, resources: {requests: {cpu: 300m}}}]",
            "spec.resources.requests.cpu",
            "Invalid value: \"500m\": must be greater than or equal to aggregate container requests of 600m",
        ),
        (
            "container limit above the pod's",
            "resources: {limits: {cpu: '1'}}, containers: [
                {name: a, resources: {requests: {cpu: 500m}, limits: {cpu: '2'}}}]",
            "spec.resources.containers[0].cpu.limits",
            "Invalid value: \"2\": must be less than or equal to pod limits of 1",
        ),
        (
            "claims",
            "resources: {claims: [{name: gpu}]}, containers: [{name: a}]",
            "spec.resources.claims",
            "Forbidden: claims may not be set for Resources at pod-level",
        ),
        (
            "hugepages alone",
            "resources: {limits: {hugepages-2Mi: 2Mi}}, containers: [{name: a}]",
            "spec.resources",
            "Forbidden: HugePages require cpu or memory",
        ),
        (
            "hugepages request not equal to limit",
            "resources: {requests: {hugepages-2Mi: 2Mi, memory: 1Gi}, limits: {hugepages-2Mi: 4Mi}},
             containers: [{name: a}]",
            "spec.resources.requests",
            "Invalid value: \"2Mi\": must be equal to hugepages-2Mi limit of 4Mi",
        ),
        (
            "windows pod",
            "os: {name: windows}, resources: {requests: {cpu: '1'}}, containers: [{name: a}]",
            "spec.resources",
            "Forbidden: may not be set for a windows pod",
        ),
        (
            "negative quantity",
            "resources: {requests: {cpu: '-1'}}, containers: [{name: a}]",
            "spec.resources.requests.cpu",
            "Invalid value: \"-1\": must be greater than or equal to 0",
        ),
    ];
    for (name, spec, field, message) in rows {
        assert_eq!(
            refused(&manifest(spec, "")),
            (field.to_string(), message.to_string()),
            "{name}"
        );
    }
    // Hugepages with cpu, request equal to limit: accepted, and replacing the aggregate.
    let pod = pod(&manifest(
        "resources: {requests: {cpu: '1', hugepages-2Mi: 4Mi}, limits: {hugepages-2Mi: 4Mi}},
         containers: [{name: a, resources: {requests: {hugepages-2Mi: 2Mi}, limits: {hugepages-2Mi: 2Mi}}}]",
        "",
    ));
    let huge = gantry_api::Sym::new("hugepages-2Mi");
    assert_eq!(pod.requests().scalar(huge), 4 * MI);
}

/// A bound pod with a sidecar `log` (100m) and a container `app` requesting `spec_cpu`,
/// whose status says `status`.
fn resized(spec_cpu: &str, status: &str) -> String {
    manifest(
        &format!(
            "nodeName: n1, initContainers: [{{name: log, restartPolicy: Always,
                resources: {{requests: {{cpu: 100m}}}}}}],
             containers: [{{name: app, resources: {{requests: {{cpu: {spec_cpu}, memory: 1Gi}}}}}}]"
        ),
        &format!("phase: Running, {status}"),
    )
}

#[test]
fn in_place_resize_from_v1_33_takes_the_largest_of_spec_status_and_allocated() {
    // component-helpers/resource/helpers_test.go TestPodResourceRequests, the resize rows
    // (UseStatusResources), plus the sidecar's share (100m).
    let infeasible = "conditions: [{type: PodResizePending, status: 'True', reason: Infeasible}]";
    let rows: &[(&str, &str, &str, i64)] = &[
        (
            "resized, no resize status",
            "4",
            "containerStatuses: [{name: app, resources: {requests: {cpu: '2'}}}]",
            4000,
        ),
        (
            "resized, infeasible",
            "4",
            &format!("{infeasible}, containerStatuses: [{{name: app, resources: {{requests: {{cpu: '2'}}}}}}]"),
            2000,
        ),
        (
            "resized, infeasible & in-progress",
            "6",
            &format!("{infeasible}, containerStatuses: [{{name: app, allocatedResources: {{cpu: '4'}}, resources: {{requests: {{cpu: '2'}}}}}}]"),
            4000,
        ),
        (
            "per-resource 3-way maximum",
            "30m",
            "containerStatuses: [{name: app, allocatedResources: {cpu: 20m}, resources: {requests: {cpu: 10m}}}]",
            30,
        ),
        (
            "actual above spec and allocated",
            "1",
            "containerStatuses: [{name: app, allocatedResources: {cpu: '1'}, resources: {requests: {cpu: '3'}}}]",
            3000,
        ),
        (
            "deferred resize is not infeasible",
            "1",
            "conditions: [{type: PodResizePending, status: 'True', reason: Deferred}],
             containerStatuses: [{name: app, allocatedResources: {cpu: '2'}, resources: {requests: {cpu: '2'}}}]",
            2000,
        ),
        (
            "a status without resources is not read",
            "1",
            "containerStatuses: [{name: app, allocatedResources: {cpu: '5'}}]",
            1000,
        ),
    ];
    for (name, spec, status, cpu) in rows {
        let pod = pod(&resized(spec, status));
        assert_eq!(pod.usage().milli_cpu, cpu + 100, "{name}");
        assert_eq!(
            pod.non_zero_usage().milli_cpu,
            cpu + 100,
            "{name}: the node's defaulted requests follow"
        );
        assert_eq!(
            pod.requests().milli_cpu,
            milli(spec) + 100,
            "{name}: the pod to place reads its spec"
        );
    }
    // Sidecars through initContainerStatuses ("resized, restartable init container").
    let sidecar = |status: &str| {
        pod(&resized(
            "1",
            &format!(
                "{status}initContainerStatuses: [{{name: log, resources: {{requests: {{cpu: 400m}}}}}}]"
            ),
        ))
    };
    assert_eq!(sidecar("").usage().milli_cpu, 1000 + 400);
    let infeasible_sidecar = pod(&resized(
        "1",
        &format!(
            "{infeasible}, initContainerStatuses: [{{name: log, resources: {{requests: {{cpu: 50m}}}}}}]"
        ),
    ));
    assert_eq!(infeasible_sidecar.usage().milli_cpu, 1000 + 50);
}

fn milli(text: &str) -> i64 {
    gantry_api::Quantity::parse(text)
        .unwrap()
        .milli_value()
        .unwrap()
}

#[test]
fn in_place_resize_before_v1_33_follows_that_release() {
    let gate = Some("InPlacePodVerticalScaling=true");
    // v1.32 (kubernetes#128377): max(spec, status.resources), status.resources alone
    // when status.resize is Infeasible; allocatedResources and sidecars not read.
    let v132 = release("1.32", gate);
    let text = resized(
        "1",
        "containerStatuses: [{name: app, allocatedResources: {cpu: '5'}, resources: {requests: {cpu: '2'}}}],
         initContainerStatuses: [{name: log, resources: {requests: {cpu: '1'}}}]",
    );
    assert_eq!(pod_as(v132, &text).usage().milli_cpu, 2000 + 100);
    let text = resized(
        "3",
        "resize: Infeasible, containerStatuses: [{name: app, resources: {requests: {cpu: '2'}}}]",
    );
    assert_eq!(pod_as(v132, &text).usage().milli_cpu, 2000 + 100);
    // v1.28-v1.31 (pkg/api/v1/resource/helpers.go): allocatedResources.
    for minor in ["1.28", "1.31"] {
        let old = release(
            minor,
            gate.map(|g| format!("{g},SidecarContainers=true"))
                .as_deref(),
        );
        let text = resized(
            "1",
            "containerStatuses: [{name: app, allocatedResources: {cpu: '5'}, resources: {requests: {cpu: '2'}}}]",
        );
        assert_eq!(pod_as(old, &text).usage().milli_cpu, 5000 + 100, "{minor}");
        let text = resized(
            "3",
            "resize: Infeasible, containerStatuses: [{name: app, allocatedResources: {cpu: '2'}}]",
        );
        assert_eq!(pod_as(old, &text).usage().milli_cpu, 2000 + 100, "{minor}");
        // Infeasible with nothing allocated: the container counts nothing.
        let text = resized("3", "resize: Infeasible, containerStatuses: [{name: app}]");
        assert_eq!(pod_as(old, &text).usage().milli_cpu, 100, "{minor}");
    }
}

#[test]
fn status_resources_are_dropped_with_the_gate_off() {
    // v1.32's default: InPlacePodVerticalScaling off, the API server drops the status
    // resources (dropDisabledPodStatusFields): the spec is what the node counts.
    let text = resized(
        "1",
        "resize: Infeasible, containerStatuses: [{name: app, allocatedResources: {cpu: '5'}, resources: {requests: {cpu: '2'}}}]",
    );
    for off in [
        release("1.32", None),
        release("1.28", Some("SidecarContainers=true")),
    ] {
        let pod = pod_as(off, &text);
        assert_eq!(pod.usage(), pod.requests(), "{off}");
        assert_eq!(pod.usage().milli_cpu, 1100, "{off}");
    }
}

#[test]
fn status_quantities_are_checked_naming_the_field() {
    let text = resized(
        "1",
        "containerStatuses: [{name: app, resources: {requests: {cpu: lots}}}]",
    );
    let Err(DecodeError::Object { error, .. }) = decode_as(Release::default(), &text) else {
        panic!("a malformed status quantity is an error");
    };
    assert_eq!(
        error.field,
        "status.containerStatuses[0].resources.requests.cpu"
    );
}

#[test]
fn replicas_with_equal_status_share_a_template() {
    // A status equal to the spec (every running pod's, v1.33 on) keeps nothing per pod.
    let status = "containerStatuses: [{name: app, allocatedResources: {cpu: '1', memory: 1Gi},
                  resources: {requests: {cpu: '1', memory: 1Gi}}}]";
    let pod = pod(&resized("1", status));
    assert!(pod.containers[0].resized.is_none());
    assert_eq!(pod.usage(), pod.requests());
}

#[test]
fn sidecar_host_ports_count_from_v1_34() {
    let text = manifest(
        "initContainers: [{name: log, restartPolicy: Always, ports: [{containerPort: 9000, hostPort: 9000}]}],
         containers: [{name: app, ports: [{containerPort: 80, hostPort: 8080}]}]",
        "",
    );
    let ports = |pod: &Pod| pod.host_ports().map(|p| p.port).collect::<Vec<_>>();
    assert_eq!(ports(&pod_as(release("1.34", None), &text)), [9000, 8080]);
    assert_eq!(ports(&pod_as(release("1.33", None), &text)), [8080]);
}

#[test]
fn defaulted_requests_of_bound_pods_count_sidecars_from_v1_32() {
    let text = manifest(
        "initContainers: [{name: log, restartPolicy: Always}], containers: [{name: app}]",
        "",
    );
    let gates = Some("SidecarContainers=true");
    let v131 = pod_as(release("1.31", gates), &text);
    let v132 = pod_as(release("1.32", gates), &text);
    assert_eq!(v131.non_zero_usage().milli_cpu, DEFAULT_MILLI_CPU_REQUEST);
    assert_eq!(
        v132.non_zero_usage().milli_cpu,
        2 * DEFAULT_MILLI_CPU_REQUEST
    );
}
