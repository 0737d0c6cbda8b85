//! The Kubernetes release Gantry decides as: an emulated version (KEP-4330's
//! `--emulated-version`) and the feature gates in force, with kube-scheduler's
//! `--feature-gates` syntax. Each gate's default follows upstream's versioned feature
//! specs (`pkg/features/kube_features.go` at v1.35.4 and v1.36.3, and for v1.37 at
//! kubernetes/kubernetes ead35706 with `staging/src/k8s.io/kube-scheduler/pkg/features`);
//! rules tied to a release rather than a gate (message texts, the default plugin list) are
//! read from [`Release::minor`].

use std::fmt;

/// The oldest and newest minor releases of Kubernetes 1.x Gantry decides as.
pub const OLDEST_MINOR: u8 = 28;
pub const NEWEST_MINOR: u8 = 37;
/// What Gantry decides as when the user names no release: the newest, v1.37 (current since
/// 2026-08-26). Its decisions are derived, not recorded: v1.36.3's recorded rules under
/// v1.37's feature gates, the gates' new defaults each recorded with v1.36.3's code with
/// the gate turned on (see docs/compatibility.md).
pub const DEFAULT_MINOR: u8 = 37;

/// A feature gate whose setting changes what Gantry decides or says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Restartable init containers (`restartPolicy: Always`) run beside the app.
    SidecarContainers,
    /// `spec.resources`: requests and limits for the whole pod.
    PodLevelResources,
    /// A bound pod's usage follows `status.containerStatuses[].resources` while resizing.
    InPlacePodVerticalScaling,
    /// ResourceClaims, and the DynamicResources plugin in the default profile.
    DynamicResourceAllocation,
    /// `firstAvailable` subrequests in ResourceClaims.
    DRAPrioritizedList,
    /// `matchLabelKeys`/`mismatchLabelKeys` in pod (anti-)affinity terms.
    MatchLabelKeysInPodAffinity,
    /// `matchLabelKeys` in topology spread constraints.
    MatchLabelKeysInPodTopologySpread,
    /// The API server merges spread constraints' `matchLabelKeys` into `labelSelector`
    /// (and validates the merged selector).
    MatchLabelKeysInPodTopologySpreadSelectorMerge,
    /// `nodeAffinityPolicy`/`nodeTaintsPolicy` in topology spread constraints.
    NodeInclusionPolicyInPodTopologySpread,
    /// `schedulingGates` hold a pod back from scheduling.
    PodSchedulingReadiness,
    /// Cluster events requeue pods through per-plugin hints: it changes when a pending pod
    /// is retried, never what a cycle decides.
    SchedulerQueueingHints,
    /// NodeDeclaredFeatures in the default profile: a pod that needs a node feature
    /// (`status.declaredFeatures`) goes only where a node declares it.
    NodeDeclaredFeatures,
    /// The Workload API: PodGroup objects and pods' `spec.schedulingGroup` (v1.36:
    /// `scheduling.k8s.io/v1alpha2`); pods of a group are scheduled in pod-group cycles.
    GenericWorkload,
    /// The GangScheduling plugin: a gang's pods wait for `minCount` of them (v1.35, v1.36;
    /// merged into GenericWorkload in v1.37).
    GangScheduling,
    /// TopologyAwareWorkloadScheduling (KEP-5732, alpha in v1.36): a pod group whose
    /// PodGroup names a topology key is tried on each domain of that key, and placed in one.
    TopologyAwareWorkloadScheduling,
    /// WorkloadAwarePreemption (KEP-5710, alpha in v1.36; merged into GenericWorkload in
    /// v1.37): a gang that cannot fit preempts as one, across the cluster, and PodGroups
    /// may be preempted as one (`disruptionMode: PodGroup`).
    WorkloadAwarePreemption,
    /// OpportunisticBatching (KEP-5598): a pod like the one just placed that no longer fits
    /// where that one went takes the next node of that cycle's ranking, without a search.
    OpportunisticBatching,
    /// ContainerRestartRules (KEP-5307): containers' own `restartPolicy` (and rules); the
    /// API server keeps and validates them, and drops them while the gate is off.
    ContainerRestartRules,
    /// SchedulerPopFromBackoffQ (KEP-5142): an idle scheduler takes the pod whose backoff
    /// ends first rather than wait for it; backoffs end on whole seconds.
    SchedulerPopFromBackoffQ,
    /// SchedulerAsyncPreemption (KEP-4832): preemption deletes its victims in the
    /// background, and DefaultPreemption's PreEnqueue holds the preemptor back until the
    /// deletions are done.
    SchedulerAsyncPreemption,
    /// StorageCapacityScoring (KEP-4049): VolumeBinding scores nodes by how much of the
    /// storage the pod's volumes would take there (`VolumeBindingArgs.shape`).
    StorageCapacityScoring,
    /// DRADeviceTaints (KEP-5055): devices' taints keep them from requests that do not
    /// tolerate them.
    DRADeviceTaints,
    /// DRAAdminAccess (KEP-5018): a request with `adminAccess` may take devices other
    /// claims hold, and what it gets holds nothing.
    DRAAdminAccess,
    /// DRAPartitionableDevices (KEP-4815): devices that consume counters of their pool's
    /// shared counter sets (`sharedCounters`, `consumesCounters`) are allocated only while
    /// the counters last.
    DRAPartitionableDevices,
    /// DRAExtendedResource (KEP-5004): a DeviceClass's `extendedResourceName` serves pods
    /// asking for that extended resource with devices (not modelled: such classes are read
    /// with a warning).
    DRAExtendedResource,
    /// DRAConsumableCapacity (KEP-5075): devices shared by capacity between claims
    /// (`allowMultipleAllocations`, request policies, capacity requests, shares), and a
    /// claim's `distinctAttribute` constraints.
    DRAConsumableCapacity,
    /// DRAResourceClaimDeviceStatus (KEP-4817): a claim's `status.devices`, which drivers
    /// write.
    DRAResourceClaimDeviceStatus,
    /// DRADeviceBindingConditions (KEP-5007): devices whose binding waits for conditions
    /// (refused by Gantry); with DRAResourceClaimDeviceStatus, kube-scheduler stamps every
    /// allocation it reserves with `allocationTimestamp`, and so does `gantry run`.
    DRADeviceBindingConditions,
    /// DRAFractionalCapacityRange: a capacity's request policy whose range has a
    /// fractional minimum, maximum or step rounds and checks requests in thousandths
    /// rather than whole units.
    DRAFractionalCapacityRange,
    /// DRADeviceTaintRules (KEP-5055): a DeviceTaintRule gives its taint to the devices
    /// its selector picks (driver, pool, device name), as if their slices carried it.
    DRADeviceTaintRules,
    /// VolumeLimitScaling (KEP-5030): NodeVolumeLimits refuses a node whose CSINode lacks
    /// a CSI driver that asks for it (`CSIDriver.spec.preventPodSchedulingIfMissing`).
    VolumeLimitScaling,
}

