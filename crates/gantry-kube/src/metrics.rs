//! The backend's own counters (binds, conflicts, watch failures and relists, leadership);
//! `/metrics` serves them after the scheduler's metrics, which keep kube-scheduler's
//! names. Written in the Prometheus text format 0.0.4 that `/metrics` declares (as
//! kube-scheduler's are): a counter's `# TYPE` line names its samples, `_total` included.
//! (prometheus-client's encoder writes OpenMetrics only, whose `# TYPE` names a counter
//! without `_total` and whose text ends with `# EOF`: read as 0.0.4, those samples have
//! no type.)

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::watch::Kind;

#[derive(Default)]
pub struct KubeMetrics {
    bound: AtomicU64,
    failed: AtomicU64,
    conflicts: AtomicU64,
    handed_on: AtomicU64,
    /// Per kind, in [`Kind::ALL`]'s order.
    watch_errors: [AtomicU64; Kind::ALL.len()],
    relists: [AtomicU64; Kind::ALL.len()],
    leader: AtomicBool,
}

fn index(kind: Kind) -> usize {
    Kind::ALL
        .iter()
        .position(|&k| k == kind)
        .expect("every kind is in Kind::ALL")
}

/// `# HELP` and `# TYPE` of one family.
fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

impl KubeMetrics {
    pub fn bind(&self, ok: bool) {
        let counter = if ok { &self.bound } else { &self.failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn conflict(&self) {
        self.conflicts.fetch_add(1, Ordering::Relaxed);
    }

    /// A pod that fits none of this shard's nodes was handed on to the next shard.
    pub fn handed_on(&self) {
        self.handed_on.fetch_add(1, Ordering::Relaxed);
    }

    /// Pods this shard handed on so far.
    pub fn handoffs(&self) -> u64 {
        self.handed_on.load(Ordering::Relaxed)
    }

    pub fn conflicts(&self) -> u64 {
        self.conflicts.load(Ordering::Relaxed)
    }

    pub fn watch_error(&self, kind: Kind) {
        self.watch_errors[index(kind)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn relisted(&self, kind: Kind) {
        self.relists[index(kind)].fetch_add(1, Ordering::Relaxed);
    }

    /// Complete lists of a resource so far (by its plural, e.g. `pods`).
    pub fn relists_of(&self, resource: &str) -> u64 {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == resource)
            .map_or(0, |kind| self.relists[index(kind)].load(Ordering::Relaxed))
    }

    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
    }

    /// The counters in the Prometheus text format, every label value present from the
    /// start (a series that appears late breaks `rate()`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        header(
            &mut out,
            "gantry_binds_total",
            "counter",
            "Binds written through pods/binding, by result.",
        );
        for (result, counter) in [("bound", &self.bound), ("failed", &self.failed)] {
            let value = counter.load(Ordering::Relaxed);
            let _ = writeln!(out, "gantry_binds_total{{result=\"{result}\"}} {value}");
        }
        header(
            &mut out,
            "gantry_bind_conflicts_total",
            "counter",
            "Placements the binder refused because the latest cache no longer fits them.",
        );
        let _ = writeln!(out, "gantry_bind_conflicts_total {}", self.conflicts());
        header(
            &mut out,
            "gantry_shard_handoffs_total",
            "counter",
            "Pods handed on to the next shard, fitting none of this shard's nodes (shards dividing the nodes).",
        );
        let _ = writeln!(out, "gantry_shard_handoffs_total {}", self.handoffs());
        for (name, help, counters) in [
            (
                "gantry_watch_errors_total",
                "Watch or list failures, retried with backoff.",
                &self.watch_errors,
            ),
            (
                "gantry_watch_relists_total",
                "Complete lists of a resource (at start, and after 410 Gone).",
                &self.relists,
            ),
        ] {
            header(&mut out, name, "counter", help);
            for (kind, counter) in Kind::ALL.iter().zip(counters) {
                let value = counter.load(Ordering::Relaxed);
                let _ = writeln!(out, "{name}{{resource=\"{}\"}} {value}", kind.name());
            }
        }
        header(
            &mut out,
            "gantry_leader",
            "gauge",
            "1 while this instance holds the leader lease (or runs without election).",
        );
        let _ = writeln!(out, "gantry_leader {}", u8::from(self.is_leader()));
        out
    }
}
