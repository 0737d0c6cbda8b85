//! Verdicts remembered between the cycles of like pods. A run of pods made from one
//! template (a ReplicaSet scaling up, a batch job's workers) is filtered and scored on
//! the same nodes, and between two of them only the nodes the cluster changed meanwhile
//! differ, usually the one the last pod took. Filter and Score plugins that read nothing
//! but the pod and the node ([`FilterPlugin::filter_reads_only_the_node`],
//! [`ScorePlugin::worth_remembering`]) give the same answer on a node whose generation
//! did not move, so each answer is kept by node position with the generation it was
//! given at, and asked for again only where the node changed. kube-scheduler asks every
//! time; the decisions are the same (`gantry-sim`'s `tests/sim/verdict_memo.rs` runs
//! random scenarios with the memo and without and compares every placement and message).
//!
//! [`FilterPlugin::filter_reads_only_the_node`]: gantry_framework::FilterPlugin::filter_reads_only_the_node
//! [`ScorePlugin::worth_remembering`]: gantry_framework::ScorePlugin::worth_remembering

use std::sync::Arc;

use gantry_api::Pod;
use gantry_framework::{Code, Status, VerdictKey};
use smallvec::SmallVec;

use crate::framework_runner::{COLUMN_CHUNK, out_of_range};

/// An answer's stamp: the node's generation (bits 0 to 46), whether the Filter verdict
/// was a failure (bit 47), and the memo's epoch (bits 48 to 63, never 0, so that an entry
/// never written matches nothing). A generation too large for its bits is not remembered.
type Stamp = u64;
const GENERATION_BITS: u32 = 47;
const FAILED: Stamp = 1 << GENERATION_BITS;
const EPOCH_SHIFT: u32 = 48;
const MAX_EPOCH: u64 = (1 << (64 - EPOCH_SHIFT)) - 1;

/// What the memo knows of a node's Filter verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    Unknown,
    Passed,
    Failed,
}

/// Values kept by node position, each with the stamp it was given at: one Score plugin's
/// raw scores (in a byte: scores run 0 to 100, and a byte, not eight, is what makes
/// reading a cycle's worth of them cheap), or the weighted sums of several.
#[derive(Default)]
struct KeptValues<V> {
    stamps: Vec<Stamp>,
    values: Vec<V>,
}

/// The weighted sums of the raw scores of the Score plugins whose NormalizeScore changes
/// nothing, kept by node position: a node unchanged costs one stamp check and one
/// addition for all of them.
#[derive(Default)]
struct KeptSums {
    /// The plugins (index in the profile's list) and weights the sums are of.
    plugins: SmallVec<[(usize, i64); 4]>,
    kept: KeptValues<u32>,
}

/// What one profile remembers of the last pod's cycles.
#[derive(Default)]
pub struct VerdictMemo {
    /// The pod the answers were given for: a pod with the same template and
    /// `spec.nodeName` gets the same answers.
    pod: Option<Arc<Pod>>,
    /// The Filter plugins that ran (indices in the profile's list): a verdict is theirs.
    filters: SmallVec<[u32; 16]>,
    /// What else the verdicts of this epoch depend on (the plugins' keys).
    key: VerdictKey,
    /// Moves whenever the pod or its Filter plugins change: older stamps no longer match.
    epoch: u64,
    /// Cycles of like pods in a row, this one included.
    run: u32,
    /// By node position: the stamp of the Filter verdict kept.
    verdicts: Vec<Stamp>,
    /// By node position: the failure kept, where the verdict's stamp says it failed.
    failures: Vec<Status>,
    /// By Score plugin (index in the profile's list): the raw scores kept.
    scores: Vec<KeptValues<u8>>,
    /// The weighted sums kept of the plugins [`Self::add_sums`] was last asked for.
    sums: KeptSums,
    /// Indices of the nodes a Score plugin must be asked about (kept to reuse its buffer).
    misses: Vec<usize>,
    /// The positions of the nodes this cycle's search found failing, in the order it
    /// visited them: their statuses are in `failures`, and are copied out only if the
    /// cycle needs them (see [`Self::failed`]).
    failed: Vec<usize>,
}

