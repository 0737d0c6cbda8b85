//! KubeSchedulerConfiguration files (`kubescheduler.config.k8s.io/v1`, and the deprecated
//! `v1beta3` that kube-scheduler v1.28 still reads; YAML or JSON): the profiles, their
//! plugins merged onto the defaults of the release Gantry decides as, and the plugins'
//! arguments. Errors name the file and the field; what upstream accepts but Gantry reads
//! past comes back as warnings.

mod args;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use gantry_api::Release;

use crate::plugins::{self, PluginArgs, Registered};
use crate::{Profile, QueueSort, WeightedScorePlugin};

const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// Deprecated in v1.26 and removed in v1.29; in v1.28 its default plugins and weights are
/// v1's (upstream `v1beta3/default_plugins.go`: the same list and weights, SchedulingGates
/// appended while its feature gate is on), so it reads as v1.
const API_VERSION_V1BETA3: &str = "kubescheduler.config.k8s.io/v1beta3";
const KIND: &str = "KubeSchedulerConfiguration";
const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
const MULTI_POINT: &str = "multiPoint";

/// Upstream fields Gantry accepts and ignores: it has no leader election, worker pool or
/// profiling endpoints (of `clientConnection` it reads the rate limit only).
const IGNORED_FIELDS: &[&str] = &[
    "parallelism",
    "leaderElection",
    "healthzBindAddress",
    "metricsBindAddress",
    "enableProfiling",
    "enableContentionProfiling",
    "delayCacheUntilActive",
];

/// A loaded KubeSchedulerConfiguration.
pub struct SchedulerConfig {
    /// The release whose defaults and rules the profiles follow.
    pub release: Release,
    /// Each with its effective `percentageOfNodesToScore` (its own, else the global one).
    pub profiles: Vec<Profile>,
    /// The global `percentageOfNodesToScore`.
    pub percentage_of_nodes_to_score: Option<u32>,
    pub pod_initial_backoff_seconds: u64,
    pub pod_max_backoff_seconds: u64,
    /// The rate limit of the scheduler's API client (`clientConnection.qps` and `burst`).
    pub client_rate: ClientRate,
    /// What upstream accepts and Gantry reads past (a deprecated version, plugins it does
    /// not implement), as `file: field: message`.
    pub warnings: Vec<String>,
}

impl Default for SchedulerConfig {
    /// One profile, "default-scheduler", with the newest release's default plugins.
    fn default() -> SchedulerConfig {
        SchedulerConfig::for_release(Release::default())
    }
}

impl SchedulerConfig {
    /// One profile, "default-scheduler", with `release`'s default plugins.
    pub fn for_release(release: Release) -> SchedulerConfig {
        SchedulerConfig {
            release,
            profiles: vec![default_profile(DEFAULT_SCHEDULER_NAME, release)],
            percentage_of_nodes_to_score: None,
            pod_initial_backoff_seconds: 1,
            pod_max_backoff_seconds: 10,
            client_rate: ClientRate::DEFAULT,
            warnings: Vec::new(),
        }
    }

    /// Parses a configuration file as the newest release reads it; `source` names it in
    /// errors.
    pub fn parse(text: &str, source: &str) -> Result<SchedulerConfig, ConfigError> {
        SchedulerConfig::parse_for(text, source, Release::default())
    }

    /// Parses a configuration file as `release`'s kube-scheduler reads it.
    pub fn parse_for(
        text: &str,
        source: &str,
        release: Release,
    ) -> Result<SchedulerConfig, ConfigError> {
        let error = |field: String, message: String| ConfigError {
            source_name: source.to_string(),
            field,
            message,
        };
        let value =
            gantry_api::decode::parse_yaml_value(text).map_err(|e| error(String::new(), e))?;
        let mut config = from_value(value, release).map_err(|e| error(e.field, e.message))?;
        for warning in &mut config.warnings {
            *warning = format!("{source}: {warning}");
        }
        Ok(config)
    }
}

/// Why a configuration was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub source_name: String,
    /// The field's path, e.g. `profiles[0].pluginConfig[1].args.scoringStrategy.type`; empty
    /// when the text is not YAML or JSON at all.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.source_name)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// The extension points a profile's `plugins` can name, besides `multiPoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    PreEnqueue,
    QueueSort,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
    /// TopologyAwareWorkloadScheduling: the sets of nodes a pod group is tried on.
    PlacementGenerate,
    /// TopologyAwareWorkloadScheduling: which of the placements that fit is taken.
    PlacementScore,
}

