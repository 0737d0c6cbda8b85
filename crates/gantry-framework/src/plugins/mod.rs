//! kube-scheduler's default plugins, one file each, and the registry that maps the plugin
//! names of a KubeSchedulerConfiguration to them.

pub mod balanced_allocation;
pub mod coscheduling;
pub mod dynamic_resources;
pub mod gang_scheduling;
pub mod gpu_share;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_declared_features;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod openb;
pub mod pod_topology_spread;
pub mod scheduling_gates;
mod scored_resources;
mod shape_score;
pub mod taint_toleration;
#[cfg(test)]
pub(crate) mod testing;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

use std::sync::Arc;

use gantry_api::{Gate, Release};
use gantry_cache::{NodeColumns, NodeFlags, NodeInfo};

use crate::config::Point;
use crate::interface::*;
use crate::{Profile, Status};

/// `filter_columns` of a plugin whose Filter passes every node without `flag`: those
/// nodes are proven from the flags column, the others left to Filter. Returns true.
#[inline]
fn prove_nodes_without(
    flag: NodeFlags,
    columns: &NodeColumns,
    positions: &[usize],
    proven: &mut [bool],
) -> bool {
    let flags = columns.flags();
    for (proof, &p) in proven.iter_mut().zip(positions) {
        *proof = !flags[p].has(flag);
    }
    true
}

/// `score_columns` of a plugin whose Score is 0 on every node without `flag`: only the
/// nodes with it are asked `score`. Returns `Ok(true)`. (Where no node has the flag, the
/// plugin's `uniform_score` says 0 and this is not asked.)
#[inline]
fn score_nodes_with(
    flag: NodeFlags,
    nodes: &[&NodeInfo],
    columns: &NodeColumns,
    positions: &[usize],
    scores: &mut [i64],
    mut score: impl FnMut(&NodeInfo) -> Result<i64, Status>,
) -> Result<bool, Status> {
    let flags = columns.flags();
    for ((out, &p), node) in scores.iter_mut().zip(positions).zip(nodes) {
        *out = if flags[p].has(flag) { score(node)? } else { 0 };
    }
    Ok(true)
}

/// DynamicResources at its extension points; at Score only from v1.35, which scores
/// `firstAvailable` subrequests (#134711).
fn dynamic_resources_registration(
    dra: Arc<dynamic_resources::DynamicResources>,
    release: Release,
) -> Registered {
    let registered = Registered::builtin(dynamic_resources::NAME, &[Point::PostFilter])
        .pre_filter(dra.clone())
        .filter(dra.clone())
        .reserve(dra.clone())
        .pre_enqueue(dra.clone());
    let registered = if release.dynamic_resources_scores() {
        registered.pre_score(dra.clone()).score(dra.clone())
    } else {
        registered
    };
    registered.pre_bind(dra)
}

/// Upstream's default `multiPoint` plugins for `release` (`default_plugins.go`) in order,
/// with their score weights (`None`: no weight given), and GPUShare (a no-op for pods
/// without GPUs). v1.28 lists the in-tree volume limit plugins, later releases do not;
/// DynamicResources comes before DefaultPreemption, weight 2, while its gate is on
/// (`applyDynamicResources`: deallocating an idle claim beats evicting a pod).
pub fn default_plugins(release: Release) -> Vec<(&'static str, Option<i32>)> {
    let in_tree_limits = release.has_in_tree_volume_limits();
    let dra = release.enabled(Gate::DynamicResourceAllocation);
    let mut plugins = vec![
        ("SchedulingGates", None),
        ("PrioritySort", None),
        ("NodeUnschedulable", None),
        ("NodeName", None),
        ("TaintToleration", Some(3)),
        ("NodeAffinity", Some(2)),
        ("NodePorts", None),
        ("NodeResourcesFit", Some(1)),
        ("VolumeRestrictions", None),
    ];
    if in_tree_limits {
        plugins.extend([("EBSLimits", None), ("GCEPDLimits", None)]);
    }
    plugins.push(("NodeVolumeLimits", None));
    if in_tree_limits {
        plugins.push(("AzureDiskLimits", None));
    }
    plugins.extend([
        ("VolumeBinding", None),
        ("VolumeZone", None),
        ("PodTopologySpread", Some(2)),
        ("InterPodAffinity", Some(2)),
        // Gantry's: HAMi's GPU sharing, filtering last as a scheduler extender does.
        ("GPUShare", None),
    ]);
    if dra {
        let weight = release.dynamic_resources_scores().then_some(2);
        plugins.push((dynamic_resources::NAME, weight));
    }
    plugins.extend([
        ("DefaultPreemption", None),
        ("NodeResourcesBalancedAllocation", Some(1)),
        ("ImageLocality", Some(1)),
        ("DefaultBinder", None),
    ]);
    // `applyFeatureGates` appends it after DefaultBinder while its gate is on (v1.36 on).
    if release.enabled(Gate::NodeDeclaredFeatures) {
        plugins.push((node_declared_features::NAME, None));
    }
    // `applyGangScheduling` appends it last.
    if release.enabled(Gate::GangScheduling) {
        plugins.push((gang_scheduling::NAME, None));
    }
    // `applyTopologyAwareWorkloadScheduling` appends these after it.
    if release.enabled(Gate::TopologyAwareWorkloadScheduling) {
        plugins.extend([
            (TOPOLOGY_PLACEMENT_GENERATOR, None),
            (POD_GROUP_PODS_COUNT, Some(1)),
        ]);
    }
    plugins
}

