//! PodGroup (`scheduling.k8s.io/v1alpha2`) and a pod's `spec.schedulingGroup`, read as the
//! v1.36 API server reads them: declarative validation's messages (apimachinery
//! `validate.Union`, `validate.Minimum`), core validation's `validateSchedulingGroup`, and
//! the fields dropped while GenericWorkload is off.

use gantry_api::decode::{ClusterObjects, DecodeError};
use gantry_api::{GroupPolicy, Release};

fn gangs_on() -> Release {
    Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true"),
    )
    .unwrap()
}

fn decode(release: Release, text: &str) -> Result<ClusterObjects, (String, String)> {
    let mut objects = ClusterObjects::for_release(release);
    match objects.decode_more(text, "input.yaml") {
        Ok(()) => Ok(objects),
        Err(DecodeError::Object { error, .. }) => Err((error.field, error.message)),
        Err(other) => panic!("expected an object error, got {other}"),
    }
}

fn group(policy: &str) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: g, namespace: ml}}\nspec: {{schedulingPolicy: {policy}}}\n"
    )
}

/// The policy read, or the field and message of the refusal.
type Expected = Result<GroupPolicy, (&'static str, &'static str)>;

#[test]
fn pod_groups_decode_or_are_refused_as_the_api_server_says() {
    let cases: &[(&str, Expected)] = &[
        (
            "{gang: {minCount: 4}}",
            Ok(GroupPolicy::Gang { min_count: 4 }),
        ),
        ("{basic: {}}", Ok(GroupPolicy::Basic)),
        (
            "{}",
            Err((
                "spec.schedulingPolicy",
                "Invalid value: \"\": must specify one of: `basic`, `gang`",
            )),
        ),
        (
            "{basic: {}, gang: {minCount: 1}}",
            Err((
                "spec.schedulingPolicy",
                "Invalid value: \"{basic, gang}\": must specify exactly one of: `basic`, `gang`",
            )),
        ),
        (
            "{gang: {minCount: 0}}",
            Err((
                "spec.schedulingPolicy.gang.minCount",
                "Invalid value: 0: must be greater than or equal to 1",
            )),
        ),
        (
            "{gang: {minCount: -3}}",
            Err((
                "spec.schedulingPolicy.gang.minCount",
                "Invalid value: -3: must be greater than or equal to 1",
            )),
        ),
    ];
    for (policy, want) in cases {
        let got = decode(gangs_on(), &group(policy)).map(|o| {
            assert_eq!(o.pod_groups.len(), 1);
            assert_eq!(o.pod_groups[0].key(), "ml/g");
            o.pod_groups[0].policy
        });
        let want = want.map_err(|(f, m)| (f.to_string(), m.to_string()));
        assert_eq!(got, want, "policy {policy}");
    }
}

#[test]
fn a_min_count_beyond_int32_is_refused_not_wrapped() {
    let (field, _) = decode(gangs_on(), &group("{gang: {minCount: 4294967297}}")).unwrap_err();
    assert!(field.starts_with("spec"), "{field}");
}

#[test]
fn only_the_v1alpha2_pod_group_is_read() {
    let text = group("{gang: {minCount: 2}}").replace("v1alpha2", "v1beta1");
    let (field, message) = decode(gangs_on(), &text).unwrap_err();
    assert_eq!(field, "apiVersion");
    assert!(message.contains("scheduling.k8s.io/v1alpha2"), "{message}");
}

const MEMBER: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n  schedulingGroup: GROUP\n  containers: [{name: c, image: i}]\n";

#[test]
fn a_pods_scheduling_group_is_validated_as_validate_scheduling_group() {
    let member = |group: &str| MEMBER.replace("GROUP", group);
    let objects = decode(gangs_on(), &member("{podGroupName: g}")).unwrap();
    assert_eq!(
        objects.pods[0].scheduling_group,
        Some(gantry_api::Sym::new("g"))
    );
    assert_eq!(
        decode(gangs_on(), &member("{}")).unwrap_err(),
        (
            "spec.schedulingGroup.podGroupName".to_string(),
            "Invalid value: null: must specify one of: `podGroupName`".to_string()
        )
    );
    let (field, message) = decode(gangs_on(), &member("{podGroupName: Not_A_Name}")).unwrap_err();
    assert_eq!(field, "spec.schedulingGroup.podGroupName");
    assert!(
        message.starts_with("Invalid value: \"Not_A_Name\": a lowercase RFC 1123 subdomain"),
        "{message}"
    );
}

#[test]
fn without_generic_workload_the_api_server_drops_the_field() {
    let off = Release::parse(Some("1.36"), None).unwrap();
    let objects = decode(off, &MEMBER.replace("GROUP", "{podGroupName: g}")).unwrap();
    assert_eq!(objects.pods[0].scheduling_group, None);
}

