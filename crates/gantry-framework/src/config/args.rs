//! `pluginConfig`: plugin arguments with upstream's defaults, validated as upstream's
//! `validation_pluginargs.go` does.

use gantry_api::labels::NodeSelectorRequirement;
use gantry_api::release::Gate;
use gantry_api::{
    InclusionPolicy, NodeSelector, NodeSelectorTerm, Release, ResourceName, Sym,
    TopologySpreadConstraint, WhenUnsatisfiable,
};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::{API_VERSION, Checked, RawPluginConfig, fail, in_range, typed};
use crate::plugins::PluginArgs;
use std::time::Duration;

use crate::plugins::balanced_allocation::BalancedAllocation;
use crate::plugins::coscheduling::Coscheduling;
use crate::plugins::gpu_share::GpuShare;
use crate::plugins::inter_pod_affinity::InterPodAffinity;
use crate::plugins::node_affinity::NodeAffinity;
use crate::plugins::node_resources_fit::{
    NodeResourcesFit, ScoredResource, ScoringStrategy, default_scored_resources,
};
use crate::plugins::pod_topology_spread::{DefaultConstraints, PodTopologySpread};

const NOT_SUPPORTED: &str = "not supported by Gantry yet";

/// A profile's plugin arguments.
pub(super) struct ProfileArgs {
    pub plugins: PluginArgs,
    pub min_candidate_nodes_percentage: u32,
    pub min_candidate_nodes_absolute: u32,
}

