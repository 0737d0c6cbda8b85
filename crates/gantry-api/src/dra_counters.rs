//! Partitionable devices' counters (DRAPartitionableDevices: v1.33 alpha, v1.36 beta and
//! on): a ResourceSlice's `sharedCounters` and a device's `consumesCounters`, decoded as
//! the API server validates them (`validateCounterSet`, `validateDeviceCounterConsumption`
//! and `validateResourceSliceSpec` in `pkg/apis/resource/validation`, v1.36.2) and dropped
//! while the gate is off, as its strategy drops them.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1 as resource;

use crate::decode::{ObjectError, field_error, validation};
use crate::dra::{CounterConsumption, CounterSet, Counters};
use crate::{Quantity, Sym};

/// Upstream's `ResourceSliceMaxCounterSets`.
pub const MAX_COUNTER_SETS: usize = 8;
/// Upstream's `ResourceSliceMaxCountersPerCounterSet` and
/// `ResourceSliceMaxCountersPerDeviceCounterConsumption`.
pub const MAX_COUNTERS: usize = 32;
/// Upstream's `ResourceSliceMaxDeviceCounterConsumptionsPerDevice`.
pub const MAX_CONSUMPTIONS_PER_DEVICE: usize = 2;
/// Upstream's `ResourceSliceMaxDevices`.
pub const MAX_DEVICES: usize = 128;
/// Upstream's `ResourceSliceMaxDevicesWithAdvancedFeatures`: when a device has taints or
/// consumes counters.
pub const MAX_DEVICES_WITH_ADVANCED_FEATURES: usize = 64;

/// `field.TooMany`.
pub(crate) fn too_many(actual: usize, max: usize) -> String {
    format!("Too many: {actual}: must have at most {max} items")
}

/// A slice's `sharedCounters` at `spec.sharedCounters`.
pub(crate) fn counter_sets(
    sets: Option<&Vec<resource::CounterSet>>,
    object: &str,
) -> Result<Vec<CounterSet>, ObjectError> {
    let field = "spec.sharedCounters";
    let Some(sets) = sets else {
        return Ok(Vec::new());
    };
    if sets.len() > MAX_COUNTER_SETS {
        return Err(field_error(
            object,
            field,
            too_many(sets.len(), MAX_COUNTER_SETS),
        ));
    }
    let mut out: Vec<CounterSet> = Vec::with_capacity(sets.len());
    for (i, set) in sets.iter().enumerate() {
        let at = format!("{field}[{i}]");
        name(&set.name, object, &format!("{at}.name"))?;
        if out.iter().any(|s| s.name.as_str() == set.name) {
            return Err(field_error(object, at, validation::duplicate(&set.name)));
        }
        out.push(CounterSet {
            name: Sym::new(&set.name),
            counters: counters(&set.counters, object, &format!("{at}.counters"))?,
        });
    }
    Ok(out)
}

/// A device's `consumesCounters` at `{field}.consumesCounters`.
pub(crate) fn consumptions(
    list: Option<&Vec<resource::DeviceCounterConsumption>>,
    object: &str,
    field: &str,
) -> Result<Vec<CounterConsumption>, ObjectError> {
    let field = format!("{field}.consumesCounters");
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    if list.len() > MAX_CONSUMPTIONS_PER_DEVICE {
        return Err(field_error(
            object,
            field,
            too_many(list.len(), MAX_CONSUMPTIONS_PER_DEVICE),
        ));
    }
    let mut out: Vec<CounterConsumption> = Vec::with_capacity(list.len());
    for (i, consumption) in list.iter().enumerate() {
        let at = format!("{field}[{i}]");
        name(
            &consumption.counter_set,
            object,
            &format!("{at}.counterSet"),
        )?;
        if out
            .iter()
            .any(|c| c.counter_set.as_str() == consumption.counter_set)
        {
            return Err(field_error(
                object,
                at,
                validation::duplicate(&consumption.counter_set),
            ));
        }
        out.push(CounterConsumption {
            counter_set: Sym::new(&consumption.counter_set),
            counters: counters(&consumption.counters, object, &format!("{at}.counters"))?,
        });
    }
    Ok(out)
}

/// A counter set's or counter's name: required, a DNS label.
fn name(value: &str, object: &str, field: &str) -> Result<(), ObjectError> {
    if value.is_empty() {
        return Err(field_error(object, field, validation::required("")));
    }
    validation::check(validation::dns1123_label(value), object, field, value)
}

/// A map of counters (`validateMap`): required, at most [`MAX_COUNTERS`], keys DNS labels
/// (a bad key is reported at the map, as upstream does), values quantities.
fn counters(
    map: &BTreeMap<String, resource::Counter>,
    object: &str,
    field: &str,
) -> Result<Counters, ObjectError> {
    if map.is_empty() {
        return Err(field_error(object, field, validation::required("")));
    }
    if map.len() > MAX_COUNTERS {
        return Err(field_error(
            object,
            field,
            too_many(map.len(), MAX_COUNTERS),
        ));
    }
    let mut out = Vec::with_capacity(map.len());
    for (key, counter) in map {
        validation::check(validation::dns1123_label(key), object, field, key)?;
        let milli = Quantity::parse(&counter.value.0)
            .and_then(|q| q.milli_value())
            .map_err(|e| field_error(object, format!("{field}[{key}].value"), e.to_string()))?;
        out.push((Sym::new(key), milli));
    }
    Ok(out)
}