impl Point {
    pub const ALL: [Point; 14] = [
        Point::PreEnqueue,
        Point::QueueSort,
        Point::PreFilter,
        Point::Filter,
        Point::PostFilter,
        Point::PreScore,
        Point::Score,
        Point::Reserve,
        Point::Permit,
        Point::PreBind,
        Point::Bind,
        Point::PostBind,
        Point::PlacementGenerate,
        Point::PlacementScore,
    ];

    /// Whether `plugins` has the point's field at `minor` (the placement points came with
    /// v1.36's workload-aware scheduling).
    pub fn exists_at(self, minor: u8) -> bool {
        !matches!(self, Point::PlacementGenerate | Point::PlacementScore) || minor >= 36
    }

    /// The point's field in `plugins`.
    pub fn field(self) -> &'static str {
        match self {
            Point::PreEnqueue => "preEnqueue",
            Point::QueueSort => "queueSort",
            Point::PreFilter => "preFilter",
            Point::Filter => "filter",
            Point::PostFilter => "postFilter",
            Point::PreScore => "preScore",
            Point::Score => "score",
            Point::Reserve => "reserve",
            Point::Permit => "permit",
            Point::PreBind => "preBind",
            Point::Bind => "bind",
            Point::PostBind => "postBind",
            Point::PlacementGenerate => "placementGenerate",
            Point::PlacementScore => "placementScore",
        }
    }
}

/// `release`'s kube-scheduler default profile under `scheduler_name`.
pub(crate) fn default_profile(scheduler_name: &str, release: Release) -> Profile {
    let registry = plugins::registry(PluginArgs::default(), release);
    Merged::new(&BTreeMap::new(), &registry, release).assemble(scheduler_name)
}

/// A problem at a field, before the file's name is attached.
struct FieldError {
    field: String,
    message: String,
}

type Checked<T> = Result<T, FieldError>;

fn fail<T>(field: impl Into<String>, message: impl Into<String>) -> Checked<T> {
    Err(FieldError {
        field: field.into(),
        message: message.into(),
    })
}

/// Deserializes `value`, naming the failing field by its path below `at`.
fn typed<T: DeserializeOwned>(value: Value, at: &str) -> Checked<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let field = match inner.as_str() {
            "." => at.to_string(),
            _ if at.is_empty() || inner.starts_with('[') => format!("{at}{inner}"),
            _ => format!("{at}.{inner}"),
        };
        FieldError {
            field,
            message: e.into_inner().to_string(),
        }
    })
}

fn in_range(value: i32, range: RangeInclusive<u32>, field: &str) -> Checked<u32> {
    match u32::try_from(value) {
        Ok(v) if range.contains(&v) => Ok(v),
        _ => fail(
            field,
            format!(
                "must be in the range {}-{}, not {value}",
                range.start(),
                range.end()
            ),
        ),
    }
}

fn percentage(value: Option<i32>, field: &str) -> Checked<Option<u32>> {
    value.map(|v| in_range(v, 0..=100, field)).transpose()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    profiles: Vec<RawProfile>,
    percentage_of_nodes_to_score: Option<i32>,
    pod_initial_backoff_seconds: Option<i64>,
    pod_max_backoff_seconds: Option<i64>,
    #[serde(default)]
    extenders: Vec<Value>,
    client_connection: Option<RawClientConnection>,
}

/// `clientConnection`: the rate limit is read; where the kubeconfig is and which content
/// types the client speaks do not change what a simulated scheduler does.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawClientConnection {
    qps: Option<f32>,
    burst: Option<i32>,
    #[serde(rename = "kubeconfig")]
    _kubeconfig: Option<Value>,
    #[serde(rename = "acceptContentTypes")]
    _accept_content_types: Option<Value>,
    #[serde(rename = "contentType")]
    _content_type: Option<Value>,
}

/// The rate limit of the scheduler's API client: `qps` requests a second, in bursts of up
/// to `burst` (client-go's token bucket). kube-scheduler defaults them to 50 and 100
/// (`apis/config/v1/defaults.go`, the same from v1.28 to v1.37); client-go sets no limit
/// when `qps` is negative.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientRate {
    pub qps: f32,
    pub burst: u32,
}

