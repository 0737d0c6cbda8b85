//! NodeResourcesFit: the node must have room for the pod's requests; scoring prefers the
//! least (or most) allocated node, or follows a requested-to-capacity shape.

use std::borrow::Cow;

use gantry_api::{Pod, ResourceName, Resources, Sym};
use gantry_cache::{Amount, NodeColumns, NodeInfo};
use smallvec::SmallVec;

use super::shape_score::broken_linear;
use crate::plugins::scored_resources::{ResourceRow, RowPair, RowScore, div_floor, mul_div_floor};
use crate::{
    Cluster, Code, CycleState, FilterPlugin, MAX_NODE_SCORE, Plugin, PreFilterPlugin,
    PreFilterResult, Status,
};

pub const NAME: &str = "NodeResourcesFit";
pub const TOO_MANY_PODS: &str = "Too many pods";

#[derive(Debug, Clone, PartialEq)]
pub enum ScoringStrategy {
    LeastAllocated,
    MostAllocated,
    /// Utilisation (0..=100) to score (0..=10) points, as in the config API.
    RequestedToCapacityRatio {
        shape: Vec<(i64, i64)>,
    },
}

/// The resources scoring looks at, with their weights (default cpu 1, memory 1).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredResource {
    pub name: ResourceName,
    pub weight: i64,
}

pub fn default_scored_resources() -> Vec<ScoredResource> {
    vec![
        ScoredResource {
            name: ResourceName::Cpu,
            weight: 1,
        },
        ScoredResource {
            name: ResourceName::Memory,
            weight: 1,
        },
    ]
}

pub struct NodeResourcesFit {
    pub strategy: ScoringStrategy,
    pub resources: Vec<ScoredResource>,
    /// A node whose allocatable is below the request can never fit the pod: say so with
    /// UnschedulableAndUnresolvable, so that preemption leaves it alone (v1.34 on).
    pub unresolvable_above_allocatable: bool,
    /// DRAExtendedResource: an extended resource a device class serves is left to
    /// DynamicResources on nodes whose allocatable lacks it (`shouldDelegateResourceToDRA`).
    pub delegates_to_devices: bool,
}

impl Default for NodeResourcesFit {
    fn default() -> NodeResourcesFit {
        NodeResourcesFit {
            strategy: ScoringStrategy::LeastAllocated,
            resources: default_scored_resources(),
            unresolvable_above_allocatable: true,
            delegates_to_devices: true,
        }
    }
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        NAME
    }

    fn signs_pods(&self) -> bool {
        true
    }

    fn sign(&self, pod: &Pod, signature: &mut crate::Signature) -> bool {
        signature.add_resources(pod);
        true
    }

    /// "signature disabled when dra extended resources are used in the cluster".
    fn signs_after_pre_filter(&self, state: &CycleState) -> bool {
        state.read::<ServedByDevices>(NAME).is_none()
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::POD_DELETE_OR_NODE_ADD_OR_UPDATE
    }
}

/// Upstream's `fitsRequest`: every resource the pod requests must fit in what is left.
/// With `unresolvable_above_allocatable`, a resource the node does not have that much of
/// at all makes the status UnschedulableAndUnresolvable (upstream v1.34's
/// `InsufficientResource.Unresolvable`); too many pods never does. A resource the node's
/// allocatable lacks and that `served_by_devices` says a device class serves is left to
/// DynamicResources (DRAExtendedResource, upstream's `shouldDelegateResourceToDRA`).
pub fn insufficient_resources(
    request: &Resources,
    node: &NodeInfo,
    unresolvable_above_allocatable: bool,
    served_by_devices: impl Fn(Sym) -> bool,
) -> Status {
    let allocatable = node.allocatable();
    let requested = node.requested();
    let mut status = Status::success();
    let mut unresolvable = false;
    let mut fail = |reason: Cow<'static, str>| {
        status = if status.is_success() {
            Status::unschedulable(reason)
        } else {
            std::mem::take(&mut status).with_reason(reason)
        };
    };
    if node.pods().len() as i64 + 1 > allocatable.pods {
        fail(TOO_MANY_PODS.into());
    }
    let checks = [
        (
            request.milli_cpu,
            allocatable.milli_cpu,
            requested.milli_cpu,
            "Insufficient cpu",
        ),
        (
            request.memory,
            allocatable.memory,
            requested.memory,
            "Insufficient memory",
        ),
        (
            request.ephemeral_storage,
            allocatable.ephemeral_storage,
            requested.ephemeral_storage,
            "Insufficient ephemeral-storage",
        ),
    ];
    for (want, has, used, reason) in checks {
        if want > 0 && want > has - used {
            unresolvable |= want > has;
            fail(reason.into());
        }
    }
    for (name, want) in request.scalars() {
        // What HAMi's deployment tells kube-scheduler to leave to its extender.
        if gantry_api::gpu::ignored_by_scheduler(name) {
            continue;
        }
        let has = allocatable.scalar(name);
        // Asked only where the resource would not fit (rarely), not for every node.
        if want > has - requested.scalar(name) && !(has == 0 && served_by_devices(name)) {
            unresolvable |= want > has;
            fail(format!("Insufficient {name}").into());
        }
    }
    if unresolvable && unresolvable_above_allocatable {
        status = status.with_code(Code::UnschedulableAndUnresolvable);
    }
    status
}

