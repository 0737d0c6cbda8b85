//! `gantry sweep`: shards run as separate processes and merged give the single run's files
//! byte for byte; the same input and seeds give the same bytes; bad input is one line.

mod common;

use std::path::Path;

use common::{command, repo_root, stderr};

fn sweep(extra: &[&str], out: &Path) -> std::process::Output {
    let root = repo_root();
    let nodes = root.join("testdata/openb/tiny_nodes.csv");
    let pods = root.join("testdata/openb/tiny_pods.csv");
    let mut args = vec![
        "sweep",
        "--nodes",
        nodes.to_str().unwrap(),
        "--pods",
        pods.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    if !extra.contains(&"--seeds") {
        args.extend_from_slice(&["--seeds", "1-3"]);
    }
    args.extend_from_slice(extra);
    command(&args).output().expect("the binary runs")
}

const FILES: [&str; 4] = [
    "allocation.csv",
    "analysis_frag_discrete.csv",
    "analysis_frag_ratio_discrete.csv",
    "report.html",
];

fn read(dir: &Path, f: &str) -> Vec<u8> {
    std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()))
}

#[test]
fn shards_merged_equal_one_run_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    let out = sweep(&[], &whole);
    assert!(out.status.success(), "{}", stderr(&out));
    let alloc = String::from_utf8(read(&whole, "allocation.csv")).unwrap();
    assert_eq!(
        alloc.lines().count(),
        1 + 6 * 3,
        "a header and 18 experiments"
    );
    assert!(alloc.starts_with("workload,sc_policy,tune,seed,total_gpus,0,1,2,"));
    assert!(alloc.contains("\ntiny_pods,06-FGD,1.3,3,14,"), "{alloc}");

    // Three shards, separate processes, one of them through JOB_COMPLETION_INDEX.
    let mut parts = Vec::new();
    for i in 0..3 {
        let dir = tmp.path().join(format!("part{i}"));
        let out = if i == 2 {
            let root = repo_root();
            command(&[
                "sweep",
                "--nodes",
                root.join("testdata/openb/tiny_nodes.csv").to_str().unwrap(),
                "--pods",
                root.join("testdata/openb/tiny_pods.csv").to_str().unwrap(),
                "--seeds",
                "1-3",
                "--shard",
                "-/3",
                "--out",
                dir.to_str().unwrap(),
            ])
            .env("JOB_COMPLETION_INDEX", "2")
            .output()
            .unwrap()
        } else {
            sweep(&["--shard", &format!("{i}/3")], &dir)
        };
        assert!(out.status.success(), "{}", stderr(&out));
        let rows = String::from_utf8(read(&dir, "allocation.csv"))
            .unwrap()
            .lines()
            .count();
        assert_eq!(rows, 1 + 6, "shard {i} holds every third experiment");
        parts.push(dir);
    }
    let merged = tmp.path().join("merged");
    let mut args = vec!["sweep", "--out", merged.to_str().unwrap(), "--merge"];
    // Out of order on purpose: the merge sorts.
    for p in parts.iter().rev() {
        args.push(p.to_str().unwrap());
    }
    let out = command(&args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for f in FILES {
        assert!(
            read(&whole, f) == read(&merged, f),
            "{f} differs after the merge"
        );
    }

    // Merging a part twice is refused, naming the file.
    let p0 = parts[0].to_str().unwrap();
    let again = tmp.path().join("again");
    let out = command(&["sweep", "--out", again.to_str().unwrap(), "--merge", p0, p0])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("allocation.csv:2: experiment tiny_pods"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn same_input_and_seeds_give_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    assert!(sweep(&["--jobs", "1"], &a).status.success());
    assert!(sweep(&[], &b).status.success());
    for f in FILES {
        assert!(read(&a, f) == read(&b, f), "{f} differs between runs");
    }
    // Another seed range gives other curves for Random at least.
    let c = tmp.path().join("c");
    assert!(
        sweep(&["--policy", "Random", "--seeds", "7"], &c)
            .status
            .success()
    );
    let text = String::from_utf8(read(&c, "allocation.csv")).unwrap();
    assert_eq!(text.lines().count(), 2);
}

#[test]
fn bad_input_is_one_line_naming_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let pods = tmp.path().join("bad.csv");
    std::fs::write(
        &pods,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,1,500\np1,1000,10,two,500\n",
    )
    .unwrap();
    let nodes = repo_root().join("testdata/openb/tiny_nodes.csv");
    let out_dir = tmp.path().join("out");
    let out = command(&[
        "sweep",
        "--nodes",
        nodes.to_str().unwrap(),
        "--pods",
        pods.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("bad.csv:3: field `num_gpu`: expected a number, found \"two\""),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for (args, want) in [
        (vec!["--policy", "Tetris"], "--policy \"Tetris\""),
        (vec!["--seeds", "9-1"], "--seeds \"9-1\""),
        (vec!["--shard", "3/3"], "--shard \"3/3\""),
    ] {
        let out = sweep(&args, &out_dir);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains(want), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

#[test]
fn the_six_policies_run_in_simulate_on_an_exported_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = tmp.path().join("tiny.yaml");
    let out = sweep(
        &["--seeds", "1", "--manifests", cluster.to_str().unwrap()],
        &tmp.path().join("x"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let base = std::fs::read_to_string(repo_root().join("testdata/openb/fgd-config.yaml")).unwrap();
    let mut placements = Vec::new();
    for name in [
        "RandomScore",
        "DotProductScore",
        "GpuClusteringScore",
        "GpuPackingScore",
        "BestFitScore",
        "FGDScore",
    ] {
        let config = tmp.path().join(format!("{name}.yaml"));
        std::fs::write(&config, base.replace("FGDScore", name)).unwrap();
        let placed = tmp.path().join(format!("{name}.jsonl"));
        let out = command(&[
            "simulate",
            "--cluster",
            cluster.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--sequential",
            "--placements",
            placed.to_str().unwrap(),
        ])
        .output()
        .unwrap();
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let text = std::fs::read_to_string(&placed).unwrap();
        assert_eq!(text.lines().count(), 46, "{name}");
        assert!(
            text.contains("hami.io/vgpu-devices-allocated"),
            "{name}: cards given"
        );
        placements.push(text);
    }
    // The policies decide: not all six place every pod alike.
    assert!(placements.iter().any(|p| p != &placements[0]));

    // FGDScore's typical pods are checked, the field named.
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(
        &bad,
        format!(
            "{base}  - name: FGDScore\n    args: {{typicalPods: [{{cpuMilli: 1000, gpuMilli: 500, gpuCount: 1, frequency: 2}}]}}\n"
        ),
    )
    .unwrap();
    let out = command(&[
        "simulate",
        "--cluster",
        cluster.to_str().unwrap(),
        "--config",
        bad.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("typicalPods") && err.contains("frequency must be 0 to 1"),
        "{err}"
    );
}
