//! DRA in scenario files: node groups that publish ResourceSlices, device classes, and
//! workloads whose pods claim devices, simulated end to end; and every error the new
//! fields can give, each named by its field.

use std::collections::HashMap;

use gantry_api::dra::SliceNodes;
use gantry_framework::plugins::default_profile;
use gantry_sim::scenario::Scenario;
use gantry_sim::{SimOptions, Simulation, Summary};

/// Two gpu nodes with two devices each, three cpu nodes with none; six pods claim one
/// device each (two more than there are), four pods claim nothing.
const TWO_GROUPS: &str = r#"
deviceClasses:
- {name: gpu, driver: gpu.example.com}
nodeGroups:
- name: gpu
  count: 2
  allocatable: {cpu: "32", memory: 128Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes: {model: a100, cores: 108, nvlink: true, firmware: {version: 1.2.3}}
    capacity: {memory: 80Gi}
- name: cpu
  count: 3
  allocatable: {cpu: "32", memory: 128Gi, pods: "110"}
workloads:
- name: train
  namespace: ml
  count: 6
  arrival: {start: 0s, rate: 10/s}
  claims:
  - name: gpu
    deviceClass: gpu
    selectors: ['device.attributes["gpu.example.com"].model == "a100" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0']
  template:
    spec: {containers: [{name: t, resources: {requests: {cpu: "1"}}}]}
- name: web
  count: 4
  arrival: {start: 1s}
  template:
    spec: {containers: [{name: w, resources: {requests: {cpu: "1"}}}]}
"#;

fn simulate(text: &str, seed: u64) -> (Summary, Simulation) {
    let scenario = Scenario::parse(text, "dra.yaml").unwrap();
    let mut sim = Simulation::new(
        scenario.cluster.clone(),
        vec![default_profile("default-scheduler")],
        SimOptions {
            seed,
            ..SimOptions::default()
        },
    )
    .unwrap();
    scenario.schedule_into(&mut sim);
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    (summary, sim)
}

/// Pods of a workload bound per node.
fn bound_per_node(sim: &Simulation, workload: &str) -> HashMap<String, usize> {
    let mut per_node = HashMap::new();
    for p in sim.placements() {
        if p.pod.to_string().starts_with(workload)
            && let Some(node) = &p.node
        {
            *per_node.entry(node.to_string()).or_default() += 1;
        }
    }
    per_node
}

#[test]
fn the_scenario_becomes_classes_slices_and_templates() {
    let s = Scenario::parse(TWO_GROUPS, "dra.yaml").unwrap();
    let dra = &s.cluster.dra;
    assert_eq!(dra.device_classes.len(), 1);
    assert_eq!(
        &*dra.device_classes[0].selectors[0],
        "device.driver == \"gpu.example.com\""
    );
    let slices: Vec<(&str, &str, usize)> = dra
        .slices
        .iter()
        .map(|s| (s.name.as_str(), s.pool.as_str(), s.devices.len()))
        .collect();
    assert_eq!(
        slices,
        [
            ("gpu-0-gpu.example.com", "gpu-0", 2),
            ("gpu-1-gpu.example.com", "gpu-1", 2)
        ]
    );
    let slice = &dra.slices[1];
    assert_eq!(slice.nodes, SliceNodes::Node(gantry_api::Sym::new("gpu-1")));
    assert_eq!((slice.pool_generation, slice.pool_slice_count), (1, 1));
    let names: Vec<&str> = slice.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["dev-0", "dev-1"]);
    assert_eq!(slice.devices[0].attributes.len(), 4);
    assert_eq!(
        slice.devices[0].capacity[0].value,
        80 * 1024 * 1024 * 1024 * 1000,
        "capacities are kept in thousandths"
    );
    assert_eq!(dra.templates.len(), 1);
    let template = &dra.templates[0];
    assert_eq!(
        (template.namespace.as_str(), template.name.as_str()),
        ("ml", "train-gpu")
    );
    let request = template.spec.requests[0].exact().unwrap();
    assert_eq!(
        (request.device_class.as_str(), request.selectors.len()),
        ("gpu", 1)
    );
}

