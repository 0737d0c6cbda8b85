//! Loading KubeSchedulerConfiguration files.

use gantry_api::Release;
use gantry_framework::Profile;
use gantry_framework::config::{ClientRate, SchedulerConfig};
use gantry_framework::plugins::{default_profile, default_profile_for};

const HEADER: &str =
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

fn parse(body: &str) -> SchedulerConfig {
    SchedulerConfig::parse(&format!("{HEADER}{body}"), "scheduler.yaml").unwrap()
}

fn error(body: &str) -> String {
    match SchedulerConfig::parse(&format!("{HEADER}{body}"), "scheduler.yaml") {
        Ok(_) => panic!("accepted:\n{body}"),
        Err(e) => e.to_string(),
    }
}

/// The plugin names at each point: PreEnqueue, PreFilter, Filter, PreScore, Reserve, Permit.
fn names(p: &Profile) -> [Vec<&'static str>; 6] {
    [
        p.pre_enqueue.iter().map(|x| x.name()).collect(),
        p.pre_filter.iter().map(|x| x.name()).collect(),
        p.filter.iter().map(|x| x.name()).collect(),
        p.pre_score.iter().map(|x| x.name()).collect(),
        p.reserve.iter().map(|x| x.name()).collect(),
        p.permit.iter().map(|x| x.name()).collect(),
    ]
}

fn scores(p: &Profile) -> Vec<(&'static str, i64)> {
    p.score
        .iter()
        .map(|s| (s.plugin.name(), s.weight))
        .collect()
}

/// The default score plugins and weights up to v1.34. VolumeBinding is a Score plugin in
/// every release (its PreScore skips while StorageCapacityScoring is off).
const DEFAULT_SCORES: [(&str, i64); 8] = [
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    ("VolumeBinding", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
];

/// From v1.35 DynamicResources scores too, weight 2 (#134711, `applyDynamicResources`).
const DEFAULT_SCORES_1_35: [(&str, i64); 9] = [
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    ("VolumeBinding", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
];

#[test]
fn defaults_are_upstreams_default_profile() {
    let expected: [Vec<&str>; 6] = [
        vec!["SchedulingGates"],
        vec![
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "GPUShare",
        ],
        vec![
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "GPUShare",
        ],
        vec![
            "TaintToleration",
            "NodeAffinity",
            "VolumeBinding",
            "PodTopologySpread",
            "InterPodAffinity",
            "ImageLocality",
        ],
        // Reserve: VolumeBinding assumes the volumes it matched (upstream's default).
        vec!["VolumeBinding"],
        vec![],
    ];
    // v1.28 as above; from v1.34 DynamicResources (its gate on) after GPUShare, which
    // stands where upstream's plugins end and before DefaultPreemption, and its PreEnqueue
    // after SchedulingGates.
    let v1_28 = default_profile_for("default-scheduler", Release::at(28));
    assert_eq!(names(&v1_28), expected);
    assert_eq!(scores(&v1_28), DEFAULT_SCORES);
    assert!(v1_28.preemption && !v1_28.deallocates_claims);
    let mut expected = expected;
    for point in [0, 1, 2, 4] {
        expected[point].push("DynamicResources");
    }
    // v1.34: DynamicResources filters, but does not score yet.
    let v1_34 = default_profile_for("default-scheduler", Release::at(34));
    assert_eq!(names(&v1_34), expected);
    assert_eq!(scores(&v1_34), DEFAULT_SCORES);
    // v1.35: it scores, and Gantry's PreScore skips its Score where every node gets 0.
    let image_locality = expected[3].pop();
    expected[3].extend(["DynamicResources"].into_iter().chain(image_locality));
    let v1_35 = default_profile_for("default-scheduler", Release::at(35));
    assert_eq!(names(&v1_35), expected);
    assert_eq!(scores(&v1_35), DEFAULT_SCORES_1_35);
    // v1.36: NodeDeclaredFeatures (its gate on) last, after DefaultBinder; it pre-filters
    // and filters only.
    for point in [1, 2] {
        expected[point].push("NodeDeclaredFeatures");
    }
    let default = SchedulerConfig::default();
    let minimal = parse("");
    let profiles = [
        &default.profiles[0],
        &minimal.profiles[0],
        &default_profile("default-scheduler"),
    ];
    for profile in profiles {
        assert_eq!(profile.scheduler_name.as_str(), "default-scheduler");
        assert_eq!(names(profile), expected);
        assert_eq!(scores(profile), DEFAULT_SCORES_1_35);
        assert!(profile.preemption && profile.deallocates_claims);
        assert_eq!(profile.percentage_of_nodes_to_score, None);
        assert_eq!(
            (
                profile.min_candidate_nodes_percentage,
                profile.min_candidate_nodes_absolute
            ),
            (10, 100)
        );
    }
    assert_eq!(default.profiles.len(), 1);
    assert_eq!(minimal.profiles.len(), 1);
    assert_eq!(
        (
            minimal.pod_initial_backoff_seconds,
            minimal.pod_max_backoff_seconds
        ),
        (1, 10)
    );
}

#[test]
fn json_is_accepted_and_upstream_only_fields_are_ignored() {
    let config = SchedulerConfig::parse(
        r#"{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "parallelism": 8, "leaderElection": {"leaderElect": false},
            "clientConnection": {"kubeconfig": "/etc/kubeconfig"},
            "podInitialBackoffSeconds": 2, "podMaxBackoffSeconds": 30,
            "profiles": [{"schedulerName": "json", "pluginConfig": [
                {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 300}}]}]}"#,
        "scheduler.json",
    )
    .unwrap();
    assert_eq!(config.profiles[0].scheduler_name.as_str(), "json");
    assert_eq!(
        (
            config.pod_initial_backoff_seconds,
            config.pod_max_backoff_seconds
        ),
        (2, 30)
    );
}