/// The scalar resources of a request that the fit check compares (HAMi's are left to its
/// extender, see `insufficient_resources`).
fn checked_scalars(request: &Resources) -> impl Iterator<Item = (Sym, i64)> + '_ {
    request
        .scalars()
        .filter(|(name, _)| !gantry_api::gpu::ignored_by_scheduler(*name))
}

/// The pod's extended resources a device class serves, which nodes without them in
/// their allocatable leave to DynamicResources.
#[derive(Clone)]
struct ServedByDevices(SmallVec<[Sym; 2]>);

impl PreFilterPlugin for NodeResourcesFit {
    /// Finds the pod's extended resources a device class serves (DRAExtendedResource);
    /// never skips, as upstream's PreFilter does not.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        if !self.delegates_to_devices {
            return (None, Status::success());
        }
        let mut asked = pod
            .requests()
            .scalars()
            .filter(|(name, amount)| {
                *amount > 0
                    && gantry_api::dra_extended::is_dra_extended_resource_name(name.as_str())
            })
            .peekable();
        if asked.peek().is_none() {
            return (None, Status::success());
        }
        let Some(dra) = cluster.nodes.dra() else {
            return (None, Status::success());
        };
        let classes = dra.extended_resource_classes();
        let served: SmallVec<[Sym; 2]> = asked
            .filter(|(name, _)| classes.class_for(*name).is_some())
            .map(|(name, _)| name)
            .collect();
        if !served.is_empty() {
            state.write(NAME, ServedByDevices(served));
        }
        (None, Status::success())
    }
}

impl FilterPlugin for NodeResourcesFit {
    /// Not when a device class serves one of the pod's extended resources: the devices
    /// decide those.
    fn filter_reads_only_the_node(&self, state: &CycleState, _pod: &Pod) -> bool {
        state.read::<ServedByDevices>(NAME).is_none()
    }

    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let served = |name: Sym| {
            self.delegates_to_devices
                && (state.read::<ServedByDevices>(NAME)).is_some_and(|s| s.0.contains(&name))
        };
        insufficient_resources(
            pod.requests(),
            node,
            self.unresolvable_above_allocatable,
            served,
        )
    }

    /// A node is proven when every resource fits, which is exactly when `filter` passes.
    fn filter_columns(
        &self,
        _state: &CycleState,
        pod: &Pod,
        columns: &NodeColumns,
        positions: &[usize],
        proven: &mut [bool],
    ) -> bool {
        let request = pod.requests();
        let pods = columns.pod_count();
        // Every column cut to one length: a position is bounds-checked once, not per column.
        let n = pods.len();
        let slots = &columns.column(ResourceName::Pods, Amount::Allocatable)[..n];
        let free = |resource: ResourceName| {
            (
                &columns.column(resource, Amount::Allocatable)[..n],
                &columns.column(resource, Amount::Requested)[..n],
            )
        };
        // Pod slots, cpu and memory in one pass (a request of 0 fits anywhere, even on
        // an over-committed node), ...
        let ((cpu, cpu_used), (memory, memory_used)) =
            (free(ResourceName::Cpu), free(ResourceName::Memory));
        let (want_cpu, want_memory) = (request.milli_cpu, request.memory);
        for (proof, &p) in proven.iter_mut().zip(positions) {
            *proof = (pods[p] < slots[p])
                & (want_cpu <= 0 || want_cpu <= cpu[p] - cpu_used[p])
                & (want_memory <= 0 || want_memory <= memory[p] - memory_used[p]);
        }
        // ... then one pass per other resource the pod asks for.
        let storage = (ResourceName::EphemeralStorage, request.ephemeral_storage);
        let scalars =
            checked_scalars(request).map(|(name, want)| (ResourceName::Scalar(name), want));
        for (resource, want) in Some(storage)
            .filter(|&(_, want)| want > 0)
            .into_iter()
            .chain(scalars)
        {
            let allocatable = columns.column(resource, Amount::Allocatable);
            let used = columns.column(resource, Amount::Requested);
            for (proof, &p) in proven.iter_mut().zip(positions) {
                *proof &= want <= allocatable[p] - used[p];
            }
        }
        true
    }
}