/// TopologyAwareWorkloadScheduling's PlacementGenerate plugin: one placement per domain of
/// the PodGroup's topology key (the scheduler's own, `gantry_scheduler::placement`).
pub const TOPOLOGY_PLACEMENT_GENERATOR: &str = "TopologyPlacementGenerator";
/// TopologyAwareWorkloadScheduling's PlacementScore plugin: placements that hold more of
/// the group score higher.
pub const POD_GROUP_PODS_COUNT: &str = "PodGroupPodsCount";

/// kube-scheduler's default profile for `release`: the default plugins at every
/// extension point they implement, in upstream's order, with upstream's score weights.
pub fn default_profile_for(scheduler_name: &str, release: Release) -> Profile {
    crate::config::default_profile(scheduler_name, release)
}

/// kube-scheduler's default profile of the newest release Gantry models.
pub fn default_profile(scheduler_name: &str) -> Profile {
    default_profile_for(scheduler_name, Release::default())
}

/// The `pluginConfig` arguments of the plugins that take any; upstream's defaults by default.
#[derive(Default)]
pub struct PluginArgs {
    pub node_affinity: node_affinity::NodeAffinity,
    pub fit: node_resources_fit::NodeResourcesFit,
    pub balanced: balanced_allocation::BalancedAllocation,
    pub spread: pod_topology_spread::PodTopologySpread,
    pub pod_affinity: inter_pod_affinity::InterPodAffinity,
    pub gpu_share: gpu_share::GpuShare,
    pub coscheduling: coscheduling::Coscheduling,
    /// FGDScore's typical pods, when configured.
    pub fgd_typical: Option<Arc<openb::TypicalPods>>,
    /// VolumeBinding's `shape`, when configured (StorageCapacityScoring on).
    pub volume_capacity_shape: Option<Vec<(i64, i64)>>,
    /// VolumeBinding's `bindTimeoutSeconds`, when configured.
    pub volume_bind_timeout: Option<std::time::Duration>,
    /// DynamicResources' `bindingTimeout` in whole seconds, when configured.
    pub binding_timeout: Option<i64>,
}

/// One plugin name a profile may use, and what it runs at each extension point.
#[derive(Default)]
pub struct Registered {
    pub name: &'static str,
    pub pre_enqueue: Option<Arc<dyn PreEnqueuePlugin>>,
    pub pre_filter: Option<Arc<dyn PreFilterPlugin>>,
    pub filter: Option<Arc<dyn FilterPlugin>>,
    pub pre_score: Option<Arc<dyn PreScorePlugin>>,
    pub score: Option<Arc<dyn ScorePlugin>>,
    pub reserve: Option<Arc<dyn ReservePlugin>>,
    pub permit: Option<Arc<dyn PermitPlugin>>,
    pub post_filter: Option<Arc<dyn PostFilterPlugin>>,
    pub pre_bind: Option<Arc<dyn PreBindPlugin>>,
    /// Points the scheduler serves itself for this name (PrioritySort's queue sort,
    /// DefaultPreemption's PostFilter, DefaultBinder's Bind).
    pub builtin: &'static [Point],
    /// An upstream plugin Gantry does not implement yet: accepted at any point, and ignored.
    pub not_implemented: bool,
}

impl Registered {
    pub fn new(name: &'static str) -> Registered {
        Registered {
            name,
            ..Registered::default()
        }
    }

    fn builtin(name: &'static str, points: &'static [Point]) -> Registered {
        Registered {
            builtin: points,
            ..Registered::new(name)
        }
    }

    fn not_implemented(name: &'static str) -> Registered {
        Registered {
            not_implemented: true,
            ..Registered::new(name)
        }
    }

    pub fn pre_enqueue(mut self, p: Arc<dyn PreEnqueuePlugin>) -> Registered {
        self.pre_enqueue = Some(p);
        self
    }

    pub fn pre_filter(mut self, p: Arc<dyn PreFilterPlugin>) -> Registered {
        self.pre_filter = Some(p);
        self
    }

