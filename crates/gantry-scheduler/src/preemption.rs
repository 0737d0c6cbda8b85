//! DefaultPreemption: when a pod fits nowhere, find a node where evicting lower-priority
//! pods makes room, choosing victims and node as kube-scheduler does.

use std::collections::HashMap;
use std::sync::Arc;

use gantry_api::{Gate, LeftOutNodes, Pod, PodDisruptionBudget, PreemptionPolicy, Sym};
use gantry_cache::{ClusterState, GroupKey, NodeInfo, SharedPodGroups, Snapshot};
use gantry_framework::{Code, CycleState, Profile, Status};
use smallvec::SmallVec;

use crate::fit_error::FitError;
use crate::framework_runner::PodFilters;
use crate::rng::Rng;

pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
pub const POLICY_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
pub const VICTIM_TERMINATING: &str = "not eligible due to a terminating pod on the nominated node.";

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
    /// Most important first; inline up to four, since a dry run keeps up to a hundred
    /// candidates per preemptor and only the chosen one's victims outlive it.
    victims: SmallVec<[Arc<Pod>; 4]>,
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
/// nothing. One flag per pod, in the pods' order.
fn budget_violations(pods: &[Arc<Pod>], budgets: &[PodDisruptionBudget]) -> SmallVec<[bool; 32]> {
    let mut allowed: SmallVec<[i32; 8]> = budgets.iter().map(|b| b.disruptions_allowed).collect();
    pods.iter()
        .map(|pod| {
            let mut violates = false;
            if !pod.labels.is_empty() {
                for (budget, allowed) in budgets.iter().zip(allowed.iter_mut()) {
                    if !budget.covers(pod) || budget.has_disrupted(pod) {
                        continue;
                    }
                    *allowed -= 1;
                    violates |= *allowed < 0;
                }
            }
            violates
        })
        .collect()
}

/// What a dry run over the nodes found: candidates (those that break no budget first),
/// and why the other nodes cannot help.
struct DryRun {
    candidates: Vec<Candidate>,
    statuses: Vec<(Sym, Status)>,
}

