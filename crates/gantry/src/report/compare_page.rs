//! `--compare B.yaml --report DIR`: `index.html`, the two runs side by side (figures with
//! B's difference to A, the two configurations, plots of both over cluster time, waits to
//! bind, and every pod placed differently with links to its row in each run's own
//! report), `compare.json` (what `--json` prints), the plots as SVG, and each run's own
//! report in `a/` and `b/`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use gantry_api::Release;
use gantry_sim::replay::Divergence;

use super::page::{self, STYLE, duration, esc, url_encode};
use super::plots::{BarPlot, LinePlot, Series, YAxis, number, thousands};
use crate::compare::{Differences, Outcome};

/// Pods listed per table of differences; `compare.json` has them all.
const MAX_ROWS: usize = 1000;

/// Subdirectories holding each run's own report.
pub const ARM_DIRS: [&str; 2] = ["a", "b"];

/// One run's scheduler configuration.
pub struct Configuration {
    /// Its profiles, as the single report lists them.
    pub profiles: Vec<(String, String)>,
    /// The file as written (its plugin arguments included), unless the defaults.
    pub text: Option<String>,
}

/// What the page compares.
pub struct ComparedRuns<'a> {
    pub title: &'a str,
    /// A's and B's.
    pub releases: [Release; 2],
    pub outcomes: &'a [Outcome; 2],
    pub differences: &'a Differences,
    /// Each run against the bindings a replayed trace recorded.
    pub divergences: Option<&'a [Divergence; 2]>,
    pub configurations: [Configuration; 2],
    /// `compare.json`.
    pub json: String,
}

pub fn write(dir: &Path, runs: &ComparedRuns) -> anyhow::Result<()> {
    let file = |name: &str| dir.join(name);
    super::write_file(&file("compare.json"), runs.json.clone())?;
    let [a, b] = runs.outcomes;
    let span = a.summary.virtual_s.max(b.summary.virtual_s);
    let (x_unit, unit_name) = super::time_unit(span);
    let x_desc = format!("cluster time ({unit_name})");
    let line = |o: &Outcome, f: &dyn Fn(&gantry_sim::Sample) -> Option<f64>| -> Series {
        o.samples
            .iter()
            .filter_map(|s| f(s).map(|v| (s.virtual_s / x_unit, v)))
            .collect()
    };
    let both = |f: &dyn Fn(&gantry_sim::Sample) -> Option<f64>| [line(a, f), line(b, f)];
    let mut svgs = Vec::new();
    let [pending_a, pending_b] = both(&|s| Some(s.pending as f64));
    let [bound_a, bound_b] = both(&|s| Some(s.scheduled as f64));
    LinePlot {
        title: "Pods bound and pending over cluster time",
        x_desc: &x_desc,
        y_desc: "pods",
        y_axis: YAxis::Count,
        series: &[
            ("A: bound", bound_a),
            ("B: bound", bound_b),
            ("A: pending", pending_a),
            ("B: pending", pending_b),
        ],
        marks: &[],
        x_unit,
    }
    .draw(&file("pods.svg"))?;
    svgs.push("pods.svg");
    let [cpu_a, cpu_b] = both(&|s| Some(s.cpu_utilisation * 100.0));
    let [memory_a, memory_b] = both(&|s| Some(s.memory_utilisation * 100.0));
    LinePlot {
        title: "Requests over allocatable, all nodes, over cluster time",
        x_desc: &x_desc,
        y_desc: "requested / allocatable",
        y_axis: YAxis::Percent,
        series: &[
            ("A: cpu", cpu_a),
            ("B: cpu", cpu_b),
            ("A: memory", memory_a),
            ("B: memory", memory_b),
        ],
        marks: &[],
        x_unit,
    }
    .draw(&file("utilisation.svg"))?;
    svgs.push("utilisation.svg");
    let [gpu_a, gpu_b] = both(&|s| s.gpu_memory_stranded.map(|v| v * 100.0));
    if !gpu_a.is_empty() || !gpu_b.is_empty() {
        LinePlot {
            title: "GPU memory stranded: free memory on cards in use, of all free",
            x_desc: &x_desc,
            y_desc: "stranded / free GPU memory",
            y_axis: YAxis::Percent,
            series: &[("A", gpu_a), ("B", gpu_b)],
            marks: &[],
            x_unit,
        }
        .draw(&file("gpu-stranded.svg"))?;
        svgs.push("gpu-stranded.svg");
    }
    let (buckets, [waits_a, waits_b]) = wait_buckets([&a.waits, &b.waits]);
    BarPlot {
        title: "Pods by wait from creation to binding (cluster time)",
        x_desc: "wait",
        y_desc: "pods",
        categories: &buckets,
        series: &[("A", waits_a), ("B", waits_b)],
    }
    .draw(&file("waits.svg"))?;
    svgs.push("waits.svg");
    let mut figures = Vec::new();
    for name in svgs {
        let svg = std::fs::read_to_string(file(name))
            .map_err(|e| anyhow::anyhow!("cannot read back {name}: {e}"))?;
        figures.push(page::figure(&svg));
    }
    super::write_file(&file("index.html"), render(runs, &figures)?)
}

