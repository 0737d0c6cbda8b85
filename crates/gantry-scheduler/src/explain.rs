//! Why a pod would land where it lands, or stay pending: every Filter plugin's verdict on
//! every node (not only the first rejection, which is all the scheduler keeps), the Score
//! plugins' scores, and the decision a fresh scheduler would make.

use std::sync::Arc;

use gantry_api::{Pod, Sym};
use gantry_cache::{ClusterState, NodeInfo, Snapshot};
use gantry_framework::{ApiObjects, Cluster, Code, CycleState, Detail, NodeInfos, Profile, Status};

use crate::fit_error::FitError;
pub use crate::framework_runner::PluginScores;
use crate::framework_runner::{
    PluginTimer, PodFilters, narrowed_positions, run_choose, run_pre_filter, run_pre_score,
    run_score_per_plugin,
};
use crate::host::{ScoreHeap, num_feasible_nodes_to_find, select_host};
use crate::preemption::{self, Preemption};
use crate::rng::Rng;
use crate::scheduler::Nominations;

/// Everything one scheduling cycle of the pod would look at, and its outcome.
#[derive(Debug, Clone)]
pub struct Explanation {
    pub pre_filter: PreFilterOutcome,
    /// The profile's Filter plugins, in the order they run.
    pub filter_plugins: Vec<&'static str>,
    /// Every node, in the scheduler's node order.
    pub nodes: Vec<NodeVerdict>,
    /// Feasible nodes the scheduler would not score: it stops searching once it has
    /// found enough feasible nodes (`percentageOfNodesToScore`).
    pub feasible_not_scored: Vec<Sym>,
    /// A Filter plugin that chose among the feasible nodes itself (as HAMi's extender
    /// does), and the nodes it kept.
    pub chosen_by: Option<(&'static str, Vec<Sym>)>,
    /// `None` when fewer than two nodes are to be scored: the scheduler does not score.
    pub scoring: Option<Scoring>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Default)]
pub struct PreFilterOutcome {
    /// PreFilter plugins that said Skip: their Filter does not run for this pod.
    pub skipped: Vec<&'static str>,
    /// The nodes PreFilter narrowed the search to (`None`: all nodes).
    pub narrowed_to: Option<Vec<Sym>>,
    /// The PreFilter plugin that rejected the pod for every node (or failed), naming it.
    pub failed: Option<Status>,
}

#[derive(Debug, Clone)]
pub struct NodeVerdict {
    pub node: Sym,
    /// PreFilter ruled the node out (rejected the pod, or narrowed to other nodes), so no
    /// Filter ran on it and `filters` is empty.
    pub pre_filtered_out: bool,
    /// One status per Filter plugin (aligned with `filter_plugins`): success, a
    /// rejection with its reasons, an error, or Skip.
    pub filters: Vec<Status>,
    /// Finer verdicts some Filter plugins give (GPUShare: each card), by plugin.
    pub details: Vec<(&'static str, Vec<Detail>)>,
}

impl NodeVerdict {
    /// Passes every Filter plugin that ran.
    pub fn is_feasible(&self) -> bool {
        !self.pre_filtered_out && self.filters.iter().all(|s| s.is_success() || s.is_skip())
    }