/// One step of a gate's history: from `minor` on, its default, and whether it is locked
/// (or removed: the feature stays as its last default, and the gate is no longer known).
struct Spec {
    minor: u8,
    default: bool,
    locked: bool,
    removed: bool,
}

const fn spec(minor: u8, default: bool) -> Spec {
    Spec {
        minor,
        default,
        locked: false,
        removed: false,
    }
}

const fn locked(minor: u8, default: bool) -> Spec {
    Spec {
        minor,
        default,
        locked: true,
        removed: false,
    }
}

/// The gate is gone from `minor` on; the feature is always as it was last.
const fn removed(minor: u8, default: bool) -> Spec {
    Spec {
        minor,
        default,
        locked: true,
        removed: true,
    }
}

/// Every modelled gate with its upstream name and versioned specs (kube_features.go).
const GATES: &[(Gate, &str, &[Spec])] = &[
    (
        Gate::SidecarContainers,
        "SidecarContainers",
        &[
            spec(28, false),
            spec(29, true),
            locked(33, true),
            removed(37, true),
        ],
    ),
    (
        Gate::PodLevelResources,
        "PodLevelResources",
        &[spec(32, false), spec(34, true)],
    ),
    (
        Gate::InPlacePodVerticalScaling,
        "InPlacePodVerticalScaling",
        &[spec(27, false), spec(33, true), locked(35, true)],
    ),
    (
        Gate::DynamicResourceAllocation,
        "DynamicResourceAllocation",
        &[spec(26, false), spec(34, true), locked(35, true)],
    ),
    (
        Gate::DRAPrioritizedList,
        "DRAPrioritizedList",
        &[
            spec(33, false),
            spec(34, true),
            spec(36, true),
            locked(37, true),
        ],
    ),
    (
        Gate::MatchLabelKeysInPodAffinity,
        "MatchLabelKeysInPodAffinity",
        &[spec(29, false), spec(31, true), locked(33, true)],
    ),
    (
        Gate::MatchLabelKeysInPodTopologySpread,
        "MatchLabelKeysInPodTopologySpread",
        &[spec(25, false), spec(27, true)],
    ),
    (
        Gate::MatchLabelKeysInPodTopologySpreadSelectorMerge,
        "MatchLabelKeysInPodTopologySpreadSelectorMerge",
        &[spec(34, true)],
    ),
    (
        Gate::NodeInclusionPolicyInPodTopologySpread,
        "NodeInclusionPolicyInPodTopologySpread",
        &[spec(25, false), spec(26, true), locked(33, true)],
    ),
    (
        Gate::PodSchedulingReadiness,
        "PodSchedulingReadiness",
        &[
            spec(26, false),
            spec(27, true),
            locked(30, true),
            removed(37, true),
        ],
    ),
    (
        Gate::SchedulerQueueingHints,
        "SchedulerQueueingHints",
        &[
            spec(28, false),
            spec(32, true),
            locked(34, true),
            removed(37, true),
        ],
    ),
    (
        Gate::NodeDeclaredFeatures,
        "NodeDeclaredFeatures",
        &[spec(35, false), spec(36, true), locked(37, true)],
    ),
    (Gate::GenericWorkload, "GenericWorkload", &[spec(35, false)]),
    (
        Gate::GangScheduling,
        "GangScheduling",
        &[spec(35, false), removed(37, false)],
    ),
    (
        Gate::TopologyAwareWorkloadScheduling,
        "TopologyAwareWorkloadScheduling",
        &[spec(36, false)],
    ),
    (
        Gate::WorkloadAwarePreemption,
        "WorkloadAwarePreemption",
        &[spec(36, false), removed(37, false)],
    ),
    (
        Gate::OpportunisticBatching,
        "OpportunisticBatching",
        &[spec(35, true)],
    ),
    (
        Gate::ContainerRestartRules,
        "ContainerRestartRules",
        &[spec(34, false), spec(35, true)],
    ),
    (
        Gate::SchedulerPopFromBackoffQ,
        "SchedulerPopFromBackoffQ",
        &[spec(33, true)],
    ),
    (
        Gate::SchedulerAsyncPreemption,
        "SchedulerAsyncPreemption",
        &[spec(32, false), spec(33, true)],
    ),
    (
        Gate::StorageCapacityScoring,
        "StorageCapacityScoring",
        &[spec(33, false), spec(37, true)],
    ),
    (
        Gate::DRADeviceTaints,
        "DRADeviceTaints",
        &[spec(33, false), spec(36, true)],
    ),
    (
        Gate::DRAAdminAccess,
        "DRAAdminAccess",
        &[spec(32, false), spec(34, true), locked(36, true)],
    ),
    (
        Gate::DRAPartitionableDevices,
        "DRAPartitionableDevices",
        &[spec(33, false), spec(36, true)],
    ),
    (
        Gate::DRAExtendedResource,
        "DRAExtendedResource",
        &[spec(34, false), spec(36, true), locked(37, true)],
    ),
    (
        Gate::DRADeviceTaintRules,
        "DRADeviceTaintRules",
        &[spec(35, false), spec(37, true)],
    ),
    (
        Gate::DRAConsumableCapacity,
        "DRAConsumableCapacity",
        &[spec(34, false), spec(36, true)],
    ),
    (
        Gate::DRAResourceClaimDeviceStatus,
        "DRAResourceClaimDeviceStatus",
        &[spec(32, false), spec(33, true), locked(37, true)],
    ),
    (
        Gate::DRADeviceBindingConditions,
        "DRADeviceBindingConditions",
        &[spec(34, false), spec(36, true)],
    ),
    (
        Gate::DRAFractionalCapacityRange,
        "DRAFractionalCapacityRange",
        &[spec(37, true)],
    ),
    (
        Gate::VolumeLimitScaling,
        "VolumeLimitScaling",
        &[spec(35, false), spec(37, true)],
    ),
];