fn render(runs: &ComparedRuns, figures: &[String]) -> anyhow::Result<String> {
    let mut html = String::new();
    let title = format!("gantry simulate --compare: {}", esc(runs.title));
    write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title}</title><style>{STYLE}{COMPARE_STYLE}</style></head><body>\n<header><h1>{title}</h1>\
<nav><a href=\"#figures\">Figures</a><a href=\"#configurations\">Configurations</a>\
<a href=\"#time\">Over time</a><a href=\"#differences\">Placed differently</a>\
<a href=\"#one-side\">Bound under one only</a><a href=\"{}/index.html\">A's report</a>\
<a href=\"{}/index.html\">B's report</a></nav></header>\n",
        ARM_DIRS[0], ARM_DIRS[1]
    )?;
    figures_table(&mut html, runs)?;
    configurations(&mut html, runs)?;
    writeln!(
        html,
        "<section id=\"time\"><h2>Over cluster time</h2><div class=\"plots\">{}</div></section>",
        figures.concat()
    )?;
    differences(&mut html, runs.differences)?;
    writeln!(
        html,
        "<footer>Files beside this page: <a href=\"compare.json\">compare.json</a> (every \
difference), each plot as SVG, and each run's own report: <a href=\"{a}/index.html\">{a}/</a>, \
<a href=\"{b}/index.html\">{b}/</a>.</footer></body></html>",
        a = ARM_DIRS[0],
        b = ARM_DIRS[1]
    )?;
    Ok(html)
}

/// The figures of both runs, with B's difference to A.
fn figures_table(html: &mut String, runs: &ComparedRuns) -> std::fmt::Result {
    let [a, b] = runs.outcomes;
    html.push_str(
        "<section id=\"figures\"><h2>The two runs</h2><p class=\"hint\">The same inputs and seed \
under each configuration. Waits run from a pod's creation to its binding, in cluster time.</p>\
<table class=\"num\" id=\"figure-table\"><thead><tr><th></th><th>A</th><th>B</th><th>B − A</th></tr></thead><tbody>",
    );
    write!(
        html,
        "<tr><th>configuration</th><td>{}</td><td>{}</td><td></td></tr>",
        esc(&a.config),
        esc(&b.config)
    )?;
    let count = |html: &mut String, what: &str, va: usize, vb: usize| {
        write!(
            html,
            "<tr><th>{what}</th><td>{}</td><td>{}</td><td>{}</td></tr>",
            thousands(va as i64),
            thousands(vb as i64),
            signed(vb as f64 - va as f64, "")
        )
    };
    let (sa, sb) = (&a.summary, &b.summary);
    count(html, "pods", sa.pods_total, sb.pods_total)?;
    count(html, "scheduled", sa.scheduled, sb.scheduled)?;
    count(
        html,
        "pending at the end",
        sa.pods_total - sa.scheduled,
        sb.pods_total - sb.scheduled,
    )?;
    count(html, "evicted by preemption", sa.preempted, sb.preempted)?;
    count(
        html,
        "scheduling attempts",
        sa.attempts as usize,
        sb.attempts as usize,
    )?;
    if a.pod_groups + b.pod_groups > 0 {
        count(
            html,
            "pod groups scheduled",
            a.pod_groups_scheduled,
            b.pod_groups_scheduled,
        )?;
    }
    for (i, what) in ["wait p50", "wait p90", "wait p99", "longest wait"]
        .iter()
        .enumerate()
    {
        let (wa, wb) = (a.wait_s[i], b.wait_s[i]);
        write!(
            html,
            "<tr><th>{what}</th><td>{}</td><td>{}</td><td>{}</td></tr>",
            duration(Duration::from_secs_f64(wa)),
            duration(Duration::from_secs_f64(wb)),
            signed((wb - wa) * 1000.0, " ms")
        )?;
    }
    let last = |o: &Outcome, f: &dyn Fn(&gantry_sim::Sample) -> Option<f64>| {
        o.samples.iter().rev().find_map(f)
    };
    let share_row = |html: &mut String,
                     what: &str,
                     f: &dyn Fn(&gantry_sim::Sample) -> Option<f64>| {
        let (va, vb) = (last(a, f), last(b, f));
        if va.is_none() && vb.is_none() {
            return Ok(());
        }
        let cell = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{:.1}%", v * 100.0));
        let delta = match (va, vb) {
            (Some(va), Some(vb)) => signed((vb - va) * 100.0, " pp"),
            _ => String::new(),
        };
        write!(
            html,
            "<tr><th>{what}</th><td>{}</td><td>{}</td><td>{delta}</td></tr>",
            cell(va),
            cell(vb)
        )
    };
    share_row(html, "cpu requested, at the end", &|s| {
        Some(s.cpu_utilisation)
    })?;
    share_row(html, "memory requested, at the end", &|s| {
        Some(s.memory_utilisation)
    })?;
    share_row(html, "GPU memory stranded, at the end", &|s| {
        s.gpu_memory_stranded
    })?;
    if let Some([da, db]) = runs.divergences {
        write!(
            html,
            "<tr><th>recorded bindings reproduced</th><td>{:.1}%</td><td>{:.1}%</td><td>{}</td></tr>",
            da.reproduced() * 100.0,
            db.reproduced() * 100.0,
            signed((db.reproduced() - da.reproduced()) * 100.0, " pp")
        )?;
        // Why each run placed pods elsewhere than recorded: how it judged the recorded node.
        let mut causes: Vec<&String> = da.other_node_by_cause.keys().collect();
        causes.extend(db.other_node_by_cause.keys());
        causes.sort();
        causes.dedup();
        for cause in causes {
            let n = |d: &Divergence| d.other_node_by_cause.get(cause).copied().unwrap_or(0);
            count(
                html,
                &format!("elsewhere than recorded: {}", esc(cause)),
                n(da),
                n(db),
            )?;
        }
    }
    html.push_str("</tbody></table></section>\n");
    Ok(())
}

