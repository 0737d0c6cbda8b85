//! A corpus of scenarios recorded step by step from the real scheduler (`testdata/<name>`:
//! a directory per scenario with its `steps.yaml`): each is checked, and every mismatch of
//! every scenario is reported at once.

use std::path::Path;

/// Runs `check` on each scenario of `testdata/<corpus>` (at least `minimum` of them) and
/// fails listing every problem it returns, prefixed with the scenario's name.
pub fn check_every_scenario(corpus: &str, minimum: usize, check: impl Fn(&Path) -> Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(corpus);
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("steps.yaml").exists())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= minimum,
        "scenarios missing from {}",
        root.display()
    );
    let failures: Vec<String> = dirs
        .iter()
        .flat_map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
            check(dir).into_iter().map(move |p| format!("{name}: {p}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