/// `clientConnection`'s rate limit, defaulted as kube-scheduler's (`v1/defaults.go`: a
/// zero is 50 requests a second, bursts of 100) and validated as upstream's (a negative
/// burst refused; a negative qps, client-go's "no limit", accepted).
#[test]
fn the_client_rate_limit_is_read_and_defaulted() {
    let rate = |fields: &str| {
        parse(&format!(
            "clientConnection: {{kubeconfig: /etc/k, {fields}}}\n"
        ))
        .client_rate
    };
    let default = ClientRate {
        qps: 50.0,
        burst: 100,
    };
    assert_eq!(parse("").client_rate, default);
    assert_eq!(rate("qps: 0, burst: 0"), default);
    assert_eq!(
        rate("qps: 5000, burst: 10000"),
        ClientRate {
            qps: 5000.0,
            burst: 10000
        }
    );
    assert!(!rate("qps: -1").limits());
    assert_eq!(
        error("clientConnection: {burst: -1}\n"),
        "scheduler.yaml: clientConnection.burst: must be non-negative, not -1"
    );
    assert!(error("clientConnection: {qpss: 5}\n").contains("qpss"));
}

#[test]
fn most_allocated_bin_packing_profile() {
    let config = parse(
        "
profiles:
- schedulerName: bin-packing
  pluginConfig:
  - name: NodeResourcesFit
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitArgs
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: cpu, weight: 3}
        - {name: nvidia.com/gpu}
  - name: InterPodAffinity
    args: {hardPodAffinityWeight: 5}
  - name: DefaultPreemption
    args: {minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 7}
",
    );
    let profile = &config.profiles[0];
    assert_eq!(profile.scheduler_name.as_str(), "bin-packing");
    // The plugins themselves are the defaults, with their new arguments.
    assert_eq!(scores(profile), DEFAULT_SCORES_1_35);
    assert_eq!(
        (
            profile.min_candidate_nodes_percentage,
            profile.min_candidate_nodes_absolute
        ),
        (0, 7)
    );
}