/// The first release whose feature gates check their dependencies.
const FIRST_DEPENDENCIES_MINOR: u8 = 35;

/// The dependencies among modelled gates (`kube_features.go`, v1.35.4 and v1.36.3).
const DEPENDENCIES: &[(Gate, &[Gate])] = &[
    (Gate::DRAPrioritizedList, &[Gate::DynamicResourceAllocation]),
    (Gate::DRAAdminAccess, &[Gate::DynamicResourceAllocation]),
    (Gate::DRADeviceTaints, &[Gate::DynamicResourceAllocation]),
    (
        Gate::DRAPartitionableDevices,
        &[Gate::DynamicResourceAllocation],
    ),
    (
        Gate::DRAExtendedResource,
        &[Gate::DynamicResourceAllocation],
    ),
    (
        Gate::DRAConsumableCapacity,
        &[Gate::DynamicResourceAllocation],
    ),
    (Gate::DRADeviceTaintRules, &[Gate::DRADeviceTaints]),
    (
        Gate::DRADeviceBindingConditions,
        &[
            Gate::DynamicResourceAllocation,
            Gate::DRAResourceClaimDeviceStatus,
        ],
    ),
    (
        Gate::MatchLabelKeysInPodTopologySpreadSelectorMerge,
        &[Gate::MatchLabelKeysInPodTopologySpread],
    ),
    (Gate::GangScheduling, &[Gate::GenericWorkload]),
    (Gate::WorkloadAwarePreemption, &[Gate::GangScheduling]),
    (
        Gate::TopologyAwareWorkloadScheduling,
        &[Gate::GenericWorkload],
    ),
];