impl VerdictMemo {
    /// Starts a cycle of `pod`, whose Filter plugins are `filters` and whose verdicts
    /// depend on `key` besides the pod and the node (`None`: on more, and this cycle
    /// does not use the memo): the answers kept stay valid if the pod is like the last
    /// one (its template and `spec.nodeName`), the same plugins run and the key is the
    /// same; otherwise they are dropped.
    pub fn begin(&mut self, pod: &Arc<Pod>, filters: &[u32], key: Option<&VerdictKey>) {
        let same_pod = self.pod.as_ref().is_some_and(|last| {
            (Arc::ptr_eq(last, pod) || last.same_template(pod)) && last.node_name == pod.node_name
        });
        let same_key = key.is_none_or(|key| *key == self.key);
        if same_pod && self.filters[..] == *filters && same_key && self.epoch != 0 {
            self.run = self.run.saturating_add(1);
            return;
        }
        self.run = 1;
        self.pod = Some(pod.clone());
        self.filters = filters.into();
        if let Some(key) = key {
            self.key.clone_from(key);
        }
        if self.epoch == MAX_EPOCH {
            // Every stamp could match again: forget them all (once per 65,535 changes).
            self.verdicts.fill(0);
            self.scores.iter_mut().for_each(|s| s.stamps.fill(0));
            self.sums.kept.stamps.fill(0);
            self.epoch = 0;
        }
        self.epoch += 1;
    }

    /// Whether this cycle should use the memo: from the second like pod in a row on (the
    /// first of a run would only pay for keeping answers no later pod may ask for).
    pub fn in_use(&self) -> bool {
        self.run >= 2
    }

    fn stamp(&self, generation: u64) -> Option<Stamp> {
        (generation < FAILED).then_some(self.epoch << EPOCH_SHIFT | generation)
    }

    /// The Filter verdict kept for the node at `position`, of generation `generation`.
    #[inline]
    pub fn verdict(&self, position: usize, generation: u64) -> Kept {
        let Some(want) = self.stamp(generation) else {
            return Kept::Unknown;
        };
        match self.verdicts.get(position) {
            Some(&kept) if kept == want => Kept::Passed,
            Some(&kept) if kept == want | FAILED => Kept::Failed,
            _ => Kept::Unknown,
        }
    }

    /// Whether every node at `positions` (a run of positions) passed, as kept for its
    /// generation now: one tight loop for the common case of a chunk of nodes unchanged.
    pub fn all_passed(&self, positions: std::ops::Range<usize>, generations: &[u64]) -> bool {
        let (Some(kept), Some(generations)) = (
            self.verdicts.get(positions.clone()),
            generations.get(positions),
        ) else {
            return false;
        };
        let epoch = self.epoch << EPOCH_SHIFT;
        let missed = kept
            .iter()
            .zip(generations)
            .fold(false, |missed, (&kept, &generation)| {
                missed | (generation >= FAILED) | (kept != epoch | generation)
            });
        !missed
    }

    /// Starts a search: no node failed yet.
    pub fn start_search(&mut self) {
        self.failed.clear();
    }

    /// The node at `position`, which [`Self::verdict`] says failed, failed this search.
    pub fn note_failed(&mut self, position: usize) {
        self.failed.push(position);
    }

