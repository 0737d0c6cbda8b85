//! `gantry run --shadow`: Gantry decides every pod another scheduler places, writes
//! nothing to the cluster, and compares its decision with the real binding when the watch
//! shows it. A decision is held as kube-scheduler holds its own (assumed in the cache,
//! Reserve done), so that the next pod's decision sees it; the real binding replaces it:
//! on the same node it confirms it, elsewhere the decision is unreserved and forgotten,
//! and the reason is found (the real node fit by every Filter plugin: Gantry scored it
//! lower; it did not: the plugin that refused it). A summary line a minute, counters on
//! `/metrics`, and a file of the disagreements (JSON Lines).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry_api::{Pod, Sym};
use gantry_scheduler::{BindingCycle, LastCycle};
use serde::Serialize;

/// How often the summary line is logged.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(60);

/// The reason of a disagreement where the real node passed every Filter plugin.
pub const SCORED_LOWER: &str = "Score";

/// What Gantry decided for a pod, awaiting the real binding.
pub(crate) enum Decision {
    /// Assumed on its node, with the cycle that concludes it, and what the scheduling
    /// cycle saw of the other nodes.
    Node(Box<BindingCycle>, Box<LastCycle>),
    /// Fits nowhere, by this message (the plugins that rejected it).
    Unschedulable {
        message: String,
        plugins: Vec<String>,
    },
}

/// One disagreement, as written to the file.
#[derive(Debug, Clone, Serialize)]
pub struct Disagreement {
    pub pod: String,
    /// Where the other scheduler bound it.
    pub bound_to: String,
    /// Where Gantry would have; `None` when it found no node.
    pub gantry: Option<String>,
    /// Where the real node fits in Gantry's view now, how Gantry's cycle judged it:
    /// `Score` (scored lower), `tie` (scored as high, the tie broken the other way), `not
    /// searched` (the cycle stopped before reaching it), or the Filter plugin that refused
    /// it then. Else the Filter plugin that refuses the real node now, or for a pod Gantry
    /// found unschedulable the plugins that rejected it.
    pub reason: String,
    /// Gantry's message: why the real node does not fit, or why no node does.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Seconds since the instance started.
    pub at_s: f64,
}

/// The counts so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShadowCounts {
    pub agreed: u64,
    pub disagreed: u64,
    /// Bound by the other scheduler before Gantry decided.
    pub missed: u64,
    /// Disagreements by reason.
    pub by_reason: BTreeMap<String, u64>,
}

/// The shadow's state in the scheduling loop.
pub(crate) struct Shadow {
    decisions: HashMap<Arc<str>, Decision>,
    pub counts: ShadowCounts,
    file: Option<Box<dyn Write + Send>>,
    last_summary: Instant,
}

impl Shadow {
    pub fn new(file: Option<Box<dyn Write + Send>>) -> Shadow {
        Shadow {
            decisions: HashMap::new(),
            counts: ShadowCounts::default(),
            file,
            last_summary: Instant::now(),
        }
    }

    pub fn decided(&mut self, uid: Arc<str>, decision: Decision) {
        if let Some(Decision::Node(earlier, _)) = self.decisions.insert(uid, decision) {
            // A pod decided twice: the first decision is given back.
            let _ = earlier.finish(Err("decided again".into()));
        }
    }

    /// The decision for a pod the watch shows bound (or deleted), if Gantry made one.
    pub fn take(&mut self, uid: &str) -> Option<Decision> {
        self.decisions.remove(uid)
    }

    pub fn agreed(&mut self) {
        self.counts.agreed += 1;
    }

    pub fn missed(&mut self) {
        self.counts.missed += 1;
    }

    /// Counts a disagreement and writes it to the file (a failing file is said once).
    pub fn disagreed(&mut self, disagreement: Disagreement) {
        self.counts.disagreed += 1;
        *self
            .counts
            .by_reason
            .entry(disagreement.reason.clone())
            .or_default() += 1;
        let Some(file) = &mut self.file else { return };
        let mut line = serde_json::to_vec(&disagreement).expect("plain data");
        line.push(b'\n');
        if let Err(error) = file.write_all(&line).and_then(|()| file.flush()) {
            tracing::error!(%error, "cannot write the disagreements file; no more are written");
            self.file = None;
        }
    }

    /// The summary line, once a minute.
    pub fn summary_due(&mut self) -> Option<String> {
        if self.last_summary.elapsed() < SUMMARY_EVERY {
            return None;
        }
        self.last_summary = Instant::now();
        Some(self.summary())
    }

    pub fn summary(&self) -> String {
        let c = &self.counts;
        let compared = c.agreed + c.disagreed;
        let ratio = if compared == 0 {
            100.0
        } else {
            c.agreed as f64 * 100.0 / compared as f64
        };
        let reasons: Vec<String> = (c.by_reason.iter())
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        format!(
            "shadow: {compared} bindings compared, {ratio:.1}% as Gantry decided; disagreements by reason: {}; {} bound before Gantry decided",
            if reasons.is_empty() {
                "none".into()
            } else {
                reasons.join(", ")
            },
            c.missed
        )
    }

    /// The counters, in Prometheus' text format.
    pub fn render(&self) -> String {
        let c = &self.counts;
        let mut out = String::new();
        out.push_str("# HELP gantry_shadow_decisions_total Bindings of the shadowed scheduler, by whether Gantry decided the same node.\n");
        out.push_str("# TYPE gantry_shadow_decisions_total counter\n");
        for (result, n) in [
            ("agree", c.agreed),
            ("disagree", c.disagreed),
            ("missed", c.missed),
        ] {
            let _ = writeln!(
                out,
                "gantry_shadow_decisions_total{{result=\"{result}\"}} {n}"
            );
        }
        out.push_str("# HELP gantry_shadow_disagreements_total Disagreements by reason: Score, or the Filter plugin that refuses the real node in Gantry's view.\n");
        out.push_str("# TYPE gantry_shadow_disagreements_total counter\n");
        for (reason, n) in &c.by_reason {
            let reason = reason.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(
                out,
                "gantry_shadow_disagreements_total{{reason=\"{reason}\"}} {n}"
            );
        }
        out
    }
}

/// The pod as if bound to `node`, for the Filter check of the real node.
pub(crate) fn placed_on(pod: &Pod, node: Sym) -> Arc<Pod> {
    let mut pod = pod.clone();
    pod.node_name = Some(node);
    Arc::new(pod)
}
