//! What a run reports: counters, latencies, placements and histories, the summary, and
//! the invariants a finished run must hold.

use gantry_cache::Cache;

use super::{Simulation, Summary};
use crate::records::{Placement, PodHistory, PodStatus};

impl Simulation {
    /// Pods evicted by preemption so far.
    pub fn preempted(&self) -> usize {
        self.preempted
    }

    /// Scheduling attempts so far.
    pub fn attempts(&self) -> u64 {
        self.attempts
    }

    /// Wall-clock duration of each scheduling attempt so far, in microseconds.
    pub fn latencies_us(&self) -> &[u64] {
        &self.latencies_us
    }

    /// Forgets the attempt latencies so far (a benchmark's warm-up).
    pub fn clear_latencies(&mut self) {
        self.latencies_us.clear();
    }

    /// One line per pod given to the simulation, in the order they arrived.
    pub fn placements(&self) -> &[Placement] {
        self.records.placements()
    }

    /// Each PodGroup a pod-group cycle ran for, with its PodGroupScheduled condition, by
    /// `namespace/name`.
    pub fn pod_groups(&self) -> Vec<crate::records::GroupRecord> {
        self.records.groups().cloned().collect()
    }

    /// Each pod's history, in the order of `placements`.
    pub fn histories(&self) -> &[PodHistory] {
        self.records.histories()
    }

    /// Nodes run through Filter so far, by all instances.
    pub fn nodes_evaluated(&self) -> u64 {
        self.instances
            .iter()
            .map(|i| i.scheduler.nodes_evaluated)
            .sum()
    }

    pub(super) fn summary(&mut self, wall_s: f64) -> Summary {
        self.latencies_us.sort_unstable();
        let at = |q: f64| {
            let n = self.latencies_us.len();
            if n == 0 {
                0
            } else {
                self.latencies_us[((n - 1) as f64 * q).round() as usize]
            }
        };
        let attempted = self.histories().iter().filter(|h| h.attempts > 0).count();
        let scheduled = self.records.count(PodStatus::Bound);
        let gpus = crate::gpu_report::GpuReport::of(self.cache());
        Summary {
            pods_total: self.placements().len(),
            scheduled,
            unschedulable: self.records.count(PodStatus::Pending),
            gated: self.records.count(PodStatus::Gated),
            other_scheduler: self.records.count(PodStatus::OtherScheduler),
            gave_up: self.records.count(PodStatus::GivenUp),
            preempted: self.preempted,
            attempts: self.attempts,
            bind_failures: self.api.bind_failures,
            retries: self.attempts.saturating_sub(attempted as u64),
            overcommitted_nodes: self.api.overcommitted_nodes(),
            schedulers: self.options.schedulers,
            event_latency_ms: self.options.event_latency.as_secs_f64() * 1e3,
            conflicts: self.conflicts.binder + self.conflicts.api,
            binder_conflicts: self.conflicts.binder,
            conflicts_by_plugin: self.conflicts.by_plugin.clone(),
            overcommits_prevented: self.conflicts.overcommits_prevented,
            wall_s,
            pods_per_sec: scheduled as f64 / wall_s.max(1e-9),
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            virtual_s: self.clock.as_secs_f64(),
            gpu_pods: gpus.gpu_pods,
            shared_cards: gpus.shared_cards,
        }
    }

    /// The first instance's cache (what it believes is bound and assumed). Once a run has
    /// ended, every instance's cache holds the same bound pods.
    pub fn cache(&self) -> &Cache {
        &self.instances[0].cache
    }

    /// DESIGN.md's invariants at the end of a run: no node was over-committed by pods this
    /// scheduler placed (a run without assume breaks this on purpose), and no pod is lost:
    /// each one is bound, or pending with the reason it is not; no device is given twice,
    /// and no claim made for a pod's extended resources outlives its binding.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.api.overcommitted_nodes() > 0 {
            return Err(format!(
                "{} nodes were over-committed",
                self.api.overcommitted_nodes()
            ));
        }
        // As for nodes, what binds did: a card the input already over-fills (bound pods
        // holding more than it has) is the cluster's state, not this scheduler's doing.
        let cards = self.api.overfilled_cards();
        if cards > 0 {
            return Err(format!("{cards} GPU cards hold more than they have"));
        }
        for (index, placement) in self.placements().iter().enumerate() {
            if placement.node.is_none() && placement.reason.is_none() {
                return Err(format!(
                    "pod {} is neither bound nor explained",
                    placement.pod
                ));
            }
            let bound = self.api.bound_pod(self.records.uid(index));
            if placement.node.is_none() && bound.is_some() {
                return Err(format!(
                    "pod {} is bound but reported pending",
                    placement.pod
                ));
            }
            if let Some(pod) = bound
                && !self.api.claims.holds_claims_of(pod)
            {
                return Err(format!(
                    "pod {} is bound without its claims allocated and reserved for it",
                    placement.pod
                ));
            }
        }
        self.api.claims.check()?;
        // A claim made for a pod's extended resources lives as long as its pod is bound.
        if let Some(claim) = (self.api.claims.claims()).find(|c| {
            c.extended_resource
                && c.owner_pod
                    .as_deref()
                    .is_none_or(|uid| self.api.bound_pod(uid).is_none())
        }) {
            return Err(format!(
                "claim {}/{} was made for a pod's extended resources, and its pod is not bound",
                claim.namespace, claim.name
            ));
        }
        let slices = &self.api.dra_catalog().slices;
        self.api.claims.check_counters(slices)?;
        self.api.claims.check_shares(slices)?;
        for (i, instance) in self.instances.iter().enumerate() {
            let dra = instance.cache.dra();
            let counts = dra.allocation_counts();
            if counts != dra.recount_allocations() || !dra.pools_agree() {
                return Err(format!(
                    "instance {i}: the cache's device index differs from a recount"
                ));
            }
            if let Some((device, n)) = counts.iter().find(|(_, n)| *n > 1) {
                return Err(format!("instance {i}: device {device} held by {n} claims"));
            }
            if comparable(dra.share_counts()) != comparable(dra.recount_shares()) {
                return Err(format!(
                    "instance {i}: the cache's shares of shared devices differ from a recount"
                ));
            }
        }
        Ok(())
    }
}

/// Shares as [`DraCache::share_counts`](gantry_cache::DraCache::share_counts) and its
/// recount are compared: amounts sorted, an aggregated entry of zeros as none.
fn comparable(
    shares: Vec<(gantry_api::dra::DeviceId, gantry_cache::DeviceShares)>,
) -> Vec<(gantry_api::dra::DeviceId, gantry_cache::DeviceShares)> {
    (shares.into_iter())
        .map(|(device, mut share)| {
            if let Some(amounts) = &mut share.consumed {
                amounts.sort_by_key(|(key, _)| key.as_str().to_string());
            }
            if share
                .consumed
                .as_ref()
                .is_some_and(|a| a.iter().all(|(_, v)| *v == 0))
            {
                share.consumed = None;
            }
            (device, share)
        })
        .collect()
}