#[test]
fn disabling_every_default_score_plugin() {
    let profile = &parse(
        "
profiles:
- plugins:
    score:
      disabled: [{name: '*'}]
      enabled:
      - {name: NodeResourcesFit, weight: 5}
      - {name: ImageLocality}
",
    )
    .profiles[0];
    assert_eq!(
        scores(profile),
        [("NodeResourcesFit", 5), ("ImageLocality", 1)]
    );
    // Other points keep their defaults.
    assert_eq!(names(profile)[2].len(), 15);
    assert_eq!(names(profile)[3].len(), 7);
}

#[test]
fn multi_point_weights_order_and_per_point_overrides() {
    let profile = &parse(
        "
profiles:
- plugins:
    multiPoint:
      enabled:
      - {name: ImageLocality, weight: 7}
      - {name: TaintToleration}
      disabled:
      - {name: NodeResourcesBalancedAllocation}
      - {name: DefaultPreemption}
    score:
      enabled: [{name: InterPodAffinity, weight: 9}]
    filter:
      disabled: [{name: NodeName}]
    preScore:
      disabled: [{name: '*'}]
      enabled: [{name: PodTopologySpread}]
",
    )
    .profiles[0];
    // Re-listing a default without a weight resets it to 1, as upstream; an explicit
    // score entry overrides multiPoint's weight and comes first.
    assert_eq!(
        scores(profile),
        [
            ("InterPodAffinity", 9),
            ("TaintToleration", 1),
            ("NodeAffinity", 2),
            ("NodeResourcesFit", 1),
            ("VolumeBinding", 1),
            ("PodTopologySpread", 2),
            ("DynamicResources", 2),
            ("ImageLocality", 7),
        ]
    );
    assert!(!names(profile)[2].contains(&"NodeName"));
    assert_eq!(names(profile)[3], ["PodTopologySpread"]);
    assert!(!profile.preemption);
}

#[test]
fn multi_point_star_keeps_only_listed_plugins() {
    let profile = &parse(
        "
profiles:
- plugins:
    multiPoint:
      disabled: [{name: '*'}]
      enabled: [{name: PrioritySort}, {name: DefaultBinder}, {name: NodeAffinity, weight: 4}]
",
    )
    .profiles[0];
    assert_eq!(
        names(profile),
        [
            vec![],
            vec!["NodeAffinity"],
            vec!["NodeAffinity"],
            vec!["NodeAffinity"],
            vec![],
            vec![]
        ]
    );
    assert_eq!(scores(profile), [("NodeAffinity", 4)]);
    assert!(!profile.preemption);
}

#[test]
fn two_profiles_and_percentage_of_nodes_to_score() {
    let config = parse(
        "
percentageOfNodesToScore: 40
profiles:
- schedulerName: default-scheduler
- schedulerName: fast
  percentageOfNodesToScore: 10
  plugins:
    score:
      disabled: [{name: '*'}]
- schedulerName: adaptive
  percentageOfNodesToScore: 0
",
    );
    let summary: Vec<_> = config
        .profiles
        .iter()
        .map(|p| {
            (
                p.scheduler_name.as_str(),
                p.percentage_of_nodes_to_score,
                p.score.len(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("default-scheduler", Some(40), 9),
            ("fast", Some(10), 0),
            ("adaptive", Some(0), 9),
        ]
    );
    assert_eq!(config.percentage_of_nodes_to_score, Some(40));
}

#[test]
fn list_defaulting_without_constraints_and_added_affinity_are_accepted() {
    parse(
        "
profiles:
- pluginConfig:
  - name: PodTopologySpread
    args: {defaultingType: List}
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions: [{key: pool, operator: In, values: [batch]}]
  - name: NodeResourcesBalancedAllocation
    args: {resources: [{name: cpu, weight: 1}, {name: memory}]}
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
",
    );
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (
            "
profiles:
- pluginConfig:
  - name: GPUShare
    args: {gpuSchedulerPolicy: 'binpack,fastest'}
",
            r#"profiles[0].pluginConfig[0].args.gpuSchedulerPolicy: "binpack,fastest" is not a comma-separated list of binpack, spread, numa, mutex, topology-aware"#,
        ),
        (
            "
profiles:
- pluginConfig:
  - name: GPUShare
    args: {nodeSchedulerPolicy: mutex}
",
            r#"profiles[0].pluginConfig[0].args.nodeSchedulerPolicy: must be binpack, spread or none, not "mutex""#,
        ),
        (
            "
profiles:
- pluginConfig:
  - name: GPUShare
    args: {defaultCores: 101}
",
            "profiles[0].pluginConfig[0].args.defaultCores: must be 0 to 100, not 101",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args: {}
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: Foo}}
",
            r#"profiles[0].pluginConfig[1].name: duplicate "NodeResourcesFit""#,
        ),
        (
            "
profiles:
- pluginConfig:
  - name: InterPodAffinity
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: Foo}}
",
            r#"profiles[0].pluginConfig[1].args.scoringStrategy.type: must be LeastAllocated, MostAllocated or RequestedToCapacityRatio, not "Foo""#,
        ),
        (
            "
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        requestedToCapacityRatio:
          shape: [{utilization: 50, score: 0}, {utilization: 40, score: 10}]
",
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: values must be sorted in increasing order",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        requestedToCapacityRatio: {shape: [{utilization: 50, score: 11}]}
",
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[0].score: must be in the range 0-10, not 11",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 101}]}}
",
            "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: must be in the range 1-100, not 101",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated, requestedToCapacityRatio: {shape: []}}}
