//! `index.html`: the run's inputs and configuration, the outcome in figures, a table per
//! workload, pending pods grouped by reason, the plots (the scenario's events marked),
//! utilisation per node group, DRA devices in use per node group (when the cluster has
//! any), the PodGroups (when there are any), and a searchable table of every pod with the reason each
//! pending one is pending. One file: styles, plots, data and script inline, nothing
//! fetched. The pod table filters as you type, and reads its filter from the address
//! (`index.html#status=pending&q=cpu`), so a link can open it filtered.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use gantry_sim::{Placement, PodStatus, Simulation, Summary};
use serde_json::json;

use super::RunInfo;
use super::devices::{self, DeviceRow};
use super::plots::{number, thousands};
use super::tables::{self, NodeGroupRow, WorkloadRow};

/// The plots, as SVG markup.
pub struct Plots {
    pub pods: String,
    pub utilisation: String,
    /// Free GPU memory stranded on cards in use, when the cluster has HAMi-registered cards.
    pub gpu_stranded: Option<String>,
    pub nodes: String,
    pub latency: String,
    pub throughput: String,
    /// GPU cards by use, when the cluster has HAMi-registered cards.
    pub gpus: Option<String>,
}

/// Example pods listed per pending reason.
const EXAMPLES_PER_REASON: usize = 3;

pub fn render(
    info: &RunInfo,
    summary: &Summary,
    sim: &Simulation,
    devices: &[DeviceRow],
    plots: &Plots,
    (x_unit, unit_name): (f64, &str),
) -> anyhow::Result<String> {
    let mut html = String::new();
    let title = format!("gantry simulate: {}", esc(&info.name));
    let devices_link = if devices.is_empty() {
        ""
    } else {
        "<a href=\"#devices\">Devices</a>"
    };
    let groups_link = if sim.pod_groups().is_empty() {
        ""
    } else {
        "<a href=\"#pod-groups\">Pod groups</a>"
    };
    write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title}</title><style>{STYLE}</style></head><body>\n<header><h1>{title}</h1>\
<nav><a href=\"#inputs\">Inputs</a><a href=\"#workloads\">Workloads</a><a href=\"#pending\">Pending</a>\
<a href=\"#time\">Over time</a><a href=\"#nodes\">Node groups</a>{devices_link}{groups_link}<a href=\"#speed\">Speed</a><a href=\"#pods\">Pods</a></nav></header>\n"
    )?;
    outcome(&mut html, info, summary, sim)?;
    inputs(&mut html, info)?;
    workloads(&mut html, sim)?;
    pending(&mut html, sim)?;
    over_time(&mut html, info, plots, x_unit, unit_name)?;
    node_groups(&mut html, sim, plots)?;
    if !devices.is_empty() {
        device_section(&mut html, devices, sim.placements())?;
    }
    let groups = sim.pod_groups();
    if !groups.is_empty() {
        super::pod_groups::section(&mut html, &groups)?;
    }
    speed(&mut html, summary, plots)?;
    pods(&mut html, sim)?;
    write!(
        html,
        "<footer>Files beside this page: <a href=\"summary.json\">summary.json</a>, \
<a href=\"placements.jsonl\">placements.jsonl</a>, and each plot as SVG.</footer>\n\
<script>{SCRIPT}</script></body></html>\n"
    )?;
    Ok(html)
}