/// DefaultPreemption's refusal of a pod-group member (v1.36). With
/// TopologyAwareWorkloadScheduling, preempting for each placement tried would preempt once
/// per topology option, so a member of a group with scheduling constraints is not
/// preempted for; with WorkloadAwarePreemption no member is, the group cycle preempts for
/// the whole group instead.
pub fn refused_for_group(
    profile: &Profile,
    pod: &Pod,
    groups: &SharedPodGroups,
) -> Option<&'static str> {
    let key = GroupKey::of(pod)?;
    let release = profile.release;
    if release.enabled(Gate::TopologyAwareWorkloadScheduling) {
        match groups.lock().group(key) {
            None => return Some("pod group for pod not found"),
            Some(group) if group.constraints.is_some() => {
                return Some("not eligible due to placement-based pod group scheduling limitation");
            }
            Some(_) => {}
        }
    }
    release
        .enabled(Gate::WorkloadAwarePreemption)
        .then_some("not eligible due to workload aware preemption enabled")
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
        if self.awaits_its_victims(pod, &statuses) {
            return Outcome::Failed(VICTIM_TERMINATING.to_string());
        }
        // Until v1.30 every node not rejected for good may help; from v1.31 only those
        // rejected as Unschedulable (`NodesForStatusCode`), so not the nodes a PreFilter
        // result left out.
        let only_unschedulable = matches!(
            self.profile.release.left_out_nodes(),
            LeftOutNodes::Absent | LeftOutNodes::DidNotSatisfy
        );
        let mut unhelpful: Vec<(Sym, Status)> = Vec::new();
        let mut potential = Vec::new();
        for position in 0..self.snapshot.num_nodes() {
            let name = self.snapshot.node_at(position).name();
            let helps = match statuses.get(&name) {
                Some(s) => s.code() != Code::UnschedulableAndUnresolvable,
                None => !only_unschedulable,
            };
            if helps {
                potential.push(position);
            } else {
                unhelpful.push((name, Status::unresolvable(NOT_HELPFUL)));
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
                release: self.profile.release,
                claim_to_deallocate: None,
                claim_to_delete: None,
            };
            return Outcome::Failed(inner.to_string());
        }
        let best = pick_one_node(dry_run.candidates);
        Outcome::Nominated {
            node: best.node,
            victims: best.victims.into_vec(),
        }
    }

    /// Upstream's `PodEligibleToPreemptOthers` past the policy: a pod nominated to a node
    /// where a lower-priority pod is still terminating as a preemption victim waits for it
    /// to go rather than evicting more (unless filters now reject that node for good).
    fn awaits_its_victims(
        &self,
        pod: &Pod,
        statuses: &HashMap<Sym, &Status, foldhash::fast::RandomState>,
    ) -> bool {
        let Some(nominated) = pod.nominated_node_name else {
            return false;
        };
        if statuses
            .get(&nominated)
            .is_some_and(|s| s.code() == Code::UnschedulableAndUnresolvable)
        {
            return false;
        }
        self.snapshot.node(nominated).is_some_and(|node| {
            node.pods()
                .iter()
                .any(|p| p.priority < pod.priority && p.terminating && p.preempted_by_scheduler)
        })
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
        let mut scratch = Scratch::default();
        for i in 0..potential.len() {
            let info = self
                .snapshot
                .node_at(potential[(offset + i) % potential.len()]);
            match self.select_victims(&filters, state, pod, info, &mut scratch) {
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
        cycle_state: &CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
        scratch: &mut Scratch,
    ) -> Result<Candidate, Status> {
        // Most nodes hold no pod of lower priority: say so before cloning anything.
        if !node.pods().iter().any(|p| p.priority < pod.priority) {
            return Err(Status::unresolvable(NO_VICTIMS));
        }
        let Scratch {
            info,
            state,
            potential,
        } = scratch;
        info.clone_from(node);
        state.clone_from(cycle_state);
        potential.clear();
        potential.extend(
            node.pods()
                .iter()
                .filter(|p| p.priority < pod.priority)
                .cloned(),
        );
        for victim in potential.iter() {
            info.remove_pod(&victim.uid);
            filters.pre_filter_update_for_pod(state, pod, victim, info, -1);
        }
        let nominated = self.nominated.on(info.name());
        let status = filters.run_with_nominated_in_place(state, pod, info, nominated);
        if !status.is_success() {
            return Err(status);
        }
        potential.sort_by(|a, b| more_important(a, b));
        let violations = budget_violations(potential, self.budgets);
        let mixed = violations.contains(&true) && violations.contains(&false);
        // Violating pods first, then the others, each group most important first.
        let flagged = || potential.iter().zip(violations.iter().copied());
        let in_reprieve_order = flagged()
            .filter(|(_, violates)| *violates)
            .chain(flagged().filter(|(_, violates)| !*violates));
        let mut victims: SmallVec<[Arc<Pod>; 4]> = SmallVec::new();
        let mut pdb_violations = 0;
        for (candidate, violates) in in_reprieve_order {
            info.add_pod(Arc::clone(candidate));
            filters.pre_filter_update_for_pod(state, pod, candidate, info, 1);
            if !filters
                .run_with_nominated_in_place(state, pod, info, nominated)
                .is_success()
            {
                info.remove_pod(&candidate.uid);
                filters.pre_filter_update_for_pod(state, pod, candidate, info, -1);
                pdb_violations += usize::from(violates);
                victims.push(Arc::clone(candidate));
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

/// What the dry run tries each node with, its buffers reused from node to node: the
/// copies of the node and of the cycle state, and the node's pods of lower priority than
/// the preemptor.
#[derive(Default)]
struct Scratch {
    info: NodeInfo,
    state: CycleState,
    potential: Vec<Arc<Pod>>,
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

#[cfg(test)]
mod tests {
    //! Upstream's default_preemption_test.go rows that involve PodDisruptionBudgets
    //! (TestDryRunPreemption, TestPostFilter), with its resource sizes: nodes of 500m cpu
    //! and 500 bytes of memory (32 pods), priorities low 0, mid 100, high 1000, very high
    //! 10000.

    use super::*;
    use crate::framework_runner::{PluginTimer, run_pre_filter};
    use crate::scheduler::Nominations;
    use gantry_api::{LabelSelector, Node, Resources};
    use gantry_cache::Cache;
    use gantry_framework::plugins::default_profile;
    use gantry_framework::{ApiObjects, Cluster};

    const MID: i32 = 100;
    const HIGH: i32 = 1000;

    fn node(name: &str, milli_cpu: i64, memory: i64, pods: i64) -> Node {
        let mut allocatable = Resources::new(milli_cpu, memory);
        allocatable.pods = pods;
        Node::new(name, allocatable)
    }

    /// A pod named `name` (also its uid) with the given priority, labels and requests.
    fn pod(name: &str, priority: i32, labels: &[(&str, &str)], request: i64) -> Pod {
        let mut pod = Pod::new("default", name)
            .with_priority(priority)
            .with_labels(labels.iter().copied());
        if request > 0 {
            pod = pod.with_requests(request, request);
        }
        pod.uid = Arc::from(name);
        pod
    }

    fn budget(selector: (&str, &str), allowed: i32, disrupted: &[&str]) -> PodDisruptionBudget {
        PodDisruptionBudget {
            namespace: Sym::new("default"),
            name: Arc::from("pdb"),
            selector: Some(LabelSelector::from_pairs([(
                Sym::new(selector.0),
                Sym::new(selector.1),
            )])),
            disruptions_allowed: allowed,
            disrupted_pods: disrupted.iter().map(|p| Arc::from(*p)).collect(),
        }
    }

    struct TestCluster {
        snapshot: Snapshot,
        profile: Profile,
    }

    fn test_cluster(
        nodes: Vec<Node>,
        pods: Vec<(&str, Pod)>,
        percentage: u32,
        absolute: u32,
    ) -> TestCluster {
        let cache = Cache::new();
        for n in nodes {
            cache.add_node(Arc::new(n));
        }
        for (node, p) in pods {
            cache.add_pod(Arc::new(p.on_node(node))).unwrap();
        }
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        let mut profile = default_profile("default-scheduler");
        profile.min_candidate_nodes_percentage = percentage;
        profile.min_candidate_nodes_absolute = absolute;
        TestCluster { snapshot, profile }
    }

    /// The cycle state after PreFilter, which must pass.
    fn pre_filtered(c: &TestCluster, pod: &Pod) -> CycleState {
        let objects = ApiObjects::default();
        let view = Cluster {
            nodes: &c.snapshot,
            objects: &objects,
        };
        let mut state = CycleState::new();
        run_pre_filter(
            &c.profile,
            &mut state,
            pod,
            view,
            &mut PluginTimer::default(),
        )
        .expect("PreFilter passes");
        state
    }

    /// The candidates of a dry run from `offset`, by node name, each with its victims (by
    /// name) and budget violations.
    fn dry_run(
        c: &TestCluster,
        preemptor: &Pod,
        budgets: &[PodDisruptionBudget],
        offset: usize,
    ) -> Vec<(String, Vec<String>, usize)> {
        let state = pre_filtered(c, preemptor);
        let preemption = Preemption {
            profile: &c.profile,
            snapshot: &c.snapshot,
            nominated: &Nominations::default(),
            budgets,
        };
        let potential: Vec<usize> = (0..c.snapshot.num_nodes()).collect();
        let result = preemption.dry_run(&state, &Arc::new(preemptor.clone()), &potential, offset);
        let mut candidates: Vec<(String, Vec<String>, usize)> = result
            .candidates
            .iter()
            .map(|c| {
                let mut victims: Vec<String> =
                    c.victims.iter().map(|v| v.name.to_string()).collect();
                victims.sort();
                (c.node.to_string(), victims, c.pdb_violations)
            })
            .collect();
        candidates.sort();
        candidates
    }

    fn one_node_two_foo_pods(names: &[&str]) -> TestCluster {
        let pods = names
            .iter()
            .map(|n| ("node1", pod(n, MID, &[("app", "foo")], 200)))
            .collect();
        test_cluster(vec![node("node1", 500, 500, 32)], pods, 10, 100)
    }

    fn victims(names: &[&str], violations: usize) -> Vec<(String, Vec<String>, usize)> {
        vec![(
            "node1".to_string(),
            names.iter().map(|n| n.to_string()).collect(),
            violations,
        )]
    }

    #[test]
    fn victims_count_the_budgets_they_break() {
        let preemptor = pod("p", HIGH, &[], 500);
        let foo = ("app", "foo");
        let c = one_node_two_foo_pods(&["p1.1", "p1.2"]);
        assert_eq!(
            dry_run(&c, &preemptor, &[budget(foo, 1, &[])], 0),
            victims(&["p1.1", "p1.2"], 1),
            "preemption with violation of same pdb"
        );
        assert_eq!(
            dry_run(&c, &preemptor, &[budget(foo, 1, &["p2"])], 0),
            victims(&["p1.1", "p1.2"], 1),
            "the victim doesn't belong to DisruptedPods"
        );
        assert_eq!(
            dry_run(&c, &preemptor, &[budget(foo, 1, &["p1.2"])], 0),
            victims(&["p1.1", "p1.2"], 0),
            "the victim belongs to DisruptedPods"
        );
        let c = one_node_two_foo_pods(&["p1.1", "p1.2", "p1.3"]);
        assert_eq!(
            dry_run(&c, &preemptor, &[budget(foo, 1, &["p1.3"])], 0),
            victims(&["p1.1", "p1.2", "p1.3"], 1),
            "the victim in DisruptedPods is treated as non-violating"
        );
    }

    #[test]
    fn the_dry_run_looks_past_enough_candidates_until_one_breaks_no_budget() {
        let nodes = (1..=5)
            .map(|i| node(&format!("node{i}"), 500, 500, 32))
            .collect();
        let foo: &[(&str, &str)] = &[("app", "foo")];
        let pods = vec![
            ("node1", pod("p1", MID, foo, 300)),
            ("node2", pod("p2", MID, foo, 300)),
            ("node3", pod("p3", MID, &[], 300)),
            ("node4", pod("p4", MID, &[], 300)),
            ("node5", pod("p5", MID, foo, 300)),
        ];
        let c = test_cluster(nodes, pods, 40, 2);
        let preemptor = pod("p", HIGH, &[], 300);
        // From node5: node5 and node1 break the budget, node2 would too (but two such are
        // kept at most), node3 does not: the search stops there.
        let owned = |(n, v, k): (&str, &str, usize)| (n.to_string(), vec![v.to_string()], k);
        assert_eq!(
            dry_run(&c, &preemptor, &[budget(("app", "foo"), 0, &[])], 4),
            [("node1", "p1", 1), ("node3", "p3", 0), ("node5", "p5", 1)].map(owned)
        );
    }

    /// Preemption over every node, each failing with `Too many pods`; the node chosen.
    fn nominate(
        c: &TestCluster,
        budgets: &[PodDisruptionBudget],
        preemptor: &Pod,
        seed: u64,
    ) -> Sym {
        let preemptor = Arc::new(preemptor.clone());
        let names: Vec<Sym> = (0..c.snapshot.num_nodes())
            .map(|i| c.snapshot.node_at(i).name())
            .collect();
        let fit_error = FitError {
            num_all_nodes: names.len(),
            node_statuses: names
                .iter()
                .map(|n| (*n, Status::unschedulable("Too many pods")))
                .collect(),
            pre_filter_message: None,
            post_filter_message: None,
            release: c.profile.release,
            claim_to_deallocate: None,
            claim_to_delete: None,
        };
        let state = pre_filtered(c, &preemptor);
        let preemption = Preemption {
            profile: &c.profile,
            snapshot: &c.snapshot,
            nominated: &Nominations::default(),
            budgets,
        };
        match preemption.run(&state, &preemptor, &fit_error, &mut Rng::new(seed)) {
            Outcome::Nominated { node, .. } => node,
            Outcome::Failed(message) => panic!("no nomination: {message}"),
        }
    }

    #[test]
    fn the_node_breaking_fewest_budgets_wins_before_lower_priorities() {
        // TestPostFilter "pod can be made schedulable on minHighestPriority node": both
        // nodes break one budget, so the lower highest victim priority decides.
        let one_pod = |name| node(name, 0, 0, 1);
        let violating = ("test.kubernetes.io/is-violating-pdb", "violating");
        let non_violating = ("test.kubernetes.io/is-violating-pdb", "non-violating");
        let budgets = [
            budget(violating, 0, &[]),
            budget(non_violating, i32::MAX, &[]),
        ];
        let preemptor = pod("p", 10_000, &[], 0);
        let pods = vec![
            ("node1", pod("p1", HIGH, &[non_violating], 0)),
            ("node2", pod("p3", MID, &[violating], 0)),
            ("node1", pod("p2", 0, &[violating], 0)),
        ];
        let c = test_cluster(vec![one_pod("node1"), one_pod("node2")], pods, 10, 100);
        for seed in 0..4 {
            assert_eq!(nominate(&c, &budgets, &preemptor, seed), Sym::new("node2"));
        }
        // A budget that protects only node2's pod: node1 breaks none and wins, although
        // its highest victim has the higher priority.
        let pods = vec![
            ("node1", pod("p1", HIGH, &[], 0)),
            ("node2", pod("p3", MID, &[violating], 0)),
            ("node1", pod("p2", 0, &[], 0)),
        ];
        let c = test_cluster(vec![one_pod("node1"), one_pod("node2")], pods, 10, 100);
        for seed in 0..4 {
            assert_eq!(nominate(&c, &budgets, &preemptor, seed), Sym::new("node1"));
        }
    }

    /// The filter run with nominated pods, on a copy (the scheduling cycle's way) and in
    /// place (the way of preemption's trial node): the same verdicts, and in place the
    /// node and the cycle state come back as they were.
    #[test]
    fn nominated_pods_count_the_same_on_a_copy_and_in_place() {
        use crate::framework_runner::NominatedScratch;
        use gantry_api::PodAffinityTerm;
        let c = test_cluster(
            vec![node("a", 4000, 4000, 10).with_labels([("kubernetes.io/hostname", "a")])],
            vec![("a", pod("resident", 0, &[], 1000))],
            100,
            1,
        );
        // The incoming pod keeps away from app=cache: InterPodAffinity has state to change.
        let mut incoming = pod("incoming", MID, &[], 2000);
        incoming
            .affinity
            .pod_anti_affinity
            .required
            .push(PodAffinityTerm {
                label_selector: Some(LabelSelector::from_pairs([(
                    Sym::new("app"),
                    Sym::new("cache"),
                )])),
                namespaces: Vec::new(),
                namespace_selector: None,
                topology_key: Sym::new("kubernetes.io/hostname"),
            });
        let state = pre_filtered(&c, &incoming);
        let filters = PodFilters::new(&c.profile, &state);
        let node = c.snapshot.node_at(0);
        let nominated = |name, priority, labels: &[(&str, &str)], cpu| {
            Arc::new(pod(name, priority, labels, cpu))
        };
        let cases = [
            ("nothing nominated", vec![], true),
            (
                "a small pod of higher priority",
                vec![nominated("n1", HIGH, &[], 500)],
                true,
            ),
            (
                "a pod that takes the room",
                vec![nominated("n1", HIGH, &[], 2000)],
                false,
            ),
            (
                "the same pod of lower priority",
                vec![nominated("n1", 0, &[], 2000)],
                true,
            ),
            (
                "a cache pod",
                vec![nominated("n1", MID, &[("app", "cache")], 0)],
                false,
            ),
            (
                "two pods, the second one too many",
                vec![
                    nominated("n1", MID, &[], 1000),
                    nominated("n2", MID, &[], 1000),
                ],
                false,
            ),
        ];
        let mut scratch = NominatedScratch::default();
        for (case, pods, fits) in cases {
            let on_copy = filters.run_with_nominated(&state, &incoming, node, &pods, &mut scratch);
            let mut info = node.clone();
            let mut trial_state = state.clone();
            let in_place =
                filters.run_with_nominated_in_place(&mut trial_state, &incoming, &mut info, &pods);
            assert_eq!(on_copy, in_place, "{case}");
            assert_eq!(on_copy.is_success(), fits, "{case}: {on_copy:?}");
            assert_eq!(info.requested(), node.requested(), "{case}");
            assert_eq!(info.pods().len(), node.pods().len(), "{case}");
            assert_eq!(info.label_index(), node.label_index(), "{case}");
            // The state came back too: a cache pod added now is refused by the copy's
            // state exactly as by the original.
            let cache = [nominated("n3", MID, &[("app", "cache")], 0)];
            assert_eq!(
                filters.run_with_nominated(&trial_state, &incoming, node, &cache, &mut scratch),
                filters.run_with_nominated(&state, &incoming, node, &cache, &mut scratch),
                "{case}"
            );
            assert_eq!(
                filters.run(&trial_state, &incoming, node),
                Status::success(),
                "{case}: the state counts no cache pod after the run"
            );
        }
    }

    /// Upstream's `TestPodEligibleToPreemptOthers` (v1.28; v1.35's reads the same with
    /// `PodDisruptionConditions` always on), past the policy case: (its name, the nominated
    /// node's status, the pod on node1, whether the preemptor may preempt).
    #[test]
    fn a_pod_waits_for_the_victims_still_terminating_on_its_nominated_node() {
        let victim = |priority: i32, terminating: bool, condition: bool| {
            let mut p = pod("p1", priority, &[], 0);
            p.terminating = terminating;
            p.preempted_by_scheduler = condition;
            p
        };
        let unresolvable = Status::unresolvable("node(s) had untolerated taint(s)");
        let unschedulable = Status::unschedulable("Insufficient cpu");
        type Case<'a> = (&'a str, Option<&'a Status>, Option<Pod>, bool, bool);
        let cases: [Case; 6] = [
            (
                "Pod with nominated node",
                Some(&unresolvable),
                Some(victim(0, true, true)),
                true,
                true,
            ),
            (
                "Pod with nominated node, but without nominated node status",
                None,
                Some(victim(0, true, true)),
                true,
                false,
            ),
            ("Pod without nominated node", None, None, false, true),
            (
                "victim Pods terminating",
                Some(&unschedulable),
                Some(victim(0, true, true)),
                true,
                false,
            ),
            (
                "non-victim Pods terminating",
                None,
                Some(victim(0, true, false)),
                true,
                true,
            ),
            // Gantry's own: a victim of higher priority is not the preemptor's to wait for.
            (
                "higher-priority victim terminating",
                None,
                Some(victim(HIGH + 1, true, true)),
                true,
                true,
            ),
        ];
        for (name, status, on_node, nominated, eligible) in cases {
            let pods = on_node.into_iter().map(|p| ("node1", p)).collect();
            let c = test_cluster(vec![node("node1", 1000, 1000, 10)], pods, 10, 100);
            let mut preemptor = pod("p", HIGH, &[], 0);
            preemptor.nominated_node_name = nominated.then(|| Sym::new("node1"));
            let preemption = Preemption {
                profile: &c.profile,
                snapshot: &c.snapshot,
                nominated: &Nominations::default(),
                budgets: &[],
            };
            let statuses = status.map(|s| (Sym::new("node1"), s)).into_iter().collect();
            assert_eq!(
                !preemption.awaits_its_victims(&preemptor, &statuses),
                eligible,
                "{name}"
            );
        }
    }
}
