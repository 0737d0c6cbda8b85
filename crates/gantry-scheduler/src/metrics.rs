//! Scheduler metrics, named as kube-scheduler names them, kept in fixed arrays so that
//! recording one costs a clock read and an add (they stay on in benchmarks). Rendered in
//! the Prometheus text format.

use std::fmt::Write;
use std::time::Duration;

use gantry_api::Sym;
use gantry_framework::config::Point;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    Scheduled,
    Unschedulable,
    Error,
}

impl AttemptResult {
    const ALL: [AttemptResult; 3] = [
        AttemptResult::Scheduled,
        AttemptResult::Unschedulable,
        AttemptResult::Error,
    ];

    fn label(self) -> &'static str {
        match self {
            AttemptResult::Scheduled => "scheduled",
            AttemptResult::Unschedulable => "unschedulable",
            AttemptResult::Error => "error",
        }
    }
}

/// The extension points whose duration is recorded, in the order they are rendered.
const MEASURED_POINTS: [Point; 8] = [
    Point::PreFilter,
    Point::Filter,
    Point::PostFilter,
    Point::PreScore,
    Point::Score,
    Point::Reserve,
    Point::Permit,
    Point::Bind,
];

/// Upstream's `extension_point` label: the point's name (`PreFilter`), which is its config
/// field (`preFilter`) capitalised.
fn point_label(point: Point) -> String {
    let field = point.field();
    field[..1].to_uppercase() + &field[1..]
}

/// A histogram with fixed exponential buckets (upper bounds in seconds).
#[derive(Debug, Clone)]
pub struct Histogram {
    bounds: Vec<f64>,
    /// Per bucket (not cumulative); the last counts observations above every bound.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    /// `count` buckets: `start`, `start*factor`, ... (Prometheus' ExponentialBuckets).
    pub fn exponential(start: f64, factor: f64, count: usize) -> Histogram {
        let bounds: Vec<f64> = (0..count).map(|i| start * factor.powi(i as i32)).collect();
        Histogram {
            counts: vec![0; bounds.len() + 1],
            bounds,
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, value: Duration) {
        let seconds = value.as_secs_f64();
        let bucket = self.bounds.partition_point(|b| *b < seconds);
        self.counts[bucket] += 1;
        self.sum += seconds;
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum_seconds(&self) -> f64 {
        self.sum
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            cumulative += count;
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {}", self.count);
        let trimmed = labels.trim_end_matches(',');
        let _ = writeln!(out, "{name}_sum{{{trimmed}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{trimmed}}} {}", self.count);
    }
}

/// Upstream samples plugin execution time in this share of cycles.
pub const PLUGIN_SAMPLE_EVERY: u64 = 10;

#[derive(Debug, Clone)]
pub struct Metrics {
    /// Per profile: attempts and their duration per result.
    profiles: Vec<(Sym, [u64; 3], [Histogram; 3])>,
    /// Per point, indexed by `Point as usize` (those not measured stay empty).
    extension_points: [Histogram; Point::ALL.len()],
    /// (plugin, extension point) -> duration, sampled.
    plugins: Vec<(&'static str, Point, Histogram)>,
    /// active, backoff, unschedulable, gated.
    pub pending_pods: [usize; 4],
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            profiles: Vec::new(),
            extension_points: std::array::from_fn(|_| Histogram::exponential(0.0001, 2.0, 12)),
            plugins: Vec::new(),
            pending_pods: [0; 4],
        }
    }
}

impl Metrics {
    /// `scheduler_schedule_attempts_total` and `scheduler_scheduling_attempt_duration_seconds`.
    pub fn observe_attempt(&mut self, profile: Sym, result: AttemptResult, duration: Duration) {
        let index = match self.profiles.iter().position(|p| p.0 == profile) {
            Some(i) => i,
            None => {
                let histograms = std::array::from_fn(|_| Histogram::exponential(0.001, 2.0, 15));
                self.profiles.push((profile, [0; 3], histograms));
                self.profiles.len() - 1
            }
        };
        let r = result as usize;
        self.profiles[index].1[r] += 1;
        self.profiles[index].2[r].observe(duration);
    }

    /// `scheduler_framework_extension_point_duration_seconds`.
    pub fn observe_extension_point(&mut self, point: Point, duration: Duration) {
        self.extension_points[point as usize].observe(duration);
    }

    /// `scheduler_plugin_execution_duration_seconds` (sampled cycles only).
    pub fn observe_plugin(&mut self, plugin: &'static str, point: Point, duration: Duration) {
        match self
            .plugins
            .iter_mut()
            .find(|p| p.0 == plugin && p.1 == point)
        {
            Some(entry) => entry.2.observe(duration),
            None => {
                let mut h = Histogram::exponential(0.00001, 1.5, 20);
                h.observe(duration);
                self.plugins.push((plugin, point, h));
            }
        }
    }

