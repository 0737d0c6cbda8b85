//! Every (trace, policy, seed) of a sweep, in one canonical order, optionally one shard
//! of them, run over all cores; their rows gathered into [`Results`].

use std::sync::atomic::{AtomicUsize, Ordering};

use gantry_framework::plugins::openb::Policy;
use rayon::prelude::*;

use crate::analysis;
use crate::engine::{self, Workload};
use crate::output::{Key, Kind, Results, format_row};
use crate::trace::{NodeTrace, PodTrace, TraceError};

/// What to run.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub workloads: Vec<Workload>,
    pub policies: Vec<Policy>,
    pub seeds: Vec<u64>,
    /// Tuning ratio (1.3: 130 % of the cluster's GPUs requested).
    pub inflation: f64,
    /// `Some((i, n))`: only every n-th experiment, from the i-th (0-based).
    pub shard: Option<(usize, usize)>,
}

/// One experiment of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub workload: usize,
    pub policy: Policy,
    pub seed: u64,
    pub key: Key,
}

impl Sweep {
    /// The sweep, refusing (before anything runs) traces it cannot measure or tune: see
    /// [`Workload::new`] and [`Workload::check_tuning`].
    pub fn new(
        nodes: &NodeTrace,
        pods: &[PodTrace],
        policies: Vec<Policy>,
        seeds: Vec<u64>,
        inflation: f64,
    ) -> Result<Sweep, TraceError> {
        let workloads = pods
            .iter()
            .map(|p| {
                let w = Workload::new(nodes, p)?;
                w.check_tuning(inflation)?;
                Ok(w)
            })
            .collect::<Result<Vec<_>, TraceError>>()?;
        Ok(Sweep {
            workloads,
            policies,
            seeds,
            inflation,
            shard: None,
        })
    }

    /// The `tune` column: the ratio as Python prints it (`1.3`).
    pub fn tune(&self) -> String {
        analysis::py_repr(self.inflation)
    }

    /// All experiments in key order (the order of the output rows), then the shard's.
    pub fn plan(&self) -> Vec<Planned> {
        let tune = self.tune();
        let mut all = Vec::new();
        for (w, wl) in self.workloads.iter().enumerate() {
            for &policy in &self.policies {
                for &seed in &self.seeds {
                    let key = (
                        wl.stem.clone(),
                        policy.column(),
                        tune.clone(),
                        seed.to_string(),
                    );
                    all.push(Planned {
                        workload: w,
                        policy,
                        seed,
                        key,
                    });
                }
            }
        }
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all.dedup_by(|a, b| a.key == b.key);
        match self.shard {
            Some((i, n)) if n > 0 => all
                .into_iter()
                .enumerate()
                .filter(|(k, _)| k % n == i)
                .map(|(_, p)| p)
                .collect(),
            _ => all,
        }
    }

    /// Runs the planned experiments on rayon's pool; `progress(done, total)` after each.
    /// An experiment whose tuning passes [`engine::MAX_TASKS`] is an error.
    pub fn run(&self, progress: &(dyn Fn(usize, usize) + Sync)) -> Result<Results, TraceError> {
        let plan = self.plan();
        let total = plan.len();
        let done = AtomicUsize::new(0);
        let rows: Vec<(Key, [String; 3])> = plan
            .par_iter()
            .map(|p| {
                let wl = &self.workloads[p.workload];
                let lines = engine::run(wl, p.policy, p.seed, self.inflation)?;
                let g = wl.total_gpus;
                let rows = [
                    format_row(
                        Kind::Allocation,
                        &p.key,
                        g,
                        &analysis::allocation(&lines, g),
                    ),
                    format_row(
                        Kind::FragAmount,
                        &p.key,
                        g,
                        &analysis::frag_amount(&lines, g),
                    ),
                    format_row(Kind::FragRatio, &p.key, g, &analysis::frag_ratio(&lines, g)),
                ];
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                Ok((p.key.clone(), rows))
            })
            .collect::<Result<_, TraceError>>()?;
        let mut out = Results::default();
        for (key, [a, f, r]) in rows {
            out.insert(Kind::Allocation, key.clone(), a);
            out.insert(Kind::FragAmount, key.clone(), f);
            out.insert(Kind::FragRatio, key, r);
        }
        Ok(out)
    }
}
