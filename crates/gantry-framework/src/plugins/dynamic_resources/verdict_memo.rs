//! What a selector remembers of its verdicts, so that CEL runs once per kind of device
//! rather than once per device: by slice (a slice's verdicts do not change until it is
//! replaced), and by what the expression can see of a device (its driver, attributes and
//! capacities), which the devices of a large cluster share: 100,000 nodes of 128 alike
//! GPUs have a few hundred kinds, not 12.8 million. Most nodes of a pool publish alike
//! slices, so a new slice is first compared with a few recent ones, whole.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Weak};

use foldhash::fast::{FixedState, RandomState};
use gantry_api::Sym;
use gantry_api::dra::{AttributeValue, Device, DeviceCapacity, QualifiedName, ResourceSlice};

use super::cel::Verdict;

/// Slices remembered before they are all forgotten: more than the largest cluster
/// Gantry is measured at has (one slice a node at 100,000 nodes).
const MAX_SLICES: usize = 1 << 18;

/// Kinds of device remembered before they are all forgotten.
const MAX_KINDS: usize = 1 << 16;

/// Slices kept as examples of a whole slice's devices: the nodes of a pool of one
/// machine type publish alike slices, whose verdicts are then one comparison away.
const MAX_EXAMPLES: usize = 8;

#[derive(Default)]
pub(super) struct VerdictMemo {
    /// Verdicts on every device of a slice, by the slice's address.
    by_slice: HashMap<usize, SliceVerdicts, RandomState>,
    /// Verdicts by kind of device, under the hash of what the expression sees.
    by_kind: HashMap<u64, Vec<(DeviceKind, Verdict)>, RandomState>,
    kinds: usize,
    /// Slices judged lately whose devices differ from each other's, newest first, with
    /// their verdicts.
    examples: Vec<(Arc<ResourceSlice>, Arc<[Verdict]>)>,
}

/// A selector's remembered verdicts on one slice.
struct SliceVerdicts {
    /// Keeps the slice's address from being reused while the entry stands, so that an
    /// address names one slice.
    _slice: Weak<ResourceSlice>,
    verdicts: Arc<[Verdict]>,
}

/// What a selector's expression can read of a device: `device.driver`,
/// `device.attributes`, `device.capacity` and `device.allowMultipleAllocations` (not its
/// name).
struct DeviceKind {
    driver: Sym,
    attributes: Vec<(QualifiedName, AttributeValue)>,
    capacity: Vec<DeviceCapacity>,
    allow_multiple_allocations: bool,
}

/// Whether a selector sees the same of both devices.
fn seen_alike(x: &Device, y: &Device) -> bool {
    x.attributes == y.attributes
        && x.capacity == y.capacity
        && x.allow_multiple_allocations == y.allow_multiple_allocations
}

/// Whether the expression sees the same devices, in the same order, on both slices (at
/// once where they share their device list, as equal lists read together do).
fn alike(a: &ResourceSlice, b: &ResourceSlice) -> bool {
    a.driver == b.driver
        && (Arc::ptr_eq(&a.devices, &b.devices)
            || (a.devices.len() == b.devices.len()
                && (a.devices.iter().zip(b.devices.iter())).all(|(x, y)| seen_alike(x, y))))
}

impl DeviceKind {
    fn is(&self, driver: Sym, device: &Device) -> bool {
        self.driver == driver
            && self.attributes == device.attributes
            && self.capacity == device.capacity
            && self.allow_multiple_allocations == device.allow_multiple_allocations
    }
}

/// The hash of what the expression sees of `device`; fixed, so the same on every run.
fn kind_hash(driver: Sym, device: &Device) -> u64 {
    let mut hasher = FixedState::default().build_hasher();
    driver.hash(&mut hasher);
    device.attributes.hash(&mut hasher);
    device.capacity.hash(&mut hasher);
    device.allow_multiple_allocations.hash(&mut hasher);
    hasher.finish()
}

