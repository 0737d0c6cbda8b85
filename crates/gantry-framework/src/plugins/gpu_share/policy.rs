//! HAMi's scheduling policies: how a node's cards are ordered for a container
//! (`hami.io/gpu-scheduler-policy`, `pkg/scheduler/policy/gpu_policy.go`), which node wins
//! (`hami.io/node-scheduler-policy`, `node_policy.go`), and the weights of a card's score
//! (`hami.io/device-scoring-weights`, `pkg/util/device_scoring_weights.go`).

use std::cmp::Ordering;

use smallvec::SmallVec;

const BINPACK: &str = "binpack";
const SPREAD: &str = "spread";
const NUMA: &str = "numa";
const MUTEX: &str = "mutex";
const TOPOLOGY: &str = "topology-aware";

/// HAMi's `IsValidGPUSchedulerPolicy`: a comma-separated list of known policy names.
pub fn valid_gpu_policy(policy: &str) -> bool {
    !policy.trim().is_empty()
        && policy
            .split(',')
            .all(|p| [BINPACK, SPREAD, NUMA, MUTEX, TOPOLOGY].contains(&p.trim()))
}

/// HAMi's `IsValidNodeSchedulerPolicy`: one name, surrounding blanks allowed.
pub fn node_policy(policy: &str) -> Option<NodePolicy> {
    match policy.trim() {
        BINPACK => Some(NodePolicy::Binpack),
        SPREAD => Some(NodePolicy::Spread),
        _ => None,
    }
}

/// Which node HAMi picks among those that fit: the fullest (binpack, its default) or the
/// emptiest (spread), by its node score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodePolicy {
    Binpack,
    Spread,
}

impl NodePolicy {
    /// Whether a node scoring `a` beats one scoring `b`.
    pub fn prefers(self, a: f32, b: f32) -> bool {
        match self {
            NodePolicy::Binpack => a > b,
            NodePolicy::Spread => a < b,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SortKey {
    Binpack,
    Spread,
    Numa,
}

/// How the cards of a node are ordered before a container picks: HAMi sorts with
/// `DeviceUsageList.Less`, then walks the list from its end.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Order {
    /// A comma-separated chain (or bare `numa`): keys in the order written, then index.
    Chain(SmallVec<[SortKey; 3]>),
    /// `mutex`: busy cards first, so the walk meets idle ones.
    Mutex,
    /// `nvidia.com/numa-bind`: NUMA groups kept together, by score within a group.
    NumaGroups { binpack: bool },
    /// Score first, NUMA breaking ties.
    Score { binpack: bool },
}

/// A pod's GPU policy, as HAMi's `Fit` and `DeviceUsageList.Less` read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPolicy {
    order: Order,
    /// `mutex` in the list: a card already in use takes no more pods.
    pub mutex: bool,
    /// `topology-aware` in the list: cards picked by their pair scores.
    pub topology: bool,
}

/// What the ordering compares of a card.
#[derive(Debug, Clone, Copy)]
pub struct CardKey {
    pub score: f32,
    pub numa: i32,
    pub used: i64,
    pub index: u32,
}

impl GpuPolicy {
    /// The policy `policy` names (already validated), for a pod that does or does not ask
    /// for `nvidia.com/numa-bind`.
    pub fn new(policy: &str, numa_bind: bool) -> GpuPolicy {
        let policy = policy.trim();
        let contains = |name: &str| policy.split(',').any(|p| p.trim() == name);
        let order = if policy.contains(',') || policy == NUMA {
            let mut chain: SmallVec<[SortKey; 3]> = SmallVec::new();
            for part in policy.split(',') {
                let key = match part.trim() {
                    BINPACK => SortKey::Binpack,
                    SPREAD => SortKey::Spread,
                    NUMA => SortKey::Numa,
                    _ => continue,
                };
                if !chain.contains(&key) {
                    chain.push(key);
                }
            }
            if chain.is_empty() {
                chain.push(SortKey::Spread);
            }
            if numa_bind && chain[0] != SortKey::Numa {
                chain.retain(|k| *k != SortKey::Numa);
                chain.insert(0, SortKey::Numa);
            }
            Order::Chain(chain)
        } else if policy == MUTEX {
            Order::Mutex
        } else if numa_bind {
            Order::NumaGroups {
                binpack: policy == BINPACK,
            }
        } else {
            Order::Score {
                binpack: policy == BINPACK,
            }
        };
        GpuPolicy {
            order,
            mutex: contains(MUTEX),
            topology: contains(TOPOLOGY),
        }
    }

