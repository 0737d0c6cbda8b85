//! `--report DIR`: the summary, the placements and four plots (SVG), with an index.html
//! that shows them together.

use std::path::Path;

use anyhow::Context;
use gantry_sim::{Simulation, Summary};
use plotters::prelude::*;

/// Points of one line in a plot.
type Series = Vec<(f64, f64)>;

pub fn write(dir: &Path, name: &str, summary: &Summary, sim: &Simulation) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(summary)?,
    )?;
    let mut placements = String::new();
    for p in sim.placements() {
        placements.push_str(&serde_json::to_string(p)?);
        placements.push('\n');
    }
    std::fs::write(dir.join("placements.jsonl"), placements)?;

    let throughput: Vec<(f64, f64)> = sim
        .samples
        .iter()
        .map(|s| (s.wall_s, s.scheduled as f64))
        .collect();
    line_plot(
        &dir.join("throughput.svg"),
        "Pods bound over wall-clock time",
        "wall time (s)",
        "pods bound",
        &[("bound", &throughput)],
    )?;
    let pending: Vec<(f64, f64)> = sim
        .samples
        .iter()
        .map(|s| (s.virtual_s, s.pending as f64))
        .collect();
    line_plot(
        &dir.join("pending.svg"),
        "Pending pods over cluster time",
        "cluster time (s)",
        "pods pending",
        &[("pending", &pending)],
    )?;
    latency_plot(&dir.join("latency.svg"), sim.latencies_us())?;
    let (cpu, memory) = utilisation(sim);
    line_plot(
        &dir.join("utilisation.svg"),
        "Node utilisation at the end (requests / allocatable)",
        "utilisation (%)",
        "nodes",
        &[("cpu", &cpu), ("memory", &memory)],
    )?;
    std::fs::write(dir.join("index.html"), index_html(name, summary)?)?;
    Ok(())
}

fn line_plot(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, &[(f64, f64)])],
) -> anyhow::Result<()> {
    let points = series.iter().flat_map(|(_, s)| s.iter());
    let x_max = points.clone().map(|p| p.0).fold(0.0, f64::max).max(1e-6);
    let y_max = points.map(|p| p.1).fold(0.0, f64::max).max(1.0);
    let root = SVGBackend::new(path, (800, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..y_max * 1.05)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()?;
    let colours = [BLUE, RED, GREEN];
    for (i, (label, data)) in series.iter().enumerate() {
        let colour = colours[i % colours.len()];
        chart
            .draw_series(LineSeries::new(
                data.iter().copied(),
                colour.stroke_width(2),
            ))?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    if series.len() > 1 {
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Attempts per latency bucket (doubling bucket widths from 16 µs).
fn latency_plot(path: &Path, latencies_us: &[u64]) -> anyhow::Result<()> {
    let bounds: Vec<u64> = (0..14).map(|i| 16u64 << i).collect();
    let mut counts = vec![0u64; bounds.len() + 1];
    for &l in latencies_us {
        counts[bounds.partition_point(|b| *b < l)] += 1;
    }
    let root = SVGBackend::new(path, (800, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let y_max = counts.iter().copied().max().unwrap_or(1).max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption("Scheduling attempt latency", ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (0u32..counts.len() as u32).into_segmented(),
            0u64..y_max + y_max / 20 + 1,
        )?;
    chart
        .configure_mesh()
        .x_desc("attempt duration (µs, upper bound)")
        .y_desc("attempts")
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => bounds
                .get(*i as usize)
                .map_or("more".into(), |b| b.to_string()),
            _ => String::new(),
        })
        .draw()?;
    chart.draw_series(
        Histogram::vertical(&chart)
            .style(BLUE.filled())
            .data(counts.iter().enumerate().map(|(i, c)| (i as u32, *c))),
    )?;
    root.present()?;
    Ok(())
}

/// Nodes per 10% utilisation bucket, for cpu and memory.
fn utilisation(sim: &Simulation) -> (Series, Series) {
    let mut cpu = [0u32; 11];
    let mut memory = [0u32; 11];
    for (node, requested, _) in sim.api.usage() {
        let bucket = |used: i64, total: i64| {
            if total <= 0 {
                0
            } else {
                ((used as f64 / total as f64 * 10.0).floor() as usize).min(10)
            }
        };
        cpu[bucket(requested.milli_cpu, node.allocatable.milli_cpu)] += 1;
        memory[bucket(requested.memory, node.allocatable.memory)] += 1;
    }
    let series = |counts: [u32; 11]| {
        counts
            .iter()
            .enumerate()
            .map(|(i, c)| (i as f64 * 10.0, f64::from(*c)))
            .collect()
    };
    (series(cpu), series(memory))
}

fn index_html(name: &str, summary: &Summary) -> anyhow::Result<String> {
    let json: serde_json::Value = serde_json::to_value(summary)?;
    let rows: String = json
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("<tr><th>{k}</th><td>{v}</td></tr>"))
        .collect();
    let title = html_escape(name);
    Ok(format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>gantry simulate: {title}</title>\
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}th,td{{padding:2px 10px;text-align:left;border-bottom:1px solid #ddd}}img{{max-width:48%;margin:1%}}</style></head>\
<body><h1>gantry simulate: {title}</h1><table>{rows}</table>\
<p><a href=\"summary.json\">summary.json</a> · <a href=\"placements.jsonl\">placements.jsonl</a></p>\
<img src=\"throughput.svg\" alt=\"throughput\"><img src=\"latency.svg\" alt=\"latency\">\
<img src=\"pending.svg\" alt=\"pending pods\"><img src=\"utilisation.svg\" alt=\"utilisation\"></body></html>\n"
    ))
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