/// Each run's profiles, a row whose two values differ marked, then the files as written.
fn configurations(html: &mut String, runs: &ComparedRuns) -> std::fmt::Result {
    let [ra, rb] = runs.releases;
    let releases = if ra == rb {
        format!("Both decided as Kubernetes {ra}.")
    } else {
        format!("A decided as Kubernetes {ra}, B as {rb}.")
    };
    write!(
        html,
        "<section id=\"configurations\"><h2>Configurations</h2><p class=\"hint\">{releases} \
Each profile's plugins as the run read them; rows that differ are marked. \
The files follow, with the plugins' arguments.</p><table><thead><tr><th></th><th>A</th><th>B</th></tr></thead><tbody>"
    )?;
    let [a, b] = runs.configurations.each_ref().map(|c| &c.profiles[..]);
    let mut keys: Vec<&str> = a.iter().map(|(k, _)| k.as_str()).collect();
    for (k, _) in b {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    let value = |rows: &[(String, String)], key: &str| {
        rows.iter()
            .find(|(k, _)| k == key)
            .map_or("—".to_string(), |(_, v)| v.clone())
    };
    for key in keys {
        let (va, vb) = (value(a, key), value(b, key));
        write!(
            html,
            "<tr{}><th>{}</th><td>{}</td><td>{}</td></tr>",
            if va == vb { "" } else { " class=\"differs\"" },
            esc(key),
            esc(&va),
            esc(&vb)
        )?;
    }
    html.push_str("</tbody></table><div class=\"files\">");
    for (side, c) in ["A", "B"].iter().zip(&runs.configurations) {
        let text = c
            .text
            .as_deref()
            .map_or("kube-scheduler's defaults".to_string(), esc);
        write!(html, "<div><h3>{side}</h3><pre>{text}</pre></div>")?;
    }
    html.push_str("</div></section>\n");
    Ok(())
}

/// The pods placed differently, and those bound under one configuration only, each with
/// links to its row in both runs' reports.
fn differences(html: &mut String, d: &Differences) -> std::fmt::Result {
    write!(
        html,
        "<section id=\"differences\"><h2>Placed differently</h2><p class=\"hint\">{} of the {} pods \
bound under both went to another node. Each pod links to its row in each run's report; \
for the first {}, how each run's cycle judged the node the other chose.</p>",
        thousands(d.other_node.len() as i64),
        thousands(d.bound_in_both as i64),
        thousands(crate::compare::MAX_EXPLAINED as i64)
    )?;
    html.push_str(
        "<table id=\"other-node\"><thead><tr><th>pod</th><th>A's node</th><th>B's node</th><th>A's cycle, of B's node</th><th>B's cycle, of A's node</th><th>in the reports</th></tr></thead><tbody>",
    );
    for (i, (pod, na, nb)) in d.other_node.iter().take(MAX_ROWS).enumerate() {
        let why = d.why_other_node.get(i);
        write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"reason\">{}</td><td class=\"reason\">{}</td><td>{}</td></tr>",
            esc(pod),
            esc(na),
            esc(nb),
            why.map_or(String::new(), |w| esc(&w.a)),
            why.map_or(String::new(), |w| esc(&w.b)),
            links(pod)
        )?;
    }
    html.push_str("</tbody></table>");
    more(html, d.other_node.len())?;
    write!(
        html,
        "</section>\n<section id=\"one-side\"><h2>Bound under one configuration only</h2>\
<p class=\"hint\">{} under A only, {} under B only; the other side's reason is kube-scheduler's message.</p>\
<table id=\"one-side-table\"><thead><tr><th>pod</th><th>bound under</th><th>node</th><th>the other's reason</th><th>in the reports</th></tr></thead><tbody>",
        thousands(d.only_a.len() as i64),
        thousands(d.only_b.len() as i64)
    )?;
    let only = d
        .only_a
        .iter()
        .map(|(pod, node, reason)| ("A", pod, node, reason))
        .chain(
            d.only_b
                .iter()
                .map(|(pod, reason, node)| ("B", pod, node, reason)),
        );
    for (side, pod, node, reason) in only.take(MAX_ROWS) {
        write!(
            html,
            "<tr><td>{}</td><td>{side}</td><td>{}</td><td class=\"reason\">{}</td><td>{}</td></tr>",
            esc(pod),
            esc(node),
            esc(reason),
            links(pod)
        )?;
    }
    html.push_str("</tbody></table>");
    more(html, d.only_a.len() + d.only_b.len())?;
    html.push_str("</section>\n");
    Ok(())
}

