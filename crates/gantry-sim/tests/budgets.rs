//! Budgets per measured pod for `gantry bench`'s scheduling workloads, for DRA at scale
//! (`dra-at-scale`: `bench dra --nodes 1000`) and for gangs (`gang`), checked on every CI
//! run: heap allocations and the bytes they ask for (counted by the allocator, exact and
//! repeatable, at the workloads' full size) and instructions (counted by valgrind's
//! callgrind over the measured part only, at a reduced size). A workload over a budget by
//! more than [`TOLERANCE`] fails with the figures; a change that needs more raises the
//! budget in `budgets.json` in the same commit and says why in its message.
//!
//! Release builds only (`cargo test --release -p gantry-sim --test budgets`, as `.ci/run`
//! runs it): a debug build's counts are not the ones budgeted.

use std::path::Path;
use std::process::Command;

use gantry_sim::alloc_counter::{self, CountingAllocator};
use gantry_sim::bench::{BenchOptions, Workload, run};
use gantry_sim::dra_bench::run_dra;
use gantry_sim::gang_bench::run_gang;
use serde::Deserialize;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// How far over its budget a figure may go (allocation counts move by a few hundredths
/// with rayon's scheduling; instruction counts with the hash seeds).
const TOLERANCE: f64 = 0.02;

