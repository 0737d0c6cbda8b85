//! What the last scheduling cycle saw of the nodes, kept on request: a replay compares the
//! node it chose with the node the recorded cluster chose, and a shadow with the node the
//! live scheduler chose, and each says why they differ (a tie broken another way, a lower
//! score, a Filter refusal, or a node the search never reached).

use std::fmt;

use gantry_api::Sym;
use gantry_cache::{ClusterState, Snapshot};
use gantry_framework::Status;

use crate::Scheduler;

impl Scheduler {
    /// From now on, each cycle keeps what it saw of the nodes (the scores of the feasible
    /// ones, the refusals of the others) until the next: for saying why another
    /// scheduler chose another node. It costs a copy of those per cycle.
    pub fn keep_last_cycle(&mut self) {
        self.last_cycle.get_or_insert_with(LastCycle::default);
    }

    /// What the last cycle saw, when kept (see [`Self::keep_last_cycle`]); its `chosen`
    /// is `None` unless it chose a node by searching.
    pub fn last_cycle(&self) -> Option<&LastCycle> {
        self.last_cycle.as_ref()
    }

    /// What the last cycle saw, taken out (empty when not kept).
    pub fn take_last_cycle(&mut self) -> LastCycle {
        self.last_cycle
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

/// The nodes one cycle judged.
#[derive(Debug, Clone, Default)]
pub struct LastCycle {
    /// The nodes in the cluster's snapshot.
    pub nodes: usize,
    /// The feasible nodes, with their totals when scored (one feasible node is taken
    /// without scoring: its total is 0).
    pub scored: Vec<(Sym, i64)>,
    /// The nodes Filter refused, with the first refusal.
    pub refused: Vec<(Sym, Status)>,
    /// The node taken.
    pub chosen: Option<Sym>,
}

/// How the cycle judged a node other than the one it took.
#[derive(Debug, Clone, PartialEq)]
pub enum OtherNode {
    /// Feasible and scored as high as the node taken: a tie, broken the other way.
    Tie { tied: usize, total: i64 },
    /// Feasible, and scored lower.
    ScoredLower { total: i64, best: i64 },
    /// Refused by a Filter plugin (plugin and message).
    Refused {
        plugin: &'static str,
        message: String,
    },
    /// Never looked at: the search stopped once it had found enough feasible nodes
    /// (`percentageOfNodesToScore`), or the node is not in the cycle's snapshot.
    NotSearched { searched: usize, nodes: usize },
    /// The cycle took no node, or took it without a search.
    Unknown,
}

impl LastCycle {
    /// A cycle that chose the node at `chosen` (a snapshot position) among `feasible`
    /// (positions), scored by `totals` unless only one was feasible, the others refused.
    pub(crate) fn record(
        &mut self,
        snapshot: &Snapshot,
        feasible: &[usize],
        totals: &[i64],
        refused: Vec<(Sym, Status)>,
        chosen: usize,
    ) {
        let name = |i: usize| snapshot.node_at(i).name();
        self.nodes = snapshot.num_nodes();
        // Every cycle records one: the list's allocation is kept from the last (see
        // `reset`), and the names are read from the snapshot's names column.
        self.scored.clear();
        match (feasible, snapshot.columns()) {
            ([only], _) => self.scored.push((name(*only), 0)),
            (_, Some(columns)) => {
                let names = columns.names();
                let feasible_names = feasible.iter().map(|&i| names[i]);
                self.scored
                    .extend(feasible_names.zip(totals.iter().copied()));
            }
            (_, None) => self
                .scored
                .extend((feasible.iter().map(|&i| name(i))).zip(totals.iter().copied())),
        }
        self.refused = refused;
        self.chosen = Some(name(chosen));
    }

    /// Forgets the last cycle, keeping the list's allocation for the next.
    pub(crate) fn reset(&mut self) {
        // Every field named: one added later cannot be left over from the last cycle.
        let LastCycle {
            nodes,
            scored,
            refused,
            chosen,
        } = self;
        *nodes = 0;
        scored.clear();
        *refused = Vec::new();
        *chosen = None;
    }

    /// How this cycle judged `other`.
    pub fn judge(&self, other: Sym) -> OtherNode {
        let Some(chosen) = self.chosen else {
            return OtherNode::Unknown;
        };
        let total_of = |node: Sym| self.scored.iter().find(|(n, _)| *n == node).map(|s| s.1);
        let Some(best) = total_of(chosen) else {
            return OtherNode::Unknown;
        };
        if let Some(total) = total_of(other) {
            return if total == best {
                let tied = self.scored.iter().filter(|(_, t)| *t == best).count();
                OtherNode::Tie { tied, total }
            } else {
                OtherNode::ScoredLower { total, best }
            };
        }
        if let Some((_, status)) = self.refused.iter().find(|(n, _)| *n == other) {
            return OtherNode::Refused {
                plugin: status.plugin(),
                message: status.message(),
            };
        }
        OtherNode::NotSearched {
            searched: self.scored.len() + self.refused.len(),
            nodes: self.nodes,
        }
    }
}

impl OtherNode {
    /// A word for counting: `tie`, `score`, the refusing plugin, `not searched`.
    pub fn kind(&self) -> &str {
        match self {
            OtherNode::Tie { .. } => "tie",
            OtherNode::ScoredLower { .. } => "score",
            OtherNode::Refused { plugin, .. } => plugin,
            OtherNode::NotSearched { .. } => "not searched",
            OtherNode::Unknown => "unknown",
        }
    }
}

impl fmt::Display for OtherNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OtherNode::Tie { tied, total } => {
                write!(f, "tied: {tied} nodes scored {total}, the highest")
            }
            OtherNode::ScoredLower { total, best } => {
                write!(f, "scored lower: {total} against {best}")
            }
            OtherNode::Refused { plugin, message } => {
                write!(f, "refused by {plugin}: {message}")
            }
            OtherNode::NotSearched { searched, nodes } => write!(
                f,
                "not searched: the cycle looked at {searched} of {nodes} nodes"
            ),
            OtherNode::Unknown => f.write_str("not known: the cycle kept no scores"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_framework::Code;

    fn cycle() -> LastCycle {
        LastCycle {
            nodes: 10,
            scored: vec![
                (Sym::new("a"), 180),
                (Sym::new("b"), 187),
                (Sym::new("c"), 187),
            ],
            refused: vec![(
                Sym::new("d"),
                Status::new(Code::Unschedulable, "Insufficient cpu")
                    .with_plugin("NodeResourcesFit"),
            )],
            chosen: Some(Sym::new("b")),
        }
    }

    #[test]
    fn another_node_is_a_tie_a_lower_score_a_refusal_or_never_looked_at() {
        let cycle = cycle();
        assert_eq!(
            cycle.judge(Sym::new("c")),
            OtherNode::Tie {
                tied: 2,
                total: 187
            }
        );
        assert_eq!(
            cycle.judge(Sym::new("a")),
            OtherNode::ScoredLower {
                total: 180,
                best: 187
            }
        );
        let refused = cycle.judge(Sym::new("d"));
        assert_eq!(refused.kind(), "NodeResourcesFit");
        assert_eq!(
            refused.to_string(),
            "refused by NodeResourcesFit: Insufficient cpu"
        );
        assert_eq!(
            cycle.judge(Sym::new("z")).to_string(),
            "not searched: the cycle looked at 4 of 10 nodes"
        );
        let none = LastCycle::default();
        assert_eq!(none.judge(Sym::new("a")), OtherNode::Unknown);
    }
}