fn more(html: &mut String, listed: usize) -> std::fmt::Result {
    if listed > MAX_ROWS {
        write!(
            html,
            "<p class=\"hint\">{} more in <a href=\"compare.json\">compare.json</a>.</p>",
            thousands((listed - MAX_ROWS) as i64)
        )?;
    }
    Ok(())
}

/// Links to the pod's row in each run's pod table (which reads its filter from the address).
fn links(pod: &str) -> String {
    let q = esc(&url_encode(pod));
    format!(
        "<a href=\"{a}/index.html#q={q}\">A</a> · <a href=\"{b}/index.html#q={q}\">B</a>",
        a = ARM_DIRS[0],
        b = ARM_DIRS[1]
    )
}

/// `+3`, `−1.5 ms`, `0`.
fn signed(v: f64, unit: &str) -> String {
    let rounded = (v * 10.0).round() / 10.0;
    if rounded == 0.0 {
        return "0".into();
    }
    let sign = if rounded > 0.0 { "+" } else { "−" };
    format!("{sign}{}{unit}", number(rounded.abs()))
}

/// Pods per wait bucket (decades from 10 ms), for each run.
fn wait_buckets(waits: [&[Duration]; 2]) -> (Vec<String>, [Vec<u64>; 2]) {
    let bounds = [
        (Duration::from_millis(10), "≤ 10 ms"),
        (Duration::from_millis(100), "≤ 100 ms"),
        (Duration::from_secs(1), "≤ 1 s"),
        (Duration::from_secs(10), "≤ 10 s"),
        (Duration::from_secs(60), "≤ 1 min"),
        (Duration::from_secs(600), "≤ 10 min"),
    ];
    let counts = waits.map(|waits| {
        let mut counts = vec![0u64; bounds.len() + 1];
        for w in waits {
            counts[bounds.partition_point(|(b, _)| b < w)] += 1;
        }
        counts
    });
    let mut labels: Vec<String> = bounds.iter().map(|(_, l)| l.to_string()).collect();
    labels.push("more".into());
    (labels, counts)
}

const COMPARE_STYLE: &str = "
#figure-table th{font-weight:normal;color:#5b6475;width:260px}tr.differs td{background:#fff5e0}
.files{display:flex;gap:12px}.files div{flex:1 1 0;min-width:0}.files pre{background:#f6f7f9;padding:8px 10px;font-size:12px;overflow:auto;max-height:420px}
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_read_with_their_sign() {
        assert_eq!(signed(2.0, ""), "+2");
        assert_eq!(signed(-1.25, " ms"), "−1.3 ms");
        assert_eq!(signed(0.04, " pp"), "0");
    }

    #[test]
    fn waits_fall_in_the_bucket_up_to_their_bound() {
        let a = [
            Duration::from_millis(10),
            Duration::from_millis(11),
            Duration::from_secs(3600),
        ];
        let (labels, [ca, cb]) = wait_buckets([&a, &[]]);
        assert_eq!(labels.len(), 7);
        assert_eq!(ca, vec![1, 1, 0, 0, 0, 0, 1]);
        assert_eq!(cb, vec![0; 7]);
    }
}
