//! Scenario files: node groups, workloads that arrive over virtual time, and timed
//! cluster events, in a small YAML format (see docs/simulate.md). Pod templates are ordinary
//! Kubernetes Pod manifests, decoded like any other.
//!
//! ```yaml
//! nodeGroups:
//! - name: general
//!   count: 100
//!   zones: [zone-a, zone-b, zone-c]
//!   allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
//!   labels: {pool: general}
//!   taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
//! workloads:
//! - name: web
//!   count: 300
//!   arrival: {start: 0s, rate: 50/s}
//!   template:
//!     metadata: {labels: {app: web}}
//!     spec: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}
//! events:
//! - {at: 10s, deleteNodes: {group: general, count: 2}}
//! ```
//!
//! Node groups may carry HAMi GPUs (`gpus:`, see `scenario/gpus.rs`) and DRA devices
//! (`devices:`, with `deviceClasses` and workloads' `claims`, see `scenario/devices.rs`).

use std::time::Duration;

use gantry_api::decode::ClusterObjects;
use thiserror::Error;

use crate::{SimEvent, Simulation};
use builder::Builder;
use file::{GroupCount, ScenarioFile, TimedEvent, WorkloadCount};

mod builder;
mod devices;
mod file;
mod gpus;
#[cfg(test)]
mod tests;

#[derive(Debug, Error)]
pub struct ScenarioError {
    pub source_name: String,
    /// Field path, e.g. `workloads[1].arrival.rate`; empty for the file as a whole (its
    /// syntax).
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.field.as_str() {
            "" => write!(f, "{}: {}", self.source_name, self.message),
            field => write!(f, "{}: {field}: {}", self.source_name, self.message),
        }
    }
}

/// The longest duration a scenario may name (ten years): every virtual time stays far
/// from overflowing.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// The most nodes and pods one scenario may create, over all its groups, workloads and
/// events: many times the largest cluster Kubernetes supports (5,000 nodes, 150,000
/// pods), and a clear error before memory runs out.
pub const MAX_NODES: usize = 100_000;
pub const MAX_PODS: usize = 2_000_000;

/// A parsed scenario: the initial cluster, then timed events (pod arrivals included).
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub cluster: ClusterObjects,
    pub events: Vec<(Duration, SimEvent)>,
    /// The file's `events`, one line each, for marking them on plots.
    pub timeline: Vec<Mark>,
}

/// One of a scenario's events as a person reads it: `drain 20 nodes of general`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub at: Duration,
    pub what: String,
}

impl Scenario {
    /// A scenario as the newest release's API server admits its pods.
    pub fn parse(text: &str, source_name: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse_for(text, source_name, gantry_api::Release::default())
    }

    /// A scenario whose pods go through `release`'s API server.
    pub fn parse_for(
        text: &str,
        source_name: &str,
        release: gantry_api::Release,
    ) -> Result<Scenario, ScenarioError> {
        let err = |field: String, message: String| ScenarioError {
            source_name: source_name.to_string(),
            field,
            message,
        };
        let value =
            gantry_api::decode::parse_yaml_value(text).map_err(|e| err(String::new(), e))?;
        let file: ScenarioFile = serde_path_to_error::deserialize(value)
            .map_err(|e| err(e.path().to_string(), e.inner().to_string()))?;
        Builder {
            file: &file,
            source_name,
            release,
            err: &err,
            nodes: std::cell::Cell::new(0),
            pods: std::cell::Cell::new(0),
            first_pods: std::cell::RefCell::default(),
        }
        .build()
    }

    /// Puts the scenario's events on the simulation's clock.
    pub fn schedule_into(&self, sim: &mut Simulation) {
        for (at, event) in &self.events {
            sim.schedule(*at, event.clone());
        }
    }
}

/// `250ms`, `30s`, `5m`, `2h`, or a bare number of seconds; at most `MAX_DURATION`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (like 250ms, 30s, 5m, 2h)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("{text:?} has an unknown unit (use ms, s, m or h)")),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!("{text:?} must be a non-negative duration"));
    }
    if seconds > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "{text:?} is longer than {}, the longest time a scenario may span",
            show_duration(MAX_DURATION)
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `100/s`, `30/m`, `5/h`: the interval between two arrivals (at most `MAX_DURATION`).
pub fn parse_rate(text: &str) -> Result<Duration, String> {
    let (count, unit) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?} is not a rate (like 100/s or 30/m)"))?;
    let count: f64 = count
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a rate (like 100/s or 30/m)"))?;
    if !(count.is_finite() && count > 0.0) {
        return Err(format!("{text:?} must be a positive rate"));
    }
    let per = match unit.trim() {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "{text:?} has an unknown unit {other:?} (use s, m or h)"
            ));
        }
    };
    let interval = per / count;
    if interval > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "{text:?} is too slow: one pod every {interval:.3e} s is longer than {}, the longest time a scenario may span",
            show_duration(MAX_DURATION)
        ));
    }
    Ok(Duration::from_secs_f64(interval))
}

/// When the last of `count` pods arrives, if within `MAX_DURATION`.
fn last_arrival(start: Duration, interval: Duration, count: usize) -> Option<Duration> {
    let steps = u32::try_from(count.saturating_sub(1)).ok()?;
    let last = start.checked_add(interval.checked_mul(steps)?)?;
    (last <= MAX_DURATION).then_some(last)
}

/// `3h`, `90s`, `250ms`: the largest unit that divides the duration.
fn show_duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0s".into(),
        _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        _ if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
        _ if ms.is_multiple_of(1000) => format!("{}s", ms / 1000),
        _ => format!("{ms}ms"),
    }
}

/// A scenario event as a person reads it, for the report's plots.
fn describe(event: &TimedEvent) -> String {
    let nodes = |verb: &str, gc: &GroupCount| format!("{verb} {} {} nodes", gc.count, gc.group);
    let pods = |verb: &str, wc: &WorkloadCount| format!("{verb} {} {} pods", wc.count, wc.workload);
    if let Some(gc) = &event.add_nodes {
        nodes("add", gc)
    } else if let Some(gc) = &event.delete_nodes {
        nodes("delete", gc)
    } else if let Some(gc) = &event.drain_nodes {
        nodes("drain", gc)
    } else if let Some(wc) = &event.delete_pods {
        pods("delete", wc)
    } else if let Some(wc) = &event.scale {
        pods("add", wc)
    } else {
        String::new()
    }
}