    /// The status the scheduler records for the node: the first plugin that did not pass.
    fn first_failure(&self) -> Option<&Status> {
        self.filters
            .iter()
            .find(|s| !s.is_success() && !s.is_skip())
    }
}

/// The scores of the nodes the scheduler would score, column by column.
#[derive(Debug, Clone)]
pub struct Scoring {
    pub nodes: Vec<Sym>,
    /// Per Score plugin in profile order, each score aligned with `nodes`.
    pub plugins: Vec<PluginScores>,
    /// Sum over the plugins of normalised score × weight, aligned with `nodes`.
    pub totals: Vec<i64>,
}

#[derive(Debug, Clone)]
pub enum Outcome {
    Scheduled {
        node: Sym,
        how: Choice,
        /// Every node with the winning total (more than one: the seeded tie-break chose).
        tied: Vec<Sym>,
    },
    Unschedulable {
        /// The FitError message, exactly as the scheduler reports it.
        message: String,
        /// Preemption found room: the node the pod would be nominated to, and the pods
        /// (`namespace/name`) it would evict.
        nominated: Option<(Sym, Vec<String>)>,
    },
    /// A plugin failed: the scheduler would report this error and retry the pod.
    Error(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The pod's nominated node still fits, so the scheduler takes it without searching.
    NominatedNode,
    OnlyFeasibleNode,
    /// A Filter plugin chose the node among the feasible ones (see `chosen_by`).
    ChosenByPlugin,
    HighestScore,
}

/// Explains one scheduling cycle of `pod` under `profile` on a fresh scheduler seeded
/// with `seed` (no other pods nominated): the same decision as `Scheduler::schedule_one`.
pub fn explain(
    profile: &Profile,
    snapshot: &Snapshot,
    objects: &ApiObjects,
    pod: &Arc<Pod>,
    seed: u64,
) -> Explanation {
    let cluster = Cluster {
        nodes: snapshot,
        objects,
    };
    let mut state = CycleState::new();
    let mut timer = PluginTimer::default();
    let num_nodes = snapshot.num_nodes();
    let all_nodes = || (0..num_nodes).map(|i| snapshot.node_at(i));
    let mut explanation = Explanation {
        pre_filter: PreFilterOutcome::default(),
        filter_plugins: profile.filter.iter().map(|p| p.name()).collect(),
        nodes: Vec::new(),
        feasible_not_scored: Vec::new(),
        chosen_by: None,
        scoring: None,
        // Decided on every path below.
        outcome: Outcome::Error(String::new()),
    };

    let pre_filtered = run_pre_filter(profile, &mut state, pod, cluster, &mut timer);
    explanation.pre_filter.skipped = profile
        .pre_filter
        .iter()
        .map(|p| p.name())
        .filter(|name| state.is_filter_skipped(name))
        .collect();
    // Candidates in the order the scheduler searches them.
    let mut narrowing = Vec::new();
    let candidates: Vec<usize> = match pre_filtered {
        Ok(None) => (0..num_nodes).collect(),
        Ok(Some(narrowed)) => {
            let positions = narrowed_positions(snapshot, &narrowed.nodes);
            explanation.pre_filter.narrowed_to = Some(narrowed.nodes);
            narrowing = narrowed.plugins;
            positions
        }
        Err(status) => {
            explanation.nodes = all_nodes().map(|n| ruled_out(n.name())).collect();
            explanation.outcome = if status.is_rejected() {
                let fit_error = FitError {
                    num_all_nodes: num_nodes,
                    node_statuses: all_nodes().map(|n| (n.name(), status.clone())).collect(),
                    pre_filter_message: Some(status.message()),
                    post_filter_message: None,
                    release: profile.release,
                    claim_to_deallocate: None,
                    claim_to_delete: None,
                };
                unschedulable(profile, snapshot, objects, &state, pod, fit_error, seed)
            } else {
                Outcome::Error(status.message())
            };
            explanation.pre_filter.failed = Some(status);
            return explanation;
        }
    };

    let filters = PodFilters::new(profile, &state);
    explanation.nodes = all_nodes().map(|n| ruled_out(n.name())).collect();
    for &position in &candidates {
        let verdict = &mut explanation.nodes[position];
        verdict.pre_filtered_out = false;
        let node = snapshot.node_at(position);
        verdict.filters = filters.run_all(&state, pod, node);
        verdict.details = profile
            .filter
            .iter()
            .filter(|p| !state.is_filter_skipped(p.name()))
            .map(|p| (p.name(), p.details(&state, pod, node)))
            .filter(|(_, d)| !d.is_empty())
            .collect();
    }
    let feasible: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&p| explanation.nodes[p].is_feasible())
        .collect();

    // As the scheduler: a pod nominated by an earlier preemption tries its node first.
    if let Some(node) = pod.nominated_node_name
        && let Some(position) = snapshot.position(node)
        && filters
            .run(&state, pod, snapshot.node_at(position))
            .is_success()
    {
        explanation.outcome = Outcome::Scheduled {
            node,
            how: Choice::NominatedNode,
            tied: Vec::new(),
        };
        return explanation;
    }
    if feasible.is_empty() {
        let mut fit_error = FitError {
            num_all_nodes: num_nodes,
            node_statuses: candidates
                .iter()
                .filter_map(|&p| {
                    let verdict = &explanation.nodes[p];
                    verdict.first_failure().map(|s| (verdict.node, s.clone()))
                })
                .collect(),
            pre_filter_message: None,
            post_filter_message: None,
            release: profile.release,
            claim_to_deallocate: None,
            claim_to_delete: None,
        };
        if !narrowing.is_empty() {
            fit_error.add_nodes_left_out(snapshot, None, &candidates, &narrowing);
        }
        explanation.outcome =
            unschedulable(profile, snapshot, objects, &state, pod, fit_error, seed);
        return explanation;
    }

