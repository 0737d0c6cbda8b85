//! DefaultPreemption: when a pod fits nowhere, find a node where evicting lower-priority
//! pods makes room, choosing victims and node as kube-scheduler does.

use std::collections::HashMap;
use std::sync::Arc;

use gantry_api::{Pod, PodDisruptionBudget, PreemptionPolicy, Sym};
use gantry_cache::{ClusterState, NodeInfo, Snapshot};
use gantry_framework::{Code, CycleState, Profile, Status};
use smallvec::SmallVec;

use crate::fit_error::FitError;
use crate::framework_runner::PodFilters;
use crate::rng::Rng;

pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
pub const POLICY_NEVER: &str = "not eligible due to preemptionPolicy=Never.";

pub enum Outcome {
    Nominated {
        node: Sym,
        victims: Vec<Arc<Pod>>,
    },
    /// The message that follows `preemption: `.
    Failed(String),
}

pub struct Preemption<'a> {
    pub profile: &'a Profile,
    pub snapshot: &'a Snapshot,
    pub nominated: &'a crate::scheduler::Nominations,
    /// The cluster's PodDisruptionBudgets: victims they protect are spared first, and
    /// nodes whose eviction would break fewer of them win.
    pub budgets: &'a [PodDisruptionBudget],
}

/// A node where evicting `victims` makes room for the pod.
struct Candidate {
    node: Sym,
    /// Most important first.
    victims: Vec<Arc<Pod>>,
    /// Victims whose eviction a PodDisruptionBudget does not allow.
    pdb_violations: usize,
}

/// Upstream's `MoreImportantPod`: higher priority, then earlier start.
fn more_important(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| start_time(a).cmp(&start_time(b)))
}

/// A pod without a start time counts as started now (later than any recorded one).
fn start_time(pod: &Pod) -> i64 {
    pod.start_time.unwrap_or(i64::MAX)
}

/// Upstream's `filterPodsWithPDBViolation`: walks the pods (most important first) and
/// spends each covering budget's `disruptionsAllowed`; a pod that overdraws one is
/// violating. Pods whose eviction a budget already recorded (`disruptedPods`) spend
/// nothing. Both groups keep the input order.
fn split_by_budget_violation(
    pods: Vec<Arc<Pod>>,
    budgets: &[PodDisruptionBudget],
) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
    let mut allowed: SmallVec<[i32; 8]> = budgets.iter().map(|b| b.disruptions_allowed).collect();
    let (mut violating, mut non_violating) = (Vec::new(), Vec::new());
    for pod in pods {
        let mut violates = false;
        if !pod.labels.is_empty() {
            for (budget, allowed) in budgets.iter().zip(allowed.iter_mut()) {
                if !budget.covers(&pod) || budget.has_disrupted(&pod) {
                    continue;
                }
                *allowed -= 1;
                violates |= *allowed < 0;
            }
        }
        if violates {
            violating.push(pod);
        } else {
            non_violating.push(pod);
        }
    }
    (violating, non_violating)
}

/// What a dry run over the nodes found: candidates (those that break no budget first),
/// and why the other nodes cannot help.
struct DryRun {
    candidates: Vec<Candidate>,
    statuses: Vec<(Sym, Status)>,
}