/// The one release whose Workload API Gantry reads (PodGroup `scheduling.k8s.io/v1alpha2`
/// and `spec.schedulingGroup`): v1.35's inline pod groups (`v1alpha1`, `spec.workloadRef`)
/// and v1.37's `v1beta1` are other APIs.
pub const WORKLOAD_API_MINOR: u8 = 36;

impl Gate {
    fn index(self) -> usize {
        GATES
            .iter()
            .position(|(g, _, _)| *g == self)
            .expect("every gate is in the table")
    }

    pub fn name(self) -> &'static str {
        GATES[self.index()].1
    }

    /// The spec in force at `minor`, if the gate exists there.
    fn spec_at(self, minor: u8) -> Option<&'static Spec> {
        GATES[self.index()]
            .2
            .iter()
            .rev()
            .find(|s| s.minor <= minor)
    }
}

/// The first minor release of each rule tied to a release (see the methods of
/// [`Release`], and docs/upstream-rules.md for the pull requests and the code read).
struct Rules {
    /// #124500: EBSLimits, GCEPDLimits, AzureDiskLimits out of the default plugins.
    in_tree_volume_limits_not_default: u8,
    /// #124003: and out of the registry.
    in_tree_volume_limits_unregistered: u8,
    /// #117588.
    single_final_period: u8,
    /// #134740.
    aggregated_taint_message: u8,
    /// #131345.
    fit_unresolvable_above_allocatable: u8,
    /// #130260.
    balanced_allocation_skips_best_effort: u8,
    /// #116938.
    image_counts_at_snapshot: u8,
    /// #123366.
    image_locality_counts_init_containers: u8,
    /// #119779, #125197, #126022: see [`LeftOutNodes`].
    left_out_filtered_out: u8,
    left_out_absent: u8,
    left_out_did_not_satisfy: u8,
    /// #119779.
    pre_filter_runs_past_unschedulable: u8,
    /// #125398.
    volume_binding_stops_narrowing: u8,
    /// #129887.
    pv_node_affinity_message: u8,
    /// #129145.
    read_write_once_pod_message: u8,
    /// #132040.
    sidecar_host_ports: u8,
    /// #119971.
    preempted_event_names_preemptor: u8,
    /// #127878.
    non_zero_requests_count_sidecars: u8,
    /// #134711: DynamicResources scores `firstAvailable` subrequests, weight 2.
    dynamic_resources_scores: u8,
    /// #128748.
    backoff_counts_failures: u8,
    /// #135573.
    balanced_allocation_scores_change: u8,
    /// #130231.
    image_locality_counts_image_volumes: u8,
    /// NodeDeclaredFeatures' v1.36 rewrite (`node(s) didn't match Pod's required features`).
    declared_features_aggregate_message: u8,
    /// PodObservedGenerationTracking (beta on in 1.34, GA in 1.35).
    conditions_observe_generation: u8,
    /// DynamicResources' v1.36 `computeScore` (claims allocated before the cycle read
    /// from their own allocation; no score while DRAPrioritizedList is off).
    dynamic_resources_scores_allocated_claims: u8,
    /// #135231 (KEP-5598): the host is the top of a heap of scores whose random
    /// tiebreaker only extenders' nodes get (#141024 would give it to all).
    ties_by_score_heap: u8,
}