    /// The nodes this search found failing, in the order visited, with their statuses.
    pub fn failed(&self) -> impl Iterator<Item = (usize, &Status)> + '_ {
        self.failed.iter().map(|&p| (p, &self.failures[p]))
    }

    /// Keeps the Filter verdict on the node at `position`: `None` it passed, or the
    /// status it failed with, which is also noted as this search's (see
    /// [`Self::note_failed`]), even where no later cycle may read it: the generation is
    /// past the stamp's bits, or the status is an error (which is no verdict on the
    /// node, and may name what only this pod has: DynamicResources names its claim).
    pub fn keep_verdict(&mut self, position: usize, generation: u64, status: Option<&Status>) {
        if self.verdicts.len() <= position {
            self.verdicts.resize(position + 1, 0);
        }
        let Some(status) = status.filter(|s| !s.is_success()) else {
            self.verdicts[position] = self.stamp(generation).unwrap_or(0);
            return;
        };
        let stamp = self
            .stamp(generation)
            .filter(|_| status.code() != Code::Error);
        if self.failures.len() <= position {
            self.failures.resize(position + 1, Status::success());
        }
        self.failures[position] = status.clone();
        self.verdicts[position] = stamp.map_or(0, |stamp| stamp | FAILED);
        self.note_failed(position);
    }

    /// The raw scores of Score plugin `plugin` (its index in the profile's list) for the
    /// nodes at `positions` (whose generations `generations` holds, by position), into
    /// `scores`: those kept where the node did not change, and for the others what
    /// `score_misses` writes for the indices (in `positions`) it is given, which are kept.
    pub fn scores(
        &mut self,
        plugin: usize,
        generations: &[u64],
        positions: &[usize],
        scores: &mut [i64],
        score_misses: impl FnMut(&[usize], &mut [i64]) -> Result<(), Status>,
    ) -> Result<(), Status> {
        let copy = |score: &mut i64, raw: i64| {
            *score = raw;
            false
        };
        if self.scores.len() <= plugin {
            self.scores.resize_with(plugin + 1, KeptValues::default);
        }
        let epoch = self.epoch << EPOCH_SHIFT;
        let kept = &mut self.scores[plugin];
        let misses = &mut self.misses;
        (kept.serve(
            epoch,
            misses,
            generations,
            positions,
            scores,
            copy,
            score_misses,
        ))
        .map(|_| ())
    }

    /// Adds to `totals`, for the nodes at `positions`, the sum of weight × raw score of
    /// the Score plugins `plugins` ((index in the profile's list, weight), plugins whose
    /// NormalizeScore changes nothing): the sums kept where the node did not change, and
    /// for the others the sums of what `score_misses` writes for each plugin and the
    /// indices it is given, which are kept. `Ok(false)` when some raw score is outside
    /// 0..=MAX_NODE_SCORE or a sum overflows (the totals are then of no use).
    pub fn add_sums(
        &mut self,
        plugins: &[(usize, i64)],
        generations: &[u64],
        positions: &[usize],
        totals: &mut [i64],
        mut score_misses: impl FnMut(usize, &[usize], &mut [i64]) -> Result<(), Status>,
    ) -> Result<bool, Status> {
        let KeptSums {
            plugins: summed,
            kept,
        } = &mut self.sums;
        if summed[..] != *plugins {
            *summed = plugins.into();
            kept.stamps.fill(0);
        }
        // A sum that cannot be trusted is -1: never kept, and flagged when added.
        let add = |total: &mut i64, sum: i64| {
            *total += sum;
            sum < 0
        };
        let mut raws = [0; COLUMN_CHUNK];
        let sum_misses = |misses: &[usize], sums: &mut [i64]| {
            sums.fill(0);
            let raws = &mut raws[..misses.len()];
            for &(plugin, weight) in plugins {
                score_misses(plugin, misses, raws)?;
                for (sum, &raw) in sums.iter_mut().zip(raws.iter()) {
                    let added = raw.checked_mul(weight).and_then(|w| sum.checked_add(w));
                    *sum = match added {
                        Some(added) if *sum >= 0 && !out_of_range(raw) => added,
                        _ => -1,
                    };
                }
            }
            Ok(())
        };
        let epoch = self.epoch << EPOCH_SHIFT;
        let misses = &mut self.misses;
        let flagged = kept.serve(
            epoch,
            misses,
            generations,
            positions,
            totals,
            add,
            sum_misses,
        )?;
        Ok(!flagged)
    }
}

