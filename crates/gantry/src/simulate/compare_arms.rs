//! `simulate --compare B.yaml`, `--compare-emulated-version`, `--compare-feature-gates`:
//! the two arms built from the flags (B's configuration and release default to A's), the
//! inputs read again when B decides as another release (admission and validation follow
//! the release), then both runs and their comparison.

use std::path::Path;

use gantry_api::Release;
use gantry_framework::config::SchedulerConfig;
use gantry_sim::SimOptions;
use gantry_sim::scenario::Scenario;

use super::node_change::NodeChange;
use super::{Recorded, SimulateArgs, describe_settings, read_inputs, sim_options};
use crate::compare::{self, Arm};
use crate::load;
use crate::report::{self, RunInfo, compare_page};

impl SimulateArgs {
    /// Whether a second configuration or release is to run beside the first.
    pub(super) fn compares(&self) -> bool {
        self.compare.is_some()
            || self.compare_emulated_version.is_some()
            || self.compare_feature_gates.is_some()
            || !self.compare_nodes.is_empty()
            || self.compare_without_nodes.is_some()
    }
}

pub(super) fn run(
    args: &SimulateArgs,
    (release, config): (Release, SchedulerConfig),
    scenario: Scenario,
    recorded: Recorded,
    inputs: Vec<(String, String)>,
) -> anyhow::Result<()> {
    let b_release = args.release.other_release(
        args.compare_emulated_version.as_deref(),
        args.compare_feature_gates.as_deref(),
        release,
    )?;
    let b_file = args.compare.as_deref().or(args.config.as_deref());
    let other = load::config(b_file, b_release)?;
    // Another release reads the inputs its own way: read them again.
    let b_scenario = if b_release == release {
        None
    } else {
        anyhow::ensure!(
            args.live.kubeconfig().is_none(),
            "--compare-emulated-version and --compare-feature-gates need a dump, a scenario or a trace, not --kubeconfig: one read of a live cluster is decoded as one release"
        );
        Some(read_inputs(args, b_release, &other, None)?.0)
    };
    let releases_differ = b_release != release;
    let label = |file: Option<&Path>, release: Release| {
        let file = file.map_or_else(
            || "kube-scheduler's defaults".into(),
            |f| f.display().to_string(),
        );
        if releases_differ {
            format!("{file}, as Kubernetes {release}")
        } else {
            file
        }
    };
    let a_options = sim_options(args, &config);
    let b_options = sim_options(args, &other);
    let configurations = match &args.report {
        Some(dir) => Some((
            dir.as_path(),
            [
                configuration(args.config.as_deref(), &config)?,
                configuration(b_file, &other)?,
            ],
        )),
        None => None,
    };
    let name = scenario.name.clone();
    let mut b_inputs = match b_scenario {
        Some(b) => (b.cluster, b.events),
        None => (scenario.cluster.clone(), scenario.events.clone()),
    };
    let nodes = args.compare_without_nodes.as_deref();
    let changed = NodeChange::read(&args.compare_nodes, nodes, b_release)?
        .map(|change| change.apply(&mut b_inputs.0));
    let nodes_at_start = [scenario.cluster.nodes.len(), b_inputs.0.nodes.len()];
    // Each run's own report, when asked for: B's names B's configuration and release.
    let own_report = |side: usize, options: &SimOptions, config: &SchedulerConfig| {
        let dir = args.report.as_ref()?;
        let mut inputs = inputs.clone();
        if side == 1 {
            inputs.retain(|(flag, _)| flag != "--config");
            let b = b_file.map_or("kube-scheduler's defaults".into(), |f| {
                f.display().to_string()
            });
            inputs.push(("--compare".into(), b));
        }
        let info = RunInfo {
            name: name.clone(),
            inputs,
            settings: describe_settings(options, config),
            release: config.release,
            timeline: scenario.timeline.clone(),
            nodes_at_start: nodes_at_start[side],
        };
        Some((dir.join(compare_page::ARM_DIRS[side]), info))
    };
    let (a_report, b_report) = (
        own_report(0, &a_options, &config),
        own_report(1, &b_options, &other),
    );
    let arms = [
        Arm {
            label: label(args.config.as_deref(), release),
            report: a_report,
            options: a_options,
            config,
        },
        Arm {
            label: label(b_file, b_release),
            report: b_report,
            options: b_options,
            config: other,
        },
    ];
    let a_inputs = (scenario.cluster, scenario.events);
    let recorded = recorded.as_ref().map(|(recorded, _)| recorded.as_slice());
    let follow = args.follow_recorded;
    let outcomes = compare::run([a_inputs, b_inputs], arms, recorded.map(|r| (r, follow)))?;
    let mut title = if releases_differ {
        format!("{name}, A decided as Kubernetes {release}, B as {b_release}")
    } else {
        format!("{name}, decided as Kubernetes {release}")
    };
    if let Some(changed) = changed {
        title += &format!(
            "; B's nodes: {} removed ({} pods on them to place again), {} added",
            changed.removed, changed.unbound, changed.added
        );
    }
    compare::write(
        &outcomes,
        recorded,
        args.json,
        &title,
        [release, b_release],
        configurations,
    )
}

/// A run's configuration as the comparison page shows it.
fn configuration(
    file: Option<&Path>,
    config: &SchedulerConfig,
) -> anyhow::Result<compare_page::Configuration> {
    let text = file.map(|f| load::read_text(f, load::MAX_CONFIG_BYTES, "config"));
    Ok(compare_page::Configuration {
        profiles: report::describe_profiles(&config.profiles),
        text: text.transpose()?,
    })
}
