//! Which instance owns a pod when several share a cluster (`gantry run --shard`, and the
//! simulation's and benchmark's instances): a stable hash of the pod's UID
//! (FNV-1a, the same in every process and every run), so every pod has exactly one owner
//! without the instances talking to each other.

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
        let index: u64 = index.trim().parse().map_err(|_| invalid())?;
        let count: u64 = count.trim().parse().map_err(|_| invalid())?;
        if !(1..=Self::MAX_INSTANCES).contains(&count) {
            return Err(format!(
                "{text:?}: the number of instances must be 1 to {}, not {count}",
                Self::MAX_INSTANCES
            ));
        }
        let (Ok(index), Ok(count)) = (u32::try_from(index), u32::try_from(count)) else {
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
    }
}