",
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: must be omitted unless type is RequestedToCapacityRatio",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: NodeResourcesBalancedAllocation
    args: {resources: [{name: cpu, weight: 2}]}
",
            "profiles[0].pluginConfig[0].args.resources[0].weight: must be 1, not 2",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: InterPodAffinity
    args: {hardPodAffinityWeight: 101}
",
            "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: must be in the range 0-100, not 101",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: PodTopologySpread
    args:
      defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]
",
            "profiles[0].pluginConfig[0].args.defaultingType: must be List when defaultConstraints are given",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}
      - {maxSkew: 0, topologyKey: host, whenUnsatisfiable: DoNotSchedule}
",
            "profiles[0].pluginConfig[0].args.defaultConstraints[1].maxSkew: must be greater than zero, not 0",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Near}]}]
",
            r#"profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: must be In, NotIn, Exists, DoesNotExist, Gt or Lt, not "Near""#,
        ),
        (
            "
profiles:
- pluginConfig:
  - name: DefaultPreemption
    args: {minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0}
",
            "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: must not be zero when minCandidateNodesAbsolute is zero",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args: {kind: InterPodAffinityArgs}
",
            r#"profiles[0].pluginConfig[0].args.kind: must be NodeResourcesFitArgs, not "InterPodAffinityArgs""#,
        ),
        (
            "
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {typo: MostAllocated}}
",
            "profiles[0].pluginConfig[0].args.scoringStrategy.typo: unknown field `typo`, expected one of `type`, `resources`, `requestedToCapacityRatio`",
        ),
        (
            "
profiles:
- pluginConfig:
  - name: CapacityScheduling
",
            r#"profiles[0].pluginConfig[0].name: unknown plugin "CapacityScheduling": not one of kube-scheduler v1.37's in-tree plugins (of scheduler-plugins' out-of-tree plugins Gantry has Coscheduling only)"#,
        ),
        (
            "
profiles:
- plugins:
    score:
      enabled: [{name: NodeResourceFit}]
",
            r#"profiles[0].plugins.score.enabled[0].name: unknown plugin "NodeResourceFit": not one of kube-scheduler v1.37's in-tree plugins (of scheduler-plugins' out-of-tree plugins Gantry has Coscheduling only)"#,
        ),
        (
            "
profiles:
- plugins:
    filter:
      disabled: [{name: NodeNames}]
",
            r#"profiles[0].plugins.filter.disabled[0].name: unknown plugin "NodeNames": not one of kube-scheduler v1.37's in-tree plugins (of scheduler-plugins' out-of-tree plugins Gantry has Coscheduling only)"#,
        ),
        (
            "
profiles:
- plugins:
    score:
      enabled: [{name: NodeName}]
",
            "profiles[0].plugins.score.enabled[0].name: NodeName does not implement score",
        ),
        (
            "
profiles:
- plugins:
    score:
      enabled: [{name: ImageLocality, weight: -1}]
",
            "profiles[0].plugins.score.enabled[0].weight: must not be negative, not -1",
        ),
        (
            "
profiles:
- plugins:
    multiPoint:
      enabled: [{name: ImageLocality}, {name: ImageLocality}]
",
            r#"profiles[0].plugins.multiPoint.enabled[1].name: duplicate "ImageLocality""#,
        ),
        (
            "
profiles:
- plugins:
    scoring:
      enabled: [{name: ImageLocality}]
",
            "profiles[0].plugins.scoring: unknown extension point; must be multiPoint, preEnqueue, queueSort, preFilter, filter, postFilter, preScore, score, reserve, permit, preBind, bind, postBind, placementGenerate, placementScore",
        ),
        (
            "
profiles:
- plugins:
    bind:
      disabled: [{name: DefaultBinder}]
",
            "profiles[0].plugins.bind: at least one bind plugin is required",
        ),
        (
            "
profiles:
- schedulerName: a
- schedulerName: b
- schedulerName: a
",
            r#"profiles[2].schedulerName: duplicate "a" (also profiles[0])"#,
        ),
        (
            "
profiles:
- schedulerName: a
- percentageOfNodesToScore: 50
",
            "profiles[1].schedulerName: required",
        ),
        (
            "
profiles:
- percentageOfNodesToScore: 101
",
            "profiles[0].percentageOfNodesToScore: must be in the range 0-100, not 101",
        ),
        (
            "percentageOfNodesToScore: -1\n",
            "percentageOfNodesToScore: must be in the range 0-100, not -1",
        ),
        (
            "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n",
            "podMaxBackoffSeconds: must be at least podInitialBackoffSeconds (5), not 4",
        ),
        (
            "profile: []\n",
            "profile: unknown field `profile`, expected one of `profiles`, `percentageOfNodesToScore`, `podInitialBackoffSeconds`, `podMaxBackoffSeconds`, `extenders`, `clientConnection`",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(error(body), format!("scheduler.yaml: {expected}"), "{body}");
    }
}