impl VerdictMemo {
    /// The verdicts on `slice`: remembered for it, or for an example slice whose devices
    /// are alike (then remembered for this one too).
    pub(super) fn slice(&mut self, slice: &Arc<ResourceSlice>) -> Option<Arc<[Verdict]>> {
        let key = Arc::as_ptr(slice) as usize;
        if let Some(known) = self.by_slice.get(&key) {
            return Some(known.verdicts.clone());
        }
        let (_, verdicts) = self
            .examples
            .iter()
            .find(|(example, _)| alike(example, slice))?;
        let verdicts = verdicts.clone();
        self.remember_slice(slice, verdicts.clone());
        Some(verdicts)
    }

    /// The remembered verdicts on `slice`'s devices, by kind, `None` where a kind is new.
    pub(super) fn by_kind(&self, slice: &ResourceSlice) -> Vec<Option<Verdict>> {
        (slice.devices.iter())
            .map(|device| {
                let hash = kind_hash(slice.driver, device);
                let alike = self.by_kind.get(&hash)?;
                let (_, verdict) = alike
                    .iter()
                    .find(|(kind, _)| kind.is(slice.driver, device))?;
                Some(*verdict)
            })
            .collect()
    }

    /// Remembers the verdicts on `slice`, and those on its devices of kinds not yet known.
    pub(super) fn remember(&mut self, slice: &Arc<ResourceSlice>, verdicts: Arc<[Verdict]>) {
        for (device, &verdict) in slice.devices.iter().zip(verdicts.iter()) {
            if self.kinds >= MAX_KINDS {
                self.by_kind.clear();
                self.kinds = 0;
            }
            let alike = self
                .by_kind
                .entry(kind_hash(slice.driver, device))
                .or_default();
            if !alike.iter().any(|(kind, _)| kind.is(slice.driver, device)) {
                let kind = DeviceKind {
                    driver: slice.driver,
                    attributes: device.attributes.clone(),
                    capacity: device.capacity.clone(),
                    allow_multiple_allocations: device.allow_multiple_allocations,
                };
                alike.push((kind, verdict));
                self.kinds += 1;
            }
        }
        if self.examples.len() >= MAX_EXAMPLES {
            self.examples.pop();
        }
        self.examples.insert(0, (slice.clone(), verdicts.clone()));
        self.remember_slice(slice, verdicts);
    }

