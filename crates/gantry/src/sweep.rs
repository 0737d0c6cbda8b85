//! `gantry sweep`: the FGD artifact's experiments (six policies × traces × seeds) on
//! Gantry's implementation, written as the published curve files, in shards if asked,
//! and merged back byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use gantry_framework::plugins::openb::Policy;
use gantry_sweep::output::{self, Kind, MAX_RESULT_BYTES, Results};
use gantry_sweep::trace::MAX_TRACE_BYTES;
use gantry_sweep::{Sweep, report, trace};

use crate::load::read_limited;

/// The most worker threads `--jobs` may ask for (each is a thread of its own, started
/// before anything runs).
const MAX_JOBS: u64 = 256;

#[derive(Args)]
pub struct SweepArgs {
    /// Node CSV (`sn,cpu_milli,memory_mib,gpu,model`); the published runs use
    /// openb_node_list_gpu_node.csv.
    #[arg(long, required_unless_present = "merge")]
    nodes: Option<PathBuf>,
    /// Pod CSVs (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...`); the file
    /// stem is the `workload` column, under as many parent folders as tell alike stems
    /// apart (`x/trace`, `y/trace`).
    #[arg(long, num_args = 1.., required_unless_present = "merge")]
    pods: Vec<PathBuf>,
    /// Policies: Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD (default: all).
    #[arg(long, num_args = 1..)]
    policy: Vec<String>,
    /// Seeds, `A-B` inclusive or one number.
    #[arg(long, default_value = "42-51")]
    seeds: String,
    /// Workload tuning ratio: tasks are removed or copied until this many times the
    /// cluster's GPUs are requested.
    #[arg(long, default_value_t = 1.3)]
    inflation: f64,
    /// Output directory: allocation.csv, analysis_frag_discrete.csv,
    /// analysis_frag_ratio_discrete.csv, report.html.
    #[arg(long)]
    out: PathBuf,
    /// Run only experiment I, I+N, I+2N, ... of the sweep's canonical order (0-based);
    /// the index defaults to $JOB_COMPLETION_INDEX when given as `-/N`.
    #[arg(long, allow_hyphen_values = true)]
    shard: Option<String>,
    /// Join the result directories of shards into --out instead of running.
    #[arg(long, num_args = 1.., conflicts_with_all = ["nodes", "pods", "shard"])]
    merge: Vec<PathBuf>,
    /// A published analysis_allo_discrete.csv: report the largest deviation of each
    /// policy's mean curve from it (deviation.csv, and on stderr).
    #[arg(long)]
    compare: Option<PathBuf>,
    /// Write the first pod trace, as the first seed orders and tunes it, and the nodes as
    /// Kubernetes YAML (HAMi cards) for `gantry simulate --cluster`, instead of sweeping.
    #[arg(long)]
    manifests: Option<PathBuf>,
    /// Worker threads, 1 to 256 (default: all cores).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_JOBS))]
    jobs: Option<u64>,
}

fn seeds(s: &str) -> Result<Vec<u64>> {
    let bad = || format!("--seeds {s:?}: expected A-B or a number");
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (a.trim().parse::<u64>(), b.trim().parse::<u64>()),
        None => (s.trim().parse(), s.trim().parse()),
    };
    let (a, b) = (a.with_context(bad)?, b.with_context(bad)?);
    if a > b || b - a >= 100_000 {
        bail!("--seeds {s:?}: A must not be above B, and at most 100000 seeds");
    }
    Ok((a..=b).collect())
}

fn shard(s: &str) -> Result<(usize, usize)> {
    let bad = || format!("--shard {s:?}: expected I/N with 0 <= I < N");
    let (i, n) = s.split_once('/').with_context(bad)?;
    let n: usize = n.trim().parse().with_context(bad)?;
    let i: usize = if i.trim() == "-" {
        let index = std::env::var("JOB_COMPLETION_INDEX")
            .with_context(|| format!("--shard {s:?}: JOB_COMPLETION_INDEX is not set"))?;
        match index.trim().parse() {
            Ok(i) if i < n => i,
            _ => bail!(
                "--shard {s:?}: JOB_COMPLETION_INDEX={index:?} is not an index from 0 to {}",
                n.saturating_sub(1)
            ),
        }
    } else {
        i.trim().parse().with_context(bad)?
    };
    if n == 0 || i >= n {
        bail!(bad());
    }
    Ok((i, n))
}