/// The figures that say how the run went, as cards.
fn outcome(html: &mut String, info: &RunInfo, s: &Summary, sim: &Simulation) -> std::fmt::Result {
    let pending = s.pods_total - s.scheduled;
    let mut breakdown: Vec<String> = Vec::new();
    for (n, what) in [
        (s.unschedulable, "unschedulable"),
        (s.gated, "gated"),
        (s.other_scheduler, "another scheduler's"),
        (s.gave_up, "given up"),
    ] {
        if n > 0 {
            breakdown.push(format!("{} {what}", thousands(n as i64)));
        }
    }
    let cards = [
        (
            "pods submitted",
            thousands(s.pods_total as i64),
            String::new(),
            false,
        ),
        (
            "scheduled",
            thousands(s.scheduled as i64),
            percent(s.scheduled, s.pods_total),
            false,
        ),
        (
            "pending at the end",
            thousands(pending as i64),
            breakdown.join(", "),
            pending > 0,
        ),
        (
            "evicted by preemption",
            thousands(s.preempted as i64),
            String::new(),
            false,
        ),
        (
            "nodes",
            thousands(sim.api.usage().len() as i64),
            format!("{} at the start", thousands(info.nodes_at_start as i64)),
            false,
        ),
        (
            "cluster time",
            duration(Duration::from_secs_f64(s.virtual_s)),
            "simulated".into(),
            false,
        ),
        (
            "scheduling attempts",
            thousands(s.attempts as i64),
            format!("{} retries", thousands(s.retries as i64)),
            false,
        ),
        (
            "bind failures",
            thousands(s.bind_failures as i64),
            String::new(),
            s.bind_failures > 0,
        ),
        (
            "over-committed nodes",
            thousands(s.overcommitted_nodes as i64),
            "requests above allocatable".into(),
            s.overcommitted_nodes > 0,
        ),
    ];
    html.push_str("<section id=\"outcome\"><div class=\"cards\">");
    for (label, value, note, alert) in cards {
        write!(
            html,
            "<div class=\"card{}\"><div class=\"value\">{}</div><div class=\"label\">{}</div><div class=\"note\">{}</div></div>",
            if alert { " alert" } else { "" },
            esc(&value),
            esc(label),
            esc(&note)
        )?;
    }
    html.push_str("</div></section>\n");
    Ok(())
}

fn inputs(html: &mut String, info: &RunInfo) -> std::fmt::Result {
    html.push_str("<section id=\"inputs\"><h2>Inputs and configuration</h2><table class=\"kv\">");
    for (key, value) in info.inputs.iter().chain(&info.settings) {
        write!(
            html,
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(key),
            esc(value)
        )?;
    }
    html.push_str("</table></section>\n");
    Ok(())
}

fn workloads(html: &mut String, sim: &Simulation) -> std::fmt::Result {
    let rows = tables::workloads(sim.placements(), sim.histories());
    html.push_str(
        "<section id=\"workloads\"><h2>Workloads</h2>\
<p class=\"hint\">Pods grouped by name (a scenario's workload, or a controller's pods). \
Time to bind runs from a pod's creation to its bind, in cluster time.</p>\
<table class=\"num\"><thead><tr><th>workload</th><th>submitted</th><th>scheduled</th>\
<th>pending</th><th>evicted by preemption</th><th>time to bind, p50</th><th>p99</th></tr></thead><tbody>",
    );
    for (name, row) in &rows {
        let WorkloadRow {
            submitted,
            scheduled,
            pending,
            preempted,
            p50_to_bind,
            p99_to_bind,
        } = row;
        let time = |d: &Option<Duration>| d.map_or("—".to_string(), duration);
        write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            thousands(*submitted as i64),
            thousands(*scheduled as i64),
            if *pending > 0 { " class=\"bad\"" } else { "" },
            thousands(*pending as i64),
            thousands(*preempted as i64),
            time(p50_to_bind),
            time(p99_to_bind),
        )?;
    }
    html.push_str("</tbody></table></section>\n");
    Ok(())
}

fn pending(html: &mut String, sim: &Simulation) -> std::fmt::Result {
    let placements = sim.placements();
    let reasons = tables::pending_reasons(placements);
    html.push_str("<section id=\"pending\"><h2>Pending pods by reason</h2>");
    if reasons.is_empty() {
        html.push_str("<p>Every pod was scheduled.</p></section>\n");
        return Ok(());
    }
    html.push_str(
        "<p class=\"hint\">kube-scheduler's own message for each. Click a count to list the pods.</p>",
    );
    reason_table(html, placements, &reasons)?;
    html.push_str("</section>\n");
    Ok(())
}