#[test]
fn api_version_and_syntax_errors() {
    let wrong = SchedulerConfig::parse(
        "apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n",
        "old.yaml",
    );
    assert_eq!(
        wrong.err().map(|e| e.to_string()).as_deref(),
        Some(
            r#"old.yaml: apiVersion: must be kubescheduler.config.k8s.io/v1, not "kubescheduler.config.k8s.io/v1beta2""#
        )
    );
    // Only v1.28 still reads v1beta3, so only it suggests it.
    let wrong_v1_28 = SchedulerConfig::parse_for(
        "apiVersion: kubescheduler.config.k8s.io/v1beta2
kind: KubeSchedulerConfiguration
",
        "old.yaml",
        Release::at(28),
    );
    assert_eq!(
        wrong_v1_28.err().map(|e| e.to_string()).as_deref(),
        Some(
            r#"old.yaml: apiVersion: must be kubescheduler.config.k8s.io/v1 (or the deprecated kubescheduler.config.k8s.io/v1beta3), not "kubescheduler.config.k8s.io/v1beta2""#
        )
    );
    let empty = SchedulerConfig::parse("", "empty.yaml");
    assert_eq!(
        empty.err().map(|e| e.to_string()).as_deref(),
        Some("empty.yaml: must be a KubeSchedulerConfiguration, not null")
    );
    let syntax = SchedulerConfig::parse("profiles: [", "broken.yaml");
    let error = syntax.err().unwrap();
    assert_eq!(
        (error.source_name.as_str(), error.field.as_str()),
        ("broken.yaml", "")
    );
}