/// The default two-resource loop of `score_with`, node by node: `at` reads a node's two
/// (allocatable, requested) amounts, `score` scores one, `combine` averages the weighted.
#[inline(always)]
fn pair_scores(
    positions: &[usize],
    scores: &mut [i64],
    weights: [i64; 2],
    at: impl Fn(usize) -> [(i64, i64); 2],
    score: impl Fn(i64, i64) -> Option<i64>,
    combine: impl Fn(i64, i64) -> i64,
) {
    for (out, &p) in scores.iter_mut().zip(positions) {
        let (mut weighted, mut total) = (0, 0);
        for ((a, q), weight) in at(p).into_iter().zip(weights) {
            if a != 0
                && let Some(s) = score(q, a)
            {
                weighted += s * weight;
                total += weight;
            }
        }
        *out = combine(weighted, total);
    }
}

fn least_allocated(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        0
    } else {
        mul_div_floor(capacity - requested, MAX_NODE_SCORE, capacity)
    }
}

fn most_allocated(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        0
    } else {
        mul_div_floor(requested.min(capacity), MAX_NODE_SCORE, capacity)
    }
}

impl RowScore for NodeResourcesFit {
    /// Cpu and memory defaulted for pods that request none, as upstream's fit scores.
    const USE_NON_ZERO: bool = true;

    fn resources(&self) -> &[ScoredResource] {
        &self.resources
    }

