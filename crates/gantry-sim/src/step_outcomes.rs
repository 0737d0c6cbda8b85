//! What a step corpus recorded of the real scheduler (`outcomes.json` of
//! `testdata/coscheduling-1.35`: each pod's node or `PodScheduled=False` message over the
//! runs, and the nodes bound in each run), and how a run of Gantry's is judged against it
//! (the simulation's, or `gantry run`'s against an API server): each pod's outcome must be
//! one the real scheduler gave that pod in some run, and the nodes bound, taken together,
//! those of some run. Where all runs agree, that is an exact match.

use std::collections::BTreeMap;

use serde_json::Value;

/// A pod's outcome: its node, or the message of its `PodScheduled=False` condition, or
/// neither (gated: no condition).
pub type Outcome = (Option<String>, Option<String>);

/// What `got` (outcomes by `namespace/name`) did that no recorded run did, one line each.
pub fn problems(recorded: &Value, got: &BTreeMap<String, Outcome>) -> Vec<String> {
    let mut problems = Vec::new();
    let empty = serde_json::Map::new();
    let pods = recorded["pods"].as_object().unwrap_or(&empty);
    for (pod, seen) in pods {
        let seen: Vec<Outcome> = (seen.as_array().into_iter().flatten())
            .map(|o| {
                let text = |field: &str| o[field].as_str().map(str::to_string);
                (text("node"), text("reason"))
            })
            .collect();
        let found = got.get(pod).cloned().unwrap_or_default();
        if !seen.contains(&found) {
            problems.push(format!("{pod}: got {found:?}, recorded {seen:?}"));
        }
    }
    if got.len() != pods.len() {
        problems.push(format!(
            "{} pods decided, {} recorded",
            got.len(),
            pods.len()
        ));
    }
    let mut bound: Vec<String> = got.values().filter_map(|(node, _)| node.clone()).collect();
    bound.sort();
    let bound_seen: Vec<Vec<String>> =
        serde_json::from_value(recorded["bound"].clone()).unwrap_or_default();
    if !bound_seen.contains(&bound) {
        problems.push(format!("nodes bound {bound:?}, recorded {bound_seen:?}"));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_outcome_no_run_gave_and_a_set_of_nodes_no_run_bound_are_problems() {
        let recorded = json!({
            "pods": {
                "default/a": [{"node": "n1", "reason": null}, {"node": null, "reason": "late"}],
                "default/b": [{"node": "n2", "reason": null}],
            },
            "bound": [["n1", "n2"], ["n2"]],
        });
        let outcome = |node: Option<&str>, reason: Option<&str>| {
            (node.map(str::to_string), reason.map(str::to_string))
        };
        let mut got = BTreeMap::from([
            ("default/a".to_string(), outcome(None, Some("late"))),
            ("default/b".to_string(), outcome(Some("n2"), None)),
        ]);
        assert_eq!(problems(&recorded, &got), Vec::<String>::new());
        got.insert("default/a".into(), outcome(Some("n2"), None));
        assert_eq!(
            problems(&recorded, &got),
            [
                r#"default/a: got (Some("n2"), None), recorded [(Some("n1"), None), (None, Some("late"))]"#,
                r#"nodes bound ["n2", "n2"], recorded [["n1", "n2"], ["n2"]]"#,
            ]
        );
        got.remove("default/b");
        assert!(problems(&recorded, &got).contains(&"1 pods decided, 2 recorded".to_string()));
    }
}