#[test]
fn the_workload_gates_are_refused_outside_the_release_modelled() {
    for version in ["1.35", "1.37"] {
        let error = Release::parse(Some(version), Some("GenericWorkload=true")).unwrap_err();
        assert!(
            error.to_string().contains("use --emulated-version 1.36"),
            "{version}: {error}"
        );
    }
    let error = Release::parse(Some("1.36"), Some("GangScheduling=true")).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("GangScheduling is enabled, but depends on features that are disabled: [GenericWorkload]"),
        "{error}"
    );
    assert!(Release::parse(Some("1.36"), Some("GenericWorkload=true")).is_ok());
}

fn coscheduling_group(spec: &str) -> String {
    format!(
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: g, namespace: ml, creationTimestamp: \"2026-12-01T10:00:00Z\"}}\nspec: {spec}\nstatus: {{phase: Running}}\n"
    )
}

/// scheduler-plugins' PodGroup, checked as the API server checks it against the CRD's
/// schema (`manifests/coscheduling/crd.yaml`), in any release.
#[test]
fn coscheduling_pod_groups_decode_or_are_refused_as_the_crd_says() {
    let read = decode(
        Release::default(),
        &coscheduling_group(
            "{minMember: 3, scheduleTimeoutSeconds: 10, minResources: {cpu: \"20\", memory: 8Gi}}",
        ),
    )
    .unwrap();
    let [group] = read.coscheduling_groups.as_slice() else {
        panic!("{:?}", read.coscheduling_groups)
    };
    assert_eq!((group.key(), group.min_member), ("ml/g".to_string(), 3));
    assert_eq!(group.schedule_timeout_seconds, Some(10));
    assert_eq!(group.created, 1_796_119_200);
    let resources = group.min_resources.as_ref().unwrap();
    let names: Vec<&str> = resources.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["cpu", "memory"]);
    assert!(read.pod_groups.is_empty());
    // Left out: no minMember (0, unchecked) and no minResources (not an empty list).
    let bare = decode(Release::default(), &coscheduling_group("{}")).unwrap();
    assert_eq!(bare.coscheduling_groups[0].min_member, 0);
    assert_eq!(bare.coscheduling_groups[0].min_resources, None);
    for (spec, field, message) in [
        (
            "{minMember: 0}",
            "spec.minMember",
            "Invalid value: 0: spec.minMember in body should be greater than or equal to 1",
        ),
        (
            "{minResources: {cpu: lots}}",
            "spec.minResources.cpu",
            "Invalid value: \"lots\": spec.minResources.cpu in body should match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$'",
        ),
        (
            "{minResources: {cpu: [1]}}",
            "spec.minResources.cpu",
            "Invalid value: [1]: spec.minResources.cpu in body must be of type integer,string",
        ),
        (
            "{minResources: {memory: 1.5Gi}}",
            "spec.minResources.memory",
            "\"1.5Gi\": Gantry reads minResources of at most 18 digits, binary ones whole (apimachinery keeps others at arbitrary precision, which it does not model)",
        ),
    ] {
        let refused = decode(Release::default(), &coscheduling_group(spec)).err();
        assert_eq!(
            refused,
            Some((field.to_string(), message.to_string())),
            "{spec}"
        );
    }
    let (field, message) = decode(
        Release::default(),
        &coscheduling_group("{minMember: 2147483648}"),
    )
    .unwrap_err();
    assert_eq!(field, "spec.minMember", "{message}");
}

/// `spec.schedulingConstraints` (TopologyAwareWorkloadScheduling): dropped while the gate is
/// off, as the API server's strategy drops it; with it on, checked as v1.36's declarative
/// validation checks it (upstream's declarative_validation_test.go cases).
#[test]
fn scheduling_constraints_are_dropped_without_the_gate_and_checked_with_it() {
    let with = |topology: &str| {
        group("{gang: {minCount: 2}}").replace(
            "spec: {",
            &format!("spec: {{schedulingConstraints: {{topology: {topology}}}, "),
        )
    };
    let tas_on = Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"),
    )
    .unwrap();
    let off = decode(gangs_on(), &with("[{key: foo}, {key: bar}]")).unwrap();
    assert_eq!(off.pod_groups[0].constraints, None);
    let key = |topology: &str| {
        decode(tas_on, &with(topology))
            .map(|o| o.pod_groups[0].topology_key().map(|k| k.to_string()))
    };
    assert_eq!(key("[{key: foo}]"), Ok(Some("foo".into())));
    assert_eq!(
        key("[{key: example.com/Foo}]"),
        Ok(Some("example.com/Foo".into()))
    );
    let long = format!("[{{key: {}/{}}}]", "a".repeat(253), "b".repeat(63));
    assert!(key(&long).is_ok());
    // "valid with empty schedulingConstraints": kept, with no key.
    assert_eq!(key("[]"), Ok(None));
    let empty = decode(tas_on, &with("[]")).unwrap();
    assert!(empty.pod_groups[0].constraints.is_some());
    assert_eq!(
        key("[{key: foo}, {key: bar}]").unwrap_err(),
        (
            "spec.schedulingConstraints.topology".to_string(),
            "Too many: 2: must have at most 1 item".to_string()
        )
    );
    assert_eq!(
        key("[{key: ''}]").unwrap_err(),
        (
            "spec.schedulingConstraints.topology[0].key".to_string(),
            "Required value".to_string()
        )
    );
    for bad in [
        format!("{}/foo", "a".repeat(254)),
        format!("foo/{}", "b".repeat(64)),
        "b".repeat(64),
        "Example.com/Foo".to_string(),
    ] {
        let (field, message) = key(&format!("[{{key: '{bad}'}}]")).unwrap_err();
        assert_eq!(field, "spec.schedulingConstraints.topology[0].key", "{bad}");
        assert!(message.starts_with("Invalid value: "), "{bad}: {message}");
    }
}