    /// Each resource's score under the strategy, weighted, averaged over the resources
    /// the node has.
    fn score_rows(&self, rows: &[ResourceRow<'_>], positions: &[usize], scores: &mut [i64]) {
        match &self.strategy {
            ScoringStrategy::LeastAllocated => self.score_with(
                rows,
                positions,
                scores,
                |q, a| Some(least_allocated(q, a)),
                // Exact rows: the product cannot overflow.
                |q, a| {
                    Some(if a == 0 || q > a {
                        0
                    } else {
                        div_floor((a - q) * MAX_NODE_SCORE, a)
                    })
                },
            ),
            ScoringStrategy::MostAllocated => {
                let score = |q, a| Some(most_allocated(q, a));
                self.score_with(rows, positions, scores, score, score)
            }
            ScoringStrategy::RequestedToCapacityRatio { shape } => {
                let score = |q, a| {
                    let utilisation = if q > a { 100 } else { mul_div_floor(q, 100, a) };
                    Some(broken_linear(shape, utilisation)).filter(|&s| s > 0)
                };
                self.score_with(rows, positions, scores, score, score)
            }
        }
    }
}

impl NodeResourcesFit {
    /// `score_rows` with the strategy's score of one resource (`score(requested,
    /// allocatable)` for an allocatable amount above 0; `None`: the resource does not
    /// count), node by node straight from the rows (no buffers: measured faster than
    /// blocks of nodes a resource at a time). `score_exact` is the same score for amounts
    /// that cannot overflow it (see `ResourceRow`), without the checks.
    #[inline]
    fn score_with(
        &self,
        rows: &[ResourceRow<'_>],
        positions: &[usize],
        scores: &mut [i64],
        score: impl Fn(i64, i64) -> Option<i64>,
        score_exact: impl Fn(i64, i64) -> Option<i64>,
    ) {
        let rows: SmallVec<[(&ResourceRow<'_>, i64); 8]> = rows
            .iter()
            .zip(&self.resources)
            .filter(|(row, _)| row.is_scored())
            .map(|(row, resource)| (row, resource.weight))
            .collect();
        let round = matches!(
            self.strategy,
            ScoringStrategy::RequestedToCapacityRatio { .. }
        );
        // `weighted` is never negative (scores of 0 to 100, positive weights), so dividing
        // by 1 or 2 (cpu and memory of weight 1, the default) needs no real division.
        let combine = |weighted: i64, weights: i64| match weights {
            0 => 0,
            _ if round => (weighted as f64 / weights as f64).round() as i64,
            1 => weighted,
            2 => weighted / 2,
            _ => div_floor(weighted, weights),
        };
        if let [(first, w0), (second, w1)] = rows[..] {
            // The default (cpu and memory), the bounds checked once per node.
            let pair = RowPair::new(first, second);
            let weights = [w0, w1];
            if pair.is_exact() {
                pair_scores(
                    positions,
                    scores,
                    weights,
                    |p| pair.at_exact(p),
                    score_exact,
                    combine,
                );
            } else {
                pair_scores(positions, scores, weights, |p| pair.at(p), score, combine);
            }
            return;
        }
        for (out, &p) in scores.iter_mut().zip(positions) {
            let (mut weighted, mut weights) = (0, 0);
            for &(row, weight) in &rows {
                let (a, q) = row.at(p);
                if a != 0
                    && let Some(s) = score(q, a)
                {
                    weighted += s * weight;
                    weights += weight;
                }
            }
            *out = combine(weighted, weights);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, node_info};
    use crate::{Code, ScorePlugin};
    use gantry_api::Sym;

    fn pod(cpu: i64, mem: i64) -> Pod {
        Pod::new("ns", "p").with_requests(cpu, mem)
    }

    #[test]
    fn filter_table() {
        // Re-derived from upstream's fit_test TestEnoughRequests.
        let n = node("n", 10, 20);
        let check = |p: &Pod, existing: &[Pod]| {
            NodeResourcesFit::default().filter(&CycleState::new(), p, &node_info(&n, existing))
        };
        assert!(
            check(&pod(0, 0), &[pod(10, 20)]).is_success(),
            "no request fits a full node"
        );
        assert!(check(&pod(1, 1), &[pod(5, 5)]).is_success());
        let s = check(&pod(1, 1), &[pod(10, 20)]);
        assert_eq!(
            (s.code(), s.message().as_str()),
            (Code::Unschedulable, "Insufficient cpu, Insufficient memory")
        );
        assert_eq!(
            check(&pod(2, 1), &[pod(9, 5)]).message(),
            "Insufficient cpu"
        );
        assert_eq!(
            check(&pod(1, 2), &[pod(5, 19)]).message(),
            "Insufficient memory"
        );
        // Init containers count by their peak.
        let init = Pod::new("ns", "p")
            .with_requests(1, 1)
            .with_init_container(gantry_api::Container::new("i", Some(3), Some(1)));
        assert_eq!(check(&init, &[pod(8, 19)]).message(), "Insufficient cpu");
        // Extended resources.
        let gpu = Sym::new("example.com/gpu");
        let mut with_gpu = pod(1, 1);
        with_gpu.containers[0].requests.set_scalar(gpu, 1);
        with_gpu.update_requests();
        assert_eq!(
            check(&with_gpu, &[]).message(),
            "Insufficient example.com/gpu"
        );
        // Pod count.
        let mut tiny = node("t", 10, 20);
        tiny.allocatable.pods = 1;
        let s = NodeResourcesFit::default().filter(
            &CycleState::new(),
            &pod(1, 1),
            &node_info(&tiny, &[pod(0, 0)]),
        );
        assert_eq!(s.message(), TOO_MANY_PODS);
    }

    #[test]
    fn least_allocated_scores() {
        // Upstream's least_allocated_test: "nothing scheduled, resources requested, differently
        // sized nodes": cpu 3000m/4000m... expected scores 37 and 50.
        let p = Pod::new("ns", "p")
            .with_requests(1000, 2000)
            .with_requests(2000, 3000);
        let n1 = node("n1", 4000, 10000);
        let n2 = node("n2", 6000, 10000);
        let score = |n: &gantry_api::Node| {
            NodeResourcesFit::default()
                .score(&CycleState::new(), &p, &node_info(n, &[]))
                .unwrap()
        };
        assert_eq!(score(&n1), 37);
        assert_eq!(score(&n2), 50);
    }

    /// Past the exact bound (2^55), amounts take the checked arithmetic: a node of 2^62
    /// bytes of memory scores as the exact i128 formula says, through the columns (the
    /// cycle's path) and one node alike, and the same pod scores the same on a small node
    /// whether or not the huge one shares its snapshot.
    #[test]
    fn huge_amounts_score_exactly_through_the_columns() {
        use gantry_cache::{Cache, ClusterState, Snapshot};
        use std::sync::Arc;
        let huge_memory: i64 = 1 << 62;
        let mut huge = node("huge", 4000, 0);
        huge.allocatable.memory = huge_memory;
        let small = node("small", 4000, 10000);
        let p = pod(1000, 3 << 60);
        let expected_huge = {
            let cpu = (4000 - 1000) * 100 / 4000;
            let memory =
                (i128::from(huge_memory - (3 << 60)) * 100 / i128::from(huge_memory)) as i64;
            (cpu + memory) / 2
        };
        let fit = NodeResourcesFit::default();
        let by_columns = |nodes: &[&gantry_api::Node]| {
            let cache = Cache::new();
            for n in nodes {
                cache.add_node(Arc::new((*n).clone()));
            }
            let mut snapshot = Snapshot::new();
            cache.update_snapshot(&mut snapshot).unwrap();
            let infos: Vec<&NodeInfo> = (0..snapshot.num_nodes())
                .map(|i| snapshot.node_at(i))
                .collect();
            let positions: Vec<usize> = (0..infos.len()).collect();
            let mut scores = vec![0; infos.len()];
            let columns = snapshot.columns().unwrap();
            assert!(
                fit.score_columns(
                    &CycleState::new(),
                    &p,
                    &infos,
                    columns,
                    &positions,
                    &mut scores
                )
                .unwrap()
            );
            infos
                .iter()
                .map(|i| i.name().to_string())
                .zip(scores)
                .collect::<Vec<_>>()
        };
        let both = by_columns(&[&huge, &small]);
        let score_of =
            |name: &str, list: &[(String, i64)]| list.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(score_of("huge", &both), expected_huge);
        let one = fit
            .score(&CycleState::new(), &p, &node_info(&huge, &[]))
            .unwrap();
        assert_eq!(one, expected_huge);
        let small_alone = by_columns(&[&small]);
        assert_eq!(score_of("small", &both), score_of("small", &small_alone));
    }

    #[test]
    fn most_allocated_and_ratio_scores() {
        // Upstream's most_allocated_test "resources requested, pods scheduled with resources": 62, 60... here
        // the simpler "nothing scheduled, resources requested, differently sized nodes": 62 and 50.
        let p = Pod::new("ns", "p")
            .with_requests(1000, 2000)
            .with_requests(2000, 3000);
        let most = NodeResourcesFit {
            strategy: ScoringStrategy::MostAllocated,
            resources: default_scored_resources(),
            ..NodeResourcesFit::default()
        };
        assert_eq!(
            most.score(
                &CycleState::new(),
                &p,
                &node_info(&node("n1", 4000, 10000), &[])
            )
            .unwrap(),
            62
        );
        assert_eq!(
            most.score(
                &CycleState::new(),
                &p,
                &node_info(&node("n2", 6000, 10000), &[])
            )
            .unwrap(),
            50
        );
        let ratio = NodeResourcesFit {
            strategy: ScoringStrategy::RequestedToCapacityRatio {
                shape: vec![(0, 10), (100, 0)],
            },
            resources: default_scored_resources(),
            ..NodeResourcesFit::default()
        };
        // cpu 75% -> 25, memory 50% -> 50; mean 37.5 rounds to 38.
        assert_eq!(
            ratio
                .score(
                    &CycleState::new(),
                    &p,
                    &node_info(&node("n1", 4000, 10000), &[])
                )
                .unwrap(),
            38
        );
    }
}
