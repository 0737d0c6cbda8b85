//! The report page: per workload, the mean allocation curve and the mean fragment curve of
//! each policy over its seeds (the paper's Fig. 9(a) and 7(a)), as inline SVG, from the
//! rows of the result files (so a merged sweep gives the same page as a single run).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::analysis::COLUMNS;
use crate::output::{Kind, Results};

/// A policy's mean allocation curve and, when written, its fragment curve.
type Curves<'a> = Vec<(&'a str, &'a Vec<f64>, Option<&'a Vec<f64>>)>;

const COLORS: [&str; 6] = [
    "#7f7f7f", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#d62728",
];

fn chart(title: &str, y_label: &str, curves: &[(&str, &Vec<f64>)], y_max: f64) -> String {
    let (w, h, l, b) = (560.0, 300.0, 50.0, 30.0);
    let x = |c: usize| l + (c as f64) / 130.0 * (w - l - 10.0);
    let y = |v: f64| 10.0 + (1.0 - v / y_max) * (h - b - 10.0);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-size=\"11\">\
         <text x=\"{l}\" y=\"9\">{title}</text>"
    );
    for t in 0..=5 {
        let v = y_max * f64::from(t) / 5.0;
        let yv = y(v);
        let _ = write!(
            s,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{yv:.1}\" y2=\"{yv:.1}\" stroke=\"#ddd\"/>\
             <text x=\"4\" y=\"{:.1}\">{v:.0}</text>",
            w - 10.0,
            yv + 4.0,
        );
    }
    for c in (0..COLUMNS).step_by(10) {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\">{c}</text>",
            x(c) - 6.0,
            h - 12.0
        );
    }
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\">arrived workload (% of GPUs); y: {y_label}</text>",
        l + 120.0,
        h - 1.0
    );
    for (i, (name, values)) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan())
            .map(|(c, v)| format!("{:.1},{:.1}", x(c), y(*v)))
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"{color}\">{name}</text>",
            points.join(" "),
            l + 10.0,
            25.0 + 13.0 * i as f64
        );
    }
    s.push_str("</svg>");
    s
}

/// The page. `deviations`: optional lines comparing with published curves.
pub fn html(results: &Results, deviations: &[crate::output::Deviation]) -> String {
    let alloc = results.means(Kind::Allocation);
    let frag = results.means(Kind::FragAmount);
    let mut by_workload: BTreeMap<&str, Curves<'_>> = BTreeMap::new();
    for ((w, p), v) in &alloc {
        by_workload
            .entry(w)
            .or_default()
            .push((p, v, frag.get(&(w.clone(), p.clone()))));
    }
    let mut s = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>gantry sweep</title></head><body>\
         <h1>gantry sweep</h1><p>Mean over seeds of each policy: GPU allocation ratio and \
         fragment amount (% of the cluster's GPUs) at each percent of arrived GPU workload.</p>",
    );
    for (w, curves) in &by_workload {
        let a: Vec<(&str, &Vec<f64>)> = curves.iter().map(|(p, v, _)| (*p, *v)).collect();
        let f: Vec<(&str, &Vec<f64>)> = curves
            .iter()
            .filter_map(|(p, _, f)| f.map(|f| (*p, f)))
            .collect();
        let _ = write!(s, "<h2>{w}</h2>");
        s.push_str(&chart("GPU allocation ratio (%)", "allocated %", &a, 100.0));
        let top = f
            .iter()
            .flat_map(|(_, v)| v.iter())
            .filter(|v| !v.is_nan())
            .fold(1.0f64, |m, v| m.max(*v));
        s.push_str(&chart(
            "Fragment (% of GPUs)",
            "fragment %",
            &f,
            (top * 1.1).ceil(),
        ));
        let at130: Vec<String> = curves
            .iter()
            .map(|(p, v, _)| format!("{p}: {:.2}", v[COLUMNS - 1]))
            .collect();
        let _ = write!(s, "<p>At 130 %: {}</p>", at130.join("; "));
    }
    if !deviations.is_empty() {
        s.push_str("<h2>Against the published curves</h2><table border=\"1\"><tr><th>workload</th><th>policy</th><th>max |Δ| (pp)</th><th>at</th><th>ours</th><th>published</th></tr>");
        for d in deviations {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td></tr>",
                d.workload, d.policy, d.max_abs, d.at, d.ours_at, d.published_at
            );
        }
        s.push_str("</table>");
    }
    s.push_str("</body></html>\n");
    s
}
