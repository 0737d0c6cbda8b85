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

/// Chromium, or `None` with a note when it is missing and not required (`.ci/run`
/// requires it: its absence is then a failure).
fn browser_or_note(what: &str) -> Option<PathBuf> {
    let browser = find_browser();
    if browser.is_none() {
        assert!(
            std::env::var_os("GANTRY_REQUIRE_CHROMIUM").is_none(),
            "GANTRY_REQUIRE_CHROMIUM is set but none of {BROWSERS:?} is on PATH"
        );
        eprintln!("note: Chromium not found; {what} was not checked in a browser");
    }
    browser
}

/// A screenshot of `page`: one of a page that drew nothing is a few kilobytes of
/// background.
fn assert_draws(browser: &Path, profile: &Path, page: &str, shot: &Path) {
    let out = chromium(
        browser,
        profile,
        &[
            "--window-size=1400,2400",
            &format!("--screenshot={}", shot.display()),
            page,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let size = std::fs::metadata(shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 50_000, "screenshot of {size} bytes");
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
    let Some(browser) = browser_or_note("the report") else {
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

    assert_draws(&browser, &profile, &page, &dir.path().join("report.png"));
}

/// The rows of the table with this id, as their cells' text.
fn table_rows(dom: &str, id: &str) -> Vec<Vec<String>> {
    let table = &dom[dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("table {id} is there"))..];
    let body = &table[table.find("<tbody>").expect("it has a body")..];
    let body = &body[..body.find("</tbody>").expect("the body ends")];
    body.split("<tr")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .chain(row.split("<th").skip(1))
                .map(|cell| {
                    let text = &cell[cell.find('>').unwrap() + 1..];
                    let mut plain = String::new();
                    let mut in_tag = false;
                    for c in text[..text.find("</t").unwrap_or(text.len())].chars() {
                        match c {
                            '<' => in_tag = true,
                            '>' => in_tag = false,
                            c if !in_tag => plain.push(c),
                            _ => {}
                        }
                    }
                    plain.replace("&amp;", "&")
                })
                .collect()
        })
        .collect()
}

/// `--compare --report`: the page comparing the two runs of testdata/compare (worked out
/// by hand in tests/compare.rs: p1 on n2 under A and n1 under B, p3 bound under A only),
/// and each run's own report beside it, reached by the page's links.
#[test]
fn the_comparison_page_renders_and_links_to_each_runs_report() {
    let Some(browser) = browser_or_note("the comparison page") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let out = gantry_within(
        &[
            "simulate",
            "--cluster",
            "testdata/compare/cluster.yaml",
            "--pods",
            "testdata/compare/pods.yaml",
            "--compare",
            "testdata/compare/most-allocated.yaml",
            "--json",
            "--report",
            report.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json = std::fs::read_to_string(report.join("compare.json")).unwrap();
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let written: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        written["differences"], printed["differences"],
        "compare.json is what --json prints"
    );
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    assert!(html.contains("scoringStrategy"), "B's file is shown");

    let profile = dir.path().join("profile");
    let dump = |page: &Path, fragment: &str| {
        let url = format!("file://{}{fragment}", page.display());
        let out = chromium(&browser, &profile, &["--dump-dom", &url]);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let dom = dump(&report.join("index.html"), "");
    let figures = table_rows(&dom, "figure-table");
    let row = |what: &str| -> Vec<String> {
        let row = figures
            .iter()
            .find(|r| r.last().map(String::as_str) == Some(what))
            .unwrap_or_else(|| panic!("no row {what}: {figures:?}"));
        row[..3].to_vec()
    };
    assert_eq!(row("scheduled"), ["3", "2", "−1"]);
    assert_eq!(row("pending at the end"), ["0", "1", "+1"]);
    // 11 of 12 cpus under A, 7 of 12 under B.
    assert_eq!(
        row("cpu requested, at the end"),
        ["91.7%", "58.3%", "−33.3 pp"]
    );
    assert_eq!(
        table_rows(&dom, "other-node"),
        [[
            "default/p1",
            "n2",
            "n1",
            "scored lower: 454 against 463",
            "scored lower: 377 against 381",
            "A · B"
        ]]
    );
    let one_side = table_rows(&dom, "one-side-table");
    assert_eq!(one_side.len(), 1);
    assert_eq!(one_side[0][..3], ["default/p3", "A", "n1"]);
    assert!(
        one_side[0][3].contains("2 Insufficient cpu"),
        "{one_side:?}"
    );
    assert!(dom.contains("id=\"time\"") && dom.matches("<svg").count() >= 3);

    // The links open each run's report with its pod table filtered to the pod.
    assert!(html.contains("href=\"b/index.html#q=default%2Fp3\""));
    let b_dom = dump(&report.join("b/index.html"), "#q=default%2Fp3");
    assert_eq!(pod_table(&b_dom).0, 1);
    assert!(
        b_dom.contains("Insufficient cpu"),
        "B's row says why p3 waits"
    );
    let a_dom = dump(&report.join("a/index.html"), "#q=default%2Fp1");
    assert_eq!(pod_table(&a_dom), (1, "1 pod".to_string()));
    assert!(a_dom.contains("<td>n2</td>"), "A put p1 on n2");

    let page = format!("file://{}", report.join("index.html").display());
    assert_draws(&browser, &profile, &page, &dir.path().join("compare.png"));
}