    pub fn attempts(&self, result: AttemptResult) -> u64 {
        self.profiles.iter().map(|p| p.1[result as usize]).sum()
    }

    pub fn extension_point(&self, point: Point) -> &Histogram {
        &self.extension_points[point as usize]
    }

    /// All metrics in the Prometheus text exposition format.
    pub fn render_prometheus(&self) -> String {
        let mut out = String::new();
        out.push_str("# TYPE scheduler_schedule_attempts_total counter\n");
        for (profile, counts, _) in &self.profiles {
            for result in AttemptResult::ALL {
                let _ = writeln!(
                    out,
                    "scheduler_schedule_attempts_total{{profile=\"{profile}\",result=\"{}\"}} {}",
                    result.label(),
                    counts[result as usize]
                );
            }
        }
        out.push_str("# TYPE scheduler_scheduling_attempt_duration_seconds histogram\n");
        for (profile, _, histograms) in &self.profiles {
            for result in AttemptResult::ALL {
                let labels = format!("profile=\"{profile}\",result=\"{}\",", result.label());
                histograms[result as usize].render(
                    &mut out,
                    "scheduler_scheduling_attempt_duration_seconds",
                    &labels,
                );
            }
        }
        out.push_str("# TYPE scheduler_pending_pods gauge\n");
        for (queue, count) in ["active", "backoff", "unschedulable", "gated"]
            .iter()
            .zip(self.pending_pods)
        {
            let _ = writeln!(out, "scheduler_pending_pods{{queue=\"{queue}\"}} {count}");
        }
        out.push_str("# TYPE scheduler_framework_extension_point_duration_seconds histogram\n");
        for point in MEASURED_POINTS {
            let labels = format!("extension_point=\"{}\",", point_label(point));
            self.extension_points[point as usize].render(
                &mut out,
                "scheduler_framework_extension_point_duration_seconds",
                &labels,
            );
        }
        out.push_str("# TYPE scheduler_plugin_execution_duration_seconds histogram\n");
        for (plugin, point, histogram) in &self.plugins {
            let labels = format!(
                "extension_point=\"{}\",plugin=\"{plugin}\",",
                point_label(*point)
            );
            histogram.render(
                &mut out,
                "scheduler_plugin_execution_duration_seconds",
                &labels,
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_in_the_exposition() {
        let mut h = Histogram::exponential(0.001, 2.0, 3);
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_micros(1500));
        h.observe(Duration::from_secs(1));
        let mut out = String::new();
        h.render(&mut out, "x", "a=\"b\",");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.001\"} 1"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.002\"} 2"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.004\"} 2"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"+Inf\"} 3"), "{out}");
        assert!(out.contains("x_count{a=\"b\"} 3"), "{out}");
    }

    #[test]
    fn attempts_are_counted_per_profile_and_result() {
        let mut m = Metrics::default();
        let profile = Sym::new("default-scheduler");
        m.observe_attempt(profile, AttemptResult::Scheduled, Duration::from_millis(1));
        m.observe_attempt(profile, AttemptResult::Scheduled, Duration::from_millis(2));
        m.observe_attempt(profile, AttemptResult::Error, Duration::from_millis(2));
        assert_eq!(m.attempts(AttemptResult::Scheduled), 2);
        let text = m.render_prometheus();
        assert!(text.contains(
            "scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"} 2"
        ));
        assert!(text.contains("scheduler_pending_pods{queue=\"active\"} 0"));
    }

    #[test]
    fn extension_points_are_labelled_as_upstream_names_them() {
        let mut m = Metrics::default();
        m.observe_extension_point(Point::PreFilter, Duration::from_millis(1));
        m.observe_plugin("NodePorts", Point::PostFilter, Duration::from_millis(1));
        let text = m.render_prometheus();
        let point = "scheduler_framework_extension_point_duration_seconds_count";
        assert!(
            text.contains(&format!("{point}{{extension_point=\"PreFilter\"}} 1")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{point}{{extension_point=\"Bind\"}} 0")),
            "{text}"
        );
        // Points Gantry does not time are not listed.
        assert!(!text.contains("extension_point=\"PreEnqueue\""), "{text}");
        assert!(text.contains(
            "scheduler_plugin_execution_duration_seconds_count{extension_point=\"PostFilter\",plugin=\"NodePorts\"} 1"
        ), "{text}");
    }
}