/// Pending pods per reason, with a few examples; a count links to the pods' list.
fn reason_table(
    html: &mut String,
    placements: &[Placement],
    reasons: &[(&str, usize)],
) -> std::fmt::Result {
    html.push_str(
        "<table><thead><tr><th>pods</th><th>reason</th><th>for example</th></tr></thead><tbody>",
    );
    let mut examples: HashMap<&str, Vec<String>> = HashMap::new();
    for p in placements.iter().filter(|p| p.node.is_none()) {
        let pods = examples
            .entry(p.reason.as_deref().unwrap_or(tables::NO_REASON))
            .or_default();
        if pods.len() < EXAMPLES_PER_REASON {
            pods.push(p.pod.to_string());
        }
    }
    for (reason, count) in reasons {
        let examples = examples.get(reason).map_or(&[][..], Vec::as_slice);
        write!(
            html,
            "<tr><td class=\"count\"><a href=\"#q={}\">{}</a></td><td class=\"reason\">{}</td><td>{}</td></tr>",
            esc(&url_encode(reason)),
            thousands(*count as i64),
            esc(reason),
            esc(&examples.join(", ")),
        )?;
    }
    html.push_str("</tbody></table>");
    Ok(())
}

fn over_time(
    html: &mut String,
    info: &RunInfo,
    plots: &Plots,
    x_unit: f64,
    unit_name: &str,
) -> std::fmt::Result {
    write!(
        html,
        "<section id=\"time\"><h2>Over cluster time</h2><div class=\"plots\">{}{}{}</div>",
        figure(&plots.pods),
        figure(&plots.utilisation),
        plots
            .gpu_stranded
            .as_deref()
            .map(figure)
            .unwrap_or_default()
    )?;
    if !info.timeline.is_empty() {
        html.push_str(
            "<h3>The scenario's events (numbered on the plots)</h3><ol class=\"events\">",
        );
        for mark in &info.timeline {
            write!(
                html,
                "<li><span class=\"at\">{} {unit_name}</span> {}</li>",
                number((mark.at.as_secs_f64() / x_unit * 100.0).round() / 100.0),
                esc(&mark.what)
            )?;
        }
        html.push_str("</ol>");
    }
    html.push_str("</section>\n");
    Ok(())
}

fn node_groups(html: &mut String, sim: &Simulation, plots: &Plots) -> std::fmt::Result {
    let usage = sim.api.usage();
    let rows = tables::node_groups(
        usage
            .iter()
            .map(|(node, requested, pods)| (&***node, *requested, *pods)),
    );
    html.push_str(
        "<section id=\"nodes\"><h2>Node groups at the end</h2>\
<p class=\"hint\">Requests of the pods bound to each group's nodes over what the nodes have. \
Groups come from a node-pool label, else the instance type, else the node name.</p>\
<table class=\"num\"><thead><tr><th>group</th><th>nodes</th><th>pods</th><th>cpu</th><th>memory</th><th>other resources</th></tr></thead><tbody>",
    );
    for (name, row) in &rows {
        let NodeGroupRow {
            nodes,
            pods,
            requested,
            allocatable,
        } = row;
        let others: Vec<String> = allocatable
            .scalars()
            .map(|(resource, total)| {
                format!(
                    "{resource} {} of {}",
                    thousands(requested.scalar(resource)),
                    thousands(total)
                )
            })
            .collect();
        write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            thousands(*nodes as i64),
            thousands(*pods as i64),
            bar(requested.milli_cpu, allocatable.milli_cpu),
            bar(requested.memory, allocatable.memory),
            esc(&others.join(", ")),
        )?;
    }
    writeln!(
        html,
        "</tbody></table><div class=\"plots\">{}{}</div></section>",
        figure(&plots.nodes),
        plots.gpus.as_deref().map(figure).unwrap_or_default()
    )
}

