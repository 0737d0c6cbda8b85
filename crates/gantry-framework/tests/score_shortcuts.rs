//! What the scheduler's score shortcuts rely on, for every default Score plugin of every
//! release: a plugin that says its `normalize` changes nothing (`ScorePlugin::normalizes`)
//! leaves any scores as they are; and a plugin that can score every node alike
//! (`ScorePlugin::uniform_score`) normalises each of any number of equal scores as it
//! normalises one alone.

use gantry_api::Pod;
use gantry_api::release::{NEWEST_MINOR, OLDEST_MINOR, Release};
use gantry_framework::CycleState;
use gantry_framework::plugins::default_profile_for;
use proptest::prelude::*;

proptest! {
    #[test]
    fn score_shortcuts_hold_for_every_default_plugin(
        scores in proptest::collection::vec(0i64..=1_000, 1..40),
        alike in 0i64..=1_000,
        count in 1usize..40,
    ) {
        let pod = Pod::new("default", "p");
        let state = CycleState::new();
        for minor in OLDEST_MINOR..=NEWEST_MINOR {
            let profile = default_profile_for("default-scheduler", Release::at(minor));
            for weighted in &profile.score {
                let plugin = &weighted.plugin;
                if !plugin.normalizes() {
                    let mut normalized = scores.clone();
                    let _ = plugin.normalize(&state, &pod, &mut normalized);
                    prop_assert_eq!(&normalized, &scores, "{} at 1.{}", plugin.name(), minor);
                }
                let mut one = [alike];
                let mut many = vec![alike; count];
                let _ = plugin.normalize(&state, &pod, &mut one);
                let _ = plugin.normalize(&state, &pod, &mut many);
                prop_assert!(
                    many.iter().all(|&s| s == one[0]),
                    "{} at 1.{}: {:?} alone, {:?} among {}", plugin.name(), minor, one, many, count
                );
            }
        }
    }
}