const RULES: Rules = Rules {
    in_tree_volume_limits_not_default: 31,
    in_tree_volume_limits_unregistered: 32,
    single_final_period: 29,
    aggregated_taint_message: 35,
    fit_unresolvable_above_allocatable: 34,
    balanced_allocation_skips_best_effort: 33,
    image_counts_at_snapshot: 29,
    image_locality_counts_init_containers: 30,
    left_out_filtered_out: 30,
    left_out_absent: 31,
    left_out_did_not_satisfy: 32,
    pre_filter_runs_past_unschedulable: 30,
    volume_binding_stops_narrowing: 32,
    pv_node_affinity_message: 33,
    read_write_once_pod_message: 34,
    sidecar_host_ports: 34,
    preempted_event_names_preemptor: 29,
    non_zero_requests_count_sidecars: 32,
    dynamic_resources_scores: 35,
    backoff_counts_failures: 34,
    balanced_allocation_scores_change: 36,
    image_locality_counts_image_volumes: 36,
    declared_features_aggregate_message: 36,
    dynamic_resources_scores_allocated_claims: 36,
    conditions_observe_generation: 34,
    ties_by_score_heap: 35,
};

/// What becomes of the nodes a PreFilter result leaves out when the pod fits nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftOutNodes {
    /// Not counted in the message; preemption may try them (v1.28, v1.29).
    Uncounted,
    /// Counted as `node is filtered out by the prefilter result`, and left alone by
    /// preemption (v1.30).
    FilteredOut,
    /// Not counted in the message, and left alone by preemption (v1.31).
    Absent,
    /// Counted as `node(s) didn't satisfy plugin(s) [...]`, and left alone by
    /// preemption (v1.32 on).
    DidNotSatisfy,
}

/// The release Gantry decides as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    minor: u8,
    /// Bit `i`: the gate at `GATES[i]` is on.
    gates: u32,
}

impl Default for Release {
    /// The default release (`DEFAULT_MINOR`) with its default gates.
    fn default() -> Release {
        Release::at(DEFAULT_MINOR)
    }
}

/// Why a release or gate setting cannot be honoured, as one line naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct ReleaseError {
    pub flag: &'static str,
    pub message: String,
}

impl Release {
    /// Kubernetes `1.<minor>` with every gate at its default there.
    ///
    /// # Panics
    /// When `minor` is outside the supported releases (a programming error: user input
    /// goes through [`Release::parse`]).
    pub fn at(minor: u8) -> Release {
        assert!(
            (OLDEST_MINOR..=NEWEST_MINOR).contains(&minor),
            "unsupported release 1.{minor}"
        );
        let gates = GATES
            .iter()
            .enumerate()
            .filter(|(_, (gate, _, _))| gate.spec_at(minor).is_some_and(|s| s.default))
            .fold(0, |bits, (i, _)| bits | 1 << i);
        Release { minor, gates }
    }