/// A trace CSV, read within [`MAX_TRACE_BYTES`].
fn read_trace(path: &Path, what: &str) -> Result<String> {
    read_limited(path, MAX_TRACE_BYTES, what, "CSV")
}

/// The pod traces, each named by [`trace::workload_names`]; one file given twice is an
/// error naming both spellings.
fn read_pod_traces(paths: &[PathBuf]) -> Result<Vec<trace::PodTrace>> {
    let mut traces = Vec::new();
    let mut canonical: Vec<PathBuf> = Vec::new();
    for path in paths {
        // A pipe (`<(...)`) has no path to tell it by: its own name stands.
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        if let Some(i) = canonical.iter().position(|c| *c == real) {
            bail!(
                "--pods {}: the same file as {}, given before",
                path.display(),
                paths[i].display()
            );
        }
        let text = read_trace(path, "pod trace")?;
        traces.push(trace::parse_pods(path, &text)?);
        canonical.push(real);
    }
    let names = trace::workload_names(&canonical)?;
    for (pods, name) in traces.iter_mut().zip(names) {
        pods.stem = name;
    }
    Ok(traces)
}

/// A part of `--merge`: its three files, each read within [`MAX_RESULT_BYTES`].
fn read_part(dir: &Path) -> Result<[(PathBuf, String); 3]> {
    let read = |kind: Kind| -> Result<(PathBuf, String)> {
        let path = dir.join(kind.file());
        let text =
            read_limited(&path, MAX_RESULT_BYTES, "sweep result file", "CSV").context("--merge")?;
        Ok((path, text))
    };
    Ok([
        read(Kind::Allocation)?,
        read(Kind::FragAmount)?,
        read(Kind::FragRatio)?,
    ])
}

type Curves = BTreeMap<(String, String), Vec<f64>>;

/// The published mean curves of `--compare FILE` (an allocation file's layout), refused
/// when the file holds none.
fn read_published(path: &Path) -> Result<Curves> {
    let text = read_limited(path, MAX_RESULT_BYTES, "curve file", "CSV").context("--compare")?;
    let curves = output::means_of(text.lines().skip(1), true);
    if curves.is_empty() {
        bail!(
            "--compare {}: no curve in it (rows of `workload,sc_policy,tune,seed,total_gpus,0,...,130` after a header line)",
            path.display()
        );
    }
    Ok(curves)
}

/// Refuses a `--compare` file none of whose curves is of a (workload, policy) swept.
fn check_comparable<'a>(
    path: &Path,
    published: &Curves,
    ours: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<()> {
    let ours: Vec<(&str, &str)> = ours.collect();
    if ours.is_empty()
        || ours
            .iter()
            .any(|(w, p)| published.contains_key(&(w.to_string(), p.to_string())))
    {
        return Ok(());
    }
    let list = |names: Vec<&str>| {
        let mut names = names;
        names.sort_unstable();
        names.dedup();
        let more = names.len().saturating_sub(5);
        let mut s = names.into_iter().take(5).collect::<Vec<_>>().join(", ");
        if more > 0 {
            s.push_str(&format!(" and {more} more"));
        }
        s
    };
    bail!(
        "--compare {}: none of its curves is of a workload and policy swept here (its workloads: {}; swept: {})",
        path.display(),
        list(published.keys().map(|(w, _)| w.as_str()).collect()),
        list(ours.iter().map(|(w, _)| *w).collect())
    )
}

