//! Device lists shared between slices that publish the same devices. The nodes of one
//! machine type often publish alike slices (the same device names, attributes and
//! capacities); read as one list, they cost the memory of one, and the selectors' memos
//! see at once that a slice's devices are ones they judged (`Arc::ptr_eq`), where comparing
//! 128 devices of a slice never seen took longer than judging it. Slices whose devices
//! carry something of their own (a `uuid` attribute, as real GPU drivers publish) are
//! kept apart, as before.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use foldhash::fast::FixedState;
use smallvec::SmallVec;

use crate::dra::Device;

/// The device lists read so far, by a hash of their names and attributes (equal lists are
/// then compared whole: a hash never decides alone).
#[derive(Clone, Default)]
pub struct DeviceLists {
    by_hash: HashMap<u64, SmallVec<[Arc<[Device]>; 1]>, FixedState>,
}

/// Says nothing of what it holds: two reads of the same objects are equal however their
/// lists were shared.
impl std::fmt::Debug for DeviceLists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeviceLists")
    }
}

impl DeviceLists {
    /// `devices`, as a list read before if one is equal to it.
    pub fn share(&mut self, devices: Vec<Device>) -> Arc<[Device]> {
        self.share_list(devices.into())
    }

    /// `list`, or a list read before that is equal to it.
    pub fn share_list(&mut self, list: Arc<[Device]>) -> Arc<[Device]> {
        let mut hasher = FixedState::default().build_hasher();
        for device in list.iter() {
            device.name.hash(&mut hasher);
            device.attributes.hash(&mut hasher);
        }
        let lists = self.by_hash.entry(hasher.finish()).or_default();
        if let Some(equal) = lists
            .iter()
            .find(|known| Arc::ptr_eq(known, &list) || **known == list)
        {
            return equal.clone();
        }
        lists.push(list.clone());
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sym;
    use crate::dra::{AttributeValue, QualifiedName};
    use crate::dra_capacity::DeviceCapacity;

    fn gpu(name: &str, model: &str, memory: i64) -> Device {
        Device {
            name: Sym::new(name),
            attributes: vec![(
                QualifiedName {
                    domain: Sym::new("gpu.example.com"),
                    id: Sym::new("model"),
                },
                AttributeValue::String(Arc::from(model)),
            )],
            capacity: vec![DeviceCapacity {
                name: QualifiedName {
                    domain: Sym::new("gpu.example.com"),
                    id: Sym::new("memory"),
                },
                key: Sym::new("memory"),
                value: memory,
                request_policy: None,
            }],
            allow_multiple_allocations: false,
            taints: Vec::new(),
            consumes_counters: Vec::new(),
            binding: None,
            binds_to_node: false,
        }
    }

    #[test]
    fn equal_lists_are_one_and_lists_that_differ_anywhere_are_not() {
        let mut lists = DeviceLists::default();
        let a = lists.share(vec![gpu("gpu-0", "A100", 80), gpu("gpu-1", "A100", 80)]);
        let b = lists.share(vec![gpu("gpu-0", "A100", 80), gpu("gpu-1", "A100", 80)]);
        assert!(Arc::ptr_eq(&a, &b));
        // Another model: another hash. Another capacity: the same hash, compared whole.
        let model = lists.share(vec![gpu("gpu-0", "H100", 80), gpu("gpu-1", "A100", 80)]);
        let memory = lists.share(vec![gpu("gpu-0", "A100", 40), gpu("gpu-1", "A100", 80)]);
        for other in [&model, &memory] {
            assert!(!Arc::ptr_eq(&a, other));
        }
        assert_eq!(memory[0].capacity[0].value, 40);
        let again = lists.share(vec![gpu("gpu-0", "A100", 40), gpu("gpu-1", "A100", 80)]);
        assert!(Arc::ptr_eq(&memory, &again));
    }
}