#[test]
fn pods_with_claims_land_only_where_devices_are_free() {
    let (summary, sim) = simulate(TWO_GROUPS, 0);
    // Four devices for six claims: four train pods bind, two wait; the web pods fit
    // anywhere.
    assert_eq!(summary.scheduled, 8, "{summary:?}");
    let train = bound_per_node(&sim, "ml/train-");
    assert_eq!(train.values().sum::<usize>(), 4);
    for (node, pods) in &train {
        assert!(node.starts_with("gpu-"), "a train pod on {node}");
        assert!(
            *pods <= 2,
            "{pods} pods with claims on {node}, which has 2 devices"
        );
    }
    let pending: Vec<_> = sim
        .placements()
        .iter()
        .filter(|p| p.node.is_none())
        .collect();
    assert_eq!(pending.len(), 2);
    for p in pending {
        assert!(
            p.pod.to_string().starts_with("ml/train-"),
            "{} pending",
            p.pod
        );
        let reason = p.reason.as_deref().unwrap_or_default();
        assert!(reason.contains("cannot allocate all claims"), "{reason}");
    }
    // Each bound pod's claim holds a device of its own node, and no device is held twice.
    let dra = sim.cache().dra();
    let allocated: Vec<_> = dra
        .claims()
        .into_iter()
        .filter_map(|c| Some((c.owner_pod.clone()?, c.allocation.clone()?)))
        .collect();
    assert_eq!(allocated.len(), 4);
    for (owner, allocation) in &allocated {
        let placement = sim.placements().iter().find(|p| p.pod == **owner).unwrap();
        assert_eq!(
            Some(allocation.devices[0].device.pool.as_str()),
            placement.node.as_deref()
        );
    }
    assert!(dra.allocation_counts().iter().all(|(_, n)| *n == 1));
    assert_eq!(dra.allocation_counts().len(), 4);
}

#[test]
fn nodes_added_later_bring_their_devices() {
    let text = format!("{TWO_GROUPS}events:\n- {{at: 10s, addNodes: {{group: gpu, count: 1}}}}\n");
    let (summary, sim) = simulate(&text, 0);
    assert_eq!(summary.scheduled, 10, "{summary:?}");
    assert_eq!(bound_per_node(&sim, "ml/train-").get("gpu-2"), Some(&2));
}

#[test]
fn the_same_seed_gives_the_same_placements_and_claims() {
    let run = |seed| {
        let (_, sim) = simulate(TWO_GROUPS, seed);
        let claims: Vec<(String, String)> = sim
            .cache()
            .dra()
            .claims()
            .iter()
            .map(|c| {
                let device = c
                    .allocation
                    .as_ref()
                    .map(|a| a.devices[0].device.to_string())
                    .unwrap_or_default();
                (c.name.to_string(), device)
            })
            .collect();
        (sim.placements().to_vec(), claims)
    };
    let first = run(7);
    assert_eq!(first.1.len(), 6, "a claim per train pod, allocated or not");
    assert!(first.1[0].0.starts_with("train-"), "{:?}", first.1);
    assert_eq!(run(7), first);
}