/// kube-scheduler v1.28 still reads v1beta3 (deprecated), with v1's default plugins and
/// weights (upstream `v1beta3/default_plugins.go`); v1.29 removed it.
#[test]
fn v1beta3_is_read_as_v1_with_a_deprecation_warning() {
    let body = "kind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    score:\n      enabled: [{name: ImageLocality, weight: 5}]\n";
    let v1_28 = Release::at(28);
    let beta = SchedulerConfig::parse_for(
        &format!("apiVersion: kubescheduler.config.k8s.io/v1beta3\n{body}"),
        "beta.yaml",
        v1_28,
    )
    .unwrap();
    let v1 = SchedulerConfig::parse_for(
        &format!("apiVersion: kubescheduler.config.k8s.io/v1\n{body}"),
        "v1.yaml",
        v1_28,
    )
    .unwrap();
    let refused = SchedulerConfig::parse(
        &format!("apiVersion: kubescheduler.config.k8s.io/v1beta3\n{body}"),
        "beta.yaml",
    )
    .err()
    .unwrap();
    assert_eq!(
        refused.to_string(),
        "beta.yaml: apiVersion: kubescheduler.config.k8s.io/v1beta3 was removed in v1.29, so kube-scheduler v1.37 does not read it: use kubescheduler.config.k8s.io/v1 (the same fields)"
    );
    assert_eq!(
        beta.warnings,
        vec!["beta.yaml: apiVersion: KubeSchedulerConfiguration v1beta3 is deprecated in v1.26, will be removed in v1.29 (read as kubescheduler.config.k8s.io/v1, whose v1.28 defaults are the same)".to_string()]
    );
    assert!(v1.warnings.is_empty());
    let weights = |c: &SchedulerConfig| {
        c.profiles[0]
            .score
            .iter()
            .map(|s| (s.plugin.name().to_string(), s.weight))
            .collect::<Vec<_>>()
    };
    assert_eq!(weights(&beta), weights(&v1));
    assert!(weights(&beta).contains(&("TaintToleration".to_string(), 3)));
}

/// The in-tree volume limit plugins Gantry does not implement are accepted with a warning
/// under v1.28 (which leaves CSI-migrated volumes to NodeVolumeLimits) and unknown from
/// v1.32, which removed them; out-of-tree plugins are an error.
#[test]
fn unimplemented_upstream_plugins_warn_out_of_tree_ones_fail() {
    let in_tree = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    filter:\n      enabled: [{name: EBSLimits}, {name: CinderLimits}]\n      disabled: [{name: GCEPDLimits}]\n";
    let config = SchedulerConfig::parse_for(in_tree, "s.yaml", Release::at(28)).unwrap();
    let removed = SchedulerConfig::parse(in_tree, "s.yaml").err().unwrap();
    assert_eq!(
        removed.to_string(),
        "s.yaml: profiles[0].plugins.filter.enabled[0].name: unknown plugin \"EBSLimits\": not one of kube-scheduler v1.37's in-tree plugins (of scheduler-plugins' out-of-tree plugins Gantry has Coscheduling only)"
    );
    assert_eq!(config.warnings.len(), 2, "{:?}", config.warnings);
    assert!(config.warnings[0].starts_with(
        "s.yaml: profiles[0].plugins.filter.enabled[0].name: EBSLimits is not implemented by Gantry and is ignored"
    ));
    assert!(config.warnings[1].contains("enabled[1].name: CinderLimits is not implemented"));
    let error = SchedulerConfig::parse(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: CapacityScheduling}]\n",
        "s.yaml",
    )
    .err()
    .unwrap();
    assert_eq!(
        error.field,
        "profiles[0].plugins.multiPoint.enabled[0].name"
    );
    assert!(error.message.contains("out-of-tree"), "{}", error.message);
}

