//! OpportunisticBatching (KEP-5598, beta and on from v1.35; upstream
//! `framework/runtime/batch.go`): a profile remembers the ranking of its last cycle, and
//! the next pod, if it has the same signature and no longer fits on the node the last one
//! took, is offered the next node of that ranking (a "hint") instead of a search. Only
//! pods that fit one to a node are batched this way, and only while the ranking is fresh.
//!
//! A hinted node that passes Filter is taken without scoring, and the search's start
//! index does not move: in a cluster large enough that a cycle looks at a share of its
//! nodes, a run of like pods fills the best nodes of the first pod's share, where without
//! batching each pod would search the next share.

use std::time::Duration;

use gantry_api::Sym;
use gantry_framework::Signature;

/// Upstream's `maxBatchAge`: a ranking older than this is not offered.
pub const MAX_BATCH_AGE: Duration = Duration::from_millis(500);

/// One profile's batching state.
#[derive(Default)]
pub struct Batch {
    ranking: Option<Ranking>,
    last_cycle: Option<LastCycle>,
}

/// The nodes of a cycle's ranking not yet offered, the best last (offered by `pop`).
struct Ranking {
    signature: Signature,
    nodes: Vec<Sym>,
    created: Duration,
}

/// The last cycle that chose a node.
struct LastCycle {
    cycle: u64,
    chosen: Sym,
}

impl Batch {
    /// Upstream's `GetNodeHint`: the next node of the last ranking for a pod of
    /// `signature` in scheduling cycle `cycle` at time `now`, if the ranking serves it:
    /// kept for a pod of the same signature, made in the cycle just before, no older than
    /// [`MAX_BATCH_AGE`], and the node the last pod took now rejects this one
    /// (`rejects_on`, Filter on that node; `None` when the node is gone). A ranking that
    /// does not serve is kept, as upstream keeps it, until the next cycle's results
    /// replace it.
    pub fn hint(
        &mut self,
        signature: Option<&Signature>,
        cycle: u64,
        now: Duration,
        rejects_on: impl FnOnce(Sym) -> Option<bool>,
    ) -> Option<Sym> {
        let ranking = self.ranking.as_mut().filter(|r| !r.nodes.is_empty())?;
        let last = self.last_cycle.as_ref()?;
        let serves = cycle == last.cycle + 1
            && signature == Some(&ranking.signature)
            && now <= ranking.created + MAX_BATCH_AGE
            && rejects_on(last.chosen) == Some(true);
        if serves { ranking.nodes.pop() } else { None }
    }

    /// Upstream's `StoreScheduleResults`, after a cycle chose `chosen`: a hint taken keeps
    /// the ranking as it is; otherwise the pod's own ranking of the other feasible nodes
    /// (`others`, best first) replaces it, or nothing does when the pod has no signature
    /// or no other node was feasible.
    pub fn store(
        &mut self,
        signature: Option<Signature>,
        hinted: Option<Sym>,
        chosen: Sym,
        others: Vec<Sym>,
        cycle: u64,
        now: Duration,
    ) {
        self.last_cycle = Some(LastCycle { cycle, chosen });
        if hinted == Some(chosen) {
            return;
        }
        self.ranking = match signature {
            Some(signature) if !others.is_empty() => {
                let mut nodes = others;
                nodes.reverse();
                Some(Ranking {
                    signature,
                    nodes,
                    created: now,
                })
            }
            _ => None,
        };
    }

    /// Whether a cycle that chose a node left a ranking to offer.
    #[cfg(test)]
    fn has_ranking(&self) -> bool {
        self.ranking.as_ref().is_some_and(|r| !r.nodes.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::Pod;

    fn signature(cpu: &str) -> Signature {
        let mut s = Signature::new(&Pod::new("default", "p"));
        s.add(gantry_framework::signature::signer::RESOURCES, &cpu);
        s
    }

    fn names(list: &[&str]) -> Vec<Sym> {
        list.iter().map(|n| Sym::new(n)).collect()
    }

    fn stored() -> Batch {
        let mut batch = Batch::default();
        let ranked = names(&["b", "c"]);
        batch.store(
            Some(signature("3")),
            None,
            Sym::new("a"),
            ranked,
            1,
            Duration::ZERO,
        );
        batch
    }

    const FULL: fn(Sym) -> Option<bool> = |_| Some(true);

    /// Why, the pod's signature, its cycle, the time, and Filter on the last node.
    type Case = (
        &'static str,
        Option<Signature>,
        u64,
        Duration,
        fn(Sym) -> Option<bool>,
    );

    /// batch.go's conditions, one by one: each one failing gives no hint and keeps the
    /// ranking; all holding, the ranking's nodes come in order.
    #[test]
    fn a_hint_needs_every_condition_of_batch_state_compatible() {
        let same = signature("3");
        let at = Duration::from_millis(100);
        let cases: [Case; 5] = [
            ("a cycle between", Some(same.clone()), 3, at, FULL),
            ("another signature", Some(signature("2")), 2, at, FULL),
            ("no signature", None, 2, at, FULL),
            (
                "too old",
                Some(same.clone()),
                2,
                Duration::from_millis(501),
                FULL,
            ),
            (
                "the last node still fits",
                Some(same.clone()),
                2,
                at,
                |_| Some(false),
            ),
        ];
        for (why, sig, cycle, now, rejects) in cases {
            let mut batch = stored();
            assert_eq!(batch.hint(sig.as_ref(), cycle, now, rejects), None, "{why}");
            assert!(batch.has_ranking(), "{why}: the ranking is kept");
        }
        let mut batch = stored();
        assert_eq!(
            batch.hint(Some(&same), 2, MAX_BATCH_AGE, FULL),
            Some(Sym::new("b"))
        );
        let gone: fn(Sym) -> Option<bool> = |_| None;
        assert_eq!(
            stored().hint(Some(&same), 2, at, gone),
            None,
            "the node is gone"
        );
        // The hint taken: the ranking goes on, the age counted from its creation.
        batch.store(
            Some(same.clone()),
            Some(Sym::new("b")),
            Sym::new("b"),
            Vec::new(),
            2,
            at,
        );
        assert_eq!(batch.hint(Some(&same), 3, at, FULL), Some(Sym::new("c")));
        batch.store(
            Some(same.clone()),
            Some(Sym::new("c")),
            Sym::new("c"),
            Vec::new(),
            3,
            at,
        );
        assert_eq!(
            batch.hint(Some(&same), 4, at, FULL),
            None,
            "the ranking is spent"
        );
    }

    /// A hint not taken (another node chosen) replaces the ranking with the cycle's own,
    /// or drops it when the pod has no signature or only one node was feasible.
    #[test]
    fn a_cycle_that_searched_replaces_the_ranking() {
        let same = signature("3");
        let mut batch = stored();
        batch.store(
            Some(same.clone()),
            Some(Sym::new("b")),
            Sym::new("x"),
            names(&["y"]),
            2,
            Duration::ZERO,
        );
        assert_eq!(
            batch.hint(Some(&same), 3, Duration::ZERO, FULL),
            Some(Sym::new("y"))
        );
        let mut batch = stored();
        batch.store(None, None, Sym::new("x"), names(&["y"]), 2, Duration::ZERO);
        assert!(!batch.has_ranking());
        let mut batch = stored();
        batch.store(
            Some(same),
            None,
            Sym::new("x"),
            Vec::new(),
            2,
            Duration::ZERO,
        );
        assert!(!batch.has_ranking());
    }
}