impl ClientRate {
    pub const DEFAULT: ClientRate = ClientRate {
        qps: 50.0,
        burst: 100,
    };

    /// Whether the client waits for tokens at all.
    pub fn limits(&self) -> bool {
        self.qps > 0.0
    }
}

impl std::fmt::Display for ClientRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.limits() {
            true => write!(f, "{} requests/s, burst {}", self.qps, self.burst),
            false => f.write_str("not rate-limited"),
        }
    }
}

/// `clientConnection`'s rate limit, defaulted and validated as upstream's (a zero is the
/// default; a negative burst is refused, `ValidateClientConnectionConfiguration`).
fn client_rate(raw: Option<&RawClientConnection>) -> Checked<ClientRate> {
    let qps = raw.and_then(|c| c.qps).unwrap_or(0.0);
    let burst = raw.and_then(|c| c.burst).unwrap_or(0);
    if !qps.is_finite() {
        return fail(
            "clientConnection.qps",
            format!("must be a number, not {qps}"),
        );
    }
    let Ok(burst) = u32::try_from(burst) else {
        return fail(
            "clientConnection.burst",
            format!("must be non-negative, not {burst}"),
        );
    };
    Ok(ClientRate {
        qps: if qps == 0.0 {
            ClientRate::DEFAULT.qps
        } else {
            qps
        },
        burst: if burst == 0 {
            ClientRate::DEFAULT.burst
        } else {
            burst
        },
    })
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawProfile {
    scheduler_name: Option<String>,
    percentage_of_nodes_to_score: Option<i32>,
    /// Keyed by extension point (`multiPoint`, `filter`…).
    #[serde(default)]
    plugins: BTreeMap<String, PluginSet>,
    #[serde(default)]
    plugin_config: Vec<RawPluginConfig>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginSet {
    #[serde(default)]
    enabled: Vec<Plugin>,
    #[serde(default)]
    disabled: Vec<Plugin>,
}

impl PluginSet {
    fn disables(&self, name: &str) -> bool {
        self.disabled
            .iter()
            .any(|p| p.name == "*" || p.name == name)
    }

    fn enables(&self, name: &str) -> bool {
        self.enabled.iter().any(|p| p.name == name)
    }
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Plugin {
    name: String,
    weight: Option<i32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPluginConfig {
    name: String,
    #[serde(default)]
    args: Value,
}

/// Removes `apiVersion` or `kind`, which must be `expected`.
fn take_type_meta(map: &mut Map<String, Value>, field: &str, expected: &str) -> Checked<()> {
    match map.remove(field) {
        Some(value) if value == expected => Ok(()),
        Some(value) => fail(field, format!("must be {expected}, not {value}")),
        None => fail(field, format!("required ({expected})")),
    }
}

fn from_value(mut value: Value, release: Release) -> Checked<SchedulerConfig> {
    let Value::Object(map) = &mut value else {
        return fail("", format!("must be a {KIND}, not {value}"));
    };
    let mut warnings = Vec::new();
    match map.remove("apiVersion") {
        Some(Value::String(v)) if v == API_VERSION => {}
        Some(Value::String(v)) if v == API_VERSION_V1BETA3 && !release.at_least(29) => {
            warnings.push(format!(
                "apiVersion: KubeSchedulerConfiguration v1beta3 is deprecated in v1.26, will be removed in v1.29 (read as {API_VERSION}, whose v1.28 defaults are the same)"
            ))
        }
        Some(Value::String(v)) if v == API_VERSION_V1BETA3 => {
            return fail(
                "apiVersion",
                format!(
                    "{API_VERSION_V1BETA3} was removed in v1.29, so kube-scheduler {release} does not read it: use {API_VERSION} (the same fields)"
                ),
            );
        }
        // The deprecated version is suggested only where the release still reads it.
        Some(value) if !release.at_least(29) => {
            return fail(
                "apiVersion",
                format!("must be {API_VERSION} (or the deprecated {API_VERSION_V1BETA3}), not {value}"),
            );
        }
        Some(value) => {
            return fail("apiVersion", format!("must be {API_VERSION}, not {value}"));
        }
        None => return fail("apiVersion", format!("required ({API_VERSION})")),
    }
    take_type_meta(map, "kind", KIND)?;
    for field in IGNORED_FIELDS {
        map.remove(*field);
    }
    let raw: RawConfig = typed(value, "")?;
    if !raw.extenders.is_empty() {
        return fail("extenders", "not supported by Gantry");
    }
    let global = percentage(raw.percentage_of_nodes_to_score, "percentageOfNodesToScore")?;
    let initial = raw.pod_initial_backoff_seconds.unwrap_or(1);
    let Some(initial) = u64::try_from(initial).ok().filter(|s| *s > 0) else {
        return fail(
            "podInitialBackoffSeconds",
            format!("must be greater than zero, not {initial}"),
        );
    };
    let max = raw.pod_max_backoff_seconds.unwrap_or(10);
    let Some(max) = u64::try_from(max).ok().filter(|s| *s >= initial) else {
        return fail(
            "podMaxBackoffSeconds",
            format!("must be at least podInitialBackoffSeconds ({initial}), not {max}"),
        );
    };
    let client_rate = client_rate(raw.client_connection.as_ref())?;
    let mut raw_profiles = raw.profiles;
    if raw_profiles.is_empty() {
        raw_profiles.push(RawProfile::default());
    }
    // As upstream, only a lone profile gets the default name.
    let lone = raw_profiles.len() == 1;
    let mut profiles: Vec<Profile> = Vec::with_capacity(raw_profiles.len());
    for (i, raw) in raw_profiles.into_iter().enumerate() {
        let at = format!("profiles[{i}]");
        let name = match raw.scheduler_name.as_deref() {
            None if lone => DEFAULT_SCHEDULER_NAME,
            None | Some("") => return fail(format!("{at}.schedulerName"), "required"),
            Some(name) => name,
        };
        if let Some(j) = profiles
            .iter()
            .position(|p| p.scheduler_name.as_str() == name)
        {
            return fail(
                format!("{at}.schedulerName"),
                format!("duplicate {name:?} (also profiles[{j}])"),
            );
        }
        let own = percentage(
            raw.percentage_of_nodes_to_score,
            &format!("{at}.percentageOfNodesToScore"),
        )?;
        let mut profile = build_profile(name, &raw, &at, release, &mut warnings)?;
        profile.percentage_of_nodes_to_score = own.or(global);
        // One queue serves every profile (`validateCommonQueueSort`).
        if let Some(first) = profiles.first()
            && first.queue_sort != profile.queue_sort
        {
            return fail(
                format!("{at}.plugins.queueSort"),
                "must be the same for all profiles",
            );
        }
        profiles.push(profile);
    }
    Ok(SchedulerConfig {
        release,
        profiles,
        percentage_of_nodes_to_score: global,
        pod_initial_backoff_seconds: initial,
        pod_max_backoff_seconds: max,
        client_rate,
        warnings,
    })
}

fn build_profile(
    name: &str,
    raw: &RawProfile,
    at: &str,
    release: Release,
    warnings: &mut Vec<String>,
) -> Checked<Profile> {
    let args = args::parse(&raw.plugin_config, at, release)?;
    let registry = plugins::registry(args.plugins, release);
    check_names(raw, &registry, at, release, warnings)?;
    let merged = Merged::new(&raw.plugins, &registry, release);
    let count = |point| {
        let plugins = merged.expand(point);
        plugins.iter().filter(|r| r.implements(point)).count()
    };
    let queue_sorts = count(Point::QueueSort);
    if queue_sorts != 1 {
        return fail(
            format!("{at}.plugins.queueSort"),
            format!("exactly one queue sort plugin is required, not {queue_sorts}"),
        );
    }
    if count(Point::Bind) == 0 {
        return fail(
            format!("{at}.plugins.bind"),
            "at least one bind plugin is required",
        );
    }
    let mut profile = merged.assemble(name);
    profile.min_candidate_nodes_percentage = args.min_candidate_nodes_percentage;
    profile.min_candidate_nodes_absolute = args.min_candidate_nodes_absolute;
    Ok(profile)
}

fn find<'r>(registry: &'r [Registered], name: &str) -> Option<&'r Registered> {
    registry.iter().find(|r| r.name == name)
}

/// Why an upstream plugin Gantry does not implement can be read past: kube-scheduler
/// v1.28 has the in-tree volume limit plugins (EBSLimits, GCEPDLimits, AzureDiskLimits,
/// CinderLimits) defer to NodeVolumeLimits once their volumes are migrated to CSI, which is
/// GA and on; later releases removed them.
fn ignored_plugin(name: &str) -> String {
    format!(
        "{name} is not implemented by Gantry and is ignored: kube-scheduler v1.28 leaves volumes migrated to CSI (GA, on by default) to NodeVolumeLimits, and later releases removed {name}"
    )
}

/// Every plugin name must be known, and enabled at most once per point, at points it
/// implements, with a weight that is not negative. Upstream plugins Gantry does not
/// implement are warned about.
fn check_names(
    raw: &RawProfile,
    registry: &[Registered],
    at: &str,
    release: Release,
    warnings: &mut Vec<String>,
) -> Checked<()> {
    let minor = release.minor();
    let unknown = |name: &str| {
        format!(
            "unknown plugin {name:?}: not one of kube-scheduler v1.{minor}'s in-tree plugins (of scheduler-plugins' out-of-tree plugins Gantry has Coscheduling only)"
        )
    };
    for (j, config) in raw.plugin_config.iter().enumerate() {
        match find(registry, &config.name) {
            None => {
                return fail(
                    format!("{at}.pluginConfig[{j}].name"),
                    unknown(&config.name),
                );
            }
            Some(r) if r.not_implemented => warnings.push(format!(
                "{at}.pluginConfig[{j}].name: {}",
                ignored_plugin(r.name)
            )),
            Some(_) => {}
        }
    }
    for (key, set) in &raw.plugins {
        let at = format!("{at}.plugins.{key}");
        let points = Point::ALL.into_iter().filter(|p| p.exists_at(minor));
        let point = match points.clone().find(|p| p.field() == key) {
            Some(point) => Some(point),
            None if key == MULTI_POINT => None,
            None => {
                let names: Vec<_> = points.map(|p| p.field()).collect();
                return fail(
                    at,
                    format!(
                        "unknown extension point; must be {MULTI_POINT}, {}",
                        names.join(", ")
                    ),
                );
            }
        };
        for (j, plugin) in set.enabled.iter().enumerate() {
            let field = format!("{at}.enabled[{j}]");
            let Some(registered) = find(registry, &plugin.name) else {
                return fail(format!("{field}.name"), unknown(&plugin.name));
            };
            if registered.not_implemented {
                warnings.push(format!("{field}.name: {}", ignored_plugin(registered.name)));
            }
            if let Some(point) = point
                && !registered.not_implemented
                && !registered.implements(point)
            {
                return fail(
                    format!("{field}.name"),
                    format!("{} does not implement {key}", plugin.name),
                );
            }
            if set.enabled[..j].iter().any(|p| p.name == plugin.name) {
                return fail(
                    format!("{field}.name"),
                    format!("duplicate {:?}", plugin.name),
                );
            }
            if let Some(weight) = plugin.weight.filter(|w| *w < 0) {
                return fail(
                    format!("{field}.weight"),
                    format!("must not be negative, not {weight}"),
                );
            }
        }
        for (j, plugin) in set.disabled.iter().enumerate() {
            if plugin.name != "*" && find(registry, &plugin.name).is_none() {
                return fail(format!("{at}.disabled[{j}].name"), unknown(&plugin.name));
            }
        }
    }
    Ok(())
}

/// A profile's `plugins` merged onto the defaults, as upstream's `mergePlugins` and the
/// framework's `expandMultiPointPlugins` do.
struct Merged<'a> {
    custom: &'a BTreeMap<String, PluginSet>,
    /// The default multiPoint plugins, as the profile's `multiPoint` changes them.
    multi: Vec<Plugin>,
    registry: &'a [Registered],
    release: Release,
}

static NONE: PluginSet = PluginSet {
    enabled: Vec::new(),
    disabled: Vec::new(),
};

impl<'a> Merged<'a> {
    /// Upstream's `mergePluginSet` for `multiPoint`: the defaults not disabled (none if "*"
    /// is), each replaced in place by a custom entry of the same name, then the other custom
    /// entries. (The other points have no defaults, so they are the profile's own sets.)
    fn new(
        custom: &'a BTreeMap<String, PluginSet>,
        registry: &'a [Registered],
        release: Release,
    ) -> Merged<'a> {
        let set = custom.get(MULTI_POINT).unwrap_or(&NONE);
        let defaults = plugins::default_plugins(release)
            .into_iter()
            .filter(|(name, _)| !set.disables(name))
            .map(|(name, weight)| {
                let own = set.enabled.iter().find(|p| p.name == name);
                own.cloned().unwrap_or(Plugin {
                    name: name.to_string(),
                    weight,
                })
            });
        let mut multi: Vec<Plugin> = defaults.collect();
        let others: Vec<Plugin> = set
            .enabled
            .iter()
            .filter(|p| !multi.iter().any(|m| m.name == p.name))
            .cloned()
            .collect();
        multi.extend(others);
        Merged {
            custom,
            multi,
            registry,
            release,
        }
    }

    fn at(&self, point: Point) -> &'a PluginSet {
        self.custom.get(point.field()).unwrap_or(&NONE)
    }

    /// The plugins at `point`, in order: those enabled there that multiPoint also names,
    /// then multiPoint's (unless disabled there), then the rest enabled there.
    fn expand(&self, point: Point) -> Vec<&'a Registered> {
        let set = self.at(point);
        let mut overrides = Vec::new();
        let mut from_multi = Vec::new();
        if !set.disables("*") {
            for plugin in &self.multi {
                let name = plugin.name.as_str();
                let implements = find(self.registry, name).is_some_and(|r| r.implements(point));
                if !implements || set.disables(name) {
                    continue;
                }
                if set.enables(name) {
                    overrides.push(name);
                } else {
                    from_multi.push(name);
                }
            }
        }
        let (first, rest): (Vec<&str>, Vec<&str>) = set
            .enabled
            .iter()
            .map(|p| p.name.as_str())
            .partition(|name| overrides.contains(name));
        first
            .into_iter()
            .chain(from_multi)
            .chain(rest)
            .filter_map(|name| find(self.registry, name))
            .collect()
    }

    /// A Score or PlacementScore plugin's weight (upstream's `getScoreWeights`): one given
    /// at that point wins over one given at multiPoint; none (or 0) means 1.
    fn weight(&self, point: Point, name: &str) -> i64 {
        self.at(point)
            .enabled
            .iter()
            .chain(&self.multi)
            .find(|p| p.name == name)
            .and_then(|p| p.weight)
            .filter(|w| *w != 0)
            .map_or(1, i64::from)
    }

    fn assemble(&self, scheduler_name: &str) -> Profile {
        let mut profile = Profile::empty(scheduler_name);
        profile.release = self.release;
        for point in Point::ALL {
            for r in self.expand(point) {
                match point {
                    Point::PreEnqueue => profile.pre_enqueue.extend(r.pre_enqueue.clone()),
                    Point::PreFilter => profile.pre_filter.extend(r.pre_filter.clone()),
                    Point::Filter => profile.filter.extend(r.filter.clone()),
                    Point::PostFilter if r.name == plugins::dynamic_resources::NAME => {
                        profile.deallocates_claims = true
                    }
                    Point::PostFilter if r.post_filter.is_some() => {
                        profile.post_filter.extend(r.post_filter.clone())
                    }
                    Point::PostFilter => profile.preemption |= r.implements(point),
                    Point::QueueSort if r.name == plugins::coscheduling::NAME => {
                        profile.queue_sort = QueueSort::Coscheduling
                    }
                    Point::PreScore => profile.pre_score.extend(r.pre_score.clone()),
                    Point::Score => {
                        profile
                            .score
                            .extend(r.score.clone().map(|plugin| WeightedScorePlugin {
                                plugin,
                                weight: self.weight(point, r.name),
                            }))
                    }
                    Point::Reserve => profile.reserve.extend(r.reserve.clone()),
                    Point::Permit => profile.permit.extend(r.permit.clone()),
                    Point::PreBind => profile.pre_bind.extend(r.pre_bind.clone()),
                    Point::PlacementGenerate if r.implements(point) => {
                        profile.placement_generate.push(r.name)
                    }
                    Point::PlacementScore if r.implements(point) => profile
                        .placement_score
                        .push((r.name, self.weight(point, r.name))),
                    // PrioritySort and DefaultBinder are the scheduler's own; nothing
                    // Gantry implements runs at PostBind yet.
                    Point::QueueSort
                    | Point::Bind
                    | Point::PostBind
                    | Point::PlacementGenerate
                    | Point::PlacementScore => {}
                }
            }
        }
        profile
    }
}