    /// `--emulated-version MAJOR.MINOR` (default: the newest) and `--feature-gates
    /// Name=bool,...`, checked as kube-scheduler checks them.
    pub fn parse(
        emulated_version: Option<&str>,
        feature_gates: Option<&str>,
    ) -> Result<Release, ReleaseError> {
        let mut release = match emulated_version {
            None => Release::default(),
            Some(text) => Release::at(parse_version(text)?),
        };
        if let Some(text) = feature_gates {
            release.set_gates(text)?;
            release.check_dependencies()?;
        }
        if release.enabled(Gate::GenericWorkload) && release.minor != WORKLOAD_API_MINOR {
            return Err(ReleaseError {
                flag: "--feature-gates",
                message: format!(
                    "GenericWorkload is modelled as Kubernetes 1.{WORKLOAD_API_MINOR} has it (PodGroup scheduling.k8s.io/v1alpha2); 1.{}'s Workload API is not read yet: use --emulated-version 1.{WORKLOAD_API_MINOR}",
                    release.minor
                ),
            });
        }
        Ok(release)
    }

    /// Upstream's gate dependencies (`defaultKubernetesFeatureGateDependencies`, checked
    /// from v1.35): an enabled gate whose dependency is disabled is refused, with
    /// component-base's text.
    fn check_dependencies(&self) -> Result<(), ReleaseError> {
        if !self.at_least(FIRST_DEPENDENCIES_MINOR) {
            return Ok(());
        }
        for (gate, needs) in DEPENDENCIES {
            let disabled: Vec<&str> = needs
                .iter()
                .filter(|need| !self.enabled(**need))
                .map(|need| need.name())
                .collect();
            if self.enabled(*gate) && !disabled.is_empty() {
                return Err(ReleaseError {
                    flag: "--feature-gates",
                    message: format!(
                        "{} is enabled, but depends on features that are disabled: [{}]",
                        gate.name(),
                        disabled.join(" ")
                    ),
                });
            }
        }
        Ok(())
    }