    /// HAMi's `Less`: whether card `a` sorts before card `b`. The walk starts at the end,
    /// so spread puts the least used cards last and binpack the most used.
    pub fn less(&self, a: &CardKey, b: &CardKey) -> bool {
        let by_score = |binpack: bool| {
            if binpack {
                a.score < b.score
            } else {
                a.score > b.score
            }
        };
        match &self.order {
            Order::Mutex => {
                if a.used != b.used {
                    a.used > b.used
                } else {
                    a.numa < b.numa
                }
            }
            Order::NumaGroups { binpack } => {
                if a.numa == b.numa {
                    by_score(*binpack)
                } else if *binpack {
                    a.numa > b.numa
                } else {
                    a.numa < b.numa
                }
            }
            Order::Score { binpack } => {
                if a.score != b.score {
                    by_score(*binpack)
                } else {
                    a.numa < b.numa
                }
            }
            Order::Chain(keys) => {
                for key in keys {
                    match key {
                        SortKey::Binpack | SortKey::Spread if a.score != b.score => {
                            return by_score(*key == SortKey::Binpack);
                        }
                        SortKey::Numa if a.numa != b.numa => return a.numa < b.numa,
                        _ => {}
                    }
                }
                a.index < b.index
            }
        }
    }

    /// Sorts card positions as HAMi's `sort.Sort` does for a node's handful of cards: an
    /// insertion sort, so cards that compare equal keep their order.
    pub fn sort(&self, order: &mut [u8], keys: &[CardKey]) {
        order.sort_by(|&a, &b| {
            let (a, b) = (&keys[a as usize], &keys[b as usize]);
            if self.less(a, b) {
                Ordering::Less
            } else if self.less(b, a) {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        });
    }
}

/// HAMi's `DeviceScoringWeights`: how much shares, compute and memory count in a card's
/// score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weights {
    pub slot: i64,
    pub core: i64,
    pub memory: i64,
}

impl Default for Weights {
    fn default() -> Weights {
        Weights {
            slot: 1,
            core: 1,
            memory: 1,
        }
    }
}

impl Weights {
    /// HAMi's `ParseDeviceScoringWeights`, with its messages.
    pub fn parse(value: &str) -> Result<Weights, String> {
        let key_name = gantry_api::gpu::DEVICE_SCORING_WEIGHTS;
        let invalid = |why: String| format!("invalid {key_name} annotation {value:?}: {why}");
        let parts: Vec<&str> = value.split(',').collect();
        if parts.len() != 3 {
            return Err(invalid("expected slot, core, and memory weights".into()));
        }
        let mut weights = Weights {
            slot: 0,
            core: 0,
            memory: 0,
        };
        let mut seen: Vec<&str> = Vec::new();
        for part in parts {
            let Some((key, weight)) = part.trim().split_once('=') else {
                return Err(invalid("expected key=value entries".into()));
            };
            let key = key.trim();
            if seen.contains(&key) {
                return Err(invalid(format!("duplicate {key:?} weight")));
            }
            let weight: i64 = weight
                .trim()
                .parse()
                .map_err(|_| invalid(format!("{key:?} weight must be an integer")))?;
            if weight < 0 {
                return Err(invalid(format!("{key:?} weight must not be negative")));
            }
            match key {
                "slot" => weights.slot = weight,
                "core" => weights.core = weight,
                "memory" => weights.memory = weight,
                _ => return Err(invalid(format!("unknown weight {key:?}"))),
            }
            seen.push(key);
        }
        if weights
            == (Weights {
                slot: 0,
                core: 0,
                memory: 0,
            })
        {
            return Err(invalid("at least one weight must be positive".into()));
        }
        Ok(weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(score: f32, numa: i32, used: i64, index: u32) -> CardKey {
        CardKey {
            score,
            numa,
            used,
            index,
        }
    }

    #[test]
    fn policy_names_as_hami_validates_them() {
        // HAMi's TestPolicyContains and IsValidGPUSchedulerPolicy.
        assert!(valid_gpu_policy("binpack"));
        assert!(valid_gpu_policy("mutex, spread, numa"));
        assert!(valid_gpu_policy("binpack,topology-aware"));
        assert!(!valid_gpu_policy(""));
        assert!(!valid_gpu_policy("  "));
        assert!(!valid_gpu_policy("binpack,fastest"));
        let p = GpuPolicy::new("spread,numa,mutex", false);
        assert!(p.mutex && !p.topology);
        assert!(GpuPolicy::new("mutex,topology-aware", false).topology);
        assert!(!GpuPolicy::new("binpack,spread,numa", false).topology);
        assert_eq!(node_policy(" spread "), Some(NodePolicy::Spread));
        assert_eq!(node_policy("mutex"), None);
    }

    #[test]
    fn spread_and_binpack_order_by_score_with_numa_breaking_ties() {
        let spread = GpuPolicy::new("spread", false);
        let binpack = GpuPolicy::new("binpack", false);
        let (low, high) = (key(1.0, 1, 0, 0), key(2.0, 0, 0, 1));
        assert!(
            spread.less(&high, &low),
            "spread: higher scores first, walked last"
        );
        assert!(binpack.less(&low, &high));
        // Equal scores: the lower NUMA node first (#1806), for both.
        let (n0, n1) = (key(1.0, 0, 0, 5), key(1.0, 1, 0, 0));
        assert!(spread.less(&n0, &n1) && binpack.less(&n0, &n1));
        // An unknown single name (topology-aware) orders as spread.
        assert!(GpuPolicy::new("topology-aware", false).less(&high, &low));
    }

    #[test]
    fn numa_bind_groups_cards_by_numa_node_first() {
        let spread = GpuPolicy::new("spread", true);
        let binpack = GpuPolicy::new("binpack", true);
        let (a, b) = (key(9.0, 0, 0, 0), key(1.0, 1, 0, 1));
        assert!(
            spread.less(&a, &b),
            "spread: lower NUMA first whatever the score"
        );
        assert!(binpack.less(&b, &a), "binpack: higher NUMA first");
    }

    #[test]
    fn mutex_puts_busy_cards_first() {
        let mutex = GpuPolicy::new("mutex", false);
        assert!(mutex.less(&key(0.0, 0, 2, 0), &key(5.0, 0, 0, 1)));
        assert!(mutex.less(&key(0.0, 0, 1, 0), &key(0.0, 1, 1, 1)));
    }

    #[test]
    fn chains_compare_key_by_key_then_by_index() {
        let chain = GpuPolicy::new("numa,binpack", false);
        assert!(chain.less(&key(9.0, 0, 0, 3), &key(1.0, 1, 0, 0)));
        assert!(chain.less(&key(1.0, 0, 0, 3), &key(2.0, 0, 0, 0)));
        assert!(chain.less(&key(1.0, 0, 0, 0), &key(1.0, 0, 0, 3)));
        // A chain without sort keys falls back to spread; numa-bind puts numa first.
        let fallback = GpuPolicy::new("mutex,topology-aware", false);
        assert!(fallback.less(&key(2.0, 1, 0, 0), &key(1.0, 0, 0, 1)));
        let bound = GpuPolicy::new("binpack,spread", true);
        assert!(bound.less(&key(9.0, 0, 0, 0), &key(1.0, 1, 0, 1)));
        let mut order = [0u8, 1, 2];
        let keys = [key(1.0, 0, 0, 0), key(1.0, 0, 0, 1), key(3.0, 0, 0, 2)];
        GpuPolicy::new("binpack", false).sort(&mut order, &keys);
        assert_eq!(order, [0, 1, 2], "equal cards keep their order");
        GpuPolicy::new("spread", false).sort(&mut order, &keys);
        assert_eq!(order, [2, 0, 1]);
    }

    #[test]
    fn scoring_weights_as_hamis_parser_reads_them() {
        assert_eq!(
            Weights::parse("slot=1,core=1,memory=3"),
            Ok(Weights {
                slot: 1,
                core: 1,
                memory: 3
            })
        );
        assert_eq!(
            Weights::parse(" memory = 2 , slot=0, core=0"),
            Ok(Weights {
                slot: 0,
                core: 0,
                memory: 2
            })
        );
        for (bad, why) in [
            ("slot=1,core=1", "expected slot, core, and memory weights"),
            ("slot=1,core,memory=1", "expected key=value entries"),
            ("slot=1,slot=1,memory=1", "duplicate \"slot\" weight"),
            (
                "slot=x,core=1,memory=1",
                "\"slot\" weight must be an integer",
            ),
            (
                "slot=-1,core=1,memory=1",
                "\"slot\" weight must not be negative",
            ),
            ("slot=1,gpu=1,memory=1", "unknown weight \"gpu\""),
            (
                "slot=0,core=0,memory=0",
                "at least one weight must be positive",
            ),
        ] {
            let message = Weights::parse(bad).unwrap_err();
            assert!(message.ends_with(why), "{bad}: {message}");
            assert!(message.starts_with("invalid hami.io/device-scoring-weights annotation"));
        }
    }
}
