//! Why a pod did not fit: kube-scheduler's message, and the same facts in structured form.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use gantry_api::dra::ResourceClaim;

use gantry_api::{LeftOutNodes, Pod, Release, Sym};
use gantry_cache::{ClusterState, Snapshot};
use gantry_framework::plugins::dynamic_resources::{self, ClaimsPostFilter};
use gantry_framework::{CycleState, Profile, Status};

/// The outcome of a failed scheduling attempt over `num_all_nodes` nodes.
#[derive(Debug, Clone, Default)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// The rejecting status of every node that was evaluated and failed.
    pub node_statuses: Vec<(Sym, Status)>,
    /// Set when a PreFilter plugin rejected the pod for all nodes.
    pub pre_filter_message: Option<String>,
    /// What the PostFilter plugins said (`no new claims to deallocate, preemption: ...`),
    /// if any ran.
    pub post_filter_message: Option<String>,
    /// The release whose message format and rules apply.
    pub release: Release,
    /// A claim DynamicResources' PostFilter frees, as the cycle saw it: the caller
    /// writes it without allocation and reservations, conditioned on that version, as
    /// upstream writes it before the pod is retried.
    pub claim_to_deallocate: Option<Arc<ResourceClaim>>,
    /// A claim DynamicResources' PostFilter deletes: one an earlier attempt made for the
    /// pod's extended resources and left behind.
    pub claim_to_delete: Option<Arc<ResourceClaim>>,
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

    /// Adds a PostFilter plugin's rejection; several are joined with `, ` as upstream
    /// joins the reasons of one status.
    pub fn add_post_filter_reason(&mut self, reason: &str) {
        match &mut self.post_filter_message {
            Some(message) => {
                message.push_str(", ");
                message.push_str(reason);
            }
            None => self.post_filter_message = Some(reason.to_string()),
        }
    }

    /// DynamicResources' PostFilter, where the profile has it: its reason joins the
    /// message, and a claim it frees is kept for the caller to write. Returns whether
    /// the other PostFilter plugins (preemption) run after it: not when a PreFilter
    /// rejected the pod before DynamicResources' own PreFilter ran, as upstream then
    /// fails reading that plugin's state and stops with its error, `not found`.
    pub fn run_claims_post_filter(
        &mut self,
        profile: &Profile,
        pod: &Pod,
        state: &CycleState,
    ) -> bool {
        if !profile.deallocates_claims {
            return true;
        }
        let outcome = dynamic_resources::post_filter(state, pod);
        self.add_post_filter_reason(outcome.reason());
        match outcome {
            ClaimsPostFilter::StateNotFound => false,
            ClaimsPostFilter::Deallocate(claim) => {
                self.claim_to_deallocate = Some(claim);
                true
            }
            ClaimsPostFilter::DeleteLeftBehind(claim) => {
                self.claim_to_delete = Some(claim);
                true
            }
            ClaimsPostFilter::NoNewClaims | ClaimsPostFilter::StillNotSchedulable => true,
        }
    }

    /// The nodes a PreFilter result left out (those of `scope`, every node if `None`,
    /// not at `searched`; sorted snapshot positions), where the release reports them: v1.30 as `node is filtered out by the
    /// prefilter result`, v1.32 on as `node(s) didn't satisfy plugin(s) [...]`. Either
    /// way they count in the message, and preemption leaves them alone (as it does from
    /// v1.31, when they go unreported; see [`Release::left_out_nodes`]).
    pub fn add_nodes_left_out(
        &mut self,
        snapshot: &Snapshot,
        scope: Option<&[usize]>,
        searched: &[usize],
        plugins: &[&'static str],
    ) {
        let status = match self.release.left_out_nodes() {
            LeftOutNodes::Uncounted | LeftOutNodes::Absent => return,
            LeftOutNodes::FilteredOut => {
                Status::unresolvable("node is filtered out by the prefilter result")
            }
            LeftOutNodes::DidNotSatisfy => {
                let mut names: Vec<&str> = plugins.to_vec();
                names.sort_unstable();
                names.dedup();
                Status::unresolvable(format!(
                    "node(s) didn't satisfy plugin(s) [{}]",
                    names.join(" ")
                ))
            }
        };
        let mut searched = searched.iter().peekable();
        let mut add = |position: usize| {
            if searched.next_if_eq(&&position).is_none() {
                self.node_statuses
                    .push((snapshot.node_at(position).name(), status.clone()));
            }
        };
        match scope {
            Some(scope) => scope.iter().copied().for_each(&mut add),
            None => (0..snapshot.num_nodes()).for_each(&mut add),
        }
    }

    /// The plugins that rejected the pod somewhere: the queue retries the pod on the
    /// events they registered.
    /// A handful of plugins among thousands of nodes: each is kept once as it is met,
    /// not once per node.
    pub fn rejecting_plugins(&self) -> Vec<&'static str> {
        let mut plugins: Vec<&'static str> = Vec::new();
        for (_, status) in &self.node_statuses {
            let plugin = status.plugin();
            if !plugin.is_empty() && !plugins.contains(&plugin) {
                plugins.push(plugin);
            }
        }
        plugins.sort_unstable();
        plugins
    }
}

impl fmt::Display for FitError {
    /// `0/N nodes are available: <count> <reason>, ... .` with the items sorted as
    /// strings, then what PostFilter said (` preemption: ...`), to which v1.28 added a
    /// period of its own.
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
            write!(f, " {message}")?;
            if !self.release.single_final_period() {
                f.write_str(".")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_matches_kube_scheduler_v1_28() {
        let err = FitError {
            release: Release::at(28),
            num_all_nodes: 3,
            node_statuses: vec![
                (Sym::new("a"), Status::unschedulable("Insufficient cpu").with_reason("Insufficient memory")),
                (Sym::new("b"), Status::unschedulable("Insufficient cpu")),
                (Sym::new("c"), Status::unresolvable("node(s) had untolerated taint {k: v}")),
            ],
            pre_filter_message: None,
            claim_to_deallocate: None,
            claim_to_delete: None,
            post_filter_message: Some(
                "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.".into(),
            ),
        };
        assert_eq!(
            err.to_string(),
            "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
        );
    }

    /// v1.35: one final period, and DynamicResources' PostFilter before preemption.
    #[test]
    fn message_matches_kube_scheduler_v1_35() {
        let mut err = FitError {
            num_all_nodes: 2,
            node_statuses: vec![
                (Sym::new("a"), Status::unschedulable("Insufficient cpu")),
                (
                    Sym::new("b"),
                    Status::unresolvable("node(s) had untolerated taint(s)"),
                ),
            ],
            ..FitError::default()
        };
        err.add_post_filter_reason(ClaimsPostFilter::NoNewClaims.reason());
        err.add_post_filter_reason(
            "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.",
        );
        assert_eq!(
            err.to_string(),
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
        );
    }
}
