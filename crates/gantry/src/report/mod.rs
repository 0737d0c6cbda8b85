//! `--report DIR`: `index.html`, a page a person reads (self-contained: plots inline, no
//! network), and beside it `summary.json`, `placements.jsonl` and the plots as SVG files;
//! with `--compare`, the page comparing two runs, each run's own report beside it.

pub mod compare_page;
mod devices;
mod page;
mod plots;
mod pod_groups;
mod tables;

use std::path::Path;

use anyhow::Context;
use gantry_framework::Profile;
use gantry_sim::scenario::Mark;
use gantry_sim::{GpuReport, Simulation, Summary};

use plots::{BarPlot, LinePlot, Series, YAxis};
pub use tables::pending_reasons;

/// What the run was given, for the page's first section.
pub struct RunInfo {
    pub name: String,
    /// Input files, as (flag, paths).
    pub inputs: Vec<(String, String)>,
    /// Options and scheduler profiles, as (setting, value).
    pub settings: Vec<(String, String)>,
    /// The release the run decided as.
    pub release: gantry_api::Release,
    /// The scenario's events, marked on the plots over cluster time.
    pub timeline: Vec<Mark>,
    pub nodes_at_start: usize,
}

/// Each profile's plugins, as the report lists them: Filter, Score (with weights), and
/// the rest.
pub fn describe_profiles(profiles: &[Profile]) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    for p in profiles {
        let name = p.scheduler_name;
        let filters: Vec<&str> = p.filter.iter().map(|f| f.name()).collect();
        let scores: Vec<String> = p
            .score
            .iter()
            .map(|s| format!("{} ×{}", s.plugin.name(), s.weight))
            .collect();
        let percentage = p
            .percentage_of_nodes_to_score
            .map_or("adaptive".to_string(), |v| format!("{v}%"));
        rows.push((format!("{name}: Filter"), filters.join(", ")));
        rows.push((format!("{name}: Score"), scores.join(", ")));
        rows.push((
            format!("{name}: other"),
            format!(
                "preemption {}, percentageOfNodesToScore {percentage}",
                if p.preemption { "on" } else { "off" }
            ),
        ));
    }
    rows
}

pub fn write(
    dir: &Path,
    info: &RunInfo,
    summary: &Summary,
    sim: &Simulation,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let file = |name: &str| dir.join(name);
    let devices = devices::device_rows(sim.cache());
    let mut summary_json =
        crate::output::with_release(serde_json::to_value(summary)?, info.release);
    if !devices.is_empty() {
        summary_json["devices"] = serde_json::to_value(&devices)?;
    }
    write_file(
        &file("summary.json"),
        serde_json::to_string_pretty(&summary_json)?,
    )?;
    let mut placements = String::new();
    for p in sim.placements() {
        placements.push_str(&serde_json::to_string(p)?);
        placements.push('\n');
    }
    write_file(&file("placements.jsonl"), placements)?;

    let (x_unit, unit_name) = time_unit(summary.virtual_s);
    let x_desc = format!("cluster time ({unit_name})");
    let over_time = |f: &dyn Fn(&gantry_sim::Sample) -> f64| -> Series {
        sim.samples
            .iter()
            .map(|s| (s.virtual_s / x_unit, f(s)))
            .collect()
    };
    LinePlot {
        title: "Pods bound and pending over cluster time",
        x_desc: &x_desc,
        y_desc: "pods",
        y_axis: YAxis::Count,
        series: &[
            (
                "bound (all binds so far)",
                over_time(&|s| s.scheduled as f64),
            ),
            ("pending (in the queue)", over_time(&|s| s.pending as f64)),
        ],
        marks: &info.timeline,
        x_unit,
    }
    .draw(&file("pods.svg"))?;
    LinePlot {
        title: "Requests over allocatable, all nodes, over cluster time",
        x_desc: &x_desc,
        y_desc: "requested / allocatable",
        y_axis: YAxis::Percent,
        series: &[
            ("cpu", over_time(&|s| s.cpu_utilisation * 100.0)),
            ("memory", over_time(&|s| s.memory_utilisation * 100.0)),
        ],
        marks: &info.timeline,
        x_unit,
    }
    .draw(&file("utilisation.svg"))?;
    let stranded: Series = (sim.samples.iter())
        .filter_map(|s| Some((s.virtual_s / x_unit, s.gpu_memory_stranded? * 100.0)))
        .collect();
    let drew_stranded = !stranded.is_empty();
    if drew_stranded {
        LinePlot {
            title: "GPU memory stranded: free memory on cards in use, of all free",
            x_desc: &x_desc,
            y_desc: "stranded / free GPU memory",
            y_axis: YAxis::Percent,
            series: &[("HAMi-registered cards", stranded)],
            marks: &info.timeline,
            x_unit,
        }
        .draw(&file("gpu-stranded.svg"))?;
    }
    let throughput: Series = sim
        .samples
        .iter()
        .map(|s| (s.wall_s, s.scheduled as f64))
        .collect();
    LinePlot {
        title: "Pods bound over wall-clock time (the scheduler's speed)",
        x_desc: "wall-clock time (s)",
        y_desc: "pods bound",
        y_axis: YAxis::Count,
        series: &[("bound", throughput)],
        marks: &[],
        x_unit: 1.0,
    }
    .draw(&file("throughput.svg"))?;
    let (buckets, cpu, memory) = utilisation_buckets(sim);
    BarPlot {
        title: "Nodes by requests over allocatable, at the end",
        x_desc: "requested / allocatable",
        y_desc: "nodes",
        categories: &buckets,
        series: &[("cpu", cpu), ("memory", memory)],
    }
    .draw(&file("nodes.svg"))?;
    let (buckets, attempts) = latency_buckets(sim.latencies_us());
    BarPlot {
        title: "Scheduling attempts by duration (wall clock)",
        x_desc: "attempt duration, up to (µs)",
        y_desc: "attempts",
        categories: &buckets,
        series: &[("attempts", attempts)],
    }
    .draw(&file("latency.svg"))?;
    let gpus = GpuReport::of(sim.cache());
    if !gpus.cards.is_empty() {
        let (buckets, [shares, memory, cores]) = gpu_buckets(&gpus);
        BarPlot {
            title: "GPU cards by use, at the end (HAMi-registered cards)",
            x_desc: "used / what the card offers",
            y_desc: "cards",
            categories: &buckets,
            series: &[("shares", shares), ("memory", memory), ("cores", cores)],
        }
        .draw(&file("gpu-utilisation.svg"))?;
    }

    let svg = |name: &str| -> anyhow::Result<String> {
        std::fs::read_to_string(file(name)).with_context(|| format!("cannot read back {name}"))
    };
    let plots = page::Plots {
        pods: svg("pods.svg")?,
        utilisation: svg("utilisation.svg")?,
        gpu_stranded: if drew_stranded {
            Some(svg("gpu-stranded.svg")?)
        } else {
            None
        },
        nodes: svg("nodes.svg")?,
        latency: svg("latency.svg")?,
        throughput: svg("throughput.svg")?,
        gpus: if gpus.cards.is_empty() {
            None
        } else {
            Some(svg("gpu-utilisation.svg")?)
        },
    };
    let html = page::render(info, summary, sim, &devices, &plots, (x_unit, unit_name))?;
    write_file(&file("index.html"), html)
}

