//! How many nodes a cycle searches, and how the host is taken from the scored nodes: up to v1.34 the highest total, ties
//! broken at random (`selectHost`); from v1.35 the top of `sortedNodeScores` in
//! `schedule_one.go` (kubernetes#135231), a binary heap, Go's
//! `container/heap`, over the feasible nodes in the order Filter found them, ordered by
//! total score and then by a random tiebreaker that only nodes an extender scored are given
//! (kubernetes#141024 would give it to all). Without extenders equal totals stay in the
//! order the heap's sifting leaves them, so ties are broken by position, not at random. The
//! heap's later pops are OpportunisticBatching's ranking.

use crate::rng::Rng;

/// Upstream's `numFeasibleNodesToFind`: with 100 or more nodes, stop searching after
/// enough feasible ones (adaptive `50 - n/125` percent, at least 5%, at least 100 nodes).
pub fn num_feasible_nodes_to_find(percentage: Option<u32>, num_nodes: usize) -> usize {
    const MIN_FEASIBLE: usize = 100;
    let percentage = percentage.unwrap_or(0) as usize;
    if num_nodes < MIN_FEASIBLE || percentage >= 100 {
        return num_nodes;
    }
    let adaptive = if percentage == 0 {
        50usize.saturating_sub(num_nodes / 125).max(5)
    } else {
        percentage
    };
    (num_nodes * adaptive / 100).max(MIN_FEASIBLE)
}

/// The index of the highest total; among equal totals one is chosen uniformly at random
/// (reservoir sampling, as upstream's `selectHost`).
pub fn select_host(totals: &[i64], rng: &mut Rng) -> usize {
    let Some(&first) = totals.first() else {
        return 0;
    };
    let (mut best, mut best_score) = (0, first);
    let mut ties = 0u64;
    for (i, &score) in totals.iter().enumerate() {
        if score > best_score {
            (best, best_score) = (i, score);
            ties = 1;
        } else if score == best_score {
            ties += 1;
            if rng.below(ties) == 0 {
                best = i;
            }
        }
    }
    best
}

/// Go's `container/heap` over `(total, index)`, the greatest total on top; `Less` is false
/// both ways between equal totals, as upstream's with a zero tiebreaker.
pub struct ScoreHeap {
    entries: Vec<(i64, usize)>,
}

impl ScoreHeap {
    /// `heap.Init` over `totals` (the feasible nodes' totals, in Filter's order), in
    /// `buffer`'s allocation.
    pub fn new(totals: &[i64], mut buffer: Vec<(i64, usize)>) -> ScoreHeap {
        buffer.clear();
        buffer.extend(totals.iter().copied().zip(0..));
        let mut heap = ScoreHeap { entries: buffer };
        let n = heap.entries.len();
        for i in (0..n / 2).rev() {
            heap.down(i, n);
        }
        heap
    }

    /// `heap.Pop`: the index (in `totals`) of the top node.
    pub fn pop(&mut self) -> Option<usize> {
        let n = self.entries.len().checked_sub(1)?;
        self.entries.swap(0, n);
        self.down(0, n);
        self.entries.pop().map(|(_, index)| index)
    }

    /// The index of the node upstream takes among `totals` (what `new` then `pop` give),
    /// `None` when there are none, without building the heap: with one greatest total it
    /// is that one; among several, `Init` leaves on top the first node of the descent
    /// from the root that holds the greatest total, going left whenever the left subtree
    /// holds one (a node stays above children no greater than it, and `down` takes the
    /// right child only when it is strictly greater).
    pub fn top(totals: &[i64]) -> Option<usize> {
        let max = *totals.iter().max()?;
        let first = totals.iter().position(|&t| t == max)?;
        if !totals[first + 1..].contains(&max) {
            return Some(first);
        }
        let mut node = 0;
        while totals[node] != max {
            let left = 2 * node + 1;
            node = if subtree_holds(totals, left, max) {
                left
            } else {
                left + 1
            };
        }
        Some(node)
    }

    /// The allocation, for the next cycle.
    pub fn into_buffer(self) -> Vec<(i64, usize)> {
        self.entries
    }

    fn less(&self, i: usize, j: usize) -> bool {
        self.entries[i].0 > self.entries[j].0
    }