    fn remember_slice(&mut self, slice: &Arc<ResourceSlice>, verdicts: Arc<[Verdict]>) {
        if self.by_slice.len() >= MAX_SLICES {
            self.by_slice.clear();
        }
        let key = Arc::as_ptr(slice) as usize;
        let entry = SliceVerdicts {
            _slice: Arc::downgrade(slice),
            verdicts,
        };
        self.by_slice.insert(key, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::dra::SliceNodes;

    fn gpu(name: &str, model: &str, memory: i64) -> Device {
        let name_of = |id: &str| QualifiedName {
            domain: Sym::new("gpu.example.com"),
            id: Sym::new(id),
        };
        Device {
            binding: None,
            binds_to_node: false,
            name: Sym::new(name),
            attributes: vec![(name_of("model"), AttributeValue::String(model.into()))],
            capacity: vec![DeviceCapacity::new(name_of("memory"), "memory", memory)],
            taints: Vec::new(),
            consumes_counters: Vec::new(),
            allow_multiple_allocations: false,
        }
    }

    fn slice(name: &str, driver: &str, devices: Vec<Device>) -> Arc<ResourceSlice> {
        Arc::new(ResourceSlice {
            binding_conditions: false,
            name: Sym::new(name),
            driver: Sym::new(driver),
            pool: Sym::new(name),
            pool_generation: 1,
            pool_slice_count: 1,
            nodes: SliceNodes::Node(Sym::new(name)),
            devices: devices.into(),
            shared_counters: Vec::new(),
        })
    }

    /// Another node's slice of alike devices takes the verdicts already worked out (a
    /// device's name is not part of its kind); a device that differs in its driver, an
    /// attribute or a capacity is judged on its own.
    #[test]
    fn alike_devices_share_verdicts_and_others_do_not() {
        let mut memo = VerdictMemo::default();
        let first = slice(
            "n1",
            "gpu.example.com",
            vec![gpu("gpu-0", "A100", 80), gpu("gpu-1", "H100", 80)],
        );
        memo.remember(&first, Arc::from([Verdict::Yes, Verdict::No]));
        assert_eq!(
            memo.slice(&first).as_deref(),
            Some(&[Verdict::Yes, Verdict::No][..])
        );

        let second = slice(
            "n2",
            "gpu.example.com",
            vec![
                gpu("gpu-7", "H100", 80),
                gpu("gpu-8", "A100", 80),
                gpu("gpu-9", "A100", 40),
                gpu("gpu-10", "T4", 80),
            ],
        );
        assert_eq!(
            memo.slice(&second),
            None,
            "remembered by slice only once judged"
        );
        assert_eq!(
            memo.by_kind(&second),
            [Some(Verdict::No), Some(Verdict::Yes), None, None]
        );
        let other_driver = slice("n3", "other.example.com", vec![gpu("gpu-0", "A100", 80)]);
        assert_eq!(memo.by_kind(&other_driver), [None]);
        assert_eq!(memo.slice(&other_driver), None);
    }

    /// A slice alike an example slice (the same devices but for their names, in the same
    /// order) takes its verdicts whole; one in another order or with a device more does not.
    #[test]
    fn a_slice_alike_an_example_takes_its_verdicts() {
        let mut memo = VerdictMemo::default();
        let devices = |names: [&str; 2]| vec![gpu(names[0], "A100", 80), gpu(names[1], "H100", 80)];
        let first = slice("n1", "gpu.example.com", devices(["a", "b"]));
        memo.remember(&first, Arc::from([Verdict::Yes, Verdict::No]));
        let alike = slice("n2", "gpu.example.com", devices(["c", "d"]));
        assert_eq!(
            memo.slice(&alike).as_deref(),
            Some(&[Verdict::Yes, Verdict::No][..])
        );
        let mut swapped = devices(["c", "d"]);
        swapped.reverse();
        assert_eq!(memo.slice(&slice("n3", "gpu.example.com", swapped)), None);
        let mut more = devices(["c", "d"]);
        more.push(gpu("e", "A100", 80));
        assert_eq!(memo.slice(&slice("n4", "gpu.example.com", more)), None);
        assert_eq!(
            memo.slice(&slice("n5", "other.example.com", devices(["c", "d"]))),
            None
        );
    }

    /// Two kinds under one hash are told apart by what they are, not by the hash.
    #[test]
    fn a_kind_is_its_driver_attributes_and_capacities() {
        let a100 = gpu("gpu-0", "A100", 80);
        let kind = DeviceKind {
            driver: Sym::new("gpu.example.com"),
            attributes: a100.attributes.clone(),
            capacity: a100.capacity.clone(),
            allow_multiple_allocations: false,
        };
        let driver = Sym::new("gpu.example.com");
        assert!(kind.is(driver, &gpu("gpu-5", "A100", 80)));
        assert!(!kind.is(driver, &gpu("gpu-0", "H100", 80)));
        assert!(!kind.is(driver, &gpu("gpu-0", "A100", 40)));
        assert!(!kind.is(Sym::new("other.example.com"), &a100));
        // `device.allowMultipleAllocations` is seen by selectors too.
        let shared = Device {
            allow_multiple_allocations: true,
            ..gpu("gpu-5", "A100", 80)
        };
        assert!(!kind.is(driver, &shared));
        assert_ne!(kind_hash(driver, &shared), kind_hash(driver, &a100));
    }
}