fn write_file(path: &Path, text: String) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The unit the time axes count in: seconds up to five minutes, minutes up to three
/// hours, then hours.
fn time_unit(span_s: f64) -> (f64, &'static str) {
    if span_s <= 300.0 {
        (1.0, "s")
    } else if span_s <= 3.0 * 3600.0 {
        (60.0, "min")
    } else {
        (3600.0, "h")
    }
}

/// Nodes per 10% bucket of requests over allocatable, for cpu and memory; "over" holds
/// over-committed nodes.
fn utilisation_buckets(sim: &Simulation) -> (Vec<String>, Vec<u64>, Vec<u64>) {
    let mut cpu = vec![0u64; 11];
    let mut memory = vec![0u64; 11];
    let bucket = |used: i64, total: i64| {
        if total <= 0 || used > total {
            return if used > 0 { 10 } else { 0 };
        }
        ((used * 10 / total) as usize).min(9)
    };
    for (node, requested, _) in sim.api.usage() {
        cpu[bucket(requested.milli_cpu, node.allocatable.milli_cpu)] += 1;
        memory[bucket(requested.memory, node.allocatable.memory)] += 1;
    }
    let mut labels: Vec<String> = (0..10)
        .map(|i| format!("{}–{}%", i * 10, i * 10 + 10))
        .collect();
    labels.push("over".into());
    (labels, cpu, memory)
}

/// Cards per 10% bucket of shares, memory and compute in use; "over" holds over-committed
/// cards.
fn gpu_buckets(gpus: &GpuReport) -> (Vec<String>, [Vec<u64>; 3]) {
    let mut counts = [vec![0u64; 11], vec![0u64; 11], vec![0u64; 11]];
    for card in &gpus.cards {
        for (i, fraction) in [card.shares, card.memory, card.cores]
            .into_iter()
            .enumerate()
        {
            let bucket = if fraction > 1.0 {
                10
            } else {
                ((fraction * 10.0) as usize).min(9)
            };
            counts[i][bucket] += 1;
        }
    }
    let mut labels: Vec<String> = (0..10)
        .map(|i| format!("{}–{}%", i * 10, i * 10 + 10))
        .collect();
    labels.push("over".into());
    (labels, counts)
}

/// Attempts per duration bucket, doubling from 16 µs.
fn latency_buckets(latencies_us: &[u64]) -> (Vec<String>, Vec<u64>) {
    let bounds: Vec<u64> = (0..14).map(|i| 16u64 << i).collect();
    let mut counts = vec![0u64; bounds.len() + 1];
    for &l in latencies_us {
        counts[bounds.partition_point(|b| *b < l)] += 1;
    }
    let mut labels: Vec<String> = bounds.iter().map(|b| plots::thousands(*b as i64)).collect();
    labels.push("more".into());
    (labels, counts)
}
