//! The report's DRA figures: the devices of each node group's ResourceSlices and how many
//! are allocated at the end, per driver, and the pending pods whose reason comes from
//! the DynamicResources plugin.

use std::collections::{BTreeMap, HashMap, HashSet};

use gantry_api::dra::DeviceId;
use gantry_cache::Cache;
use gantry_framework::plugins::dynamic_resources as dra;
use gantry_sim::Placement;
use serde::Serialize;

use super::tables;

/// The devices of one driver on one node group's nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceRow {
    pub group: String,
    pub driver: String,
    /// Allocated to a claim, or shared by claims (as the API holds them, or decided and
    /// not written yet).
    pub in_use: usize,
    pub total: usize,
}

/// The devices of the slices local to the nodes that exist at the end (the newest
/// generation of each pool, as the allocator reads them), per node group and driver, in
/// that order. Devices reachable from several nodes belong to no group and are left out.
pub fn device_rows(cache: &Cache) -> Vec<DeviceRow> {
    // Held alone or shared (DRAConsumableCapacity): a shared device is in use once.
    let dra = cache.dra();
    let held = dra
        .allocation_counts()
        .into_iter()
        .map(|(device, _)| device);
    let shared = dra.share_counts().into_iter().map(|(device, _)| device);
    let allocated: HashSet<DeviceId> = held.chain(shared).collect();
    let mut rows: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    cache.for_each_node(|info| {
        let Some(node) = info.node() else {
            return;
        };
        let slices = info.resource_slices();
        let mut newest = HashMap::new();
        for slice in slices {
            let generation = newest.entry((slice.driver, slice.pool)).or_insert(i64::MIN);
            *generation = (*generation).max(slice.pool_generation);
        }
        for slice in slices {
            if newest[&(slice.driver, slice.pool)] != slice.pool_generation {
                continue;
            }
            let (in_use, total) = rows
                .entry((tables::node_group(node), slice.driver.to_string()))
                .or_default();
            *total += slice.devices.len();
            *in_use += slice
                .devices
                .iter()
                .filter(|d| {
                    allocated.contains(&DeviceId {
                        driver: slice.driver,
                        pool: slice.pool,
                        device: d.name,
                    })
                })
                .count();
        }
    });
    rows.into_iter()
        .map(|((group, driver), (in_use, total))| DeviceRow {
            group,
            driver,
            in_use,
            total,
        })
        .collect()
}

/// What a DynamicResources reason says, lower-case: its Filter's verdicts, and its
/// PreFilter's messages about claims and device classes.
const DRA_MARKERS: [&str; 5] = [
    dra::REASON_CANNOT_ALLOCATE,
    dra::REASON_NOT_TRACKED,
    "device class",
    "resourceclaim",
    "resource claim",
];

/// The pending reasons (as [`tables::pending_reasons`] counts them) that mention one of
/// the DynamicResources plugin's reasons.
pub fn pending_reasons(placements: &[Placement]) -> Vec<(&str, usize)> {
    tables::pending_reasons(placements)
        .into_iter()
        .filter(|(reason, _)| {
            let lower = reason.to_lowercase();
            DRA_MARKERS.iter().any(|m| lower.contains(m))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reasons_of_the_dynamic_resources_plugin_are_kept() {
        let pending = |reason: &str| Placement {
            pod: format!("default/{reason}").as_str().into(),
            node: None,
            reason: Some(reason.to_string()),
            evicted: Vec::new(),
            annotations: Default::default(),
        };
        let placements = [
            pending("0/3 nodes are available: 1 Insufficient cpu, 2 cannot allocate all claims."),
            pending("0/3 nodes are available: 3 Insufficient cpu."),
            pending("0/3 nodes are available: 3 resourceclaim not available on the node."),
            pending("request gpu: device class gpu does not exist"),
            pending("could not find ResourceClaim \"default/x\""),
        ];
        let kept: Vec<&str> = pending_reasons(&placements)
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        assert_eq!(kept.len(), 4, "{kept:?}");
        assert!(!kept.iter().any(|r| r.ends_with("3 Insufficient cpu.")));
    }
}