fn preemption_on() -> Release {
    Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true"),
    )
    .unwrap()
}

/// A gang with these WorkloadAwarePreemption fields, after a PriorityClass `high` (1000)
/// and whatever `classes` adds.
fn preempting_group(fields: &str, classes: &str) -> String {
    let group = group("{gang: {minCount: 2}}").replace("spec: {", &format!("spec: {{{fields}, "));
    format!(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: high}}\nvalue: 1000\n---\n{classes}{group}"
    )
}

/// The group's priority and class once admitted, or the field and message refused.
fn admitted(fields: &str, classes: &str) -> Result<(i32, Option<String>), (String, String)> {
    let mut objects = decode(preemption_on(), &preempting_group(fields, classes))?;
    objects
        .resolve_priorities()
        .map_err(|e| (e.field, e.message))?;
    let group = &objects.pod_groups[0];
    let class = group.preemption.as_ref().unwrap().priority_class_name;
    Ok((group.priority(), class.map(|c| c.to_string())))
}

/// WorkloadAwarePreemption's fields (v1.36): the API server's strategy drops them while
/// the gate is off (`dropDisabledDisruptionModeField` and the two priority ones); with it
/// on, declarative validation checks them, and Priority admission (v1.36.2's
/// `admitPodGroup`) gives the group its class's priority and refuses any other.
#[test]
fn preemption_fields_are_dropped_without_the_gate_and_admitted_with_it() {
    let fields = "disruptionMode: PodGroup, priorityClassName: high, priority: 1000";
    let off = decode(gangs_on(), &preempting_group(fields, "")).unwrap();
    assert_eq!(off.pod_groups[0].preemption, None);
    assert_eq!(off.pod_groups[0].priority(), 0);
    let on = decode(preemption_on(), &preempting_group(fields, "")).unwrap();
    assert!(on.pod_groups[0].disrupted_whole());
    let default_mode = decode(preemption_on(), &preempting_group("priority: 1", "")).unwrap();
    assert!(!default_mode.pod_groups[0].disrupted_whole());

    let refused =
        |fields: &str| decode(preemption_on(), &preempting_group(fields, "")).unwrap_err();
    assert_eq!(
        refused("disruptionMode: Gang"),
        (
            "spec.disruptionMode".into(),
            "Unsupported value: \"Gang\": supported values: \"Pod\", \"PodGroup\"".into()
        )
    );
    assert_eq!(
        refused("priority: 1000000001"),
        (
            "spec.priority".into(),
            "Invalid value: 1000000001: must be less than or equal to 1000000000".into()
        )
    );
    assert_eq!(
        refused("priorityClassName: Not_A_Name").0,
        "spec.priorityClassName"
    );

    assert_eq!(
        admitted("priorityClassName: high", ""),
        Ok((1000, Some("high".into())))
    );
    assert_eq!(
        admitted("priorityClassName: high, priority: 1000", ""),
        Ok((1000, Some("high".into())))
    );
    assert_eq!(
        admitted("priorityClassName: high, priority: 7", ""),
        Err((
            "spec.priority".into(),
            "priority set in the pod group (7) must match the priority computed (1000) based on the priority class set in the spec".into()
        ))
    );
    assert_eq!(
        admitted("priorityClassName: nope", ""),
        Err((
            "spec.priorityClassName".into(),
            "no PriorityClass with name nope was found".into()
        ))
    );
    // A stored group keeps the priority it was given, its class gone.
    assert_eq!(
        admitted("priorityClassName: gone, priority: 5", ""),
        Ok((5, Some("gone".into())))
    );
    // No class: the global default's, or 0.
    assert_eq!(admitted("disruptionMode: Pod", ""), Ok((0, None)));
    let default = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: usual}\nvalue: 50\nglobalDefault: true\n---\n";
    assert_eq!(
        admitted("disruptionMode: Pod", default),
        Ok((50, Some("usual".into())))
    );
}

#[test]
fn workload_aware_preemption_is_a_v1_36_gate_that_needs_gang_scheduling() {
    let error = Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,WorkloadAwarePreemption=true"),
    )
    .unwrap_err();
    assert!(
        error.to_string().contains(
            "WorkloadAwarePreemption is enabled, but depends on features that are disabled: [GangScheduling]"
        ),
        "{error}"
    );
    let error = Release::parse(Some("1.37"), Some("WorkloadAwarePreemption=true")).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("merged into GenericWorkload in Kubernetes 1.37"),
        "{error}"
    );
    assert!(!gangs_on().enabled(gantry_api::Gate::WorkloadAwarePreemption));
}
