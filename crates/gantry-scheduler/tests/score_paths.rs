//! The scheduler sums scores by shortcuts: a plugin that scores every node alike adds one
//! figure to all (`ScorePlugin::uniform_score`), and the verdict memo adds the raw scores of
//! plugins that do not normalise straight to the totals. `explain` scores plugin by plugin
//! and node by node, as upstream does. Both must give every node the same total.

use std::sync::Arc;

use gantry_api::{Container, Node, Pod, Resources, Sym, TaintEffect};
use gantry_cache::{Cache, Snapshot};
use gantry_framework::ApiObjects;
use gantry_framework::plugins::default_profile;
use gantry_scheduler::explain::explain;
use gantry_scheduler::{Attempt, Scheduler};

/// Six nodes of different sizes; `soft_taints` puts a PreferNoSchedule taint on two of
/// them, `images` puts the pods' image on three.
fn cluster(soft_taints: bool, images: bool) -> Arc<Cache> {
    let cache = Arc::new(Cache::new());
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