/// The environment variable that makes [`callgrind_target`] run one workload.
const WORKLOAD_VAR: &str = "GANTRY_BUDGET_WORKLOAD";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Budgets {
    /// Every count of `--scale-down` the instruction counts are taken at.
    instructions_scale_down: usize,
    workloads: Vec<Budget>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Budget {
    workload: String,
    allocations_per_pod: f64,
    bytes_per_pod: f64,
    instructions_per_pod: f64,
}

fn budgets() -> Budgets {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/budgets.json");
    let text = std::fs::read_to_string(&path).expect("tests/budgets.json reads");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `bench dra --nodes` at this size is budgeted as `dra-at-scale` (the instruction count
/// divides it by `instructions_scale_down`).
const DRA_AT_SCALE: &str = "dra-at-scale";
const DRA_AT_SCALE_NODES: usize = 1_000;

/// What a budget measures: a scheduling workload, DRA at scale, or gangs.
#[derive(Clone, Copy)]
enum Subject {
    Scheduling(Workload),
    DraAtScale,
    Gang,
}

fn subject(name: &str) -> Subject {
    match name {
        DRA_AT_SCALE => return Subject::DraAtScale,
        "gang" => return Subject::Gang,
        _ => {}
    }
    Subject::Scheduling(
        Workload::parse(name).unwrap_or_else(|| panic!("budgets.json: no workload {name:?}")),
    )
}

impl Subject {
    /// Whether callgrind counts the whole run rather than `bench::run_measured`: DRA's CEL
    /// selectors are evaluated on a stack `stacker` switches to, and callgrind's call
    /// tree loses track of the toggled frame there (it credited the init phase's
    /// evaluations to the measured one), so DRA's budget counts everything the child does
    /// (set-up, both phases), divided by the measured pods: repeatable, if wider.
    fn counts_whole_run(self) -> bool {
        matches!(self, Subject::DraAtScale)
    }
}

/// Allocations and bytes per measured pod, and the measured pods.
struct Counted {
    allocations: f64,
    bytes: f64,
    measured_pods: usize,
}

/// `Some(why)` when `measured` exceeds `budget` by more than the tolerance.
fn over(what: &str, workload: &str, measured: f64, budget: f64) -> Option<String> {
    (measured > budget * (1.0 + TOLERANCE)).then(|| {
        format!(
            "{workload}: {measured:.2} {what} per pod, budget {budget:.2} (+{:.1}%, more than {:.0}%)",
            (measured / budget - 1.0) * 100.0,
            TOLERANCE * 100.0
        )
    })
}

fn counted(subject: Subject, scale_down: usize) -> Counted {
    let options = BenchOptions {
        scale_down,
        allocations: Some(alloc_counter::allocations),
        bytes_allocated: Some(alloc_counter::bytes_allocated),
        ..BenchOptions::default()
    };
    match subject {
        Subject::Scheduling(workload) => {
            let r = run(workload, &options).expect("the workload runs");
            Counted {
                allocations: r.allocs_per_pod.expect("counted"),
                bytes: r.bytes_allocated_per_pod.expect("counted"),
                measured_pods: r.measured_pods,
            }
        }
        Subject::Gang => {
            let r = run_gang(&options).expect("the workload runs");
            Counted {
                allocations: r.allocs_per_pod.expect("counted"),
                bytes: r.bytes_allocated_per_pod.expect("counted"),
                measured_pods: r.pods,
            }
        }
        Subject::DraAtScale => {
            let options = BenchOptions {
                nodes: Some(DRA_AT_SCALE_NODES / scale_down),
                ..options
            };
            let r = run_dra(&options).expect("the workload runs");
            Counted {
                allocations: r.allocs_per_pod.expect("counted"),
                bytes: r.bytes_allocated_per_pod.expect("counted"),
                measured_pods: r.measured_pods,
            }
        }
    }
}

/// Instructions per measured pod of `workload` at `scale_down`, from callgrind counting
/// `bench::run_measured` alone (or the whole child, see [`Subject::counts_whole_run`]), in
/// a child running [`callgrind_target`].
fn instructions_per_pod(workload: &str, scale_down: usize) -> Result<f64, String> {
    let out_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out_file = out_dir.path().join("callgrind.out");
    let scope: &[&str] = if subject(workload).counts_whole_run() {
        &[]
    } else {
        &[
            "--collect-atstart=no",
            "--toggle-collect=*bench::run_measured*",
        ]
    };
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .args(scope)
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(std::env::current_exe().map_err(|e| e.to_string())?)
        .args(["--exact", "callgrind_target", "--ignored", "--nocapture"])
        .env(WORKLOAD_VAR, format!("{workload}:{scale_down}"))
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "valgrind on {workload} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let pods: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("measured pods: "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("{workload}: the child did not say how many pods: {stdout}"))?;
    let profile = std::fs::read_to_string(&out_file).map_err(|e| e.to_string())?;
    let instructions: f64 = profile
        .lines()
        .find_map(|l| {
            l.strip_prefix("totals: ")
                .or_else(|| l.strip_prefix("summary: "))
        })
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("{workload}: no totals line in callgrind's output"))?;
    if instructions == 0.0 {
        return Err(format!(
            "{workload}: callgrind counted nothing in bench::run_measured"
        ));
    }
    Ok(instructions / pods)
}

/// Run by [`instructions_per_pod`] under valgrind: one workload, on a pool of one thread
/// entered first, so that every instruction of the measured part runs on the thread that
/// entered `run_measured` (callgrind's toggle counts per thread).
#[test]
#[ignore = "run under valgrind by budgets_per_pod"]
fn callgrind_target() {
    let spec = std::env::var(WORKLOAD_VAR).expect("run by budgets_per_pod");
    let (name, scale_down) = spec.split_once(':').expect("workload:scale_down");
    let scale_down: usize = scale_down.parse().expect("a scale-down");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a thread pool");
    let result = pool.install(|| counted(subject(name), scale_down));
    println!("measured pods: {}", result.measured_pods);
}

/// Allocations and bytes at full size, then instructions at the reduced size, for every
/// budgeted workload; one test so that nothing else allocates while a workload is counted.
#[test]
fn budgets_per_pod() {
    if cfg!(debug_assertions) {
        eprintln!(
            "budgets are checked in release builds: cargo test --release -p gantry-sim --test budgets"
        );
        return;
    }
    let budgets = budgets();
    let mut failures = Vec::new();
    for budget in &budgets.workloads {
        let Counted {
            allocations, bytes, ..
        } = counted(subject(&budget.workload), 1);
        println!(
            "{}: {allocations:.3} allocations and {bytes:.0} bytes per pod (budgets {} and {})",
            budget.workload, budget.allocations_per_pod, budget.bytes_per_pod
        );
        failures.extend(over(
            "allocations",
            &budget.workload,
            allocations,
            budget.allocations_per_pod,
        ));
        failures.extend(over("bytes", &budget.workload, bytes, budget.bytes_per_pod));
    }
    let valgrind = Command::new("valgrind").arg("--version").output().is_ok();
    if valgrind {
        for budget in &budgets.workloads {
            match instructions_per_pod(&budget.workload, budgets.instructions_scale_down) {
                Ok(instructions) => {
                    println!(
                        "{}: {instructions:.0} instructions per pod at 1/{} size (budget {})",
                        budget.workload,
                        budgets.instructions_scale_down,
                        budget.instructions_per_pod
                    );
                    failures.extend(over(
                        "instructions",
                        &budget.workload,
                        instructions,
                        budget.instructions_per_pod,
                    ));
                }
                Err(why) => failures.push(why),
            }
        }
    } else if std::env::var_os("GANTRY_REQUIRE_VALGRIND").is_some() {
        failures.push("valgrind is not installed (GANTRY_REQUIRE_VALGRIND is set)".into());
    } else {
        eprintln!("valgrind is not installed: instruction budgets not checked");
    }
    assert!(
        failures.is_empty(),
        "over budget:\n  {}\nFind what was added (valgrind --tool=dhat, or callgrind, on `gantry bench <workload>`), \
         or raise the budget in crates/gantry-sim/tests/budgets.json in the same commit and say why in its message.",
        failures.join("\n  ")
    );
}

#[test]
fn a_figure_over_its_budget_by_more_than_the_tolerance_is_a_failure() {
    assert_eq!(over("allocations", "basic", 6.1, 6.0), None);
    assert_eq!(over("allocations", "basic", 6.12, 6.0), None);
    let failure = over("allocations", "basic", 7.0, 6.0).unwrap();
    assert_eq!(
        failure,
        "basic: 7.00 allocations per pod, budget 6.00 (+16.7%, more than 2%)"
    );
    // Every budgeted workload exists, and the file is read as it is written.
    let budgets = budgets();
    assert!(!budgets.workloads.is_empty());
    for budget in &budgets.workloads {
        subject(&budget.workload);
        assert!(budget.allocations_per_pod > 0.0 && budget.instructions_per_pod > 0.0);
    }
}
