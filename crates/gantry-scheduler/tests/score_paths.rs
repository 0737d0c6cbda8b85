//! The scheduler sums scores by shortcuts: a plugin that scores every node alike adds one
//! figure to all (`ScorePlugin::uniform_score`), and the verdict memo adds the raw scores of
//! plugins that do not normalise straight to the totals. `explain` scores plugin by plugin
//! and node by node, as upstream does. Both must give every node the same total.

use std::sync::Arc;

use gantry_api::{Container, Node, Pod, Resources, Sym, TaintEffect};
use gantry_cache::{Cache, NodeInfo, Snapshot};
use gantry_framework::plugins::default_profile;
use gantry_framework::{ApiObjects, CycleState, ScorePlugin, Status, WeightedScorePlugin};
use gantry_scheduler::explain::explain;
use gantry_scheduler::{Attempt, Scheduler};

/// Six nodes of different sizes after one too small for the pods (so that the feasible
/// nodes' positions are not their indices); `soft_taints` puts a PreferNoSchedule taint
/// on two of them, `images` puts the pods' image on three.
fn cluster(soft_taints: bool, images: bool) -> Arc<Cache> {
    let cache = Arc::new(Cache::new());
    cache.add_node(Arc::new(Node::new("tiny", Resources::new(100, 1 << 30))));
    for i in 0..6 {
        let mut allocatable = Resources::new(2_000 + 1_000 * i, (4 + 2 * i) << 30);
        allocatable.pods = 110;
        let mut node = Node::new(&format!("node-{i}"), allocatable);
        if soft_taints && i % 3 == 0 {
            node = node.with_taint("spot", "", TaintEffect::PreferNoSchedule);
        }
        if images && i % 2 == 1 {
            node = node.with_image("registry/app:1", 800 << 20);
        }
        cache.add_node(Arc::new(node));
    }
    cache
}

fn pod(name: &str) -> Arc<Pod> {
    let mut container = Container::new("app", Some(700), Some(1 << 30));
    container.image = Sym::new("registry/app:1");
    Arc::new(Pod::new("default", name).with_container(container))
}

#[test]
fn totals_summed_by_shortcuts_are_those_of_every_plugin_on_every_node() {
    for (soft_taints, images) in [(false, false), (true, false), (false, true), (true, true)] {
        let cache = cluster(soft_taints, images);
        let profile = default_profile("default-scheduler");
        let objects = ApiObjects::default();
        let mut scheduler = Scheduler::new(cache.clone(), vec![profile.clone()], objects, 7);
        scheduler.keep_last_cycle();
        // Like pods in a row: from the second on, the memo serves the resource scores.
        for i in 0..8 {
            let case = format!("taints {soft_taints}, images {images}, pod {i}");
            let pod = pod(&format!("p{i}"));
            let mut snapshot = Snapshot::new();
            cache.update_snapshot(&mut snapshot).unwrap();
            let explanation = explain(&profile, &snapshot, &ApiObjects::default(), &pod, 7);
            let scoring = explanation.scoring.expect("several nodes fit");
            let Attempt::Scheduled { .. } = scheduler.schedule_one(&pod) else {
                panic!("{case}: not placed");
            };
            let mut summed = scheduler.last_cycle().unwrap().scored.clone();
            let mut explained: Vec<(Sym, i64)> =
                scoring.nodes.iter().copied().zip(scoring.totals).collect();
            summed.sort();
            explained.sort();
            assert_eq!(summed, explained, "{case}");
        }
    }
}

/// A plugin whose raw scores the memo keeps and sums (it reads only the node and does not
/// normalise), scoring every node `raw`.
struct Remembered(&'static str, i64);

impl gantry_framework::Plugin for Remembered {
    fn name(&self) -> &'static str {
        self.0
    }
}

impl ScorePlugin for Remembered {
    fn score(&self, _: &CycleState, _: &Pod, _: &NodeInfo) -> Result<i64, Status> {
        Ok(self.1)
    }

    fn worth_remembering(&self, _: &CycleState, _: &Pod) -> bool {
        true
    }

    fn normalizes(&self) -> bool {
        false
    }
}

/// A plugin the memo does not serve, failing on every node.
struct Failing;

impl gantry_framework::Plugin for Failing {
    fn name(&self) -> &'static str {
        "Failing"
    }
}

impl ScorePlugin for Failing {
    fn score(&self, _: &CycleState, _: &Pod, _: &NodeInfo) -> Result<i64, Status> {
        Err(Status::error("no score today"))
    }
}

/// The memo sums the remembered scores after the other plugins ran; when anything fails,
/// the error is still that of the first failing plugin in the profile's order, as when
/// every plugin is scored in turn.
#[test]
fn an_error_names_the_first_failing_plugin_in_the_profile_s_order() {
    let high = || Arc::new(Remembered("High", 101)) as Arc<dyn ScorePlugin>;
    let cases: [(Vec<Arc<dyn ScorePlugin>>, &str); 3] = [
        (
            vec![high(), Arc::new(Failing)],
            "\"High\" returns an invalid score 101",
        ),
        (vec![Arc::new(Failing), high()], "no score today"),
        (
            vec![Arc::new(Remembered("Fine", 40)), high()],
            "\"High\" returns an invalid score 101",
        ),
    ];
    for (plugins, want) in cases {
        let mut profile = default_profile("default-scheduler");
        for plugin in plugins {
            profile
                .score
                .push(WeightedScorePlugin { plugin, weight: 1 });
        }
        let names: Vec<&str> = profile.score.iter().map(|w| w.plugin.name()).collect();
        let cache = cluster(false, false);
        let mut scheduler = Scheduler::new(cache, vec![profile], ApiObjects::default(), 7);
        // From the second like pod on, the memo sums the remembered scores.
        for i in 0..3 {
            let attempt = scheduler.schedule_one(&pod(&format!("p{i}")));
            let Attempt::Error(message) = attempt else {
                panic!("{names:?}, pod {i}: {attempt:?}");
            };
            assert!(message.contains(want), "{names:?}, pod {i}: {message}");
        }
    }
}

/// Remembered plugins in range: their weighted raw scores are in every total.
#[test]
fn remembered_sums_are_weighted_into_the_totals() {
    let mut profile = default_profile("default-scheduler");
    for (plugin, weight) in [(Remembered("Forty", 40), 2), (Remembered("Seven", 7), 3)] {
        let plugin = Arc::new(plugin) as Arc<dyn ScorePlugin>;
        profile.score.push(WeightedScorePlugin { plugin, weight });
    }
    // Each on its own cluster: the two place every pod alike (a constant added to every
    // node changes no ranking), so the clusters stay alike.
    let plain = default_profile("default-scheduler");
    let mut plain = Scheduler::new(cluster(true, true), vec![plain], ApiObjects::default(), 7);
    let mut summed = Scheduler::new(cluster(true, true), vec![profile], ApiObjects::default(), 7);
    plain.keep_last_cycle();
    summed.keep_last_cycle();
    for i in 0..4 {
        let pod = pod(&format!("p{i}"));
        let mut totals = Vec::new();
        for scheduler in [&mut plain, &mut summed] {
            let Attempt::Scheduled { .. } = scheduler.schedule_one(&pod) else {
                panic!("pod {i}: not placed");
            };
            let mut scored = scheduler.last_cycle().unwrap().scored.clone();
            scored.sort();
            totals.push(scored);
        }
        let added: Vec<(Sym, i64)> = totals[0]
            .iter()
            .map(|&(n, t)| (n, t + 2 * 40 + 3 * 7))
            .collect();
        assert_eq!(totals[1], added, "pod {i}");
    }
}
