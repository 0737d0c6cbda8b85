//! Why a pod did not fit: kube-scheduler's message, and the same facts in structured form.

use std::collections::BTreeMap;
use std::fmt;

use gantry_api::Sym;
use gantry_framework::Status;

/// The outcome of a failed scheduling attempt over `num_all_nodes` nodes.
#[derive(Debug, Clone, Default)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// The rejecting status of every node that was evaluated and failed.
    pub node_statuses: Vec<(Sym, Status)>,
    /// Set when a PreFilter plugin rejected the pod for all nodes.
    pub pre_filter_message: Option<String>,
    /// What preemption said (`preemption: ...`), if it ran.
    pub post_filter_message: Option<String>,
}

impl FitError {
    /// `reason -> count` over the failed nodes (a node counts once per reason it gave);
    /// the reasons borrowed, not copied per node.
    pub fn reason_counts(&self) -> BTreeMap<&str, usize> {
        let mut counts = BTreeMap::new();
        for (_, status) in &self.node_statuses {
            for reason in status.reasons() {
                *counts.entry(reason).or_default() += 1;
            }
        }
        counts
    }

    /// The plugins that rejected the pod somewhere: the queue retries the pod on the
    /// events they registered.
    pub fn rejecting_plugins(&self) -> Vec<&'static str> {
        let mut plugins: Vec<&'static str> = self
            .node_statuses
            .iter()
            .map(|(_, s)| s.plugin())
            .filter(|p| !p.is_empty())
            .collect();
        plugins.sort_unstable();
        plugins.dedup();
        plugins
    }
}

impl fmt::Display for FitError {
    /// `0/N nodes are available: <count> <reason>, ... .` with the items sorted as
    /// strings, then ` preemption: ... .` — exactly as kube-scheduler v1.28 prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        if let Some(message) = &self.pre_filter_message {
            write!(f, " {message}.")?;
        } else {
            let mut items: Vec<String> = self
                .reason_counts()
                .into_iter()
                .map(|(reason, count)| format!("{count} {reason}"))
                .collect();
            items.sort();
            if !items.is_empty() {
                write!(f, " {}.", items.join(", "))?;
            }
        }
        if let Some(message) = &self.post_filter_message {
            write!(f, " {message}.")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_matches_kube_scheduler() {
        let err = FitError {
            num_all_nodes: 3,
            node_statuses: vec![
                (Sym::new("a"), Status::unschedulable("Insufficient cpu").with_reason("Insufficient memory")),
                (Sym::new("b"), Status::unschedulable("Insufficient cpu")),
                (Sym::new("c"), Status::unresolvable("node(s) had untolerated taint {k: v}")),
            ],
            pre_filter_message: None,
            post_filter_message: Some(
                "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.".into(),
            ),
        };
        assert_eq!(
            err.to_string(),
            "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
        );
    }
}
