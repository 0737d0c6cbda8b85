//! Resource vectors: the four resources every node and pod has, in fixed fields, plus a
//! small sorted map for the rest (hugepages-*, extended resources such as nvidia.com/gpu).

use smallvec::SmallVec;

use crate::Sym;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// Requests defaulted for scoring when a container sets none (upstream `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Upstream `DefaultMemoryRequest`: 200Mi.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Which resource a name denotes: a fixed field or a scalar (extended) resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceName {
    Cpu,
    Memory,
    EphemeralStorage,
    Pods,
    Scalar(Sym),
}

impl ResourceName {
    pub fn parse(name: &str) -> ResourceName {
        match name {
            CPU => ResourceName::Cpu,
            MEMORY => ResourceName::Memory,
            EPHEMERAL_STORAGE => ResourceName::EphemeralStorage,
            PODS => ResourceName::Pods,
            other => ResourceName::Scalar(Sym::new(other)),
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            ResourceName::Cpu => CPU,
            ResourceName::Memory => MEMORY,
            ResourceName::EphemeralStorage => EPHEMERAL_STORAGE,
            ResourceName::Pods => PODS,
            ResourceName::Scalar(s) => s.as_str(),
        }
    }
}

/// Amounts of resources: millicores for cpu, bytes for memory and storage, counts otherwise.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Pod slots: meaningful for node capacity, zero in pod requests.
    pub pods: i64,
    /// Other resources sorted by symbol, without zero entries.
    scalar: SmallVec<[(Sym, i64); 2]>,
}

/// By hand: the scalars are copied as one block (NodeInfos are copied for every node
/// preemption tries), and `clone_from` reuses the copy's buffer.
impl Clone for Resources {
    fn clone(&self) -> Resources {
        let mut copy = Resources::default();
        copy.clone_from(self);
        copy
    }

    fn clone_from(&mut self, source: &Resources) {
        let Resources {
            milli_cpu,
            memory,
            ephemeral_storage,
            pods,
            scalar,
        } = source;
        self.milli_cpu = *milli_cpu;
        self.memory = *memory;
        self.ephemeral_storage = *ephemeral_storage;
        self.pods = *pods;
        crate::small_copy::copy_into(&mut self.scalar, scalar);
    }
}

impl Resources {
    pub fn new(milli_cpu: i64, memory: i64) -> Resources {
        Resources {
            milli_cpu,
            memory,
            ..Resources::default()
        }
    }

    #[inline]
    pub fn get(&self, name: ResourceName) -> i64 {
        match name {
            ResourceName::Cpu => self.milli_cpu,
            ResourceName::Memory => self.memory,
            ResourceName::EphemeralStorage => self.ephemeral_storage,
            ResourceName::Pods => self.pods,
            ResourceName::Scalar(s) => self.scalar(s),
        }
    }

    pub fn set(&mut self, name: ResourceName, value: i64) {
        match name {
            ResourceName::Cpu => self.milli_cpu = value,
            ResourceName::Memory => self.memory = value,
            ResourceName::EphemeralStorage => self.ephemeral_storage = value,
            ResourceName::Pods => self.pods = value,
            ResourceName::Scalar(s) => self.set_scalar(s, value),
        }
    }

    #[inline]
    pub fn scalar(&self, name: Sym) -> i64 {
        match self.scalar.binary_search_by_key(&name, |e| e.0) {
            Ok(i) => self.scalar[i].1,
            Err(_) => 0,
        }
    }

    pub fn set_scalar(&mut self, name: Sym, value: i64) {
        match self.scalar.binary_search_by_key(&name, |e| e.0) {
            Ok(i) if value == 0 => {
                self.scalar.remove(i);
            }
            Ok(i) => self.scalar[i].1 = value,
            Err(_) if value == 0 => {}
            Err(i) => self.scalar.insert(i, (name, value)),
        }
    }