    pub fn filter(mut self, p: Arc<dyn FilterPlugin>) -> Registered {
        self.filter = Some(p);
        self
    }

    pub fn pre_score(mut self, p: Arc<dyn PreScorePlugin>) -> Registered {
        self.pre_score = Some(p);
        self
    }

    pub fn score(mut self, p: Arc<dyn ScorePlugin>) -> Registered {
        self.score = Some(p);
        self
    }

    pub fn reserve(mut self, p: Arc<dyn ReservePlugin>) -> Registered {
        self.reserve = Some(p);
        self
    }

    pub fn permit(mut self, p: Arc<dyn PermitPlugin>) -> Registered {
        self.permit = Some(p);
        self
    }

    pub fn post_filter(mut self, p: Arc<dyn PostFilterPlugin>) -> Registered {
        self.post_filter = Some(p);
        self
    }

    pub fn pre_bind(mut self, p: Arc<dyn PreBindPlugin>) -> Registered {
        self.pre_bind = Some(p);
        self
    }

    /// Whether the plugin takes part in `point` (what `multiPoint` expands to).
    pub fn implements(&self, point: Point) -> bool {
        self.builtin.contains(&point)
            || match point {
                Point::PreEnqueue => self.pre_enqueue.is_some(),
                Point::PreFilter => self.pre_filter.is_some(),
                Point::PostFilter => self.post_filter.is_some(),
                Point::Filter => self.filter.is_some(),
                Point::PreScore => self.pre_score.is_some(),
                Point::Score => self.score.is_some(),
                Point::Reserve => self.reserve.is_some(),
                Point::Permit => self.permit.is_some(),
                Point::PreBind => self.pre_bind.is_some(),
                _ => false,
            }
    }
}