    fn set_gates(&mut self, text: &str) -> Result<(), ReleaseError> {
        let fail = |message: String| ReleaseError {
            flag: "--feature-gates",
            message,
        };
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((name, value)) = item.split_once('=') else {
                return Err(fail(format!("missing bool value for {item}")));
            };
            let (name, value) = (name.trim(), value.trim());
            // Go's strconv.ParseBool, which kube-scheduler's flag parsing uses.
            let on = match value {
                "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
                "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
                _ => {
                    return Err(fail(format!(
                        "invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
                    )));
                }
            };
            let Some(&(gate, _, _)) = GATES.iter().find(|(_, n, _)| *n == name) else {
                return Err(fail(format!(
                    "unrecognized feature gate: {name} (Gantry models {})",
                    GATES
                        .iter()
                        .map(|(_, n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            };
            let Some(spec) = gate.spec_at(self.minor) else {
                return Err(fail(format!(
                    "feature gate {name} does not exist in Kubernetes 1.{}",
                    self.minor
                )));
            };
            if spec.removed && matches!(gate, Gate::GangScheduling | Gate::WorkloadAwarePreemption)
            {
                return Err(fail(format!(
                    "unrecognized feature gate: {name} (merged into GenericWorkload in Kubernetes 1.{}, whose Workload API Gantry does not read yet: use --emulated-version 1.{WORKLOAD_API_MINOR})",
                    spec.minor
                )));
            }
            if spec.removed {
                return Err(fail(format!(
                    "unrecognized feature gate: {name} (removed in Kubernetes 1.{}, which always has it {})",
                    spec.minor,
                    if spec.default { "on" } else { "off" }
                )));
            }
            if spec.locked && on != spec.default {
                return Err(fail(format!(
                    "cannot set feature gate {name} to {on}, feature is locked to {}",
                    spec.default
                )));
            }
            let bit = 1 << gate.index();
            if on {
                self.gates |= bit;
            } else {
                self.gates &= !bit;
            }
        }
        Ok(())
    }

    /// The minor release (`35` for v1.35).
    pub fn minor(self) -> u8 {
        self.minor
    }

    /// Whether this is v1.`minor` or later.
    pub fn at_least(self, minor: u8) -> bool {
        self.minor >= minor
    }

    pub fn enabled(self, gate: Gate) -> bool {
        self.gates & (1 << gate.index()) != 0
    }

    // Rules tied to a release rather than a gate. Each names the upstream change; the
    // sources are in docs/upstream-rules.md.

    /// kube-scheduler's default profile lists the in-tree volume limit plugins
    /// (EBSLimits, GCEPDLimits, AzureDiskLimits).
    pub fn has_in_tree_volume_limits(self) -> bool {
        !self.at_least(RULES.in_tree_volume_limits_not_default)
    }

    /// A configuration may still name the in-tree volume limit plugins (they do nothing).
    pub fn registers_in_tree_volume_limits(self) -> bool {
        !self.at_least(RULES.in_tree_volume_limits_unregistered)
    }

    /// The FitError message ends with one period after the PostFilter message (v1.28 added
    /// a second).
    pub fn single_final_period(self) -> bool {
        self.at_least(RULES.single_final_period)
    }

    /// TaintToleration says `node(s) had untolerated taint(s)` rather than naming the taint.
    pub fn aggregated_taint_message(self) -> bool {
        self.at_least(RULES.aggregated_taint_message)
    }

    /// NodeResourcesFit rejects a node whose allocatable is below the request as
    /// UnschedulableAndUnresolvable (preemption cannot help there).
    pub fn fit_unresolvable_above_allocatable(self) -> bool {
        self.at_least(RULES.fit_unresolvable_above_allocatable)
    }

    /// NodeResourcesBalancedAllocation scores BestEffort pods 0 on every node.
    pub fn balanced_allocation_skips_best_effort(self) -> bool {
        self.at_least(RULES.balanced_allocation_skips_best_effort)
    }

    /// NodeResourcesBalancedAllocation scores how the pod changes the node's balance,
    /// `50 + (50 + B(with the pod) - B(without)) / 2`, rather than the balance with it.
    pub fn balanced_allocation_scores_change(self) -> bool {
        self.at_least(RULES.balanced_allocation_scores_change)
    }

    /// ImageLocality adds the images of `volumes[].image` to the sum (not to the
    /// threshold, which still grows with the containers only).
    pub fn image_locality_counts_image_volumes(self) -> bool {
        self.at_least(RULES.image_locality_counts_image_volumes)
    }

    /// NodeDeclaredFeatures says `node(s) didn't match Pod's required features` rather than
    /// naming the unsatisfied features.
    pub fn declared_features_aggregate_message(self) -> bool {
        self.at_least(RULES.declared_features_aggregate_message)
    }

    /// The pod conditions the scheduler writes (`PodScheduled`, the victim's
    /// `DisruptionTarget`) carry the pod's generation as `observedGeneration`.
    pub fn conditions_observe_generation(self) -> bool {
        self.at_least(RULES.conditions_observe_generation)
    }

    /// DynamicResources' Score reads a claim allocated before the cycle from its own
    /// allocation (v1.35 paired the pod's claims with Filter's allocations by position and
    /// failed the cycle when some were allocated), and scores nothing while
    /// DRAPrioritizedList is off.
    pub fn dynamic_resources_scores_allocated_claims(self) -> bool {
        self.at_least(RULES.dynamic_resources_scores_allocated_claims)
    }

    /// ImageLocality counts the nodes holding an image when the snapshot is updated, not
    /// when each node was added to the cache.
    pub fn image_counts_at_snapshot(self) -> bool {
        self.at_least(RULES.image_counts_at_snapshot)
    }

    /// ImageLocality scores init containers' images too (and its threshold grows with
    /// them).
    pub fn image_locality_counts_init_containers(self) -> bool {
        self.at_least(RULES.image_locality_counts_init_containers)
    }

    /// What becomes of the nodes a PreFilter result leaves out.
    pub fn left_out_nodes(self) -> LeftOutNodes {
        if self.at_least(RULES.left_out_did_not_satisfy) {
            LeftOutNodes::DidNotSatisfy
        } else if self.at_least(RULES.left_out_absent) {
            LeftOutNodes::Absent
        } else if self.at_least(RULES.left_out_filtered_out) {
            LeftOutNodes::FilteredOut
        } else {
            LeftOutNodes::Uncounted
        }
    }

    /// PreFilter goes on past a plugin that returned Unschedulable (preemption may help),
    /// and reports that status at the end (kubernetes#119770).
    pub fn pre_filter_runs_past_unschedulable(self) -> bool {
        self.at_least(RULES.pre_filter_runs_past_unschedulable)
    }

    /// VolumeBinding's PreFilter narrows the nodes to the hostnames its bound local PVs
    /// name (until v1.31).
    pub fn volume_binding_narrows(self) -> bool {
        !self.at_least(RULES.volume_binding_stops_narrowing)
    }

    /// VolumeBinding says `node(s) didn't match PersistentVolume's node affinity` rather
    /// than `node(s) had volume node affinity conflict`.
    pub fn pv_node_affinity_message(self) -> bool {
        self.at_least(RULES.pv_node_affinity_message)
    }

    /// VolumeRestrictions' ReadWriteOncePod conflict says `node(s) unavailable due to
    /// PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another
    /// pod`.
    pub fn read_write_once_pod_message(self) -> bool {
        self.at_least(RULES.read_write_once_pod_message)
    }

    /// Equal top scores are not broken at random (`selectHost`'s reservoir sampling) but
    /// by the order of a binary heap over the feasible nodes in the order Filter found
    /// them (`sortedNodeScores`, Go's `container/heap`): the random tiebreaker is given
    /// only to nodes an extender scored, and Gantry runs none.
    pub fn ties_by_score_heap(self) -> bool {
        self.at_least(RULES.ties_by_score_heap)
    }

    /// The victim's `Preempted` event names the preemptor's UID (`Preempted by pod <uid>
    /// on node <node>`); before, `Preempted by a pod on node <node>`.
    pub fn preempted_event_names_preemptor(self) -> bool {
        self.at_least(RULES.preempted_event_names_preemptor)
    }

    /// A pod's backoff doubles with its unschedulable attempts, or with its consecutive
    /// errors when the last attempt was one (`UnschedulableCount`,
    /// `ConsecutiveErrorsCount`); before, with every attempt (`Attempts`).
    pub fn backoff_counts_failures(self) -> bool {
        self.at_least(RULES.backoff_counts_failures)
    }

    /// NodePorts counts the host ports of sidecars (restartable init containers).
    pub fn sidecar_host_ports(self) -> bool {
        self.enabled(Gate::SidecarContainers) && self.at_least(RULES.sidecar_host_ports)
    }

    /// The defaulted (non-zero) requests scoring reads add sidecars as the real requests
    /// do; before, they were the larger of the containers' sum and any init container.
    pub fn non_zero_requests_count_sidecars(self) -> bool {
        self.at_least(RULES.non_zero_requests_count_sidecars)
    }

    /// DynamicResources scores nodes (`firstAvailable` subrequests), with weight 2 in the
    /// default profile.
    pub fn dynamic_resources_scores(self) -> bool {
        self.at_least(RULES.dynamic_resources_scores)
    }

    /// The gates set away from their default for this release, as `Name=bool`.
    pub fn changed_gates(self) -> Vec<String> {
        let defaults = Release::at(self.minor);
        GATES
            .iter()
            .filter(|(gate, _, _)| self.enabled(*gate) != defaults.enabled(*gate))
            .map(|(gate, name, _)| format!("{name}={}", self.enabled(*gate)))
            .collect()
    }
}

impl fmt::Display for Release {
    /// `v1.35`, then any gate set away from its default: `v1.35 (PodLevelResources=false)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v1.{}", self.minor)?;
        let changed = self.changed_gates();
        if !changed.is_empty() {
            write!(f, " ({})", changed.join(","))?;
        }
        Ok(())
    }
}

fn parse_version(text: &str) -> Result<u8, ReleaseError> {
    let fail = |message: String| ReleaseError {
        flag: "--emulated-version",
        message,
    };
    let trimmed = text.trim().trim_start_matches('v');
    let mut parts = trimmed.split('.');
    let (Some(major), Some(minor), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(fail(format!("{text:?} is not MAJOR.MINOR (e.g. 1.35)")));
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return Err(fail(format!("{text:?} is not MAJOR.MINOR (e.g. 1.35)")));
    }
    // Digits too many for a number are a version out of range, not a malformed one.
    match (major.parse::<u32>(), minor.parse::<u8>()) {
        (Ok(1), Ok(minor)) if (OLDEST_MINOR..=NEWEST_MINOR).contains(&minor) => Ok(minor),
        _ => Err(fail(format!(
            "Gantry decides as Kubernetes 1.{OLDEST_MINOR} to 1.{NEWEST_MINOR}, not {text}"
        ))),
    }
}

#[cfg(test)]
mod tests;
