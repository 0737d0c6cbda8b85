//! DeviceTaintRules (DRADeviceTaintRules: v1.35 alpha, v1.36 beta and off, v1.37 GA and
//! on): a rule gives its one taint to every device its selector picks, by driver, pool and
//! device name (each optional; no selector picks every device), as if the device's slice
//! carried it. Upstream's scheduler sees slices through its tracker
//! (`dynamic-resource-allocation/resourceslice/tracker`, `applyPatches`, v1.36.3), which
//! appends each matching rule's taint to the device's own; Gantry patches the slices it
//! reads the same way, whichever of a slice and a rule it reads first.

use std::sync::Arc;

use k8s_openapi::api::resource::v1 as resource;
use serde_json::Value;

use crate::Sym;
use crate::decode::{ObjectError, field_error};
use crate::dra::ResourceSlice;
use crate::dra_taints::{self, DeviceTaint};

/// The API versions a DeviceTaintRule is read in: v1alpha3 (v1.35), v1beta2 (v1.36), v1.
pub const API_VERSIONS: [&str; 3] = [
    "resource.k8s.io/v1alpha3",
    "resource.k8s.io/v1beta2",
    "resource.k8s.io/v1",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTaintRule {
    pub name: Sym,
    pub driver: Option<Sym>,
    pub pool: Option<Sym>,
    pub device: Option<Sym>,
    pub taint: DeviceTaint,
}

/// A rule as the API server validates it: a name, a taint of a qualified key, a label
/// value and a known effect; the selector's fields as given.
pub fn decode(value: &Value, object: &str) -> Result<DeviceTaintRule, ObjectError> {
    let version = value.get("apiVersion").and_then(Value::as_str);
    if !version.is_some_and(|v| API_VERSIONS.contains(&v)) {
        return Err(field_error(
            object,
            "apiVersion",
            format!("{version:?} is not supported: use one of {API_VERSIONS:?}"),
        ));
    }
    let name = value.pointer("/metadata/name").and_then(Value::as_str);
    let name = name.filter(|n| !n.is_empty()).ok_or_else(|| {
        field_error(
            object,
            "metadata.name",
            "Required value: name or generateName is required",
        )
    })?;
    let selector = |field: &str| -> Result<Option<Sym>, ObjectError> {
        match value.pointer(&format!("/spec/deviceSelector/{field}")) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(Sym::new(text))),
            Some(_) => Err(field_error(
                object,
                format!("spec.deviceSelector.{field}"),
                "must be a string",
            )),
        }
    };
    let taint = value
        .pointer("/spec/taint")
        .ok_or_else(|| field_error(object, "spec.taint", "Required value"))?;
    let taint: resource::DeviceTaint = crate::decode::typed(taint.clone(), object)?;
    Ok(DeviceTaintRule {
        name: Sym::new(name),
        driver: selector("driver")?,
        pool: selector("pool")?,
        device: selector("device")?,
        taint: dra_taints::taint(&taint, object, "spec.taint")?,
    })
}

/// The slice with every rule's taint appended to the devices the rule picks, in the
/// order of `rules` (upstream's `applyPatches`); `None` when no rule picks any of them.
pub fn apply<'r>(
    rules: impl IntoIterator<Item = &'r DeviceTaintRule>,
    slice: &ResourceSlice,
) -> Option<ResourceSlice> {
    let mut patched: Option<ResourceSlice> = None;
    for rule in rules {
        if rule.driver.is_some_and(|d| d != slice.driver)
            || rule.pool.is_some_and(|p| p != slice.pool)
        {
            continue;
        }
        for (i, device) in slice.devices.iter().enumerate() {
            if rule.device.is_some_and(|d| d != device.name) {
                continue;
            }
            let slice = patched.get_or_insert_with(|| slice.clone());
            std::sync::Arc::make_mut(&mut slice.devices)[i]
                .taints
                .push(rule.taint.clone());
        }
    }
    patched
}

/// Patches `slices` in place with one more rule.
pub(crate) fn apply_to_all(rule: &DeviceTaintRule, slices: &mut [Arc<ResourceSlice>]) {
    for slice in slices {
        if let Some(patched) = apply([rule], slice) {
            *slice = Arc::new(patched);
        }
    }
}
