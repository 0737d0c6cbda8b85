//! Which instance owns a pod when several share a cluster (`gantry run --shard`, and the
//! simulation's and benchmark's instances): a stable hash of the pod's UID
//! (FNV-1a, the same in every process and every run), so every pod has exactly one owner
//! without the instances talking to each other. Shards may instead divide the nodes
//! ([`Divide::Nodes`]): each binds onto its own nodes only, and a pod that fits none of
//! them is handed on to the next shard by a count on the pod ([`HOPS_ANNOTATION`]).

use gantry_api::{Pod, Sym};

/// What instances sharing a cluster divide between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Divide {
    /// Every shard places its pods (a hash of the UID) on any node, behind a fence per
    /// node (docs/shared-state.md).
    Pods,
    /// Every shard places pods on its own nodes (a hash of the name) only: the only
    /// writer on them, it needs no node fence. A pod starts at the shard its UID hashes
    /// to and moves on, shard by shard, while it fits none of the holder's nodes.
    Nodes,
}

impl Divide {
    pub fn parse(text: &str) -> Result<Divide, String> {
        match text {
            "pods" => Ok(Divide::Pods),
            "nodes" => Ok(Divide::Nodes),
            other => Err(format!("{other:?}: shards divide pods or nodes")),
        }
    }
}

/// The pod annotation that counts how often a pod was handed on to the next shard when
/// shards divide the nodes: the pod is held by shard `(hash(uid) + hops) % count`.
pub const HOPS_ANNOTATION: &str = "gantry.dev/shard-hops";

