//! What the first path needs to know of a slice for a request: the verdicts of all the
//! request's selectors together (its class's first, then its own), and whether the
//! slice's device names are distinct. Remembered per device list (slices read together
//! share equal lists: one entry serves a pool of alike nodes) and shared by every pod whose
//! request has the same selectors, so the first path asks once a slice, where it took a
//! lookup under each selector's lock (three for the usual class selector and two of the
//! request's) and one more under a process-wide lock for the names, for every slice of
//! every node a pod is tried on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use foldhash::fast::RandomState;
use gantry_api::Sym;
use gantry_api::dra::{Device, ResourceSlice};

use super::cel::{Selector, Verdict};

/// Slices remembered before they are all forgotten (as each selector's own memo).
const MAX_SLICES: usize = 1 << 18;

pub struct SelectionVerdicts {
    selectors: Box<[Arc<Selector>]>,
    /// Slices remembered before they are all forgotten ([`MAX_SLICES`]).
    max_slices: usize,
    /// By the address of the slice's device list and its driver (what the selectors
    /// see: slices sharing an equal list share the entry); the weak reference keeps the
    /// address from being reused while the entry stands.
    by_slice: Mutex<BySlice>,
}

/// A request's selectors on one slice.
pub struct SliceFacts {
    /// For each device, in order: `Yes` when every selector accepts it, otherwise the
    /// first verdict that is not `Yes` (the search stops at the first selector that
    /// rejects a device or fails on it).
    pub verdicts: Box<[Verdict]>,
    /// No two devices share a name (else the search finds the pool invalid).
    pub names_distinct: bool,
}

impl SelectionVerdicts {
    /// The selectors in the order they are evaluated.
    pub fn new(selectors: impl IntoIterator<Item = Arc<Selector>>) -> SelectionVerdicts {
        SelectionVerdicts {
            selectors: selectors.into_iter().collect(),
            max_slices: MAX_SLICES,
            by_slice: Mutex::default(),
        }
    }

    /// The facts of `slice`. The lock is not held while the selectors judge a slice new
    /// to this memo.
    pub fn on(&self, slice: &Arc<ResourceSlice>) -> Arc<SliceFacts> {
        let key = (
            Arc::as_ptr(&slice.devices) as *const Device as usize,
            slice.driver,
        );
        if let Some((_, facts)) = self.lock().get(&key) {
            return facts.clone();
        }
        let mut together = vec![Verdict::Yes; slice.devices.len()];
        for selector in &self.selectors {
            let verdicts = selector.verdicts(slice);
            for (first, verdict) in together.iter_mut().zip(verdicts.iter()) {
                if *first == Verdict::Yes {
                    *first = *verdict;
                }
            }
        }
        let mut names: Vec<Sym> = slice.devices.iter().map(|d| d.name).collect();
        names.sort_unstable();
        let facts = Arc::new(SliceFacts {
            verdicts: together.into(),
            names_distinct: names.windows(2).all(|pair| pair[0] != pair[1]),
        });
        let mut memo = self.lock();
        if memo.len() >= self.max_slices {
            memo.clear();
        }
        memo.insert(key, (Arc::downgrade(&slice.devices), facts.clone()));
        facts
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BySlice> {
        self.by_slice
            .lock()
            .expect("selection verdict lock poisoned")
    }
}

type BySlice = HashMap<(usize, Sym), (Weak<[Device]>, Arc<SliceFacts>), RandomState>;

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::dra::{AttributeValue, Device, QualifiedName, SliceNodes};

    fn slice(models: &[&str]) -> Arc<ResourceSlice> {
        named_slice(
            &(0..models.len())
                .map(|i| format!("d{i}"))
                .collect::<Vec<_>>(),
            models,
        )
    }

