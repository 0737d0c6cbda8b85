//! The search for feasible nodes: Filter over the candidates from the rotating start,
//! until the release's share of them is found (upstream's `findNodesThatPassFilters`).

use std::sync::Arc;

use gantry_api::{Pod, Sym};
use gantry_cache::ClusterState;
use gantry_framework::{CycleState, Status};
use rayon::prelude::*;

use super::{Candidates, Scheduler};
use crate::fit_error::FitError;
use crate::framework_runner::{
    COLUMN_CHUNK, NominatedScratch, PARALLEL_THRESHOLD, PodFilters, Proofs,
};
use crate::host::num_feasible_nodes_to_find;
use crate::verdict_memo::Kept;

impl Scheduler {
    /// Filters the candidate nodes into `feasible`, starting at the rotating index, until
    /// enough are feasible; records why the others failed. The plugins' column shortcuts
    /// settle a chunk of nodes at a time; a plugin runs on a node only where its shortcut
    /// did not prove the node passes. Where every Filter plugin reads only the pod and
    /// the node, the profile's verdict memo answers for the nodes that did not change
    /// since a like pod's cycle.
    #[allow(clippy::too_many_arguments)] // the cycle's parts, borrowed apart from `self`
    pub(super) fn find_feasible(
        &mut self,
        profile_index: usize,
        state: &CycleState,
        pod: &Arc<Pod>,
        hint: Option<Sym>,
        candidates: &Candidates,
        fit_error: &mut FitError,
        feasible: &mut Vec<usize>,
    ) {
        feasible.clear();
        let profile = &self.profiles[profile_index];
        let total = candidates.len();
        if total == 0 {
            return;
        }
        let to_find = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, total);
        let snapshot = &self.snapshot;
        let columns = snapshot
            .columns()
            .expect("the cycle's snapshot keeps columns");
        let nominated = &self.nominated;
        let start = self.next_start % total;
        let filters = PodFilters::with_columns(profile, state, pod, columns);
        let memo = &mut self.memos[profile_index];
        let key = filters.verdict_key(state, pod);
        memo.begin(pod, filters.active(), key.as_ref());

        // A pod nominated by an earlier preemption tries its node first; a pod batching
        // offered a node tries that one (upstream's `evaluateNominatedNode`, the
        // nomination taking precedence). Passing, it is the only feasible node, and the
        // search's start does not move.
        if let Some(node) = pod.nominated_node_name.or(hint)
            && let Some(position) = snapshot.position(node)
            && self
                .own_nodes
                .as_ref()
                .is_none_or(|own| own.shard().owns_node(node.as_str()))
            && (self.placement.as_ref()).is_none_or(|p| p.binary_search(&position).is_ok())
        {
            let info = snapshot.node_at(position);
            let status = filters.run_with_nominated(
                state,
                pod,
                info,
                nominated.on(node),
                &mut NominatedScratch::default(),
            );
            if status.is_success() {
                feasible.push(position);
                return;
            }
        }