    /// Go's `down`: sifts the entry at `i` down within the first `n`.
    fn down(&mut self, mut i: usize, n: usize) {
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let mut child = left;
            if left + 1 < n && self.less(left + 1, left) {
                child = left + 1;
            }
            if !self.less(child, i) {
                break;
            }
            self.entries.swap(i, child);
            i = child;
        }
    }
}

/// Whether a binary heap's subtree rooted at `root` holds `value`: its level `d` below
/// `root` is the positions `(root + 1) * 2^d - 1` up to, not including,
/// `(root + 2) * 2^d - 1`.
fn subtree_holds(totals: &[i64], root: usize, value: i64) -> bool {
    let (mut start, mut end) = (root, root + 1);
    while start < totals.len() {
        if totals[start..end.min(totals.len())].contains(&value) {
            return true;
        }
        (start, end) = (2 * start + 1, 2 * end + 1);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn feasible_nodes_to_find_follows_upstream() {
        assert_eq!(num_feasible_nodes_to_find(None, 99), 99);
        assert_eq!(num_feasible_nodes_to_find(None, 100), 100);
        assert_eq!(num_feasible_nodes_to_find(None, 5000), 500);
        assert_eq!(num_feasible_nodes_to_find(None, 5625), 281);
        assert_eq!(num_feasible_nodes_to_find(None, 20000), 1000);
        assert_eq!(num_feasible_nodes_to_find(Some(100), 5000), 5000);
        assert_eq!(num_feasible_nodes_to_find(Some(1), 5000), 100);
        assert_eq!(num_feasible_nodes_to_find(Some(30), 1000), 300);
    }

    #[test]
    fn select_host_takes_the_maximum_and_breaks_ties_at_random() {
        let mut rng = Rng::new(1);
        assert_eq!(select_host(&[1, 5, 3], &mut rng), 1);
        let mut seen = [0; 3];
        for _ in 0..300 {
            seen[select_host(&[7, 2, 7], &mut rng)] += 1;
        }
        assert_eq!(seen[1], 0);
        assert!(seen[0] > 100 && seen[2] > 100, "{seen:?}");
    }

    fn pops(totals: &[i64]) -> Vec<usize> {
        let mut heap = ScoreHeap::new(totals, Vec::new());
        std::iter::from_fn(|| heap.pop()).collect()
    }

    /// `top` takes the node the heap's first pop gives, ties or not.
    #[test]
    fn the_top_is_the_heaps_first_pop() {
        let mut rng = Rng::new(3);
        for case in 0..2000 {
            let n = rng.below(70) as usize;
            let spread = 1 + rng.below(4) as i64;
            let totals: Vec<i64> = (0..n).map(|_| rng.below(spread as u64) as i64).collect();
            let heap_first = ScoreHeap::new(&totals, Vec::new()).pop();
            assert_eq!(
                ScoreHeap::top(&totals),
                heap_first,
                "case {case}: {totals:?}"
            );
        }
    }

    /// Without ties the pops are the totals from greatest to least.
    #[test]
    fn pops_come_greatest_first() {
        let totals = [5, 9, 1, 7, 3, 8];
        let order: Vec<i64> = pops(&totals).iter().map(|&i| totals[i]).collect();
        assert_eq!(order, [9, 8, 7, 5, 3, 1]);
    }

    /// Ties come out in the order Go's heap leaves them, which is not the input's (the
    /// expected sequences come from a line-by-line transcription of `container/heap`'s
    /// `Init`, `down` and `Pop`, run apart from this code).
    #[test]
    fn ties_follow_gos_heap() {
        assert_eq!(pops(&[5, 4, 5, 5, 5]), [0, 4, 3, 2, 1]);
        assert_eq!(pops(&[1, 1, 1]), [0, 2, 1]);
        assert!(pops(&[]).is_empty());
    }

    /// The recorded case (`testdata/batch-1.36/fits-twice`, the fifth pod): among 100
    /// feasible nodes, positions 10 and 15 tie at the top (451); upstream bound the pod
    /// to position 15 in every run, and the next like pod to position 10.
    #[test]
    fn the_recorded_tie_goes_to_the_later_node() {
        let mut totals = vec![440; 100];
        totals[0] = 438;
        totals[5] = 437;
        totals[10] = 451;
        totals[15] = 451;
        totals[20] = 450;
        assert_eq!(pops(&totals)[..3], [15, 10, 20]);
    }
}