    let to_find =
        num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, candidates.len());
    let scored = &feasible[..to_find.min(feasible.len())];
    explanation.feasible_not_scored = feasible[scored.len()..]
        .iter()
        .map(|&p| snapshot.node_at(p).name())
        .collect();
    let mut scored = scored.to_vec();
    let chooser = run_choose(profile, &state, pod, snapshot, &mut scored, &mut Vec::new());
    let nodes: Vec<&NodeInfo> = scored.iter().map(|&p| snapshot.node_at(p)).collect();
    if let Some(plugin) = chooser {
        explanation.chosen_by = Some((plugin, nodes.iter().map(|n| n.name()).collect()));
    }
    if let [only] = scored[..] {
        explanation.outcome = Outcome::Scheduled {
            node: snapshot.node_at(only).name(),
            how: if chooser.is_some() {
                Choice::ChosenByPlugin
            } else {
                Choice::OnlyFeasibleNode
            },
            tied: Vec::new(),
        };
        return explanation;
    }
    let given = NodeInfos::given(&nodes);
    let plugins = run_pre_score(profile, &mut state, pod, &given, cluster, &mut timer)
        .and_then(|()| run_score_per_plugin(profile, &state, pod, &nodes));
    let plugins = match plugins {
        Ok(plugins) => plugins,
        Err(status) => {
            explanation.outcome = Outcome::Error(status.message());
            return explanation;
        }
    };
    let mut totals = vec![0i64; nodes.len()];
    for plugin in &plugins {
        for (total, score) in totals.iter_mut().zip(&plugin.normalized) {
            *total += score * plugin.weight;
        }
    }
    let names: Vec<Sym> = nodes.iter().map(|n| n.name()).collect();
    let best = match profile.release.ties_by_score_heap() {
        true => ScoreHeap::top(&totals).unwrap_or(0),
        false => select_host(&totals, &mut Rng::new(seed)),
    };
    explanation.outcome = Outcome::Scheduled {
        node: names[best],
        how: Choice::HighestScore,
        tied: names
            .iter()
            .zip(&totals)
            .filter(|(_, t)| **t == totals[best])
            .map(|(n, _)| *n)
            .collect(),
    };
    explanation.scoring = Some(Scoring {
        nodes: names,
        plugins,
        totals,
    });
    explanation
}

fn ruled_out(node: Sym) -> NodeVerdict {
    NodeVerdict {
        node,
        pre_filtered_out: true,
        filters: Vec::new(),
        details: Vec::new(),
    }
}