impl<V: Copy + Default + Into<i64> + TryFrom<i64>> KeptValues<V> {
    /// Hands each node's value to `put` with its slot in `out` (what it returns for each
    /// is or-ed into the result): the kept ones, then those `ask` gives for the indices
    /// (in `positions`) it is given, which are kept where they fit in a `V`.
    #[allow(clippy::too_many_arguments)]
    fn serve(
        &mut self,
        epoch: Stamp,
        misses: &mut Vec<usize>,
        generations: &[u64],
        positions: &[usize],
        out: &mut [i64],
        put: impl Fn(&mut i64, i64) -> bool,
        mut ask: impl FnMut(&[usize], &mut [i64]) -> Result<(), Status>,
    ) -> Result<bool, Status> {
        let KeptValues { stamps, values } = self;
        if stamps.len() < generations.len() {
            stamps.resize(generations.len(), 0);
            values.resize(generations.len(), V::default());
        }
        misses.clear();
        let hit =
            |stamp: Stamp, generation: u64| (generation < FAILED) & (stamp == epoch | generation);
        let mut flagged = false;
        let chunks = positions
            .chunks(COLUMN_CHUNK)
            .zip(out.chunks_mut(COLUMN_CHUNK));
        for (c, (positions, out)) in chunks.enumerate() {
            // Most chunks are a run of positions the memo knows whole: checked in one
            // tight loop, then served in another.
            let first = positions[0];
            let run = first..first + positions.len();
            if let (Some(kept), Some(generations)) =
                (stamps.get(run.clone()), generations.get(run.clone()))
            {
                let all_hit = (positions.iter().zip(kept).zip(generations).enumerate()).fold(
                    true,
                    |all, (k, ((&position, &stamp), &generation))| {
                        all & (position == first + k) & hit(stamp, generation)
                    },
                );
                if all_hit {
                    for (slot, &value) in out.iter_mut().zip(&values[run]) {
                        flagged |= put(slot, value.into());
                    }
                    continue;
                }
            }
            for (k, (slot, &position)) in out.iter_mut().zip(positions).enumerate() {
                if hit(stamps[position], generations[position]) {
                    flagged |= put(slot, values[position].into());
                } else {
                    misses.push(c * COLUMN_CHUNK + k);
                }
            }
        }
        let mut found = [0; COLUMN_CHUNK];
        for chunk in misses.chunks(COLUMN_CHUNK) {
            let found = &mut found[..chunk.len()];
            ask(chunk, found)?;
            for (&i, &value) in chunk.iter().zip(found.iter()) {
                flagged |= put(&mut out[i], value);
                let (position, generation) = (positions[i], generations[positions[i]]);
                // A value past `V`'s range (no score of upstream's is) is asked again.
                match V::try_from(value) {
                    Ok(value) if generation < FAILED => {
                        (stamps[position], values[position]) = (epoch | generation, value);
                    }
                    _ => stamps[position] = 0,
                }
            }
        }
        Ok(flagged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::Container;

    fn pod(name: &str, cpu: i64) -> Arc<Pod> {
        Arc::new(Pod::new("ns", name).with_container(Container::new("c", Some(cpu), None)))
    }

    #[test]
    fn a_verdict_is_kept_for_the_generation_it_was_given_at() {
        let mut memo = VerdictMemo::default();
        let p = pod("a", 100);
        memo.begin(&p, &[0, 1], Some(&VerdictKey::new()));
        assert_eq!(memo.verdict(3, 7), Kept::Unknown);
        memo.keep_verdict(3, 7, None);
        assert_eq!(memo.verdict(3, 7), Kept::Passed);
        assert_eq!(memo.verdict(3, 8), Kept::Unknown, "the node changed");
        assert_eq!(memo.verdict(2, 7), Kept::Unknown, "another node");
        let refused = Status::unschedulable("Insufficient cpu");
        memo.keep_verdict(2, 9, Some(&refused));
        assert_eq!(memo.verdict(2, 9), Kept::Failed);
        let failed: Vec<_> = memo.failed().collect();
        assert_eq!(failed, [(2, &refused)], "noted as the search's");
        // An error is the search's, and asked again next time.
        memo.start_search();
        let error = Status::error("claim default/a-gpu: selector #0 on device: CEL runtime error");
        memo.keep_verdict(4, 7, Some(&error));
        assert_eq!(memo.verdict(4, 7), Kept::Unknown);
        let failed: Vec<_> = memo.failed().collect();
        assert_eq!(failed, [(4, &error)]);
    }

    #[test]
    fn a_run_of_nodes_passed_only_if_each_did_at_its_generation() {
        let mut memo = VerdictMemo::default();
        memo.begin(&pod("a", 100), &[], Some(&VerdictKey::new()));
        let generations = [4, 5, 6, FAILED];
        assert!(!memo.all_passed(0..2, &generations), "nothing kept");
        memo.keep_verdict(0, 4, None);
        memo.keep_verdict(1, 5, None);
        memo.keep_verdict(2, 6, Some(&Status::unschedulable("Insufficient cpu")));
        memo.keep_verdict(3, FAILED, None);
        assert!(memo.all_passed(0..2, &generations));
        assert!(!memo.all_passed(0..3, &generations), "node 2 failed");
        assert!(
            !memo.all_passed(3..4, &generations),
            "not kept: past the stamp's bits"
        );
        assert!(!memo.all_passed(0..2, &[4, 7]), "node 1 changed");
        assert!(!memo.all_passed(2..6, &generations), "past the nodes");
    }

    #[test]
    fn a_memo_is_used_from_the_second_like_pod_in_a_row() {
        let mut memo = VerdictMemo::default();
        let (a, b) = (pod("a", 100), pod("b", 200));
        memo.begin(&a, &[], Some(&VerdictKey::new()));
        assert!(!memo.in_use());
        memo.begin(&Arc::new(a.replica("a2")), &[], Some(&VerdictKey::new()));
        assert!(memo.in_use());
        memo.begin(&b, &[], Some(&VerdictKey::new()));
        assert!(!memo.in_use());
    }

    #[test]
    fn another_template_or_other_filters_forget_everything() {
        let mut memo = VerdictMemo::default();
        let a = pod("a", 100);
        memo.begin(&a, &[0, 1], Some(&VerdictKey::new()));
        memo.keep_verdict(0, 5, None);
        // A replica shares the template: the verdict holds.
        memo.begin(
            &Arc::new(a.replica("a2")),
            &[0, 1],
            Some(&VerdictKey::new()),
        );
        assert_eq!(memo.verdict(0, 5), Kept::Passed);
        // Other Filter plugins ran.
        memo.begin(&a, &[0], Some(&VerdictKey::new()));
        assert_eq!(memo.verdict(0, 5), Kept::Unknown);
        memo.keep_verdict(0, 5, None);
        // Another template.
        memo.begin(&pod("b", 200), &[0], Some(&VerdictKey::new()));
        assert_eq!(memo.verdict(0, 5), Kept::Unknown);
        // An equal template decoded apart counts as the same.
        memo.keep_verdict(0, 5, None);
        memo.begin(&pod("c", 200), &[0], Some(&VerdictKey::new()));
        assert_eq!(memo.verdict(0, 5), Kept::Passed);
        // Another spec.nodeName.
        let mut named = (*pod("c", 200)).clone();
        named.node_name = Some(gantry_api::Sym::new("n1"));
        memo.begin(&Arc::new(named), &[0], Some(&VerdictKey::new()));
        assert_eq!(memo.verdict(0, 5), Kept::Unknown);
    }

    #[test]
    fn another_key_forgets_everything_and_no_key_keeps_it() {
        let mut memo = VerdictMemo::default();
        let a = pod("a", 100);
        let key = |values: &[u64]| VerdictKey::from_slice(values);
        memo.begin(&a, &[0], Some(&key(&[1, 7])));
        memo.keep_verdict(0, 5, None);
        memo.begin(&a, &[0], Some(&key(&[1, 7])));
        assert!(memo.in_use());
        assert_eq!(memo.verdict(0, 5), Kept::Passed);
        // A cycle that reads more than its key says keeps nothing and drops nothing.
        memo.begin(&a, &[0], None);
        memo.begin(&a, &[0], Some(&key(&[1, 7])));
        assert_eq!(memo.verdict(0, 5), Kept::Passed);
        // The DRA store moved on: a new run.
        memo.begin(&a, &[0], Some(&key(&[1, 8])));
        assert!(!memo.in_use());
        assert_eq!(memo.verdict(0, 5), Kept::Unknown);
        memo.keep_verdict(0, 5, None);
        // And a new key for a pod not alike is kept for the next run.
        memo.begin(&pod("b", 200), &[0], Some(&key(&[2])));
        memo.keep_verdict(0, 5, None);
        memo.begin(&pod("b", 200), &[0], Some(&key(&[2])));
        assert_eq!(memo.verdict(0, 5), Kept::Passed);
    }

    #[test]
    fn the_epoch_wrapping_around_forgets_everything() {
        let mut memo = VerdictMemo::default();
        let (a, b) = (pod("a", 100), pod("b", 200));
        memo.begin(&a, &[], Some(&VerdictKey::new()));
        memo.keep_verdict(0, 5, None);
        // 65,535 epochs later the same stamp would match a stale entry.
        for i in 0..MAX_EPOCH {
            memo.begin(
                if i % 2 == 0 { &b } else { &a },
                &[],
                Some(&VerdictKey::new()),
            );
        }
        assert_eq!(memo.epoch, 1);
        assert_eq!(memo.verdict(0, 5), Kept::Unknown);
    }

    #[test]
    fn generations_past_the_stamp_s_bits_are_not_remembered() {
        let mut memo = VerdictMemo::default();
        memo.begin(&pod("a", 100), &[], Some(&VerdictKey::new()));
        memo.keep_verdict(0, 3, None);
        memo.keep_verdict(0, FAILED, None);
        assert_eq!(memo.verdict(0, FAILED), Kept::Unknown);
        assert_eq!(
            memo.verdict(0, 3),
            Kept::Unknown,
            "the earlier verdict is gone"
        );
        let refused = Status::unschedulable("Insufficient cpu");
        memo.start_search();
        memo.keep_verdict(1, FAILED + 1, Some(&refused));
        assert_eq!(memo.verdict(1, FAILED + 1), Kept::Unknown);
        let failed: Vec<_> = memo.failed().collect();
        assert_eq!(
            failed,
            [(1, &refused)],
            "this search's failure, all the same"
        );
        let mut asked = Vec::new();
        let mut scores = [0; 2];
        let generations = [FAILED, 4];
        for _ in 0..2 {
            memo.scores(0, &generations, &[0, 1], &mut scores, |misses, found| {
                asked.extend_from_slice(misses);
                found.fill(42);
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(scores, [42, 42]);
        assert_eq!(
            asked,
            [0, 1, 0],
            "the second time only the node past the bits is asked"
        );
    }

    /// Runs of positions (whole chunks, and a chunk that is a run's permutation) read
    /// the kept scores in the order asked.
    #[test]
    fn scores_kept_for_runs_of_nodes_come_back_in_the_order_asked() {
        let mut memo = VerdictMemo::default();
        memo.begin(&pod("a", 100), &[], Some(&VerdictKey::new()));
        let generations: Vec<u64> = (0..100).map(|g| g + 1).collect();
        let raw = |position: usize| position as i64 * 3;
        let mut ask = |positions: &[usize], asked: &mut Vec<usize>| {
            let mut scores = vec![0; positions.len()];
            memo.scores(0, &generations, positions, &mut scores, |misses, found| {
                asked.extend(misses.iter().map(|&i| positions[i]));
                for (f, &i) in found.iter_mut().zip(misses) {
                    *f = raw(positions[i]);
                }
                Ok(())
            })
            .unwrap();
            scores
        };
        let mut asked = Vec::new();
        let run: Vec<usize> = (10..80).collect();
        assert_eq!(
            ask(&run, &mut asked),
            run.iter().map(|&p| raw(p)).collect::<Vec<_>>()
        );
        assert_eq!(asked, run, "the first time every node is asked");
        asked.clear();
        assert_eq!(
            ask(&run, &mut asked),
            run.iter().map(|&p| raw(p)).collect::<Vec<_>>()
        );
        let permuted = [10, 12, 11, 13];
        assert_eq!(ask(&permuted, &mut asked), [30, 36, 33, 39]);
        assert!(asked.is_empty(), "{asked:?}");
    }

    #[test]
    fn scores_are_asked_only_where_nodes_changed() {
        let mut memo = VerdictMemo::default();
        memo.begin(&pod("a", 100), &[], Some(&VerdictKey::new()));
        let mut generations = vec![10, 11, 12, 13];
        let mut asked = Vec::new();
        let mut score = |generations: &[u64], asked: &mut Vec<usize>| {
            let mut scores = [0; 3];
            memo.scores(1, generations, &[3, 1, 2], &mut scores, |misses, found| {
                asked.extend_from_slice(misses);
                for (f, &i) in found.iter_mut().zip(misses) {
                    *f = [3, 1, 2][i] as i64 * 10 + generations[[3, 1, 2][i]] as i64;
                }
                Ok(())
            })
            .unwrap();
            scores
        };
        assert_eq!(score(&generations, &mut asked), [43, 21, 32]);
        assert_eq!(asked, [0, 1, 2]);
        asked.clear();
        generations[1] = 20;
        assert_eq!(score(&generations, &mut asked), [43, 30, 32]);
        assert_eq!(asked, [1], "only the node at position 1 changed");
    }

    /// Scores are kept in a byte: one past it is asked again every time, never cut short.
    #[test]
    fn a_score_past_a_byte_is_asked_again() {
        let mut memo = VerdictMemo::default();
        memo.begin(&pod("a", 100), &[], Some(&VerdictKey::new()));
        let generations = [5, 6];
        for round in 0..3 {
            let mut asked = Vec::new();
            let mut scores = [0; 2];
            memo.scores(0, &generations, &[0, 1], &mut scores, |misses, found| {
                asked.extend_from_slice(misses);
                for (f, &i) in found.iter_mut().zip(misses) {
                    *f = [300, 255][i];
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(scores, [300, 255], "round {round}");
            let want: &[usize] = if round == 0 { &[0, 1] } else { &[0] };
            assert_eq!(asked, want, "round {round}");
        }
    }

    /// `add_sums` adds each plugin's weight × raw score to the totals, kept or asked, and
    /// says when a raw score is out of 0..=100.
    #[test]
    fn added_sums_are_weighted_and_checked() {
        let mut memo = VerdictMemo::default();
        let generations = [1, 2, 3];
        let second = [10, 0, 30];
        for raws in [[5, 100, 0], [5, 101, 0], [-1, 7, 0]] {
            for round in 0..2 {
                memo.begin(&pod("a", 100), &[], Some(&VerdictKey::new()));
                let mut totals = [1, 1, 1];
                let mut asked = Vec::new();
                let in_range = memo
                    .add_sums(
                        &[(0, 2), (3, 5)],
                        &generations,
                        &[2, 0, 1],
                        &mut totals,
                        |plugin, misses, found| {
                            asked.push(plugin);
                            let of = if plugin == 0 { raws } else { second };
                            for (f, &i) in found.iter_mut().zip(misses) {
                                *f = of[i];
                            }
                            Ok(())
                        },
                    )
                    .unwrap();
                let valid = raws.iter().all(|r| (0..=100).contains(r));
                assert_eq!(in_range, valid, "{raws:?}, round {round}");
                if valid {
                    let want: Vec<i64> = (0..3).map(|i| 1 + 2 * raws[i] + 5 * second[i]).collect();
                    assert_eq!(totals[..], want, "{raws:?}, round {round}");
                    let want_asked: &[usize] = if round == 0 { &[0, 3] } else { &[] };
                    assert_eq!(asked, want_asked, "kept after the first round");
                } else {
                    assert_eq!(asked, [0, 3], "a flagged sum is not kept, round {round}");
                }
            }
            // The next case is another pod's: forget these.
            memo.begin(&pod("b", 200), &[], Some(&VerdictKey::new()));
        }
    }

    /// Sums are of one set of plugins and weights: another set is asked afresh.
    #[test]
    fn sums_of_other_plugins_or_weights_are_asked_again() {
        let mut memo = VerdictMemo::default();
        memo.begin(&pod("a", 100), &[], Some(&VerdictKey::new()));
        memo.begin(&pod("a", 100), &[], Some(&VerdictKey::new()));
        let generations = [1, 2];
        let mut sum = |plugins: &[(usize, i64)]| {
            let mut totals = [0; 2];
            let mut asked = 0;
            memo.add_sums(
                plugins,
                &generations,
                &[0, 1],
                &mut totals,
                |_, misses, found| {
                    asked += misses.len();
                    found.fill(7);
                    Ok(())
                },
            )
            .unwrap();
            (totals, asked)
        };
        assert_eq!(sum(&[(0, 1)]), ([7, 7], 2));
        assert_eq!(sum(&[(0, 1)]), ([7, 7], 0));
        assert_eq!(sum(&[(0, 2)]), ([14, 14], 2), "another weight");
        assert_eq!(sum(&[(0, 2), (1, 1)]), ([21, 21], 4), "another plugin");
        assert_eq!(sum(&[(0, 2), (1, 1)]), ([21, 21], 0));
    }
}