/// How often `pod` was handed on ([`HOPS_ANNOTATION`]; none, or not a number, is 0).
pub fn hops(pod: &Pod) -> u64 {
    pod.annotation(HOPS_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// This instance's share of the pods: `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// The only instance.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// The most instances that may share a cluster: far beyond what one API server
    /// serves watches to, small enough that every count is a plain number.
    pub const MAX_INSTANCES: u64 = 1024;

    /// Parses `I/N` (0-based index of N instances).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let invalid = || format!("{text:?} is not a shard like 0/2 (index/instances)");
        let (index, count) = text.split_once('/').ok_or_else(invalid)?;
        let index = whole_number(index).ok_or_else(invalid)?;
        let count = whole_number(count).ok_or_else(invalid)?;
        if !count.is_some_and(|count| (1..=Self::MAX_INSTANCES).contains(&count)) {
            return Err(format!(
                "{text:?}: the number of instances must be 1 to {}, not {}",
                Self::MAX_INSTANCES,
                text.split_once('/').map_or("", |(_, count)| count.trim())
            ));
        }
        let (Some(Ok(index)), Some(Ok(count))) =
            (index.map(u32::try_from), count.map(u32::try_from))
        else {
            return Err(format!(
                "{text:?}: the index must be below the number of instances"
            ));
        };
        if index >= count {
            return Err(format!(
                "{text:?}: the index must be below the number of instances"
            ));
        }
        Ok(Shard { index, count })
    }

    pub fn owns(self, uid: &str) -> bool {
        self.count <= 1 || owner(uid, self.count) == self.index
    }

    /// Whether this shard schedules `pod` when shards divide the pods: with gang
    /// scheduling on, a member of a PodGroup goes with its group (`namespace/name`), so that
    /// a gang is one shard's whole and no pod-group cycle sees part of it; any other pod
    /// goes by its UID.
    pub fn owns_pod(self, pod: &Pod, gangs: bool) -> bool {
        match pod.scheduling_group {
            Some(group) if gangs => self.owns_group(pod.namespace, group),
            _ => self.owns(&pod.uid),
        }
    }

    /// Whether this shard schedules the members of the PodGroup `namespace/name`.
    pub fn owns_group(self, namespace: Sym, name: Sym) -> bool {
        self.count <= 1 || self.owns(&format!("{namespace}/{name}"))
    }

    /// Whether this shard places pods on `node` when shards divide the nodes.
    pub fn owns_node(self, node: &str) -> bool {
        self.count <= 1 || owner(node, self.count) == self.index
    }

    /// Whether this shard holds the pod with this UID, handed on `hops` times, when
    /// shards divide the nodes.
    pub fn holds(self, uid: &str, hops: u64) -> bool {
        self.count <= 1
            || (u64::from(owner(uid, self.count)) + hops % u64::from(self.count))
                % u64::from(self.count)
                == u64::from(self.index)
    }

    /// Whether a pod handed on `hops` times is at the last shard of its round: every
    /// shard has had it since it last started at the one its UID hashes to.
    pub fn ends_round(self, hops: u64) -> bool {
        hops % u64::from(self.count.max(1)) == u64::from(self.count.max(1)) - 1
    }

    /// The seed this instance breaks ties among equally scored nodes with. Instances
    /// share one `seed` and, within a watch latency, one view of the cluster: with one
    /// random stream they would pick the same node at the same moment, again and again,
    /// and pile pods onto it (found against a real API server: 4 pods on a node where one
    /// instance put 2). Each instance's stream differs; instance 0's is `seed` itself, so a
    /// single instance decides exactly as it always has.
    pub fn tie_break_seed(self, seed: u64) -> u64 {
        seed ^ u64::from(self.index).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// Whether several instances share the cluster (the binder then re-checks placements).
    pub fn is_shared(self) -> bool {
        self.count > 1
    }
}

/// The instance (of `count`) that owns the pod with this UID (FNV-1a, stable everywhere).
pub fn owner(uid: &str, count: u32) -> u32 {
    (gantry_api::rng::fnv1a(uid.bytes()) % u64::from(count.max(1))) as u32
}

/// A whole number written in decimal digits: `Some(None)` when it is one but too large
/// for a u64, so that the error can say "too large" rather than "not a number".
fn whole_number(text: &str) -> Option<Option<u64>> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pod_has_exactly_one_owner_and_the_split_is_even() {
        let shards: Vec<Shard> = (0..3).map(|index| Shard { index, count: 3 }).collect();
        let mut per_shard = [0; 3];
        for i in 0..3000 {
            let uid = format!("6f1c0a2e-{i:04}-4c1e-9d7a-1b2c3d4e5f60");
            let owners: Vec<u32> = shards
                .iter()
                .filter(|s| s.owns(&uid))
                .map(|s| s.index)
                .collect();
            assert_eq!(owners.len(), 1, "{uid}");
            per_shard[owners[0] as usize] += 1;
        }
        assert!(per_shard.iter().all(|&n| n > 850), "{per_shard:?}");
    }

    #[test]
    fn a_pod_handed_on_visits_every_shard_once_per_round_then_starts_again() {
        let shards: Vec<Shard> = (0..3).map(|index| Shard { index, count: 3 }).collect();
        let uid = "6f1c0a2e-0001-4c1e-9d7a-1b2c3d4e5f60";
        let holder = |hops: u64| -> Vec<u32> {
            shards
                .iter()
                .filter(|s| s.holds(uid, hops))
                .map(|s| s.index)
                .collect()
        };
        let round: Vec<u32> = (0..3).map(|h| holder(h)[0]).collect();
        assert_eq!(holder(0), [owner(uid, 3)]);
        let mut visited = round.clone();
        visited.sort_unstable();
        assert_eq!(visited, [0, 1, 2]);
        assert_eq!((3..6).map(|h| holder(h)[0]).collect::<Vec<_>>(), round);
        // The count wraps rather than overflowing; every count has one holder.
        assert_eq!(holder(u64::MAX).len(), 1);
        let last = Shard { index: 0, count: 3 };
        assert_eq!(
            (0..4).map(|h| last.ends_round(h)).collect::<Vec<_>>(),
            [false, false, true, false]
        );
        assert!(Shard::WHOLE.ends_round(0) && Shard::WHOLE.holds(uid, 5));
    }

    #[test]
    fn shards_divide_the_nodes_by_name() {
        let shards: Vec<Shard> = (0..2).map(|index| Shard { index, count: 2 }).collect();
        for i in 0..100 {
            let node = format!("node-{i}");
            assert_eq!(shards.iter().filter(|s| s.owns_node(&node)).count(), 1);
        }
        assert!(Shard::WHOLE.owns_node("any"));
    }

    #[test]
    fn a_gang_is_one_shards_whole_when_gangs_are_scheduled() {
        let shards: Vec<Shard> = (0..4).map(|index| Shard { index, count: 4 }).collect();
        let member = |uid: String| {
            let mut pod = Pod::new("default", &uid);
            pod.uid = uid.into();
            pod.scheduling_group = Some(Sym::new("trainer"));
            pod
        };
        let members: Vec<Pod> = (0..32).map(|i| member(format!("uid-{i}"))).collect();
        let shards = &shards;
        let holders = |gangs: bool| -> Vec<usize> {
            let mut held: Vec<usize> = (members.iter())
                .flat_map(|m| (0..4).filter(move |&s| shards[s].owns_pod(m, gangs)))
                .collect();
            held.sort_unstable();
            held.dedup();
            held
        };
        assert_eq!(holders(true).len(), 1, "one shard holds every member");
        assert!(holders(false).len() > 1, "by UID the members spread");
        let single = Pod::new("default", "web");
        assert_eq!(
            shards.iter().filter(|s| s.owns_pod(&single, true)).count(),
            1
        );
    }

    #[test]
    fn the_hop_count_is_read_from_the_annotation_and_nonsense_is_zero() {
        let with = |value: &str| {
            let mut pod = Pod::new("default", "web");
            pod.annotations = std::sync::Arc::from([(HOPS_ANNOTATION.into(), value.into())]);
            hops(&pod)
        };
        assert_eq!(hops(&Pod::new("default", "web")), 0);
        assert_eq!(with("3"), 3);
        assert_eq!(with("18446744073709551615"), u64::MAX);
        assert_eq!(with("-1"), 0);
        assert_eq!(with("x"), 0);
        assert_eq!(Divide::parse("nodes"), Ok(Divide::Nodes));
        assert!(Divide::parse("zones").is_err());
    }

    #[test]
    fn the_hash_is_stable_across_processes() {
        // FNV-1a of "a" is 0xaf63dc4c8601ec8c: a fixed function, not a seeded one.
        assert_eq!(
            owner("a", u32::MAX),
            (0xaf63_dc4c_8601_ec8c_u64 % u64::from(u32::MAX)) as u32
        );
    }

    #[test]
    fn shards_parse_and_reject_nonsense() {
        assert_eq!(Shard::parse("1/4"), Ok(Shard { index: 1, count: 4 }));
        assert!(Shard::parse("4/4").is_err());
        assert!(Shard::parse("x").is_err());
        assert!(Shard::parse("0/0").is_err());
        assert_eq!(
            Shard::parse("0/4294967296"),
            Err(
                "\"0/4294967296\": the number of instances must be 1 to 1024, not 4294967296"
                    .into()
            )
        );
        assert!(Shard::parse("99999999999/1024").is_err());
        // Only too large is said as too large, not as malformed.
        assert_eq!(
            Shard::parse("0/18446744073709551616"),
            Err("\"0/18446744073709551616\": the number of instances must be 1 to 1024, not 18446744073709551616".into())
        );
        assert_eq!(
            Shard::parse("18446744073709551616/2"),
            Err(
                "\"18446744073709551616/2\": the index must be below the number of instances"
                    .into()
            )
        );
        assert!(
            Shard::parse("0/-1")
                .unwrap_err()
                .contains("is not a shard like")
        );
    }
}