/// The scheduler's failure path: an error if a plugin failed, else preemption (when the
/// profile has it) and the FitError message.
fn unschedulable(
    profile: &Profile,
    snapshot: &Snapshot,
    objects: &ApiObjects,
    state: &CycleState,
    pod: &Arc<Pod>,
    mut fit_error: FitError,
    seed: u64,
) -> Outcome {
    if let Some((_, status)) = fit_error
        .node_statuses
        .iter()
        .find(|(_, s)| s.code() == Code::Error)
    {
        return Outcome::Error(status.message());
    }
    let mut nominated = None;
    let preemption_runs = fit_error.run_claims_post_filter(profile, pod, state);
    let refused = preemption::refused_for_group(profile, pod, objects.pod_groups());
    if let (true, true, Some(message)) = (profile.preemption, preemption_runs, refused) {
        fit_error.add_post_filter_reason(&format!("preemption: {message}"));
    } else if profile.preemption && preemption_runs {
        let preemption = Preemption {
            profile,
            snapshot,
            nominated: &Nominations::default(),
            budgets: objects.disruption_budgets(),
        };
        match preemption.run(state, pod, &fit_error, &mut Rng::new(seed)) {
            preemption::Outcome::Nominated { node, victims } => {
                nominated = Some((node, victims.iter().map(|v| v.key()).collect()));
            }
            preemption::Outcome::Failed(message) => {
                fit_error.add_post_filter_reason(&format!("preemption: {message}"));
            }
        }
    }
    Outcome::Unschedulable {
        message: fit_error.to_string(),
        nominated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attempt, Scheduler};
    use gantry_api::{Node, Resources};
    use gantry_cache::Cache;
    use gantry_framework::plugins::{default_profile, default_profile_for};
    use gantry_framework::{FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult};

    fn node(name: &str, milli_cpu: i64) -> Node {
        let mut allocatable = Resources::new(milli_cpu, 8 << 30);
        allocatable.pods = 110;
        Node::new(name, allocatable)
    }

    fn cache(nodes: Vec<Node>, bound: Vec<Pod>) -> Arc<Cache> {
        let cache = Arc::new(Cache::new());
        for n in nodes {
            cache.add_node(Arc::new(n));
        }
        for p in bound {
            cache.add_pod(Arc::new(p)).unwrap();
        }
        cache
    }

    fn pod(name: &str, milli_cpu: i64) -> Arc<Pod> {
        Arc::new(Pod::new("default", name).with_requests(milli_cpu, 1 << 20))
    }

    /// The explanation, and what a fresh scheduler with the same seed does.
    fn explain_and_schedule(
        profile: Profile,
        cache: &Arc<Cache>,
        pod: &Arc<Pod>,
        seed: u64,
    ) -> (Explanation, Attempt) {
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        let explanation = explain(&profile, &snapshot, &ApiObjects::default(), pod, seed);
        let mut scheduler =
            Scheduler::new(cache.clone(), vec![profile], ApiObjects::default(), seed);
        (explanation, scheduler.schedule_one(pod))
    }

    fn verdict<'a>(e: &'a Explanation, node: &str, plugin: &str) -> &'a Status {
        let column = e.filter_plugins.iter().position(|p| *p == plugin).unwrap();
        let row = e.nodes.iter().find(|n| n.node == *node).unwrap();
        &row.filters[column]
    }

    #[test]
    fn a_node_failing_two_plugins_shows_both_reasons_and_the_message_matches() {
        let cache = cache(
            vec![node("small", 500).unschedulable(), node("ok", 4000)],
            vec![],
        );
        let (e, _) = explain_and_schedule(
            default_profile("default-scheduler"),
            &cache,
            &pod("p", 1000),
            0,
        );
        assert_eq!(
            verdict(&e, "small", "NodeUnschedulable").message(),
            "node(s) were unschedulable"
        );
        assert_eq!(
            verdict(&e, "small", "NodeResourcesFit").message(),
            "Insufficient cpu"
        );
        assert!(verdict(&e, "ok", "NodeResourcesFit").is_success());
        assert!(matches!(
            e.outcome,
            Outcome::Scheduled { node, how: Choice::OnlyFeasibleNode, .. } if node == *"ok"
        ));

        let (e, attempt) = explain_and_schedule(
            default_profile("default-scheduler"),
            &cache,
            &pod("big", 8000),
            0,
        );
        let Attempt::Unschedulable { fit_error, .. } = attempt else {
            panic!("{attempt:?}")
        };
        let Outcome::Unschedulable {
            message,
            nominated: None,
        } = &e.outcome
        else {
            panic!("{:?}", e.outcome)
        };
        assert_eq!(*message, fit_error.to_string());
        assert!(message.contains(" preemption: "), "{message}");
    }

    /// Busy nodes score lower; n4 and n5 tie at the top. As v1.34 the seed decides between
    /// them; as v1.35 on the score heap does, whatever the seed (n4: `Init` sifts n5 up
    /// to the root's right child and n4 to its left, and of two equal children `down`
    /// takes the left). Either way explain says what the scheduler does.
    #[test]
    fn scores_choose_the_node_the_scheduler_chooses() {
        let busy = || {
            (0..4)
                .map(|i| {
                    Pod::new("default", &format!("b{i}"))
                        .with_requests(500 * (4 - i), 1 << 20)
                        .on_node(&format!("n{i}"))
                })
                .collect()
        };
        for minor in [34, 36] {
            let release = gantry_api::Release::parse(Some(&format!("1.{minor}")), None).unwrap();
            let mut chosen_nodes = std::collections::BTreeSet::new();
            for seed in 0..8 {
                // A fresh cluster each time: the scheduler assumes the pod it places.
                let nodes = (0..6).map(|i| node(&format!("n{i}"), 4000)).collect();
                let cache = cache(nodes, busy());
                let (e, attempt) = explain_and_schedule(
                    default_profile_for("default-scheduler", release),
                    &cache,
                    &pod("p", 100),
                    seed,
                );
                let Attempt::Scheduled { node: chosen, .. } = attempt else {
                    panic!("{attempt:?}")
                };
                let Outcome::Scheduled { node, how, tied } = &e.outcome else {
                    panic!("{:?}", e.outcome)
                };
                assert_eq!((*node, *how), (chosen, Choice::HighestScore), "seed {seed}");
                assert_eq!(tied, &[Sym::new("n4"), Sym::new("n5")]);
                let scoring = e.scoring.as_ref().unwrap();
                assert_eq!(scoring.nodes.len(), 6);
                let fit = scoring
                    .plugins
                    .iter()
                    .find(|p| p.plugin == "NodeResourcesFit")
                    .unwrap();
                assert_eq!(fit.raw.len(), 6);
                let best = scoring.totals.iter().max().unwrap();
                let position = scoring.nodes.iter().position(|n| n == node).unwrap();
                assert_eq!(scoring.totals[position], *best);
                chosen_nodes.insert(chosen.as_str());
            }
            let expected: &[&str] = if minor == 34 { &["n4", "n5"] } else { &["n4"] };
            assert_eq!(
                chosen_nodes.into_iter().collect::<Vec<_>>(),
                expected,
                "v1.{minor}"
            );
        }
    }

    /// A plugin whose PreFilter rejects, narrows to `n1`, or says Skip; its Filter
    /// rejects every node.
    struct Gate(Code);

    impl Plugin for Gate {
        fn name(&self) -> &'static str {
            "Gate"
        }
    }

    impl PreFilterPlugin for Gate {
        fn pre_filter(
            &self,
            _: &mut CycleState,
            _: &Pod,
            _: Cluster<'_>,
        ) -> (PreFilterResult, Status) {
            match self.0 {
                Code::Success => (Some(vec![Sym::new("n1")]), Status::success()),
                Code::Skip => (None, Status::skip()),
                code => (None, Status::new(code, "gate closed")),
            }
        }
    }

    impl FilterPlugin for Gate {
        fn filter(&self, _: &CycleState, _: &Pod, _: &NodeInfo) -> Status {
            Status::unschedulable("gate filter")
        }
    }

    fn gated_profile(code: Code) -> Profile {
        let mut profile = default_profile("default-scheduler");
        let gate = Arc::new(Gate(code));
        profile.pre_filter.insert(0, gate.clone());
        profile.filter.insert(0, gate);
        profile
    }

    #[test]
    fn a_pre_filter_rejection_rules_out_every_node_with_the_schedulers_message() {
        let cache = cache(vec![node("n1", 4000), node("n2", 4000)], vec![]);
        let (e, attempt) = explain_and_schedule(
            gated_profile(Code::UnschedulableAndUnresolvable),
            &cache,
            &pod("p", 100),
            0,
        );
        let failed = e.pre_filter.failed.as_ref().unwrap();
        assert_eq!(
            (failed.plugin(), failed.message().as_str()),
            ("Gate", "gate closed")
        );
        assert!(
            e.nodes
                .iter()
                .all(|n| n.pre_filtered_out && !n.is_feasible())
        );
        let Attempt::Unschedulable { fit_error, .. } = attempt else {
            panic!("{attempt:?}")
        };
        let Outcome::Unschedulable { message, .. } = &e.outcome else {
            panic!("{:?}", e.outcome)
        };
        assert_eq!(*message, fit_error.to_string());
        assert!(
            message.starts_with("0/2 nodes are available: gate closed."),
            "{message}"
        );
    }

    #[test]
    fn pre_filter_narrowing_and_skip_show_on_every_node() {
        let cache = cache(vec![node("n1", 4000), node("n2", 4000)], vec![]);
        let (e, _) = explain_and_schedule(gated_profile(Code::Success), &cache, &pod("p", 100), 0);
        assert_eq!(e.pre_filter.narrowed_to, Some(vec![Sym::new("n1")]));
        let n2 = e.nodes.iter().find(|n| n.node == *"n2").unwrap();
        assert!(n2.pre_filtered_out && n2.filters.is_empty());
        assert_eq!(verdict(&e, "n1", "Gate").message(), "gate filter");
        assert!(
            verdict(&e, "n1", "NodeResourcesFit").is_success(),
            "later plugins still run"
        );

        let (e, attempt) =
            explain_and_schedule(gated_profile(Code::Skip), &cache, &pod("p", 100), 0);
        assert!(e.pre_filter.skipped.contains(&"Gate"));
        assert!(
            e.nodes
                .iter()
                .all(|n| verdict(&e, n.node.as_str(), "Gate").is_skip() && n.is_feasible())
        );
        let (Attempt::Scheduled { node: chosen, .. }, Outcome::Scheduled { node, .. }) =
            (&attempt, &e.outcome)
        else {
            panic!("{attempt:?} {:?}", e.outcome)
        };
        assert_eq!(chosen, node);
    }
}