/// DRA devices in use per node group and driver, and the pending pods the
/// DynamicResources plugin held back.
fn device_section(
    html: &mut String,
    rows: &[DeviceRow],
    placements: &[Placement],
) -> std::fmt::Result {
    html.push_str(
        "<section id=\"devices\"><h2>Devices (dynamic resource allocation) at the end</h2>\
<p class=\"hint\">The devices of each node's own ResourceSlices, and how many are allocated to a claim. \
Nodes are grouped as above.</p>\
<table class=\"num\"><thead><tr><th>group</th><th>driver</th><th>devices</th><th>in use</th><th>share</th></tr></thead><tbody>",
    );
    for row in rows {
        write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&row.group),
            esc(&row.driver),
            thousands(row.total as i64),
            thousands(row.in_use as i64),
            bar(row.in_use as i64, row.total as i64),
        )?;
    }
    html.push_str("</tbody></table>");
    let reasons = devices::pending_reasons(placements);
    if reasons.is_empty() {
        html.push_str("<p>No pod is pending for its claims.</p>");
    } else {
        html.push_str("<h3>Pending pods the DynamicResources plugin held back</h3>");
        reason_table(html, placements, &reasons)?;
    }
    html.push_str("</section>\n");
    Ok(())
}

fn speed(html: &mut String, s: &Summary, plots: &Plots) -> std::fmt::Result {
    writeln!(
        html,
        "<section id=\"speed\"><h2>The scheduler's speed</h2><p>{} pods/s over {} of wall-clock time; \
each scheduling attempt took {} µs at the median, {} µs at p90 and {} µs at p99.</p>\
<div class=\"plots\">{}{}</div></section>",
        thousands(s.pods_per_sec.round() as i64),
        duration(Duration::from_secs_f64(s.wall_s)),
        thousands(s.p50_us as i64),
        thousands(s.p90_us as i64),
        thousands(s.p99_us as i64),
        figure(&plots.throughput),
        figure(&plots.latency),
    )
}

/// The searchable table: the rows come from the JSON below it, drawn by the script.
fn pods(html: &mut String, sim: &Simulation) -> std::fmt::Result {
    // Each reason once, in the order first met; pods refer to it by index.
    let mut reasons: Vec<&str> = Vec::new();
    let mut reason_index: HashMap<&str, i64> = HashMap::new();
    let mut rows = Vec::with_capacity(sim.placements().len());
    for (p, h) in sim.placements().iter().zip(sim.histories()) {
        let reason = match p.reason.as_deref().filter(|_| p.node.is_none()) {
            Some(r) => *reason_index.entry(r).or_insert_with(|| {
                reasons.push(r);
                reasons.len() as i64 - 1
            }),
            None => -1,
        };
        let status = match h.status {
            PodStatus::Bound if h.preempted => "preempted",
            PodStatus::Bound => "scheduled",
            PodStatus::Pending => "pending",
            PodStatus::Gated => "gated",
            PodStatus::OtherScheduler => "other scheduler",
            PodStatus::GivenUp => "given up",
        };
        let pod = p.pod.to_string();
        rows.push(json!([
            pod,
            tables::workload_of(&pod),
            status,
            p.node,
            seconds(h.arrived),
            h.bound.map(|b| seconds(b.saturating_sub(h.arrived))),
            h.attempts,
            reason,
            p.evicted.len(),
        ]));
    }
    let data = json!({"reasons": reasons, "pods": rows}).to_string();
    writeln!(
        html,
        "<section id=\"pods\"><h2>Every pod</h2><div class=\"filters\">\
<input id=\"q\" type=\"search\" placeholder=\"search pods, workloads, nodes, reasons\" aria-label=\"search\">\
<select id=\"status\" aria-label=\"status\"><option value=\"\">all</option><option>scheduled</option>\
<option>preempted</option><option>pending</option><option>gated</option><option>other scheduler</option>\
<option>given up</option></select><span id=\"count\"></span></div>\
<table id=\"pod-table\"><thead><tr><th>pod</th><th>workload</th><th>status</th><th>node</th>\
<th>created at</th><th>bound after</th><th>attempts</th><th>evicted</th><th>why pending</th></tr></thead><tbody></tbody></table>\
<script type=\"application/json\" id=\"pod-data\">{}</script></section>",
        // `</` cannot end the script element early.
        data.replace("</", "<\\/")
    )
}

