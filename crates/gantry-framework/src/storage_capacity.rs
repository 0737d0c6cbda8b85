//! CSIDrivers and CSIStorageCapacities, as VolumeBinding's Filter reads them: where a CSI
//! driver opts into storage capacity tracking, a claim is provisioned on a node only where
//! a capacity object of its class reaches the node and allows a volume of its size.
//! NodeVolumeLimits reads the CSIDrivers too (VolumeLimitScaling).

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use gantry_api::{CsiDriver, StorageCapacity, StorageClass, Sym};

#[derive(Debug, Default)]
pub struct StorageCapacities {
    /// The CSIDrivers by name.
    drivers: HashMap<Sym, CsiDriver, RandomState>,
    /// In input order: upstream takes the first match in its informer's order, which only
    /// StorageCapacityScoring reads.
    capacities: Vec<Arc<StorageCapacity>>,
}

impl StorageCapacities {
    pub fn new(drivers: &[CsiDriver], capacities: &[StorageCapacity]) -> StorageCapacities {
        StorageCapacities {
            drivers: drivers.iter().map(|d| (d.name, d.clone())).collect(),
            capacities: capacities.iter().cloned().map(Arc::new).collect(),
        }
    }

    /// Upstream's `hasEnoughCapacity` before the node is known: `None` when no capacity
    /// check applies (the class's provisioner is not a CSIDriver that opts in), else the
    /// capacity objects of the class that allow a volume of `bytes`, of which one must
    /// reach the node.
    pub fn candidates(
        &self,
        class: &StorageClass,
        bytes: i64,
    ) -> Option<Vec<Arc<StorageCapacity>>> {
        if !self
            .drivers
            .get(&class.provisioner)
            .is_some_and(|d| d.storage_capacity)
        {
            return None;
        }
        Some(
            (self.capacities.iter())
                .filter(|c| c.storage_class == class.name && c.allows(bytes))
                .cloned()
                .collect(),
        )
    }

    /// The CSIDriver of that name, if one exists.
    pub fn csi_driver(&self, name: Sym) -> Option<&CsiDriver> {
        self.drivers.get(&name)
    }
}