impl Preemption<'_> {
    pub fn run(
        &self,
        state: &CycleState,
        pod: &Arc<Pod>,
        fit_error: &FitError,
        rng: &mut Rng,
    ) -> Outcome {
        if pod.preemption_policy == PreemptionPolicy::Never {
            return Outcome::Failed(POLICY_NEVER.to_string());
        }
        let statuses: HashMap<Sym, &Status, foldhash::fast::RandomState> = fit_error
            .node_statuses
            .iter()
            .map(|(n, s)| (*n, s))
            .collect();
        let mut unhelpful: Vec<(Sym, Status)> = Vec::new();
        let mut potential = Vec::new();
        for position in 0..self.snapshot.num_nodes() {
            let name = self.snapshot.node_at(position).name();
            match statuses.get(&name) {
                Some(s) if s.code() == Code::UnschedulableAndUnresolvable => {
                    unhelpful.push((name, Status::unresolvable(NOT_HELPFUL)));
                }
                _ => potential.push(position),
            }
        }
        let mut dry_run = DryRun {
            candidates: Vec::new(),
            statuses: Vec::new(),
        };
        if !potential.is_empty() {
            let offset = rng.below(potential.len() as u64) as usize;
            dry_run = self.dry_run(state, pod, &potential, offset);
        }
        if dry_run.candidates.is_empty() {
            unhelpful.extend(dry_run.statuses);
            let inner = FitError {
                num_all_nodes: unhelpful.len(),
                node_statuses: unhelpful,
                pre_filter_message: None,
                post_filter_message: None,
            };
            return Outcome::Failed(inner.to_string());
        }
        let best = pick_one_node(dry_run.candidates);
        Outcome::Nominated {
            node: best.node,
            victims: best.victims,
        }
    }

    /// Upstream's `DryRunPreemption` (one worker): tries the nodes from `offset` on, until
    /// a candidate breaking no budget is found and there are enough candidates (upstream's
    /// `GetOffsetAndNumCandidates`: a share of the nodes, at least an absolute number, at
    /// most all). Each kind of candidate is kept up to that number.
    fn dry_run(
        &self,
        state: &CycleState,
        pod: &Arc<Pod>,
        potential: &[usize],
        offset: usize,
    ) -> DryRun {
        let wanted = (potential.len() * self.profile.min_candidate_nodes_percentage as usize / 100)
            .max(self.profile.min_candidate_nodes_absolute as usize)
            .min(potential.len());
        let filters = PodFilters::new(self.profile, state);
        let (mut non_violating, mut violating) = (Vec::new(), Vec::new());
        let mut statuses = Vec::new();
        for i in 0..potential.len() {
            let info = self
                .snapshot
                .node_at(potential[(offset + i) % potential.len()]);
            match self.select_victims(&filters, state, pod, info) {
                Ok(candidate) => {
                    let kept = if candidate.pdb_violations == 0 {
                        &mut non_violating
                    } else {
                        &mut violating
                    };
                    if kept.len() < wanted {
                        kept.push(candidate);
                    }
                }
                Err(status) => statuses.push((info.name(), status)),
            }
            if !non_violating.is_empty() && non_violating.len() + violating.len() >= wanted {
                break;
            }
        }
        non_violating.append(&mut violating);
        DryRun {
            candidates: non_violating,
            statuses,
        }
    }

    /// Upstream's `SelectVictimsOnNode`: removes every lower-priority pod, checks the pod
    /// then fits, and gives back as many of them as still leave room: those a budget
    /// protects first, then the others, most important first within each group.
    fn select_victims(
        &self,
        filters: &PodFilters<'_>,
        state: &CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
    ) -> Result<Candidate, Status> {
        // Most nodes hold no pod of lower priority: say so before cloning anything.
        if !node.pods().iter().any(|p| p.priority < pod.priority) {
            return Err(Status::unresolvable(NO_VICTIMS));
        }
        let mut info = node.clone();
        let mut state = state.clone();
        let mut potential: Vec<Arc<Pod>> = info
            .pods()
            .iter()
            .filter(|p| p.priority < pod.priority)
            .cloned()
            .collect();
        for victim in &potential {
            info.remove_pod(&victim.uid);
            for plugin in &self.profile.pre_filter {
                plugin.remove_pod(&mut state, pod, victim, &info);
            }
        }
        let nominated = self.nominated.get(&info.name()).map_or(&[][..], |v| v);
        let status = filters.run_with_nominated(&state, pod, &info, nominated);
        if !status.is_success() {
            return Err(status);
        }
        potential.sort_by(|a, b| more_important(a, b));
        let (violating, non_violating) = split_by_budget_violation(potential, self.budgets);
        let mixed = !violating.is_empty() && !non_violating.is_empty();
        let in_reprieve_order = violating
            .into_iter()
            .map(|p| (p, true))
            .chain(non_violating.into_iter().map(|p| (p, false)));
        let mut victims = Vec::new();
        let mut pdb_violations = 0;
        for (candidate, violates) in in_reprieve_order {
            info.add_pod(candidate.clone());
            for plugin in &self.profile.pre_filter {
                plugin.add_pod(&mut state, pod, &candidate, &info);
            }
            if !filters
                .run_with_nominated(&state, pod, &info, nominated)
                .is_success()
            {
                info.remove_pod(&candidate.uid);
                for plugin in &self.profile.pre_filter {
                    plugin.remove_pod(&mut state, pod, &candidate, &info);
                }
                pdb_violations += usize::from(violates);
                victims.push(candidate);
            }
        }
        if victims.is_empty() {
            return Err(Status::error(format!(
                "expected at least one victim pod on node {:?}",
                node.name().as_str()
            )));
        }
        if mixed {
            victims.sort_by(|a, b| more_important(a, b));
        }
        Ok(Candidate {
            node: info.name(),
            victims,
            pdb_violations,
        })
    }
}

/// Upstream's `pickOneNodeForPreemption` criteria, in order, each keeping the best subset:
/// fewest budget violations, lowest highest-victim priority, smallest sum of priorities,
/// fewest victims, latest earliest start among the highest-priority victims. Remaining
/// ties: the first candidate.
fn pick_one_node(candidates: Vec<Candidate>) -> Candidate {
    type Criterion = fn(&Candidate) -> i64;
    let criteria: [Criterion; 5] = [
        |c| -(c.pdb_violations as i64),
        |c| -i64::from(c.victims.first().map_or(i32::MIN, |v| v.priority)),
        |c| {
            -c.victims
                .iter()
                .map(|v| i64::from(v.priority) + i64::from(i32::MAX) + 1)
                .sum::<i64>()
        },
        |c| -(c.victims.len() as i64),
        |c| {
            let top = c.victims.first().map_or(0, |v| v.priority);
            c.victims
                .iter()
                .filter(|v| v.priority == top)
                .map(|v| start_time(v))
                .min()
                .unwrap_or(i64::MAX)
        },
    ];
    let mut remaining = candidates;
    for criterion in criteria {
        if remaining.len() == 1 {
            break;
        }
        let best = remaining.iter().map(criterion).max().unwrap_or(0);
        remaining.retain(|c| criterion(c) == best);
    }
    remaining.swap_remove(0)
}