/// scheduler-plugins' Coscheduling, enabled as its README enables it: its queue sort
/// replaces PrioritySort, it joins PreFilter, PostFilter, Reserve and Permit after the
/// default plugins, and its arguments are defaulted and validated as upstream's.
#[test]
fn coscheduling_is_enabled_by_name_with_its_arguments() {
    let enabled = "
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: Coscheduling}]
    queueSort:
      enabled: [{name: Coscheduling}]
      disabled: [{name: \"*\"}]
";
    let config = parse(enabled);
    let profile = &config.profiles[0];
    assert_eq!(
        profile.queue_sort,
        gantry_framework::QueueSort::Coscheduling
    );
    let [_, pre_filter, _, _, reserve, permit] = names(profile);
    assert_eq!(pre_filter.last(), Some(&"Coscheduling"));
    assert_eq!(reserve.last(), Some(&"Coscheduling"));
    assert_eq!(permit, ["Coscheduling"]);
    let post_filter: Vec<_> = profile.post_filter.iter().map(|p| p.name()).collect();
    assert_eq!(post_filter, ["Coscheduling"]);
    assert!(profile.preemption);
    assert_eq!(
        parse("profiles: [{}]").profiles[0].queue_sort,
        gantry_framework::QueueSort::PrioritySort
    );
    let with_args = |args: &str| {
        format!("{enabled}  pluginConfig:\n  - name: Coscheduling\n    args: {args}\n")
    };
    parse(&with_args(
        "{permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: 5, podGroupRejectPercentage: 100}",
    ));
    for (args, message) in [
        (
            "{permitWaitingTimeSeconds: -1}",
            "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds: Invalid value: -1: must be greater than 0",
        ),
        (
            "{podGroupBackoffSeconds: -5}",
            "profiles[0].pluginConfig[0].args.podGroupBackoffSeconds: Invalid value: -5: must be greater than 0",
        ),
        (
            "{podGroupRejectPercentage: 101}",
            "profiles[0].pluginConfig[0].args.podGroupRejectPercentage: Invalid value: 101: must be between 0 and 100",
        ),
    ] {
        assert_eq!(
            error(&with_args(args)),
            format!("scheduler.yaml: {message}")
        );
    }
    assert!(
        error(&with_args("{permitWaitingTime: 10}")).contains("unknown field `permitWaitingTime`")
    );
    // Two queue sorts, and profiles that sort differently, are refused.
    let both = "
profiles:
- plugins:
    queueSort:
      enabled: [{name: Coscheduling}]
";
    assert!(
        error(both).ends_with(
            "profiles[0].plugins.queueSort: exactly one queue sort plugin is required, not 2"
        ),
        "{}",
        error(both)
    );
    let mixed = format!("{enabled}- schedulerName: other\n");
    assert_eq!(
        error(&mixed),
        "scheduler.yaml: profiles[1].plugins.queueSort: must be the same for all profiles"
    );
}

/// TopologyAwareWorkloadScheduling adds TopologyPlacementGenerator and PodGroupPodsCount
/// (weight 1) to the default profile (`applyTopologyAwareWorkloadScheduling`); the
/// placement points are v1.36's, and their plugins are configured as any other.
#[test]
fn topology_aware_workload_scheduling_adds_the_placement_plugins() {
    let tas = Release::parse(
        Some("1.36"),
        Some("GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"),
    )
    .unwrap();
    let default = default_profile_for("default-scheduler", tas);
    assert_eq!(default.placement_generate, ["TopologyPlacementGenerator"]);
    assert_eq!(default.placement_score, [("PodGroupPodsCount", 1)]);
    assert!(
        default_profile("default-scheduler")
            .placement_generate
            .is_empty()
    );
    let body = "profiles:\n- plugins:\n    placementScore:\n      enabled: [{name: PodGroupPodsCount, weight: 3}]\n      disabled: [{name: PodGroupPodsCount}]\n";
    let config =
        SchedulerConfig::parse_for(&format!("{HEADER}{body}"), "scheduler.yaml", tas).unwrap();
    assert_eq!(
        config.profiles[0].placement_score,
        [("PodGroupPodsCount", 3)]
    );
    let off = "profiles:\n- plugins:\n    placementGenerate:\n      disabled: [{name: '*'}]\n";
    let config =
        SchedulerConfig::parse_for(&format!("{HEADER}{off}"), "scheduler.yaml", tas).unwrap();
    assert!(config.profiles[0].placement_generate.is_empty());
    let v1_35 =
        SchedulerConfig::parse_for(&format!("{HEADER}{off}"), "scheduler.yaml", Release::at(35))
            .err()
            .expect("v1.35 has no placementGenerate")
            .to_string();
    assert!(
        v1_35.contains("plugins.placementGenerate: unknown extension point"),
        "{v1_35}"
    );
}