/// Every plugin name a profile may use in `release`; plugins with arguments are built
/// from `args`, and follow the rules of `release`.
pub fn registry(args: PluginArgs, release: Release) -> Vec<Registered> {
    let taints = Arc::new(taint_toleration::TaintToleration {
        names_no_taint: release.aggregated_taint_message(),
    });
    let node_affinity = Arc::new(args.node_affinity);
    let ports = Arc::new(node_ports::NodePorts);
    let fit = Arc::new(node_resources_fit::NodeResourcesFit {
        unresolvable_above_allocatable: release.fit_unresolvable_above_allocatable(),
        delegates_to_devices: release.enabled(Gate::DRAExtendedResource),
        ..args.fit
    });
    let balanced = balanced_allocation::BalancedAllocation {
        skips_best_effort: release.balanced_allocation_skips_best_effort(),
        scores_change: release.balanced_allocation_scores_change(),
        ..args.balanced
    };
    let spread = Arc::new(args.spread);
    let pod_affinity = Arc::new(args.pod_affinity);
    let images = Arc::new(image_locality::ImageLocality {
        counts_at_snapshot: release.image_counts_at_snapshot(),
        counts_init_containers: release.image_locality_counts_init_containers(),
        counts_image_volumes: release.image_locality_counts_image_volumes(),
    });
    // One instance per profile: its Reserve remembers the volumes it promised.
    let mut volume_binding = volume_binding::VolumeBinding::new(
        release.volume_binding_narrows(),
        release.pv_node_affinity_message(),
    );
    volume_binding.capacity_shape = release.enabled(Gate::StorageCapacityScoring).then(|| {
        (args.volume_capacity_shape)
            .unwrap_or_else(|| volume_binding::DEFAULT_CAPACITY_SHAPE.to_vec())
    });
    if let Some(timeout) = args.volume_bind_timeout {
        volume_binding.bind_timeout = timeout;
    }
    let volume_binding = Arc::new(volume_binding);
    let volume_limits = Arc::new(node_volume_limits::NodeVolumeLimits {
        missing_drivers: node_volume_limits::MissingDrivers::for_release(release),
    });
    let volume_restrictions = Arc::new(volume_restrictions::VolumeRestrictions {
        says_in_use: release.read_write_once_pod_message(),
    });
    let mut dra = dynamic_resources::DynamicResources::for_release(release);
    if let Some(seconds) = args.binding_timeout {
        dra = dra.with_binding_timeout(seconds);
    }
    let dra = Arc::new(dra);
    let declared_features = Arc::new(node_declared_features::NodeDeclaredFeatures {
        enabled: release.enabled(Gate::NodeDeclaredFeatures),
        minor: release.minor(),
        aggregate_message: release.declared_features_aggregate_message(),
    });
    let gpu_share = Arc::new(args.gpu_share);
    let mut registry = vec![
        Registered::new(scheduling_gates::NAME)
            .pre_enqueue(Arc::new(scheduling_gates::SchedulingGates)),
        Registered::builtin("PrioritySort", &[Point::QueueSort]),
        Registered::new(node_unschedulable::NAME)
            .filter(Arc::new(node_unschedulable::NodeUnschedulable)),
        Registered::new(node_name::NAME).filter(Arc::new(node_name::NodeName)),
        Registered::new(taint_toleration::NAME)
            .filter(taints.clone())
            .pre_score(taints.clone())
            .score(taints),
        Registered::new(node_affinity::NAME)
            .pre_filter(node_affinity.clone())
            .filter(node_affinity.clone())
            .pre_score(node_affinity.clone())
            .score(node_affinity),
        Registered::new(node_ports::NAME)
            .pre_filter(ports.clone())
            .filter(ports),
        Registered::new(node_resources_fit::NAME)
            .pre_filter(fit.clone())
            .filter(fit.clone())
            .score(fit),
        Registered::new(volume_restrictions::NAME)
            .pre_filter(volume_restrictions.clone())
            .filter(volume_restrictions),
        Registered::new(node_volume_limits::NAME)
            .pre_filter(volume_limits.clone())
            .filter(volume_limits),
        // Scores only under StorageCapacityScoring (its PreScore skips otherwise), but is a
        // Score plugin in every release, as upstream's.
        Registered::new(volume_binding::NAME)
            .pre_filter(volume_binding.clone())
            .filter(volume_binding.clone())
            .pre_score(volume_binding.clone())
            .score(volume_binding.clone())
            .reserve(volume_binding),
        Registered::new(volume_zone::NAME)
            .pre_filter(Arc::new(volume_zone::VolumeZone))
            .filter(Arc::new(volume_zone::VolumeZone)),
        Registered::new(pod_topology_spread::NAME)
            .pre_filter(spread.clone())
            .filter(spread.clone())
            .pre_score(spread.clone())
            .score(spread),
        Registered::new(inter_pod_affinity::NAME)
            .pre_filter(pod_affinity.clone())
            .filter(pod_affinity.clone())
            .pre_score(pod_affinity.clone())
            .score(pod_affinity),
        // In the default profile while the DynamicResourceAllocation gate is on; its
        // PostFilter (deallocating claims that block the pod) is the scheduler's.
        dynamic_resources_registration(dra, release),
        Registered::new(gpu_share::NAME)
            .pre_filter(gpu_share.clone())
            .filter(gpu_share),
        Registered::builtin("DefaultPreemption", &[Point::PostFilter]),
        Registered::new(balanced_allocation::NAME).score(Arc::new(balanced)),
        Registered::new(image_locality::NAME)
            .pre_score(images.clone())
            .score(images),
        Registered::builtin("DefaultBinder", &[Point::Bind]),
    ];
    if release.at_least(node_declared_features::FIRST_MINOR) {
        registry.push(
            Registered::new(node_declared_features::NAME)
                .pre_filter(declared_features.clone())
                .filter(declared_features),
        );
    }
    if release.enabled(Gate::GangScheduling) {
        let gang = Arc::new(gang_scheduling::GangScheduling);
        registry.push(
            Registered::new(gang_scheduling::NAME)
                .pre_enqueue(gang.clone())
                .permit(gang),
        );
    }
    if release.enabled(Gate::TopologyAwareWorkloadScheduling) {
        registry.extend([
            Registered::builtin(TOPOLOGY_PLACEMENT_GENERATOR, &[Point::PlacementGenerate]),
            Registered::builtin(POD_GROUP_PODS_COUNT, &[Point::PlacementScore]),
        ]);
    }
    // scheduler-plugins' Coscheduling: not in the default profile, enabled by name (its
    // queue sort is the scheduler's, chosen by the name).
    let coscheduling = Arc::new(args.coscheduling);
    registry.push(
        Registered::builtin(coscheduling::NAME, &[Point::QueueSort])
            .pre_filter(coscheduling.clone())
            .post_filter(coscheduling.clone())
            .reserve(coscheduling.clone())
            .permit(coscheduling),
    );
    // The FGD simulator's policies: not in the default profile, enabled by name.
    for policy in openb::Policy::ALL {
        let p = Arc::new(openb::OpenbScore {
            policy,
            typical: args
                .fgd_typical
                .clone()
                .filter(|_| policy == openb::Policy::Fgd),
        });
        registry.push(
            Registered::new(policy.plugin_name())
                .pre_score(p.clone())
                .score(p),
        );
    }
    if release.registers_in_tree_volume_limits() {
        // In-tree volume limits, superseded by CSI (NodeVolumeLimits): accepted in
        // configurations, as v1.28 still lists them (CinderLimits registered though no
        // longer a default plugin), and do nothing.
        registry.extend(
            [
                "EBSLimits",
                "GCEPDLimits",
                "AzureDiskLimits",
                "CinderLimits",
            ]
            .map(Registered::not_implemented),
        );
    }
    registry
}