    /// The scalar resources with non-zero amounts.
    pub fn scalars(&self) -> impl Iterator<Item = (Sym, i64)> + '_ {
        self.scalar.iter().copied()
    }

    /// Adds `other`, amount by amount, saturating at the ends of i64 (upstream's int64 sums
    /// wrap instead, and a node whose pods' requests wrap looks free). True when some amount
    /// saturated: the total is then a lower bound of the true one, and a holder that must
    /// subtract again exactly (a NodeInfo) adds its pods up anew instead.
    #[inline]
    pub fn add(&mut self, other: &Resources) -> bool {
        if self.apply_exact(other, i64::checked_add) {
            return false;
        }
        self.combine(other, i64::overflowing_add)
    }

    /// Subtracts `other`, saturating as [`Resources::add`]; true when some amount saturated.
    #[inline]
    pub fn sub(&mut self, other: &Resources) -> bool {
        if self.apply_exact(other, i64::checked_sub) {
            return false;
        }
        self.combine(other, i64::overflowing_sub)
    }

    /// The hot path of `add` and `sub` (nodes and pods of cpu and memory only): applies
    /// `op` to the four fixed amounts when neither side has other resources and no result
    /// overflows, and says whether it did; otherwise changes nothing.
    #[inline]
    fn apply_exact(&mut self, other: &Resources, op: fn(i64, i64) -> Option<i64>) -> bool {
        if !self.scalar.is_empty() || !other.scalar.is_empty() {
            return false;
        }
        let (Some(c), Some(m), Some(e), Some(p)) = (
            op(self.milli_cpu, other.milli_cpu),
            op(self.memory, other.memory),
            op(self.ephemeral_storage, other.ephemeral_storage),
            op(self.pods, other.pods),
        ) else {
            return false;
        };
        self.milli_cpu = c;
        self.memory = m;
        self.ephemeral_storage = e;
        self.pods = p;
        true
    }

    /// Element-wise maximum, as upstream's `maxResourceList` for init containers.
    pub fn max_with(&mut self, other: &Resources) {
        self.combine(other, |a, b| (a.max(b), false));
    }

    /// The largest magnitude of any amount.
    pub fn largest_magnitude(&self) -> u64 {
        [
            self.milli_cpu,
            self.memory,
            self.ephemeral_storage,
            self.pods,
        ]
        .into_iter()
        .chain(self.scalar.iter().map(|&(_, v)| v))
        .map(i64::unsigned_abs)
        .max()
        .unwrap_or(0)
    }

    /// Whether an amount is at an end of i64, where a saturating sum stops.
    pub fn is_saturated(&self) -> bool {
        self.first_saturated().is_some()
    }

    /// The first resource whose amount is at an end of i64.
    pub fn first_saturated(&self) -> Option<ResourceName> {
        let at_end = |v: i64| v == i64::MAX || v == i64::MIN;
        [
            (ResourceName::Cpu, self.milli_cpu),
            (ResourceName::Memory, self.memory),
            (ResourceName::EphemeralStorage, self.ephemeral_storage),
            (ResourceName::Pods, self.pods),
        ]
        .into_iter()
        .chain(
            self.scalar
                .iter()
                .map(|&(s, v)| (ResourceName::Scalar(s), v)),
        )
        .find(|&(_, v)| at_end(v))
        .map(|(name, _)| name)
    }

    /// Applies `f` amount by amount; `f` gives the result and whether it wrapped, in which
    /// case the amount saturates towards the side it overflowed. True when one did.
    fn combine(&mut self, other: &Resources, f: impl Fn(i64, i64) -> (i64, bool)) -> bool {
        let mut saturated = false;
        let mut apply = |a: i64, b: i64| -> i64 {
            match f(a, b) {
                (v, false) => v,
                // A wrapped result has the wrong sign: the true one is past the other end.
                (v, true) => {
                    saturated = true;
                    if v < 0 { i64::MAX } else { i64::MIN }
                }
            }
        };
        self.milli_cpu = apply(self.milli_cpu, other.milli_cpu);
        self.memory = apply(self.memory, other.memory);
        self.ephemeral_storage = apply(self.ephemeral_storage, other.ephemeral_storage);
        self.pods = apply(self.pods, other.pods);
        if self.scalar.is_empty() && other.scalar.is_empty() {
            // The common case (cpu and memory only): nothing to merge.
            return saturated;
        }
        let (a, b) = (&self.scalar, &other.scalar);
        let mut merged: SmallVec<[(Sym, i64); 2]> = SmallVec::new();
        let (mut i, mut j) = (0, 0);
        loop {
            let entry = match (a.get(i), b.get(j)) {
                (Some(&(na, va)), Some(&(nb, vb))) if na == nb => {
                    i += 1;
                    j += 1;
                    (na, apply(va, vb))
                }
                (Some(&(na, va)), Some(&(nb, _))) if na < nb => {
                    i += 1;
                    (na, apply(va, 0))
                }
                (Some(&(na, va)), None) => {
                    i += 1;
                    (na, apply(va, 0))
                }
                (_, Some(&(nb, vb))) => {
                    j += 1;
                    (nb, apply(0, vb))
                }
                (None, None) => break,
            };
            if entry.1 != 0 {
                merged.push(entry);
            }
        }
        self.scalar = merged;
        saturated
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.pods == 0
            && self.scalar.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_sub_and_max_cover_scalars() {
        let gpu = Sym::new("nvidia.com/gpu");
        let huge = Sym::new("hugepages-2Mi");
        let mut a = Resources::new(100, 1000);
        a.set_scalar(gpu, 2);
        let mut b = Resources::new(50, 3000);
        b.set_scalar(huge, 7);

        let mut sum = a.clone();
        sum.add(&b);
        assert_eq!((sum.milli_cpu, sum.memory), (150, 4000));
        assert_eq!((sum.scalar(gpu), sum.scalar(huge)), (2, 7));

        sum.sub(&b);
        assert_eq!(sum, a, "subtracting what was added restores the original");

        let mut max = a.clone();
        max.max_with(&b);
        assert_eq!((max.milli_cpu, max.memory), (100, 3000));
        assert_eq!((max.scalar(gpu), max.scalar(huge)), (2, 7));
    }

    #[test]
    fn sums_past_i64_saturate_and_say_so() {
        let gpu = Sym::new("example.com/card");
        let mut big = Resources::new(i64::MAX / 2 + 1, 1);
        big.set_scalar(gpu, i64::MAX);
        let mut sum = big.clone();
        assert!(sum.add(&big), "the sum saturates");
        assert_eq!(
            (sum.milli_cpu, sum.memory, sum.scalar(gpu)),
            (i64::MAX, 2, i64::MAX)
        );
        assert_eq!(sum.first_saturated(), Some(ResourceName::Cpu));
        let mut small = Resources::new(1, 1);
        assert!(!small.add(&Resources::new(2, 2)));
        assert!(!small.is_saturated());
        let mut low = Resources::new(i64::MIN + 1, 0);
        assert!(low.sub(&Resources::new(5, 0)));
        assert_eq!(low.milli_cpu, i64::MIN);
    }

    proptest::proptest! {
        /// A saturating sum is the true sum clamped to i64: never below it while the true
        /// sum fits, never wrapped around to a small or negative amount.
        #[test]
        fn saturating_sums_clamp_the_true_sum(amounts in proptest::collection::vec(0..=i64::MAX, 1..12)) {
            let mut sum = Resources::default();
            let mut exact: i128 = 0;
            for (i, &a) in amounts.iter().enumerate() {
                let saturated = sum.add(&Resources::new(a, a));
                exact += i128::from(a);
                let clamped = exact.min(i128::from(i64::MAX)) as i64;
                proptest::prop_assert_eq!((sum.milli_cpu, sum.memory), (clamped, clamped), "after {} adds", i + 1);
                if saturated {
                    proptest::prop_assert!(exact > i128::from(i64::MAX));
                }
            }
        }
    }

    #[test]
    fn zero_scalars_are_not_stored() {
        let gpu = Sym::new("nvidia.com/gpu");
        let mut r = Resources::default();
        r.set_scalar(gpu, 1);
        r.set_scalar(gpu, 0);
        assert!(r.is_zero());
        assert_eq!(r.get(ResourceName::parse("nvidia.com/gpu")), 0);
    }
}