#[test]
fn bad_dra_fields_name_the_field() {
    let group = |devices: &str| {
        format!("nodeGroups: [{{name: g, count: 1, allocatable: {{}}, devices: [{devices}]}}]\n")
    };
    let claims = |classes: &str, claims: &str| {
        format!(
            "deviceClasses: [{classes}]\nworkloads: [{{name: w, count: 1, claims: [{claims}], template: {{spec: {{containers: [{{name: c}}]}}}}}}]\n"
        )
    };
    let class = "{name: gpu, driver: gpu.example.com}";
    let cases = [
        (group("{count: 1}"), "nodeGroups[0].devices[0]", "driver"),
        (
            group("{driver: Gpu, count: 1}"),
            "nodeGroups[0].devices[0].driver",
            "a lowercase RFC 1123 subdomain must consist of",
        ),
        (
            group("{driver: gpu.example.com, count: 0}"),
            "nodeGroups[0].devices[0].count",
            "must be 1 to 128, not 0",
        ),
        (
            group("{driver: gpu.example.com, count: 200}"),
            "nodeGroups[0].devices[0].count",
            "must be 1 to 128, not 200",
        ),
        (
            group("{driver: a.b, count: 1}, {driver: a.b, count: 2}"),
            "nodeGroups[0].devices[1].driver",
            "\"a.b\" is also the driver of devices[0]",
        ),
        (
            group("{driver: a.b, count: 1, attributes: {9lives: x}}"),
            "nodeGroups[0].devices[0].attributes.9lives",
            "not a C identifier",
        ),
        (
            group("{driver: a.b, count: 1, attributes: {speed: 1.5}}"),
            "nodeGroups[0].devices[0].attributes.speed",
            "use a string, an integer, a boolean, or {version: 1.2.3}",
        ),
        (
            group(&format!(
                "{{driver: a.b, count: 1, attributes: {{model: {}}}}}",
                "x".repeat(65)
            )),
            "nodeGroups[0].devices[0].attributes.model",
            "may not be more than 64 bytes",
        ),
        (
            group("{driver: a.b, count: 1, capacity: {memory: lots}}"),
            "nodeGroups[0].devices[0].capacity.memory",
            "lots",
        ),
        (
            group("{driver: a.b, count: 1, bindingConditions: [attached]}"),
            "nodeGroups[0].devices[0].bindingFailureConditions",
            "bindingFailureConditions are required to use bindingConditions",
        ),
        (
            group("{driver: a.b, count: 1, capacity: {memory: true}}"),
            "nodeGroups[0].devices[0].capacity.memory",
            "not a quantity",
        ),
        (
            group(&format!(
                "{{driver: a.b, count: 1, attributes: {{{}}}}}",
                (0..33)
                    .map(|i| format!("a{i}: x"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            "nodeGroups[0].devices[0]",
            "must not exceed 32",
        ),
        (
            "deviceClasses: [{name: gpu}]\n".to_string(),
            "deviceClasses[0]",
            "needs a driver or selectors (or both)",
        ),
        (
            "deviceClasses: [{name: gpu, driver: gpu_example}]\n".to_string(),
            "deviceClasses[0].driver",
            "a lowercase RFC 1123 subdomain must consist of",
        ),
        (
            "deviceClasses: [{name: Gpu, driver: gpu.example.com}]\n".to_string(),
            "deviceClasses[0].name",
            "RFC 1123 subdomain",
        ),
        (
            "deviceClasses: [{name: gpu, selectors: ['device.driver ==']}]\n".to_string(),
            "deviceClasses[0].selectors[0]",
            "compilation failed",
        ),
        (
            "deviceClasses: [{name: gpu, driver: gpu.example.com, extendedResourceName: gpu}]\n"
                .to_string(),
            "deviceClasses[0].extendedResourceName",
            "must be a valid extended resource name",
        ),
        (
            format!("deviceClasses: [{class}, {class}]\n"),
            "deviceClasses[1].name",
            "\"gpu\" is also the name of deviceClasses[0]",
        ),
        (
            claims(class, "{name: gpu, deviceClass: tpu}"),
            "workloads[0].claims[0].deviceClass",
            "no device class \"tpu\" in deviceClasses",
        ),
        (
            claims(class, "{name: GPU, deviceClass: gpu}"),
            "workloads[0].claims[0].name",
            "a lowercase RFC 1123 label must consist of",
        ),
        (
            claims(class, "{name: gpu, deviceClass: gpu, count: 0}"),
            "workloads[0].claims[0].count",
            "must be 1 to 32, not 0",
        ),
        (
            claims(class, "{name: gpu, deviceClass: gpu, count: 33}"),
            "workloads[0].claims[0].count",
            "must be 1 to 32, not 33",
        ),
        (
            claims(
                class,
                "{name: gpu, deviceClass: gpu, selectors: ['device.']}",
            ),
            "workloads[0].claims[0].selectors[0]",
            "compilation failed",
        ),
        (
            claims(
                class,
                "{name: gpu, deviceClass: gpu}, {name: gpu, deviceClass: gpu}",
            ),
            "workloads[0].claims[1].name",
            "\"gpu\" is also the name of claims[0]",
        ),
        (
            claims(class, "{name: gpu}"),
            "workloads[0].claims[0]",
            "deviceClass",
        ),
        (
            format!(
                "deviceClasses: [{class}]\nworkloads: [{{name: w, count: 1, claims: [{{name: gpu, deviceClass: gpu}}], template: {{spec: {{containers: [{{name: c}}], resourceClaims: [{{name: gpu, resourceClaimName: x}}]}}}}}}]\n"
            ),
            "workloads[0].claims[0].name",
            "also the name of an entry of template.spec.resourceClaims",
        ),
        (
            format!(
                "deviceClasses: [{class}]\nworkloads: [{{name: w, count: 1, claims: [{{name: gpu, deviceClass: gpu}}], template: {{spec: {{containers: [{{name: c}}], resourceClaims: none}}}}}}]\n"
            ),
            "workloads[0].template.spec.resourceClaims",
            "must be a list",
        ),
        (
            format!(
                "deviceClasses: [{class}]\nworkloads: [{{name: w, count: 1, claims: [{{name: gpu, deviceClass: gpu}}], template: {{spec: [c]}}}}]\n"
            ),
            "workloads[0].template.spec",
            "must be a mapping",
        ),
        (
            format!(
                "deviceClasses: [{class}]\nworkloads: [{{name: a-b, count: 1, claims: [{{name: c, deviceClass: gpu}}], template: {{spec: {{containers: [{{name: c}}]}}}}}}, {{name: a, count: 1, claims: [{{name: b-c, deviceClass: gpu}}], template: {{spec: {{containers: [{{name: c}}]}}}}}}]\n"
            ),
            "workloads[1].claims[0].name",
            "makes the claim template \"a-b-c\" in namespace \"default\", as workloads[0].claims[0] does",
        ),
    ];
    for (text, field, message) in &cases {
        let e = Scenario::parse(text, "bad.yaml").unwrap_err();
        assert_eq!(e.field, *field, "{text}: got {e}");
        assert!(e.message.contains(message), "{text}: got {e}");
        assert!(!e.to_string().contains('\n'), "one line: {e}");
    }
}

#[test]
fn claims_need_a_release_whose_api_server_keeps_them() {
    let e = Scenario::parse_for(TWO_GROUPS, "dra.yaml", gantry_api::Release::at(33)).unwrap_err();
    assert_eq!(e.field, "workloads[0].claims");
    assert!(e.message.contains("DynamicResourceAllocation off"), "{e}");
}

/// A class serving `example.com/gpu` (DRAExtendedResource): a workload asking for it, no
/// claims in sight, gets GPUs of the class's nodes (two each), and the rest wait.
#[test]
fn workloads_asking_for_an_extended_resource_get_devices() {
    let scenario = r#"
deviceClasses:
- {name: gpu, driver: gpu.example.com, extendedResourceName: example.com/gpu}
nodeGroups:
- name: gpu
  count: 2
  allocatable: {cpu: "32", memory: 128Gi, pods: "110"}
  devices: [{driver: gpu.example.com, count: 2}]
- name: cpu
  count: 3
  allocatable: {cpu: "32", memory: 128Gi, pods: "110"}
workloads:
- name: train
  count: 6
  arrival: {start: 0s, rate: 10/s}
  template:
    spec: {containers: [{name: t, resources: {limits: {example.com/gpu: "1"}}}]}
"#;
    let (summary, sim) = simulate(scenario, 7);
    assert_eq!((summary.scheduled, summary.unschedulable), (4, 2));
    let placed = bound_per_node(&sim, "default/train");
    assert_eq!(placed.values().sum::<usize>(), 4);
    assert!(
        placed.keys().all(|node| node.starts_with("gpu")),
        "{placed:?}"
    );
    let claims = sim.cache().dra().claims();
    assert_eq!(claims.iter().filter(|c| c.extended_resource).count(), 4);
}

/// Devices the driver must attach first (DRADeviceBindingConditions): a node group's
/// fabric GPU with binding conditions, and two pods claiming a GPU. The group's local GPU
/// goes first (pools with binding conditions are tried last); the fabric GPU's pod is
/// bound when PreBind's second look finds the simulated driver's answer, 5 s after its
/// decision, its allocation kept to the node.
#[test]
fn devices_with_binding_conditions_bind_when_their_driver_answers() {
    let text = r#"
nodeGroups:
- name: gpu
  count: 1
  allocatable: {cpu: "32", memory: 128Gi, pods: "110"}
  devices:
  - {driver: gpu.example.com, count: 1}
  - {driver: fabric.example.com, count: 1, bindingConditions: [example.com/attached], bindingFailureConditions: [example.com/failed], bindsToNode: true}
deviceClasses:
- {name: gpu, driver: gpu.example.com}
- {name: any, driver: fabric.example.com}
workloads:
- name: local
  count: 1
  claims: [{name: gpu, deviceClass: gpu}]
  template:
    spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
- name: fabric
  count: 1
  arrival: {start: 1s}
  claims: [{name: gpu, deviceClass: any}]
  template:
    spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
"#;
    let (summary, sim) = simulate(text, 1);
    assert_eq!(summary.scheduled, 2);
    let bound: Vec<f64> = (sim.histories().iter())
        .map(|h| h.bound.expect("bound").as_secs_f64())
        .collect();
    assert!(bound[0] < 0.1, "{bound:?}");
    assert!((6.0..6.1).contains(&bound[1]), "{bound:?}");
    let claims = sim.cache().dra().claims();
    let fabric = (claims.iter())
        .find(|c| c.name.starts_with("fabric-"))
        .expect("the fabric pod's claim");
    let allocation = fabric.allocation.as_ref().expect("allocated");
    assert!(allocation.has_binding_conditions());
    assert!(allocation.node_selector.is_some(), "kept to the node");
    assert_eq!(fabric.device_status()[0].true_conditions.len(), 1);
}