        let any_nominated = !nominated.is_empty();
        // Nominated pods count on their nodes (the verdict is no longer the node's alone).
        let memo = (self.remember_verdicts && memo.in_use() && !any_nominated && key.is_some())
            .then_some(memo);
        let (generations, names) = (columns.generations(), columns.names());
        let keep_failures = self.last_cycle.is_some();
        let all_proven = filters.all_proven();
        // The verdict on the node at `position`, which the plugins in `proofs` proved.
        let verdict = |position: usize, proofs: Proofs, scratch: &mut NominatedScratch| {
            let info = snapshot.node_at(position);
            let others = if any_nominated {
                nominated.on(info.name())
            } else {
                &[]
            };
            if others.is_empty() {
                filters.run_unproven(state, pod, info, proofs)
            } else {
                filters.run_with_nominated(state, pod, info, others, scratch)
            }
        };
        // Positions of the chunk of candidates from `offset` on.
        let chunk_positions = |offset: usize, positions: &mut [usize]| {
            let mut i = (start + offset) % total;
            for position in positions.iter_mut() {
                *position = candidates.at(i);
                i = if i + 1 == total { 0 } else { i + 1 };
            }
        };
        // The same, with their proofs.
        let prove_chunk = |offset: usize, positions: &mut [usize], proofs: &mut [Proofs]| {
            chunk_positions(offset, positions);
            filters.prove(state, pod, columns, positions, proofs);
        };
        let mut record = |position: usize, status: Status, feasible: &mut Vec<usize>| {
            if status.is_success() {
                feasible.push(position);
            } else {
                // The name from the columns: no NodeInfo is read for it.
                fit_error.node_statuses.push((names[position], status));
            }
        };
        let processed =
            if to_find >= total && total >= PARALLEL_THRESHOLD && filters.runs_per_node() {
                // Every node is needed and some plugin must look at each: fan the chunks out,
                // and keep node order.
                let chunks: Vec<Vec<(usize, Status)>> = (0..total.div_ceil(COLUMN_CHUNK))
                    .into_par_iter()
                    .map(|chunk| {
                        let offset = chunk * COLUMN_CHUNK;
                        let n = COLUMN_CHUNK.min(total - offset);
                        let mut positions = [0; COLUMN_CHUNK];
                        let mut proofs = [0; COLUMN_CHUNK];
                        prove_chunk(offset, &mut positions[..n], &mut proofs[..n]);
                        let mut scratch = NominatedScratch::default();
                        (0..n)
                            .map(|k| {
                                let status = verdict(positions[k], proofs[k], &mut scratch);
                                (positions[k], status)
                            })
                            .collect()
                    })
                    .collect();
                for (position, status) in chunks.into_iter().flatten() {
                    record(position, status, feasible);
                }
                total
            } else if let Some(memo) = memo {
                // As below, with the memo (and no nominated pod): a chunk's positions, what
                // the memo knows of each, and the positions it does not know (with their
                // proofs).
                memo.start_search();
                let mut positions = [0; COLUMN_CHUNK];
                let mut kept = [Kept::Unknown; COLUMN_CHUNK];
                let mut unknown = [0; COLUMN_CHUNK];
                let mut proofs = [0; COLUMN_CHUNK];
                let mut scratch = NominatedScratch::default();
                let mut processed = 0;
                while processed < total && feasible.len() < to_find {
                    let n = COLUMN_CHUNK.min(total - processed);
                    // All nodes, not wrapping round, and the memo says each passed: take
                    // the chunk whole (or what is still to find).
                    let first = (start + processed) % total;
                    if matches!(candidates, Candidates::All(_))
                        && first + n <= total
                        && memo.all_passed(first..first + n, generations)
                    {
                        let taken = n.min(to_find - feasible.len());
                        feasible.extend(first..first + taken);
                        processed += taken;
                        continue;
                    }
                    chunk_positions(processed, &mut positions[..n]);
                    let mut m = 0;
                    for (kept, &position) in kept.iter_mut().zip(&positions[..n]) {
                        *kept = memo.verdict(position, generations[position]);
                        unknown[m] = position;
                        m += usize::from(*kept == Kept::Unknown);
                    }
                    filters.prove(state, pod, columns, &unknown[..m], &mut proofs[..m]);
                    let mut next_unknown = 0;
                    for (&kept, &position) in kept.iter().zip(&positions[..n]) {
                        if feasible.len() >= to_find {
                            break;
                        }
                        processed += 1;
                        match kept {
                            Kept::Passed => feasible.push(position),
                            Kept::Failed => memo.note_failed(position),
                            Kept::Unknown => {
                                let proof = proofs[next_unknown];
                                next_unknown += 1;
                                let status = (proof != all_proven)
                                    .then(|| verdict(position, proof, &mut scratch));
                                let generation = generations[position];
                                memo.keep_verdict(position, generation, status.as_ref());
                                if status.is_none_or(|s| s.is_success()) {
                                    feasible.push(position);
                                }
                            }
                        }
                    }
                }
                // The failures' statuses, only where the cycle reports them: no node
                // fits, or the cycle is kept for an explanation.
                if feasible.is_empty() || keep_failures {
                    for (position, status) in memo.failed() {
                        fit_error
                            .node_statuses
                            .push((names[position], status.clone()));
                    }
                }
                processed
            } else {
                // Stop as soon as enough nodes are feasible (measured: on 2 cores, fanning
                // out chunks of this search cost more than it saved).
                let mut positions = [0; COLUMN_CHUNK];
                let mut proofs = [0; COLUMN_CHUNK];
                let mut scratch = NominatedScratch::default();
                let mut processed = 0;
                while processed < total && feasible.len() < to_find {
                    let n = COLUMN_CHUNK.min(total - processed);
                    prove_chunk(processed, &mut positions[..n], &mut proofs[..n]);
                    for k in 0..n {
                        if feasible.len() >= to_find {
                            break;
                        }
                        if proofs[k] == all_proven && !any_nominated {
                            feasible.push(positions[k]);
                        } else {
                            let status = verdict(positions[k], proofs[k], &mut scratch);
                            record(positions[k], status, feasible);
                        }
                        processed += 1;
                    }
                }
                processed
            };
        self.nodes_evaluated += processed as u64;
        self.next_start = (start + processed) % total;
    }
}
