//! The report as a person sees it: `index.html` loaded in headless Chromium, its script
//! run, the pod table drawn and filtered from the address.
//!
//! Chromium comes from Debian's package (`apt-get install chromium`); `.ci/run` installs
//! it and sets `GANTRY_REQUIRE_CHROMIUM=1`, which makes its absence a failure. Without
//! that variable a developer without Chromium sees a note and the test passes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{gantry_within, repo_root, stderr};

const BROWSERS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

fn find_browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| BROWSERS.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Chromium, headless and offline, with its own profile directory.
fn chromium(browser: &Path, profile: &Path, args: &[&str]) -> std::process::Output {
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=10000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("chromium runs")
}

/// The rows the script drew into the pod table, and the count it shows.
fn pod_table(dom: &str) -> (usize, String) {
    let table = &dom[dom
        .find("id=\"pod-table\"")
        .expect("the pod table is there")..];
    let body = &table[table.find("<tbody>").expect("it has a body")..];
    let body = &body[..body.find("</tbody>").expect("the body ends")];
    let count = &dom[dom.find("id=\"count\">").expect("the count is there") + 11..];
    let count = count[..count.find('<').unwrap()].to_string();
    (body.matches("<tr>").count(), count)
}

#[test]
fn the_report_renders_in_a_browser_and_its_pod_table_filters() {
    let Some(browser) = find_browser() else {
        assert!(
            std::env::var_os("GANTRY_REQUIRE_CHROMIUM").is_none(),
            "GANTRY_REQUIRE_CHROMIUM is set but none of {BROWSERS:?} is on PATH"
        );
        eprintln!("note: Chromium not found; the report was not checked in a browser");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let scenario = repo_root().join("crates/gantry/tests/drains-scenario.yaml");
    let placements = dir.path().join("placements.jsonl");
    let out = gantry_within(
        &[
            "simulate",
            "--scenario",
            scenario.to_str().unwrap(),
            "--json",
            "--placements",
            placements.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&placements)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pending = lines.iter().filter(|l| l["node"].is_null()).count();
    assert!(
        pending > 0 && pending < lines.len(),
        "the scenario has both"
    );

    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "the page fetches nothing"
    );
    assert!(html.matches("<svg").count() >= 5, "the plots are inline");

    let page = format!("file://{}", report.join("index.html").display());
    let profile = dir.path().join("profile");
    let dump = |fragment: &str| {
        let out = chromium(
            &browser,
            &profile,
            &["--dump-dom", &format!("{page}{fragment}")],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };

    let dom = dump("");
    assert_eq!(
        pod_table(&dom),
        (lines.len(), format!("{} pods", lines.len())),
        "every pod drawn"
    );
    for section in ["inputs", "workloads", "pending", "time", "nodes", "speed"] {
        assert!(
            dom.contains(&format!("id=\"{section}\"")),
            "{section} missing"
        );
    }
    assert!(dom.contains("drain 3 pool nodes"), "the events are listed");

    let dom = dump("#status=pending");
    assert_eq!(pod_table(&dom), (pending, format!("{pending} pods")));
    let dom = dump("#q=batch-1");
    let (rows, _) = pod_table(&dom);
    let matching = lines
        .iter()
        .filter(|l| l["pod"].as_str().unwrap().contains("batch-1"))
        .count();
    assert_eq!(rows, matching, "the search box filters");

    // A screenshot of a page that drew nothing is a few kilobytes of background.
    let shot = dir.path().join("report.png");
    let out = chromium(
        &browser,
        &profile,
        &[
            "--window-size=1400,2400",
            &format!("--screenshot={}", shot.display()),
            &page,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 50_000, "screenshot of {size} bytes");
}