/// Seconds with millisecond precision, for the pod table.
fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

pub(super) fn figure(svg: &str) -> String {
    let start = svg.find("<svg").unwrap_or(0);
    format!("<figure>{}</figure>", &svg[start..])
}

/// `used of total` with a bar showing the share.
fn bar(used: i64, total: i64) -> String {
    let share = if total > 0 {
        used as f64 / total as f64
    } else {
        0.0
    };
    format!(
        "<div class=\"bar{}\"><span style=\"width:{:.0}%\"></span></div>{}",
        if share > 1.0 { " over" } else { "" },
        (share * 100.0).min(100.0),
        esc(&format!("{:.0}%", share * 100.0))
    )
}

fn percent(part: usize, whole: usize) -> String {
    if whole == 0 {
        return String::new();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

/// `0.8 ms`, `12 ms`, `3.2 s`, `4.5 min`, `2.1 h`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    let (value, unit) = if s < 0.01 {
        (s * 1000.0, "ms")
    } else if s < 1.0 {
        ((s * 1000.0).round(), "ms")
    } else if s < 120.0 {
        (s, "s")
    } else if s < 7200.0 {
        (s / 60.0, "min")
    } else {
        (s / 3600.0, "h")
    };
    format!("{} {unit}", number((value * 10.0).round() / 10.0))
}

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Percent-encoding for a value in the address's fragment.
pub(super) fn url_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