pub fn run(args: SweepArgs) -> Result<()> {
    if let Some(j) = args.jobs {
        rayon::ThreadPoolBuilder::new()
            .num_threads(j as usize)
            .build_global()
            .context("--jobs")?;
    }
    let started = std::time::Instant::now();
    let published = args.compare.as_deref().map(read_published).transpose()?;
    let results = if !args.merge.is_empty() {
        let mut all = Results::default();
        for dir in &args.merge {
            all.add_part(&read_part(dir)?)?;
        }
        if all.rows.values().all(|r| r.is_empty()) {
            bail!("--merge: the parts hold no experiment");
        }
        if let (Some(path), Some(published)) = (&args.compare, &published) {
            let ours = all.means(Kind::Allocation);
            check_comparable(
                path,
                published,
                ours.keys().map(|(w, p)| (w.as_str(), p.as_str())),
            )?;
        }
        all
    } else {
        let (Some(nodes), false) = (&args.nodes, args.pods.is_empty()) else {
            bail!("--nodes and --pods are needed unless --merge is given");
        };
        let policies = if args.policy.is_empty() {
            Policy::ALL.to_vec()
        } else {
            args.policy
                .iter()
                .map(|p| {
                    Policy::parse(p).with_context(|| {
                        format!("--policy {p:?}: not one of Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD")
                    })
                })
                .collect::<Result<Vec<_>>>()?
        };
        if !(args.inflation.is_finite() && args.inflation >= 0.0 && args.inflation <= 100.0) {
            bail!(
                "--inflation {}: expected a ratio from 0 to 100",
                args.inflation
            );
        }
        let seeds = seeds(&args.seeds)?;
        let shard = args.shard.as_deref().map(shard).transpose()?;
        let nodes = trace::parse_nodes(nodes, &read_trace(nodes, "node trace")?)?;
        let pods = read_pod_traces(&args.pods)?;
        let mut sweep = Sweep::new(&nodes, &pods, policies, seeds, args.inflation)?;
        if let Some(path) = &args.manifests {
            let w = &sweep.workloads[0];
            let (order, _) = w.arrivals(sweep.seeds[0], sweep.inflation)?;
            let (n, p) = w.trace();
            std::fs::write(path, gantry_sweep::manifests::yaml(n, p, &order))
                .with_context(|| path.display().to_string())?;
            println!(
                "gantry sweep: {} nodes and {} pods in {}",
                n.len(),
                order.len(),
                path.display()
            );
            return Ok(());
        }
        sweep.shard = shard;
        let plan = sweep.plan();
        if let (Some(path), Some(published)) = (&args.compare, &published) {
            check_comparable(
                path,
                published,
                plan.iter().map(|p| (p.key.0.as_str(), p.key.1.as_str())),
            )?;
        }
        let bar = indicatif::ProgressBar::new(plan.len() as u64).with_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} experiments, {elapsed} ({eta} left)",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let results = sweep.run(&|done, _| bar.set_position(done as u64));
        bar.finish_and_clear();
        results?
    };
    results.write(&args.out)?;
    let mut devs = Vec::new();
    if let Some(published) = &published {
        devs = output::deviations(&results.means(Kind::Allocation), published);
        let mut csv = String::from("workload,sc_policy,max_abs_pp,at,ours,published\n");
        for d in &devs {
            csv.push_str(&format!(
                "{},{},{:.2},{},{:.2},{:.2}\n",
                d.workload, d.policy, d.max_abs, d.at, d.ours_at, d.published_at
            ));
        }
        let path = args.out.join("deviation.csv");
        std::fs::write(&path, &csv).with_context(|| path.display().to_string())?;
        eprint!("{csv}");
    }
    let path = args.out.join("report.html");
    std::fs::write(&path, report::html(&results, &devs))
        .with_context(|| path.display().to_string())?;
    let rows = results.rows.get(&Kind::Allocation).map_or(0, |r| r.len());
    println!(
        "gantry sweep: {rows} experiments in {}",
        args.out.join(Kind::Allocation.file()).display()
    );
    if args.merge.is_empty() && rows > 0 {
        // The published simulator takes about 10 minutes per experiment on 2 vCPUs.
        let wall = started.elapsed().as_secs_f64();
        println!(
            "  took {wall:.2} s wall on {} threads, {:.3} s per experiment",
            rayon::current_num_threads(),
            wall / rows as f64
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_and_shard_arguments() {
        assert_eq!(seeds("42-44").unwrap(), vec![42, 43, 44]);
        assert_eq!(seeds("7").unwrap(), vec![7]);
        assert!(seeds("5-3").is_err());
        assert!(seeds("x").is_err());
        assert_eq!(shard("1/3").unwrap(), (1, 3));
        assert!(shard("3/3").is_err());
        assert!(shard("1").is_err());
    }
}
