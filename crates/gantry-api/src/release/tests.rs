use super::*;

#[test]
fn defaults_follow_the_versioned_specs() {
    let v128 = Release::at(28);
    assert!(!v128.enabled(Gate::SidecarContainers));
    assert!(!v128.enabled(Gate::DynamicResourceAllocation));
    assert!(!v128.enabled(Gate::MatchLabelKeysInPodAffinity));
    assert!(v128.enabled(Gate::MatchLabelKeysInPodTopologySpread));
    assert!(!v128.enabled(Gate::PodLevelResources));
    let v133 = Release::at(33);
    assert!(v133.enabled(Gate::InPlacePodVerticalScaling));
    assert!(!v133.enabled(Gate::DynamicResourceAllocation));
    assert!(!v133.enabled(Gate::PodLevelResources));
    let v135 = Release::at(35);
    assert_eq!(Release::default().minor(), 37);
    for gate in [
        Gate::SidecarContainers,
        Gate::PodLevelResources,
        Gate::InPlacePodVerticalScaling,
        Gate::DynamicResourceAllocation,
        Gate::DRAPrioritizedList,
        Gate::MatchLabelKeysInPodAffinity,
    ] {
        assert!(v135.enabled(gate), "{}", gate.name());
    }
    assert_eq!(v135.to_string(), "v1.35");
    assert!(!v135.enabled(Gate::NodeDeclaredFeatures));
    let v136 = Release::at(36);
    assert!(v136.enabled(Gate::NodeDeclaredFeatures));
    assert!(v136.balanced_allocation_scores_change() && !v135.balanced_allocation_scores_change());
    let v137 = Release::at(37);
    for gate in [
        Gate::SidecarContainers,
        Gate::PodSchedulingReadiness,
        Gate::SchedulerQueueingHints,
        Gate::NodeDeclaredFeatures,
        Gate::DRAPrioritizedList,
        Gate::StorageCapacityScoring,
        Gate::VolumeLimitScaling,
    ] {
        assert!(v137.enabled(gate), "{}", gate.name());
    }
    assert!(!v136.enabled(Gate::StorageCapacityScoring));
    assert!(!v136.enabled(Gate::VolumeLimitScaling));
    assert!(Release::parse(Some("1.32"), Some("StorageCapacityScoring=true")).is_err());
    assert!(Release::parse(Some("1.34"), Some("VolumeLimitScaling=true")).is_err());
}

#[test]
fn gates_are_set_as_kube_scheduler_sets_them() {
    let r = Release::parse(
        Some("1.34"),
        Some("PodLevelResources=false, DRAPrioritizedList=false"),
    )
    .unwrap();
    assert!(!r.enabled(Gate::PodLevelResources));
    assert_eq!(
        r.to_string(),
        "v1.34 (PodLevelResources=false,DRAPrioritizedList=false)"
    );
    let r = Release::parse(Some("v1.28"), Some("SidecarContainers=true")).unwrap();
    assert!(r.enabled(Gate::SidecarContainers));
    // Every spelling Go's strconv.ParseBool takes, and only those.
    for (value, on) in [
        ("1", true),
        ("t", true),
        ("T", true),
        ("TRUE", true),
        ("True", true),
        ("0", false),
        ("f", false),
        ("F", false),
        ("FALSE", false),
        ("False", false),
    ] {
        let r = Release::parse(Some("1.34"), Some(&format!("PodLevelResources={value}"))).unwrap();
        assert_eq!(r.enabled(Gate::PodLevelResources), on, "{value}");
    }
    for value in ["yes", "tRUE", "on", "2", ""] {
        assert!(
            Release::parse(None, Some(&format!("PodLevelResources={value}"))).is_err(),
            "{value}"
        );
    }
}

#[test]
fn what_cannot_be_honoured_is_an_error_naming_it() {
    let err = |v: Option<&str>, g: Option<&str>| Release::parse(v, g).unwrap_err().to_string();
    assert_eq!(
        err(Some("1.27"), None),
        "--emulated-version: Gantry decides as Kubernetes 1.28 to 1.37, not 1.27"
    );
    assert_eq!(
        err(Some("1.38"), None),
        "--emulated-version: Gantry decides as Kubernetes 1.28 to 1.37, not 1.38"
    );
    // Gates gone in v1.37 are unknown there, as kube-scheduler's flag parsing says.
    assert_eq!(
        err(Some("1.37"), Some("SidecarContainers=true")),
        "--feature-gates: unrecognized feature gate: SidecarContainers (removed in Kubernetes 1.37, which always has it on)"
    );
    assert_eq!(
        err(Some("1.37"), Some("DRAPrioritizedList=false")),
        "--feature-gates: cannot set feature gate DRAPrioritizedList to false, feature is locked to true"
    );
    assert!(Release::parse(Some("1.36"), Some("DRAPrioritizedList=false")).is_ok());
    // Dependencies among gates, checked from v1.35 as component-base checks them.
    assert_eq!(
        err(
            Some("1.35"),
            Some("MatchLabelKeysInPodTopologySpread=false")
        ),
        "--feature-gates: MatchLabelKeysInPodTopologySpreadSelectorMerge is enabled, but depends on features that are disabled: [MatchLabelKeysInPodTopologySpread]"
    );
    assert!(
        Release::parse(
            Some("1.35"),
            Some("MatchLabelKeysInPodTopologySpread=false,MatchLabelKeysInPodTopologySpreadSelectorMerge=false")
        )
        .is_ok()
    );
    assert!(
        Release::parse(
            Some("1.34"),
            Some("MatchLabelKeysInPodTopologySpread=false")
        )
        .is_ok()
    );
    assert!(Release::parse(Some("1.35"), Some("NodeDeclaredFeatures=true")).is_ok());
    assert_eq!(
        err(Some("1.34"), Some("NodeDeclaredFeatures=true")),
        "--feature-gates: feature gate NodeDeclaredFeatures does not exist in Kubernetes 1.34"
    );
    assert!(err(Some("2.0"), None).contains("not 2.0"));
    assert!(err(Some("1"), None).contains("is not MAJOR.MINOR"));
    assert!(err(Some("1.x"), None).contains("is not MAJOR.MINOR"));
    assert!(err(Some("1.-3"), None).contains("is not MAJOR.MINOR"));
    assert!(
        err(Some("1.4294967296"), None)
            .ends_with("Gantry decides as Kubernetes 1.28 to 1.37, not 1.4294967296")
    );
    assert_eq!(
        err(Some("1.36"), Some("SidecarContainers=false")),
        "--feature-gates: cannot set feature gate SidecarContainers to false, feature is locked to true"
    );
    assert_eq!(
        err(None, Some("GenericWorkload=true,GangScheduling=true")),
        "--feature-gates: unrecognized feature gate: GangScheduling (merged into GenericWorkload in Kubernetes 1.37, whose Workload API Gantry does not read yet: use --emulated-version 1.36)"
    );
    assert!(
        err(None, Some("NoSuchGate=true"))
            .starts_with("--feature-gates: unrecognized feature gate: NoSuchGate")
    );
    assert!(
        err(None, Some("PodLevelResources")).contains("missing bool value for PodLevelResources")
    );
    assert!(
        err(None, Some("PodLevelResources=yes")).contains("invalid value of PodLevelResources=yes")
    );
    assert_eq!(
        err(Some("1.31"), Some("PodLevelResources=true")),
        "--feature-gates: feature gate PodLevelResources does not exist in Kubernetes 1.31"
    );
}