pub(super) const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:14px 28px;position:sticky;top:0;z-index:1}
header h1{font-size:20px;margin:0 0 6px}nav a{color:#b8c4dd;margin-right:18px;text-decoration:none;font-size:14px}
nav a:hover{color:#fff}section{background:#fff;margin:18px 28px;padding:16px 22px;border-radius:8px;box-shadow:0 1px 3px #0002}
h2{font-size:18px;margin:0 0 10px}h3{font-size:15px;margin:14px 0 6px}.hint{color:#5b6475;font-size:13px;margin:0 0 10px}
table{border-collapse:collapse;font-size:13px;width:100%}th,td{padding:4px 10px;text-align:left;border-bottom:1px solid #e3e6eb;vertical-align:top}
thead th{background:#eef1f5;position:sticky;top:0}table.num td:not(:first-child),table.num th:not(:first-child){text-align:right}
table.kv th{width:220px;color:#5b6475;font-weight:normal}td.reason{font-family:ui-monospace,monospace;font-size:12px}
td.count{text-align:right;white-space:nowrap}td.bad{color:#b42318;font-weight:600}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(125px,1fr));gap:12px}.card{border:1px solid #e3e6eb;border-radius:8px;padding:10px 14px}
.card .value{font-size:24px;font-weight:600}.card .label{font-size:13px;color:#5b6475}.card .note{font-size:12px;color:#8a93a5;min-height:1em}
.card.alert{border-color:#f1a7a0;background:#fff5f4}.card.alert .value{color:#b42318}
.plots{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0;flex:1 1 560px;max-width:900px}figure svg{width:100%;height:auto}
ol.events{font-size:13px}ol.events .at{display:inline-block;min-width:70px;color:#5b6475}
.bar{display:inline-block;width:90px;height:9px;background:#e3e6eb;border-radius:4px;margin-right:8px;vertical-align:middle;overflow:hidden}
.bar span{display:block;height:100%;background:#1f77b4}.bar.over span{background:#d62728}
.filters{display:flex;gap:10px;align-items:center;margin-bottom:10px}#q{flex:1;padding:6px 10px;font-size:14px;border:1px solid #c9ced8;border-radius:6px}
#status{padding:6px;font-size:14px}#count{color:#5b6475;font-size:13px;white-space:nowrap}
#pod-table td:nth-child(5),#pod-table td:nth-child(6),#pod-table td:nth-child(7),#pod-table td:nth-child(8){text-align:right}
#pod-table td,#pod-table th{white-space:nowrap}#pod-table td:last-child{white-space:normal;font-family:ui-monospace,monospace;font-size:12px}footer{margin:18px 28px 40px;font-size:13px;color:#5b6475}
";

/// Draws the pod table from the page's JSON, filtered by the search box and the status,
/// at most `LIMIT` rows at a time.
const SCRIPT: &str = r#"
(function () {
  var data = JSON.parse(document.getElementById('pod-data').textContent);
  var LIMIT = 500;
  var q = document.getElementById('q'), status = document.getElementById('status');
  var body = document.querySelector('#pod-table tbody'), count = document.getElementById('count');
  function time(s) { return s === null ? '' : (s < 1 ? (s * 1000).toFixed(0) + ' ms' : s.toFixed(s < 100 ? 2 : 0) + ' s'); }
  function cell(tr, text) { var td = document.createElement('td'); td.textContent = text; tr.appendChild(td); }
  function render() {
    var needle = q.value.trim().toLowerCase(), want = status.value, rows = [], matched = 0;
    for (var i = 0; i < data.pods.length; i++) {
      var p = data.pods[i], reason = p[7] >= 0 ? data.reasons[p[7]] : '';
      if (want && p[2] !== want) continue;
      if (needle && (p[0] + ' ' + p[1] + ' ' + (p[3] || '') + ' ' + reason).toLowerCase().indexOf(needle) < 0) continue;
      matched++;
      if (rows.length >= LIMIT) continue;
      var tr = document.createElement('tr');
      cell(tr, p[0]); cell(tr, p[1]); cell(tr, p[2]); cell(tr, p[3] || '');
      cell(tr, time(p[4])); cell(tr, time(p[5])); cell(tr, p[6]); cell(tr, p[8] || ''); cell(tr, reason);
      rows.push(tr);
    }
    body.replaceChildren.apply(body, rows);
    var pods = matched.toLocaleString('en') + (matched === 1 ? ' pod' : ' pods');
    count.textContent = matched === rows.length ? pods : 'first ' + rows.length.toLocaleString('en') + ' of ' + pods;
  }
  function fromAddress() {
    var params = new URLSearchParams(location.hash.slice(1));
    if (!params.has('q') && !params.has('status')) return false;
    q.value = params.get('q') || '';
    status.value = params.get('status') || '';
    return true;
  }
  function toAddress() {
    var params = new URLSearchParams();
    if (q.value) params.set('q', q.value);
    if (status.value) params.set('status', status.value);
    history.replaceState(null, '', '#' + params.toString());
  }
  q.addEventListener('input', function () { toAddress(); render(); });
  status.addEventListener('change', function () { toAddress(); render(); });
  window.addEventListener('hashchange', function () {
    if (fromAddress()) { render(); document.getElementById('pods').scrollIntoView(); }
  });
  var filtered = fromAddress();
  render();
  if (filtered) document.getElementById('pods').scrollIntoView();
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(duration(Duration::from_micros(4_300)), "4.3 ms");
        assert_eq!(duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(duration(Duration::from_secs_f64(64.04)), "64 s");
        assert_eq!(duration(Duration::from_secs(300)), "5 min");
        assert_eq!(duration(Duration::from_secs(9000)), "2.5 h");
    }

    #[test]
    fn text_from_the_input_cannot_become_markup() {
        assert_eq!(esc("<b a=\"x\">&'"), "&lt;b a=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(url_encode("0/3 nodes: a&b"), "0%2F3%20nodes%3A%20a%26b");
    }
}