    fn named_slice(names: &[String], models: &[&str]) -> Arc<ResourceSlice> {
        Arc::new(ResourceSlice {
            binding_conditions: false,
            name: Sym::new("s"),
            driver: Sym::new("gpu.example.com"),
            pool: Sym::new("p"),
            pool_generation: 1,
            pool_slice_count: 1,
            nodes: SliceNodes::Node(Sym::new("n")),
            devices: (names.iter().zip(models))
                .map(|(name, model)| Device {
                    binding: None,
                    binds_to_node: false,
                    name: Sym::new(name),
                    attributes: vec![(
                        QualifiedName {
                            domain: Sym::new("gpu.example.com"),
                            id: Sym::new("model"),
                        },
                        AttributeValue::String(Arc::from(*model)),
                    )],
                    capacity: Vec::new(),
                    taints: Vec::new(),
                    consumes_counters: Vec::new(),
                    allow_multiple_allocations: false,
                })
                .collect(),
            shared_counters: Vec::new(),
        })
    }

    fn selector(expression: &str) -> Arc<Selector> {
        Arc::new(Selector::compile(expression).expect("compiles"))
    }

    #[test]
    fn the_first_verdict_that_is_not_yes_stands() {
        let model = "device.attributes[\"gpu.example.com\"].model";
        let together = SelectionVerdicts::new([
            selector("device.driver == \"gpu.example.com\""),
            selector(&format!("{model} != \"T4\"")),
            // Fails on a device without the attribute `missing`; rejects A100s first.
            selector(&format!(
                "{model} == \"A100\" || device.attributes[\"gpu.example.com\"].missing"
            )),
        ]);
        let s = slice(&["A100", "T4", "H100"]);
        let expected = [Verdict::Yes, Verdict::No, Verdict::Error];
        assert_eq!(*together.on(&s).verdicts, expected);
        // Remembered: the same answer from the memo.
        assert_eq!(*together.on(&s).verdicts, expected);
        // Each selector in order: a rejecting one before a failing one decides.
        let reversed = SelectionVerdicts::new([
            selector(&format!(
                "{model} == \"A100\" || device.attributes[\"gpu.example.com\"].missing"
            )),
            selector(&format!("{model} != \"H100\"")),
        ]);
        assert_eq!(
            *reversed.on(&s).verdicts,
            [Verdict::Yes, Verdict::Error, Verdict::Error]
        );
    }

    /// Slices sharing one device list share the entry, but not across drivers: the
    /// selectors see the driver too.
    #[test]
    fn a_shared_device_list_is_judged_once_per_driver() {
        let together = SelectionVerdicts::new([selector("device.driver == \"gpu.example.com\"")]);
        let first = slice(&["A100", "T4"]);
        let alike = |driver: &str| {
            Arc::new(ResourceSlice {
                driver: Sym::new(driver),
                name: Sym::new("other"),
                ..(*first).clone()
            })
        };
        assert_eq!(*together.on(&first).verdicts, [Verdict::Yes; 2]);
        assert_eq!(
            *together.on(&alike("gpu.example.com")).verdicts,
            [Verdict::Yes; 2]
        );
        assert_eq!(together.lock().len(), 1, "one entry for the list");
        assert_eq!(
            *together.on(&alike("nic.example.com")).verdicts,
            [Verdict::No; 2]
        );
        assert_eq!(together.lock().len(), 2);
    }

    /// The memo forgets everything once full, and still answers.
    #[test]
    fn a_full_memo_starts_again() {
        let together = SelectionVerdicts {
            max_slices: 2,
            ..SelectionVerdicts::new([selector(
                "device.attributes[\"gpu.example.com\"].model == \"A100\"",
            )])
        };
        let slices: Vec<_> = (0..5).map(|_| slice(&["A100", "T4"])).collect();
        for s in &slices {
            assert_eq!(*together.on(s).verdicts, [Verdict::Yes, Verdict::No]);
            assert!(together.lock().len() <= 2);
        }
    }

    #[test]
    fn a_name_twice_anywhere_in_the_slice_is_found() {
        let together = SelectionVerdicts::new([selector("true")]);
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let distinct = together.on(&named_slice(&names(&["c", "a", "b"]), &["x"; 3]));
        assert!(distinct.names_distinct);
        for twice in [
            &["a", "a", "b"][..],
            &["a", "b", "a"],
            &["b", "c", "a", "d", "c"],
        ] {
            let facts = together.on(&named_slice(&names(twice), &["x"; 5]));
            assert!(!facts.names_distinct, "{twice:?}");
        }
    }
}