/// Reads the `pluginConfig` of the profile at `at` as `release` does. Plugins without
/// arguments Gantry uses keep theirs unread.
pub(super) fn parse(
    configs: &[RawPluginConfig],
    at: &str,
    release: Release,
) -> Checked<ProfileArgs> {
    let mut out = ProfileArgs {
        plugins: PluginArgs::default(),
        min_candidate_nodes_percentage: 10,
        min_candidate_nodes_absolute: 100,
    };
    for (j, config) in configs.iter().enumerate() {
        let name = config.name.as_str();
        let field = format!("{at}.pluginConfig[{j}]");
        if configs[..j].iter().any(|c| c.name == name) {
            return fail(format!("{field}.name"), format!("duplicate {name:?}"));
        }
        let at = format!("{field}.args");
        let args = without_type_meta(&config.args, name, &at)?;
        match name {
            "NodeResourcesFit" => out.plugins.fit = fit(typed(args, &at)?, &at)?,
            "NodeResourcesBalancedAllocation" => {
                out.plugins.balanced = balanced(typed(args, &at)?, &at)?;
            }
            "PodTopologySpread" => out.plugins.spread = spread(typed(args, &at)?, &at)?,
            "InterPodAffinity" => out.plugins.pod_affinity = pod_affinity(typed(args, &at)?, &at)?,
            "NodeAffinity" => out.plugins.node_affinity = node_affinity(typed(args, &at)?, &at)?,
            "GPUShare" => {
                out.plugins.gpu_share = GpuShare::from_args(typed(args, &at)?)
                    .or_else(|(field, message)| fail(format!("{at}.{field}"), message))?;
            }
            "FGDScore" => {
                let args: crate::plugins::openb::FgdArgs = typed(args, &at)?;
                out.plugins.fgd_typical = args
                    .typical()
                    .or_else(|(field, message)| fail(format!("{at}.{field}"), message))?;
            }
            "Coscheduling" => out.plugins.coscheduling = coscheduling(typed(args, &at)?, &at)?,
            "VolumeBinding" => {
                let args: VolumeBindingArgs = typed(args, &at)?;
                out.plugins.volume_bind_timeout = args
                    .bind_timeout_seconds
                    .map(|s| std::time::Duration::from_secs(s.max(0).unsigned_abs()));
                out.plugins.volume_capacity_shape = volume_binding(args, &at, release)?;
            }
            "DynamicResources" => {
                out.plugins.binding_timeout = dynamic_resources(typed(args, &at)?, &at, release)?;
            }
            "DefaultPreemption" => {
                let args: PreemptionArgs = typed(args, &at)?;
                let percentage = format!("{at}.minCandidateNodesPercentage");
                let percentage = in_range(
                    args.min_candidate_nodes_percentage.unwrap_or(10),
                    0..=100,
                    &percentage,
                )?;
                let absolute = args.min_candidate_nodes_absolute.unwrap_or(100);
                let Ok(absolute) = u32::try_from(absolute) else {
                    return fail(
                        format!("{at}.minCandidateNodesAbsolute"),
                        format!("must not be negative, not {absolute}"),
                    );
                };
                if percentage == 0 && absolute == 0 {
                    return fail(
                        format!("{at}.minCandidateNodesPercentage"),
                        "must not be zero when minCandidateNodesAbsolute is zero",
                    );
                }
                out.min_candidate_nodes_percentage = percentage;
                out.min_candidate_nodes_absolute = absolute;
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The args without `apiVersion` and `kind`, which must match the plugin when given;
/// absent args are the defaults.
fn without_type_meta(args: &Value, plugin: &str, at: &str) -> Checked<Value> {
    let mut args = match args {
        Value::Null => Value::Object(Default::default()),
        other => other.clone(),
    };
    if let Value::Object(map) = &mut args {
        let kind = format!("{plugin}Args");
        for (field, expected) in [("apiVersion", API_VERSION), ("kind", kind.as_str())] {
            if let Some(value) = map.remove(field)
                && value != expected
            {
                return fail(
                    format!("{at}.{field}"),
                    format!("must be {expected}, not {value}"),
                );
            }
        }
    }
    Ok(args)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PreemptionArgs {
    min_candidate_nodes_percentage: Option<i32>,
    min_candidate_nodes_absolute: Option<i32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FitArgs {
    #[serde(default)]
    ignored_resources: Vec<String>,
    #[serde(default)]
    ignored_resource_groups: Vec<String>,
    scoring_strategy: Option<Strategy>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Strategy {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    resources: Vec<Resource>,
    requested_to_capacity_ratio: Option<Ratio>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Resource {
    name: String,
    #[serde(default)]
    weight: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Ratio {
    #[serde(default)]
    shape: Vec<ShapePoint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapePoint {
    utilization: i32,
    score: i32,
}

fn fit(args: FitArgs, at: &str) -> Checked<NodeResourcesFit> {
    if !args.ignored_resources.is_empty() {
        return fail(format!("{at}.ignoredResources"), NOT_SUPPORTED);
    }
    if !args.ignored_resource_groups.is_empty() {
        return fail(format!("{at}.ignoredResourceGroups"), NOT_SUPPORTED);
    }
    let Some(strategy) = args.scoring_strategy else {
        return Ok(NodeResourcesFit::default());
    };
    let at = format!("{at}.scoringStrategy");
    let ratio_field = format!("{at}.requestedToCapacityRatio");
    let strategy_kind = match (strategy.kind.as_str(), strategy.requested_to_capacity_ratio) {
        ("LeastAllocated" | "MostAllocated", Some(_)) => {
            return fail(
                ratio_field,
                "must be omitted unless type is RequestedToCapacityRatio",
            );
        }
        ("LeastAllocated", None) => ScoringStrategy::LeastAllocated,
        ("MostAllocated", None) => ScoringStrategy::MostAllocated,
        ("RequestedToCapacityRatio", Some(ratio)) => ScoringStrategy::RequestedToCapacityRatio {
            shape: shape(&ratio.shape, &format!("{ratio_field}.shape"))?,
        },
        ("RequestedToCapacityRatio", None) => {
            return fail(
                ratio_field,
                "required when type is RequestedToCapacityRatio",
            );
        }
        (other, _) => {
            return fail(
                format!("{at}.type"),
                format!(
                    "must be LeastAllocated, MostAllocated or RequestedToCapacityRatio, not {other:?}"
                ),
            );
        }
    };
    for (k, r) in strategy.resources.iter().enumerate() {
        if !(0..=100).contains(&r.weight) {
            return fail(
                format!("{at}.resources[{k}].weight"),
                format!("must be in the range 1-100, not {}", r.weight),
            );
        }
    }
    Ok(NodeResourcesFit {
        strategy: strategy_kind,
        resources: resources(strategy.resources),
        ..NodeResourcesFit::default()
    })
}

/// Upstream's defaulting of a resource list: cpu and memory when empty, weight 0 as 1.
fn resources(list: Vec<Resource>) -> Vec<ScoredResource> {
    if list.is_empty() {
        return default_scored_resources();
    }
    list.into_iter()
        .map(|r| ScoredResource {
            name: ResourceName::parse(&r.name),
            weight: r.weight.max(1),
        })
        .collect()
}

/// Utilisation (0..=100, increasing) to score (0..=10) points.
fn shape(points: &[ShapePoint], at: &str) -> Checked<Vec<(i64, i64)>> {
    if points.is_empty() {
        return fail(at, "at least one point must be specified");
    }
    for (k, p) in points.iter().enumerate() {
        let utilization = format!("{at}[{k}].utilization");
        if k > 0 && points[k - 1].utilization >= p.utilization {
            return fail(utilization, "values must be sorted in increasing order");
        }
        in_range(p.utilization, 0..=100, &utilization)?;
        in_range(p.score, 0..=10, &format!("{at}[{k}].score"))?;
    }
    Ok(points
        .iter()
        .map(|p| (i64::from(p.utilization), i64::from(p.score)))
        .collect())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DynamicResourcesArgs {
    /// Read and checked, not used: Gantry's Filter has no time limit (upstream's stops an
    /// allocation search after it, `DRASchedulerFilterTimeout`).
    filter_timeout: Option<String>,
    binding_timeout: Option<String>,
}

/// DynamicResourcesArgs as upstream validates them (`ValidateDynamicResourcesArgs`):
/// `bindingTimeout` at least a second where binding conditions are served, forbidden
/// where they are not. Returns it in whole seconds (Gantry's clock counts seconds).
fn dynamic_resources(
    args: DynamicResourcesArgs,
    at: &str,
    release: Release,
) -> Checked<Option<i64>> {
    let duration = |text: &Option<String>, field: &str| -> Checked<Option<f64>> {
        match text {
            None => Ok(None),
            Some(text) => match go_duration(text) {
                Some(seconds) => Ok(Some(seconds)),
                None => fail(
                    format!("{at}.{field}"),
                    format!("{text:?} is not a duration (like 10s or 10m0s)"),
                ),
            },
        }
    };
    if duration(&args.filter_timeout, "filterTimeout")?.is_some_and(|s| s < 0.0) {
        return fail(format!("{at}.filterTimeout"), "must be zero or positive");
    }
    let Some(seconds) = duration(&args.binding_timeout, "bindingTimeout")? else {
        return Ok(None);
    };
    let served = release.enabled(Gate::DRADeviceBindingConditions)
        && release.enabled(Gate::DRAResourceClaimDeviceStatus);
    if !served {
        return fail(
            format!("{at}.bindingTimeout"),
            "Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled",
        );
    }
    if seconds < 1.0 {
        return fail(format!("{at}.bindingTimeout"), "must be at least 1 second");
    }
    Ok(Some(seconds.ceil() as i64))
}

/// Go's `time.ParseDuration` (a `metav1.Duration`): a sign, then numbers with units
/// (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), as `10m0s` or `1.5h`, at most about 292
/// years; in seconds.
fn go_duration(text: &str) -> Option<f64> {
    let (sign, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (-1.0, rest),
        None => (1.0, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0.0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    // Go refuses what overflows its nanoseconds (`invalid duration`).
    (total <= MAX_GO_DURATION_SECONDS).then_some(sign * total)
}

/// The longest `time.Duration`: 2^63 - 1 nanoseconds (about 292 years).
const MAX_GO_DURATION_SECONDS: f64 = 9_223_372_036.854_775;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VolumeBindingArgs {
    bind_timeout_seconds: Option<i64>,
    shape: Option<Vec<ShapePoint>>,
}

/// `VolumeBindingArgs` (`ValidateVolumeBindingArgsWithOptions`): the shape StorageCapacityScoring
/// scores with, when given; refused while the gate is off, defaulted when empty.
/// `bindTimeoutSeconds` must not be negative (`gantry run`'s PreBind waits as long for the
/// pod's claims to be bound).
fn volume_binding(
    args: VolumeBindingArgs,
    at: &str,
    release: Release,
) -> Checked<Option<Vec<(i64, i64)>>> {
    if let Some(timeout) = args.bind_timeout_seconds
        && timeout < 0
    {
        return fail(
            format!("{at}.bindTimeoutSeconds"),
            format!("invalid BindTimeoutSeconds, should not be a negative value, not {timeout}"),
        );
    }
    let Some(points) = args.shape else {
        return Ok(None);
    };
    if !release.enabled(Gate::StorageCapacityScoring) {
        // v1.33 renamed the gate from VolumeCapacityPriority.
        let gate = if release.at_least(33) {
            Gate::StorageCapacityScoring.name()
        } else {
            "VolumeCapacityPriority"
        };
        return fail(
            format!("{at}.shape"),
            format!("unexpected field `shape`, remove it or turn on the feature gate {gate}"),
        );
    }
    if points.is_empty() {
        return Ok(None);
    }
    shape(&points, &format!("{at}.shape")).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BalancedArgs {
    #[serde(default)]
    resources: Vec<Resource>,
}

fn balanced(args: BalancedArgs, at: &str) -> Checked<BalancedAllocation> {
    for (k, r) in args.resources.iter().enumerate() {
        let field = format!("{at}.resources[{k}]");
        if args.resources[..k].iter().any(|o| o.name == r.name) {
            return fail(format!("{field}.name"), format!("duplicate {:?}", r.name));
        }
        if !matches!(r.weight, 0 | 1) {
            return fail(
                format!("{field}.weight"),
                format!("must be 1, not {}", r.weight),
            );
        }
    }
    Ok(BalancedAllocation {
        resources: resources(args.resources),
        ..BalancedAllocation::default()
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SpreadArgs {
    #[serde(default)]
    default_constraints: Vec<Constraint>,
    defaulting_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Constraint {
    #[serde(default)]
    max_skew: i32,
    #[serde(default)]
    topology_key: String,
    #[serde(default)]
    when_unsatisfiable: String,
    label_selector: Option<IgnoredAny>,
    min_domains: Option<i32>,
    node_affinity_policy: Option<String>,
    node_taints_policy: Option<String>,
    /// Accepted and unused, as upstream: a default constraint's selector comes from the
    /// Services selecting the pod.
    #[serde(rename = "matchLabelKeys")]
    _match_label_keys: Option<IgnoredAny>,
}

fn spread(args: SpreadArgs, at: &str) -> Checked<PodTopologySpread> {
    let defaulting = format!("{at}.defaultingType");
    match args.defaulting_type.as_deref().unwrap_or("System") {
        "System" if args.default_constraints.is_empty() => {
            return Ok(PodTopologySpread::default());
        }
        "System" => return fail(defaulting, "must be List when defaultConstraints are given"),
        "List" => {}
        other => return fail(defaulting, format!("must be System or List, not {other:?}")),
    }
    let at = format!("{at}.defaultConstraints");
    let mut constraints: Vec<TopologySpreadConstraint> = Vec::new();
    for (k, c) in args.default_constraints.iter().enumerate() {
        let c = constraint(c, &format!("{at}[{k}]"))?;
        if constraints.iter().any(|o| {
            o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable
        }) {
            return fail(
                format!("{at}[{k}]"),
                format!(
                    "duplicate {{{}, {:?}}}",
                    c.topology_key.as_str(),
                    c.when_unsatisfiable
                ),
            );
        }
        constraints.push(c);
    }
    Ok(PodTopologySpread {
        default_constraints: DefaultConstraints::List(constraints),
    })
}

fn constraint(c: &Constraint, at: &str) -> Checked<TopologySpreadConstraint> {
    if c.max_skew <= 0 {
        return fail(
            format!("{at}.maxSkew"),
            format!("must be greater than zero, not {}", c.max_skew),
        );
    }
    if c.topology_key.is_empty() {
        return fail(format!("{at}.topologyKey"), "required");
    }
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return fail(
                format!("{at}.whenUnsatisfiable"),
                format!("must be DoNotSchedule or ScheduleAnyway, not {other:?}"),
            );
        }
    };
    if c.label_selector.is_some() {
        return fail(
            format!("{at}.labelSelector"),
            "must not be set: the selector comes from the Services selecting the pod",
        );
    }
    let policy = |value: &Option<String>, default, field: &str| match value.as_deref() {
        None => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => fail(
            format!("{at}.{field}"),
            format!("must be Honor or Ignore, not {other:?}"),
        ),
    };
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: Sym::new(&c.topology_key),
        when_unsatisfiable,
        label_selector: None,
        min_domains: c.min_domains,
        node_affinity_policy: policy(
            &c.node_affinity_policy,
            InclusionPolicy::Honor,
            "nodeAffinityPolicy",
        )?,
        node_taints_policy: policy(
            &c.node_taints_policy,
            InclusionPolicy::Ignore,
            "nodeTaintsPolicy",
        )?,
    })
}

/// scheduler-plugins' `CoschedulingArgs` (`kubescheduler.config.k8s.io/v1`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CoschedulingArgs {
    permit_waiting_time_seconds: Option<i64>,
    pod_group_backoff_seconds: Option<i64>,
    pod_group_reject_percentage: Option<i32>,
}

/// Defaulted as `SetDefaults_CoschedulingArgs` (60, 0, 10) and checked as
/// `ValidateCoschedulingArgs` words it.
fn coscheduling(args: CoschedulingArgs, at: &str) -> Checked<Coscheduling> {
    let seconds = |value: Option<i64>, default: i64, field: &str| -> Checked<Duration> {
        let value = value.unwrap_or(default);
        match u64::try_from(value) {
            Ok(seconds) => Ok(Duration::from_secs(seconds)),
            Err(_) => fail(
                format!("{at}.{field}"),
                format!("Invalid value: {value}: must be greater than 0"),
            ),
        }
    };
    let percentage = args.pod_group_reject_percentage.unwrap_or(10);
    if !(0..=100).contains(&percentage) {
        return fail(
            format!("{at}.podGroupRejectPercentage"),
            format!("Invalid value: {percentage}: must be between 0 and 100"),
        );
    }
    Ok(Coscheduling {
        permit_waiting_time: seconds(
            args.permit_waiting_time_seconds,
            60,
            "permitWaitingTimeSeconds",
        )?,
        pod_group_backoff: seconds(args.pod_group_backoff_seconds, 0, "podGroupBackoffSeconds")?,
        pod_group_reject_percentage: percentage,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PodAffinityArgs {
    hard_pod_affinity_weight: Option<i32>,
    #[serde(default)]
    ignore_preferred_terms_of_existing_pods: bool,
}

fn pod_affinity(args: PodAffinityArgs, at: &str) -> Checked<InterPodAffinity> {
    if args.ignore_preferred_terms_of_existing_pods {
        return fail(
            format!("{at}.ignorePreferredTermsOfExistingPods"),
            NOT_SUPPORTED,
        );
    }
    let weight = in_range(
        args.hard_pod_affinity_weight.unwrap_or(1),
        0..=100,
        &format!("{at}.hardPodAffinityWeight"),
    )?;
    Ok(InterPodAffinity {
        hard_pod_affinity_weight: i64::from(weight),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeAffinityArgs {
    added_affinity: Option<AddedAffinity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AddedAffinity {
    required_during_scheduling_ignored_during_execution: Option<Selector>,
    #[serde(default)]
    preferred_during_scheduling_ignored_during_execution: Vec<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Selector {
    #[serde(default)]
    node_selector_terms: Vec<Term>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Term {
    #[serde(default)]
    match_expressions: Vec<Requirement>,
    #[serde(default)]
    match_fields: Vec<Requirement>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Requirement {
    key: String,
    operator: String,
    #[serde(default)]
    values: Vec<String>,
}

fn node_affinity(args: NodeAffinityArgs, at: &str) -> Checked<NodeAffinity> {
    let Some(added) = args.added_affinity else {
        return Ok(NodeAffinity::default());
    };
    let at = format!("{at}.addedAffinity");
    if !added
        .preferred_during_scheduling_ignored_during_execution
        .is_empty()
    {
        return fail(
            format!("{at}.preferredDuringSchedulingIgnoredDuringExecution"),
            NOT_SUPPORTED,
        );
    }
    let Some(required) = added.required_during_scheduling_ignored_during_execution else {
        return Ok(NodeAffinity::default());
    };
    let at = format!("{at}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
    let mut terms = Vec::new();
    for (i, t) in required.node_selector_terms.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let list = |list: &[Requirement], name: &str, fields: bool| {
            list.iter()
                .enumerate()
                .map(|(k, r)| requirement(r, &format!("{at}.{name}[{k}]"), fields))
                .collect::<Checked<Vec<_>>>()
        };
        terms.push(NodeSelectorTerm {
            match_expressions: list(&t.match_expressions, "matchExpressions", false)?,
            match_fields: list(&t.match_fields, "matchFields", true)?,
        });
    }
    Ok(NodeAffinity {
        added_affinity: Some(NodeSelector { terms }),
    })
}

/// Checked as a pod's node affinity requirement is (gantry-api's validation).
fn requirement(r: &Requirement, at: &str, is_field: bool) -> Checked<NodeSelectorRequirement> {
    NodeSelectorRequirement::parse(&r.key, &r.operator, &r.values, is_field).or_else(|e| {
        match e.part {
            Some(part) => fail(format!("{at}.{part}"), e.message),
            None => fail(at, e.message),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed_as(yaml: &str, release: Release) -> Checked<ProfileArgs> {
        let configs: Vec<RawPluginConfig> = typed(serde_saphyr::from_str(yaml).unwrap(), "")
            .unwrap_or_else(|e| panic!("{}: {}", e.field, e.message));
        parse(&configs, "profiles[0]", release)
    }

    fn args(yaml: &str) -> ProfileArgs {
        parsed_as(yaml, Release::default()).unwrap_or_else(|e| panic!("{}: {}", e.field, e.message))
    }

    /// `ValidateDynamicResourcesArgs`: `bindingTimeout` at least a second, and only where
    /// binding conditions are served; `filterTimeout` read as a duration. (That the
    /// timeout reaches the plugin: `testdata/dra-1.36/binding-timeout`, whose profile
    /// waits 10 s.)
    #[test]
    fn dynamic_resources_binding_timeout_is_checked_as_upstream_checks_it() {
        let yaml = |args: &str| format!("- name: DynamicResources\n  args: {{{args}}}");
        let timeout = |args: &str, release| {
            parsed_as(&yaml(args), release)
                .map(|a| a.plugins.binding_timeout)
                .map_err(|e| format!("{}: {}", e.field, e.message))
        };
        let v136 = Release::at(36);
        assert_eq!(timeout("bindingTimeout: 10s", v136), Ok(Some(10)));
        assert_eq!(timeout("bindingTimeout: 10m0s", v136), Ok(Some(600)));
        assert_eq!(timeout("bindingTimeout: 1.5s", v136), Ok(Some(2)));
        assert_eq!(timeout("filterTimeout: 0s", v136), Ok(None));
        let refused = [
            (
                "bindingTimeout: 500ms",
                v136,
                "bindingTimeout: must be at least 1 second",
            ),
            (
                "bindingTimeout: '-1s'",
                v136,
                "bindingTimeout: must be at least 1 second",
            ),
            (
                "bindingTimeout: ten",
                v136,
                "bindingTimeout: \"ten\" is not a duration",
            ),
            (
                "filterTimeout: '-1s'",
                v136,
                "filterTimeout: must be zero or positive",
            ),
            (
                "bindingTimeout: 10s",
                Release::at(35),
                "bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled",
            ),
        ];
        for (args, release, expected) in refused {
            let error = timeout(args, release).unwrap_err();
            assert!(error.contains(expected), "{error}\n  expected: {expected}");
        }
    }

    #[test]
    fn go_durations_are_read_as_go_reads_them() {
        assert_eq!(go_duration("0"), Some(0.0));
        assert_eq!(go_duration("1h30m"), Some(5400.0));
        assert_eq!(go_duration("250ms"), Some(0.25));
        assert_eq!(go_duration("-2s"), Some(-2.0));
        assert_eq!(go_duration("2562047h"), Some(2_562_047.0 * 3600.0));
        for bad in [
            "",
            "10",
            "1d",
            "s",
            "1.2.3s",
            "2562048h",
            "99999999999999999999h",
        ] {
            assert_eq!(go_duration(bad), None, "{bad}");
        }
    }

    /// `ValidateVolumeBindingArgsWithOptions`: a shape only with StorageCapacityScoring on
    /// (the gate named as the release names it), defaulted when empty, checked as
    /// RequestedToCapacityRatio's; a negative timeout refused.
    #[test]
    fn volume_binding_shape_follows_storage_capacity_scoring() {
        let shape = "- name: VolumeBinding\n  args: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}";
        let v137 = Release::parse(Some("1.37"), None).unwrap();
        let shape_of = |yaml: &str, release| {
            parsed_as(yaml, release)
                .unwrap_or_else(|e| panic!("{}: {}", e.field, e.message))
                .plugins
                .volume_capacity_shape
        };
        assert_eq!(shape_of(shape, v137), Some(vec![(0, 0), (100, 10)]));
        let empty = "- name: VolumeBinding\n  args: {shape: [], bindTimeoutSeconds: 0}";
        assert_eq!(shape_of(empty, v137), None);
        let error = |yaml: &str, release| {
            let e = parsed_as(yaml, release).err().expect("refused");
            format!("{}: {}", e.field, e.message)
        };
        assert_eq!(
            error(shape, Release::parse(Some("1.36"), None).unwrap()),
            "profiles[0].pluginConfig[0].args.shape: unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"
        );
        assert_eq!(
            error(empty, Release::parse(Some("1.28"), None).unwrap()),
            "profiles[0].pluginConfig[0].args.shape: unexpected field `shape`, remove it or turn on the feature gate VolumeCapacityPriority"
        );
        let on = Release::parse(Some("1.36"), Some("StorageCapacityScoring=true")).unwrap();
        assert_eq!(shape_of(shape, on), Some(vec![(0, 0), (100, 10)]));
        assert_eq!(
            error(
                "- name: VolumeBinding\n  args: {shape: [{utilization: 50, score: 1}, {utilization: 50, score: 2}]}",
                on
            ),
            "profiles[0].pluginConfig[0].args.shape[1].utilization: values must be sorted in increasing order"
        );
        assert_eq!(
            error(
                "- name: VolumeBinding\n  args: {bindTimeoutSeconds: -1}",
                on
            ),
            "profiles[0].pluginConfig[0].args.bindTimeoutSeconds: invalid BindTimeoutSeconds, should not be a negative value, not -1"
        );
    }

    #[test]
    fn arguments_reach_the_plugins() {
        let parsed = args(
            "
- name: NodeResourcesFit
  args:
    scoringStrategy:
      type: MostAllocated
      resources: [{name: cpu, weight: 3}, {name: nvidia.com/gpu}]
- name: NodeResourcesBalancedAllocation
  args: {resources: [{name: memory}]}
- name: InterPodAffinity
  args: {hardPodAffinityWeight: 0}
- name: PodTopologySpread
  args:
    defaultingType: List
    defaultConstraints:
    - {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Honor}
- name: NodeAffinity
  args:
    addedAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchFields: [{key: metadata.name, operator: NotIn, values: [n1]}]
- name: GPUShare
  args: {gpuSchedulerPolicy: ' binpack,numa', nodeSchedulerPolicy: spread, defaultMemory: 2048, defaultCores: 10, defaultGPUNum: 2}
",
        );
        let p = &parsed.plugins;
        assert_eq!(
            p.gpu_share,
            GpuShare {
                gpu_scheduler_policy: "binpack,numa".into(),
                node_scheduler_policy: crate::plugins::gpu_share::NodePolicy::Spread,
                chooses_node: true,
                default_memory: 2048,
                default_cores: 10,
                default_gpu_num: 2,
            }
        );
        assert_eq!(p.fit.strategy, ScoringStrategy::MostAllocated);
        let gpu = ResourceName::parse("nvidia.com/gpu");
        let scored = |name, weight| ScoredResource { name, weight };
        assert_eq!(
            p.fit.resources,
            [scored(ResourceName::Cpu, 3), scored(gpu, 1)]
        );
        assert_eq!(p.balanced.resources, [scored(ResourceName::Memory, 1)]);
        assert_eq!(p.pod_affinity.hard_pod_affinity_weight, 0);
        let DefaultConstraints::List(constraints) = &p.spread.default_constraints else {
            panic!("System defaulting");
        };
        assert_eq!(
            constraints
                .iter()
                .map(|c| (c.max_skew, c.topology_key.as_str(), c.node_taints_policy))
                .collect::<Vec<_>>(),
            [(2, "zone", InclusionPolicy::Honor)]
        );
        let added = p.node_affinity.added_affinity.as_ref().unwrap();
        assert_eq!(
            added.terms[0].match_fields[0].op,
            gantry_api::labels::NodeSelectorOp::NotIn
        );
    }

    #[test]
    fn requested_to_capacity_ratio_and_empty_list_defaulting() {
        let parsed = args(
            "
- name: NodeResourcesFit
  args:
    scoringStrategy:
      type: RequestedToCapacityRatio
      requestedToCapacityRatio: {shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]}
- name: PodTopologySpread
  args: {defaultingType: List}
",
        );
        let p = &parsed.plugins;
        assert_eq!(
            p.fit.strategy,
            ScoringStrategy::RequestedToCapacityRatio {
                shape: vec![(0, 10), (100, 0)]
            }
        );
        assert_eq!(p.fit.resources, default_scored_resources());
        assert_eq!(
            p.spread.default_constraints,
            DefaultConstraints::List(vec![])
        );
    }
}
