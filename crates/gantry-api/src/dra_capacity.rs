//! Consumable capacity (DRAConsumableCapacity: v1.34 alpha, v1.36 beta and on): a device
//! with `allowMultipleAllocations` is shared between claims, each taking part of its
//! capacities (a request's `capacity.requests`, rounded up by the capacity's
//! `requestPolicy`); the allocation result names the share (`shareID`) and what it takes
//! (`consumedCapacity`). The arithmetic is upstream's `consumable_capacity.go`
//! (`structured/internal/incubating`, v1.36.3), in thousandths of the unit as Gantry keeps
//! every quantity.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Raw;

use crate::decode::{ObjectError, field_error, validation};
use crate::dra::{DeviceShare, QualifiedName};
use crate::release::{Gate, Release};
use crate::{Quantity, QuantityFormat, Sym};

/// Upstream's `CapacityRequestPolicyDiscreteMaxOptions`.
pub const MAX_VALID_VALUES: usize = 10;

/// One entry of a device's `capacity`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceCapacity {
    /// The name as CEL and `matchAttribute` see it (the driver's domain when none).
    pub name: QualifiedName,
    /// The key as the slice writes it: a claim's `capacity.requests` and a result's
    /// `consumedCapacity` name the capacity so (upstream looks them up by the key as
    /// written, so `memory` and `gpu.example.com/memory` are different keys).
    pub key: Sym,
    /// In thousandths of the unit (like millicores), so `1Gi` is `1024³ × 1000`.
    pub value: i64,
    /// `requestPolicy` (DRAConsumableCapacity; dropped while the gate is off).
    pub request_policy: Option<Box<RequestPolicy>>,
}

impl DeviceCapacity {
    /// A capacity without a request policy, named as `name` is written.
    pub fn new(name: QualifiedName, key: &str, value: i64) -> DeviceCapacity {
        DeviceCapacity {
            name,
            key: Sym::new(key),
            value,
            request_policy: None,
        }
    }
}

/// A capacity's `requestPolicy`: what a share takes when its request names no amount,
/// and which amounts may be taken.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestPolicy {
    pub default: Option<i64>,
    pub valid: ValidAmounts,
}

/// The amounts a share may take: `validValues` or `validRange` (at most one is set).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ValidAmounts {
    Any,
    /// `validValues`, ascending.
    Values(Vec<i64>),
    /// `validRange`.
    Range {
        min: i64,
        max: Option<i64>,
        step: Option<i64>,
    },
}

/// Amounts by capacity key (as the slice writes it), in thousandths: a request's
/// `capacity.requests`, a result's `consumedCapacity`, or what the shares of a device
/// take together.
pub type CapacityAmounts = Vec<(Sym, i64)>;

/// Upstream's `Quantity.Value()`: whole units, rounded up.
fn whole_units(milli: i64) -> i64 {
    milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
}

/// Whether a range's arithmetic works in thousandths: with DRAFractionalCapacityRange
/// (`fractional`, v1.37) when its minimum, maximum or step is fractional and the step is
/// at least a thousandth (upstream's `useMilli`); else in whole units rounded up, as
/// `Value()` reads quantities. (A later upstream revision uses thousandths whenever the
/// gate is on; for ranges of whole units both give the same amounts.)
fn in_thousandths(min: i64, max: Option<i64>, step: Option<i64>, fractional: bool) -> bool {
    let parts = [Some(min), max, step];
    fractional && parts.iter().flatten().any(|q| q % 1000 != 0) && step.is_none_or(|s| s >= 1)
}

/// A range's `(min, step, scale)` in the unit its arithmetic works in (see
/// [`in_thousandths`]), and how many thousandths that unit is.
fn range_units(min: i64, max: Option<i64>, step: i64, fractional: bool) -> (i64, i64, i64) {
    if in_thousandths(min, max, Some(step), fractional) {
        (min, step.max(1), 1)
    } else {
        (whole_units(min), whole_units(step).max(1), 1000)
    }
}

/// What a share takes of `capacity` when its request asks for `requested` (upstream's
/// `calculateConsumedCapacity`): the policy's default (else the whole capacity) when
/// the request names none; otherwise the amount, rounded up to the range's step or the
/// next valid value. `fractional`: DRAFractionalCapacityRange.
pub fn consumed(requested: Option<i64>, capacity: &DeviceCapacity, fractional: bool) -> i64 {
    let policy = capacity.request_policy.as_deref();
    let Some(requested) = requested else {
        return policy.and_then(|p| p.default).unwrap_or(capacity.value);
    };
    match policy.map(|p| &p.valid) {
        Some(ValidAmounts::Range { min, max, step }) => {
            if requested < *min {
                return *min;
            }
            let Some(step) = step else {
                return requested;
            };
            let (min, step, scale) = range_units(*min, *max, *step, fractional);
            let requested = if scale == 1 {
                requested
            } else {
                whole_units(requested)
            };
            let added = requested.saturating_sub(min);
            let steps = added / step + i64::from(added % step != 0);
            min.saturating_add(step.saturating_mul(steps))
                .saturating_mul(scale)
        }
        Some(ValidAmounts::Values(values)) => values
            .iter()
            .copied()
            .find(|v| requested <= *v)
            .unwrap_or(requested),
        Some(ValidAmounts::Any) | None => requested,
    }
}

/// Whether taking `amount` breaks the capacity's policy (upstream's `violatesPolicy`):
/// over the range's maximum, off its step, or not a valid value. The default is always
/// allowed.
pub fn violates_policy(amount: i64, policy: Option<&RequestPolicy>, fractional: bool) -> bool {
    let Some(policy) = policy else {
        return false;
    };
    if policy.default == Some(amount) {
        return false;
    }
    match &policy.valid {
        ValidAmounts::Range { min, max, step } => {
            max.is_some_and(|max| amount > max)
                || step.is_some_and(|step| {
                    let (min, step, scale) = range_units(*min, *max, step, fractional);
                    let amount = if scale == 1 {
                        amount
                    } else {
                        whole_units(amount)
                    };
                    amount.saturating_sub(min) % step != 0
                })
        }
        ValidAmounts::Values(values) => !values.contains(&amount),
        ValidAmounts::Any => false,
    }
}

/// What a share of a device with `capacities` takes for a request asking `requests`
/// (upstream's `GetConsumedCapacityFromRequest`), by capacity key in the device's order.
pub fn consumed_by_request(
    requests: &CapacityAmounts,
    capacities: &[DeviceCapacity],
    fractional: bool,
) -> CapacityAmounts {
    capacities
        .iter()
        .map(|c| (c.key, consumed(requested(requests, c.key), c, fractional)))
        .collect()
}

fn requested(requests: &CapacityAmounts, key: Sym) -> Option<i64> {
    requests.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Why a device cannot take a request's share (upstream's `CmpRequestOverCapacity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapacityShortfall {
    /// The request names a capacity the device lacks (upstream: an error, and the device
    /// is skipped).
    Undefined(Sym),
    /// The amount breaks the capacity's request policy.
    Policy(Sym),
    /// What the device's shares take, with this one, would pass the capacity: how much
    /// is left before this share.
    Exhausted { key: Sym, left: i64, wanted: i64 },
}

/// Whether a device with `capacities`, of which its existing shares take `in_use` and
/// the shares picked in the same search `picking`, can give `requests` a share.
pub fn fits(
    requests: &CapacityAmounts,
    capacities: &[DeviceCapacity],
    in_use: &CapacityAmounts,
    picking: &CapacityAmounts,
    fractional: bool,
) -> Result<(), CapacityShortfall> {
    if let Some((key, _)) = requests
        .iter()
        .find(|(k, _)| !capacities.iter().any(|c| c.key == *k))
    {
        return Err(CapacityShortfall::Undefined(*key));
    }
    for capacity in capacities {
        let wanted = consumed(requested(requests, capacity.key), capacity, fractional);
        if violates_policy(wanted, capacity.request_policy.as_deref(), fractional) {
            return Err(CapacityShortfall::Policy(capacity.key));
        }
        let taken = amount(in_use, capacity.key).saturating_add(amount(picking, capacity.key));
        if taken.saturating_add(wanted) > capacity.value {
            return Err(CapacityShortfall::Exhausted {
                key: capacity.key,
                left: capacity.value.saturating_sub(taken),
                wanted,
            });
        }
    }
    Ok(())
}

/// The amount of `key` in `amounts` (0 when absent).
pub fn amount(amounts: &CapacityAmounts, key: Sym) -> i64 {
    requested(amounts, key).unwrap_or(0)
}

/// Adds (`sign` 1) or takes away (-1) `change` from `total`, entry by entry; an entry
/// `total` lacks is added only when adding (upstream's `ConsumedCapacity.Add` and `Sub`).
pub fn add_amounts(total: &mut CapacityAmounts, change: &CapacityAmounts, sign: i64) {
    for &(key, value) in change {
        match total.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = entry.1.saturating_add(sign.saturating_mul(value)),
            None if sign > 0 => total.push((key, value)),
            None => {}
        }
    }
}

/// Whether every amount is zero (upstream's `ConsumedCapacity.Empty`, after which
/// `Remove` drops a device's entry).
pub fn all_zero(amounts: &CapacityAmounts) -> bool {
    amounts.iter().all(|(_, v)| *v == 0)
}

/// A device's capacities at `<field>.capacity`, their request policies validated (and
/// dropped with DRAConsumableCapacity off, as the API server drops them).
pub(crate) fn capacities(
    d: &resource::Device,
    driver: &str,
    release: Release,
    object: &str,
    field: &str,
) -> Result<Vec<DeviceCapacity>, ObjectError> {
    let consumable = release.enabled(Gate::DRAConsumableCapacity);
    let fractional = release.enabled(Gate::DRAFractionalCapacityRange);
    let shared = d.allow_multiple_allocations == Some(true);
    let mut capacity = Vec::new();
    for (name, c) in d.capacity.iter().flatten() {
        let at = format!("{field}.capacity.{name}");
        let value = quantity(&c.value, object, &format!("{at}.value"))?;
        let request_policy = match (&c.request_policy, consumable) {
            (Some(policy), true) => Some(Box::new(request_policy(
                policy,
                (&c.value, value),
                (shared, fractional),
                object,
                &at,
            )?)),
            _ => None,
        };
        capacity.push(DeviceCapacity {
            name: crate::dra_decode::qualified(name, driver),
            key: Sym::new(name),
            value,
            request_policy,
        });
    }
    Ok(capacity)
}

/// A quantity at `at`, in thousandths.
pub(crate) fn quantity(q: &Raw, object: &str, at: &str) -> Result<i64, ObjectError> {
    Quantity::parse(&q.0)
        .and_then(|q| q.milli_value())
        .map_err(|e| field_error(object, at, e.to_string()))
}

/// An amount of thousandths as a plain decimal (`1073741824`, `0.1`): the key by which
/// the API server tells valid values apart.
fn decimal(milli: i64) -> String {
    let (sign, milli) = (if milli < 0 { "-" } else { "" }, milli.unsigned_abs());
    let (whole, part) = (milli / 1000, milli % 1000);
    if part == 0 {
        return format!("{sign}{whole}");
    }
    let digits = format!("{part:03}");
    format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
}

/// apimachinery's `Quantity.String()` of a quantity written as `raw`.
fn canonical(raw: &Raw, milli: i64) -> String {
    QuantityFormat::of(&raw.0).canonical(milli)
}

/// A capacity's `requestPolicy` at `<at>.requestPolicy`, validated as the API server
/// validates it (`validateMultiAllocatableDeviceCapacity`, `validateRequestPolicyValidValues`
/// and `validateRequestPolicyRange`, v1.36.2): only a device with
/// `allowMultipleAllocations` may have one; `validValues` and `validRange` need a
/// `default` that they allow; values ascending, unique in whole units, at most
/// [`MAX_VALID_VALUES`], none above the capacity; a range's minimum, maximum and one
/// step within the capacity, the default and the maximum on a step. A step of zero,
/// which makes upstream's validation divide by zero, is refused.
///
/// With DRAFractionalCapacityRange (`fractional`, v1.37) values are told apart by their
/// value rather than in whole units, and a range whose minimum, maximum or step is
/// fractional works in thousandths: each of them and the default must be a whole number
/// of thousandths, and the default and maximum on a step in thousandths (the v1.37 table
/// of `validation_device_capacity_test.go`; which values are the same follows their value,
/// as kubernetes#142355 does, where v1.37.0 compares `AsDec().String()`, so that `1` and
/// `1000m` differ).
fn request_policy(
    policy: &resource::CapacityRequestPolicy,
    capacity: (&Raw, i64),
    (shared, fractional): (bool, bool),
    object: &str,
    at: &str,
) -> Result<RequestPolicy, ObjectError> {
    let at = format!("{at}.requestPolicy");
    let error = |field: String, message: String| Err(field_error(object, field, message));
    if !shared {
        return error(
            at,
            validation::forbidden("allowMultipleAllocations must be true"),
        );
    }
    let (value_raw, value) = capacity;
    let value_text = canonical(value_raw, value);
    let default = match &policy.default {
        Some(q) => Some((q, quantity(q, object, &format!("{at}.default"))?)),
        None => None,
    };
    let values = policy.valid_values.as_ref().filter(|v| !v.is_empty());
    if values.is_some() && policy.valid_range.is_some() {
        return error(
            at,
            validation::forbidden(
                "exactly one policy can be specified, cannot specify \"validValues\" and \"validRange\" at the same time",
            ),
        );
    }
    let needs_default = match (values, &policy.valid_range) {
        (Some(_), _) => Some("validValues"),
        (None, Some(_)) => Some("validRange"),
        (None, None) => None,
    };
    if let (Some(kind), None) = (needs_default, default) {
        return error(
            format!("{at}.default"),
            validation::required(&format!("required when {kind} is defined")),
        );
    }
    let valid = if let Some(list) = values {
        let field = format!("{at}.validValues");
        let mut parsed = Vec::with_capacity(list.len());
        for (i, q) in list.iter().enumerate() {
            parsed.push(quantity(q, object, &format!("{field}[{i}]"))?);
        }
        if let Some(i) = (1..parsed.len()).find(|&i| parsed[i - 1] > parsed[i]) {
            return error(
                format!("{field}[{i}]"),
                validation::invalid(
                    &canonical(&list[i], parsed[i]),
                    "values must be sorted in ascending order",
                ),
            );
        }
        if parsed.len() > MAX_VALID_VALUES {
            return error(
                field,
                crate::dra_counters::too_many(parsed.len(), MAX_VALID_VALUES),
            );
        }
        for (i, &v) in parsed.iter().enumerate() {
            if v > value {
                return error(
                    format!("{field}[{i}]"),
                    validation::invalid(
                        &canonical(&list[i], v),
                        &format!("option is larger than capacity value: {value_text}"),
                    ),
                );
            }
            let key = |x: i64| if fractional { x } else { whole_units(x) * 1000 };
            if parsed[..i].iter().any(|&earlier| key(earlier) == key(v)) {
                return error(
                    format!("{field}[{i}]"),
                    validation::duplicate(&decimal(key(v))),
                );
            }
        }
        let (default_raw, default) = default.expect("checked above");
        if !parsed.contains(&default) {
            return error(
                field,
                validation::invalid(
                    &canonical(default_raw, default),
                    "default value is not valid according to the requestPolicy",
                ),
            );
        }
        ValidAmounts::Values(parsed)
    } else if let Some(range) = &policy.valid_range {
        let field = format!("{at}.validRange");
        let part = |q: &Option<Raw>, name: &str| match q {
            Some(q) => {
                quantity(q, object, &format!("{field}.{name}")).map(|v| Some((q.clone(), v)))
            }
            None => Ok(None),
        };
        let min = quantity(&range.min, object, &format!("{field}.min"))?;
        let min_text = canonical(&range.min, min);
        let (max, step) = (part(&range.max, "max")?, part(&range.step, "step")?);
        let (default_raw, default) = default.expect("checked above");
        let default_text = canonical(default_raw, default);
        if min > value {
            return error(
                format!("{field}.min"),
                validation::invalid(
                    &min_text,
                    &format!("min is larger than capacity value: {value_text}"),
                ),
            );
        }
        if default < min {
            return error(
                format!("{field}.min"),
                validation::invalid(
                    &default_text,
                    &format!("default is less than min: {min_text}"),
                ),
            );
        }
        if let Some((max_raw, max)) = &max {
            let max_text = canonical(max_raw, *max);
            let checks = [
                (
                    min > *max,
                    &min_text,
                    format!("min is larger than max: {max_text}"),
                ),
                (
                    *max > value,
                    &max_text,
                    format!("max is larger than capacity value: {value_text}"),
                ),
                (
                    default > *max,
                    &default_text,
                    format!("default is more than max: {max_text}"),
                ),
            ];
            if let Some((_, shown, detail)) = checks.iter().find(|(failed, _, _)| *failed) {
                return error(format!("{field}.max"), validation::invalid(shown, detail));
            }
        }
        let exact =
            |raw: &Raw, digits| Quantity::parse(&raw.0).is_ok_and(|q| q.is_whole_in(digits));
        let bounds = [
            ("default", Some(default_raw)),
            ("min", Some(&range.min)),
            ("max", range.max.as_ref()),
            ("step", range.step.as_ref()),
        ];
        let in_milli = fractional
            && bounds[1..]
                .iter()
                .any(|(_, raw)| raw.is_some_and(|raw| !exact(raw, 0)));
        if in_milli {
            let coarse = bounds
                .iter()
                .find_map(|(name, raw)| raw.filter(|raw| !exact(raw, 3)).map(|raw| (name, raw)));
            if let Some((name, raw)) = coarse {
                return error(
                    format!("{field}.{name}"),
                    validation::invalid(
                        raw.0.trim(),
                        "value cannot be represented as a milli value",
                    ),
                );
            }
        }
        // The unit the step arithmetic works in.
        let unit = |x: i64| if in_milli { x } else { whole_units(x) };
        if let Some((step_raw, step)) = &step {
            let step_text = canonical(step_raw, *step);
            if unit(*step) == 0 {
                let detail = match in_milli {
                    true => "must be greater than zero",
                    false => "must be at least one whole unit",
                };
                return error(
                    format!("{field}.step"),
                    validation::invalid(&step_text, detail),
                );
            }
            if min.saturating_add(*step) > value {
                let one_step =
                    QuantityFormat::of(&range.min.0).canonical(min.saturating_add(*step));
                return error(
                    format!("{field}.step"),
                    validation::invalid(
                        &step_text,
                        &format!("one step {one_step} is larger than capacity value: {value_text}"),
                    ),
                );
            }
            let off_step = |x: i64| (unit(x) - unit(min)) % unit(*step) != 0;
            let off = std::iter::once((default, default_text.clone()))
                .chain(max.as_ref().map(|(raw, m)| (*m, canonical(raw, *m))))
                .find(|(x, _)| off_step(*x));
            if let Some((_, shown)) = off {
                return error(
                    format!("{field}.step"),
                    validation::invalid(
                        &shown,
                        &format!(
                            "value is not a multiple of a given step ({step_text}) from ({min_text})"
                        ),
                    ),
                );
            }
        }
        ValidAmounts::Range {
            min,
            max: max.map(|(_, m)| m),
            step: step.map(|(_, s)| s),
        }
    } else {
        ValidAmounts::Any
    };
    Ok(RequestPolicy {
        default: default.map(|(_, d)| d),
        valid,
    })
}

/// The share of the `index`th allocation result: its `shareID` and `consumedCapacity`
/// (consumed capacity without a share ID is not a share, as upstream's tracker reads it).
pub(crate) fn share(
    result: &resource::DeviceRequestAllocationResult,
    object: &str,
    index: usize,
) -> Result<Option<Arc<DeviceShare>>, ObjectError> {
    let Some(id) = result.share_id.as_deref() else {
        return Ok(None);
    };
    let at = format!("status.allocation.devices.results[{index}]");
    Ok(Some(Arc::new(DeviceShare {
        id: share_id(id, object, &format!("{at}.shareID"))?,
        consumed: amounts(
            result.consumed_capacity.as_ref(),
            object,
            &format!("{at}.consumedCapacity"),
        )?,
    })))
}

/// A result's `shareID`, which the API server requires to be a UUID in its normalized
/// form (`validateUID`, with `github.com/google/uuid`'s `Validate` first).
fn share_id(id: &str, object: &str, at: &str) -> Result<Arc<str>, ObjectError> {
    let hex_at = |i: usize, c: char| [8, 13, 18, 23].contains(&i) == (c == '-');
    let uuid_like = id.len() == 36
        && id
            .char_indices()
            .all(|(i, c)| hex_at(i, c) && (c == '-' || c.is_ascii_hexdigit()));
    if uuid_like && !id.chars().any(|c| c.is_ascii_uppercase()) {
        return Ok(Arc::from(id));
    }
    let detail = if uuid_like {
        "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters".to_string()
    } else if ![32, 36, 38, 45].contains(&id.len()) {
        format!("error validating uid: invalid UUID length: {}", id.len())
    } else {
        "error validating uid: invalid UUID format".to_string()
    };
    Err(field_error(object, at, validation::invalid(id, &detail)))
}

/// A request's `capacity` at `at` (dropped with DRAConsumableCapacity off, as the API
/// server drops it).
pub(crate) fn requests(
    capacity: Option<&resource::CapacityRequirements>,
    object: &str,
    at: &str,
    release: Release,
) -> Result<CapacityAmounts, ObjectError> {
    if !release.enabled(Gate::DRAConsumableCapacity) {
        return Ok(Vec::new());
    }
    amounts(
        capacity.and_then(|c| c.requests.as_ref()),
        object,
        &format!("{at}.requests"),
    )
}

/// Amounts by key (a request's `capacity.requests`, a result's `consumedCapacity`).
pub(crate) fn amounts(
    map: Option<&BTreeMap<String, Raw>>,
    object: &str,
    at: &str,
) -> Result<CapacityAmounts, ObjectError> {
    let mut out = Vec::new();
    for (key, value) in map.into_iter().flatten() {
        out.push((
            Sym::new(key),
            quantity(value, object, &format!("{at}.{key}"))?,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: i64 = 1 << 30;

    fn capacity(value: i64, policy: Option<RequestPolicy>) -> DeviceCapacity {
        DeviceCapacity {
            request_policy: policy.map(Box::new),
            ..DeviceCapacity::new(
                QualifiedName {
                    domain: Sym::new("gpu.example.com"),
                    id: Sym::new("memory"),
                },
                "memory",
                value * 1000,
            )
        }
    }

    fn range(min: i64, max: Option<i64>, step: Option<i64>) -> RequestPolicy {
        RequestPolicy {
            default: Some(min * 1000),
            valid: ValidAmounts::Range {
                min: min * 1000,
                max: max.map(|m| m * 1000),
                step: step.map(|s| s * 1000),
            },
        }
    }

    fn policy(default: i64, valid: ValidAmounts) -> RequestPolicy {
        RequestPolicy {
            default: Some(default),
            valid,
        }
    }

    fn range_of(min: i64, max: Option<i64>, step: Option<i64>) -> ValidAmounts {
        ValidAmounts::Range { min, max, step }
    }

    // Upstream's rows (`consumable_capacity_test.go` of `structured/internal`, v1.36):
    // `testCalculateConsumedCapacity` and `testViolateCapacityRequestPolicy`, with 1, 2
    // and 3 units as 1000, 2000 and 3000 thousandths.
    #[test]
    fn upstream_consumed_capacity_rows() {
        let (one, two, three) = (1000, 2000, 3000);
        // Name, requested, capacity, policy, consumed.
        type Row = (&'static str, Option<i64>, i64, Option<RequestPolicy>, i64);
        let rows: [Row; 10] = [
            (
                "empty",
                None,
                one,
                Some(RequestPolicy {
                    default: None,
                    valid: ValidAmounts::Any,
                }),
                one,
            ),
            (
                "min in range",
                None,
                two,
                Some(policy(one, range_of(one, None, None))),
                one,
            ),
            (
                "default in set",
                None,
                two,
                Some(policy(one, ValidAmounts::Values(vec![one]))),
                one,
            ),
            (
                "more than min in range",
                Some(two),
                two,
                Some(policy(one, range_of(one, None, None))),
                two,
            ),
            (
                "less than min in range",
                Some(one),
                two,
                Some(policy(one, range_of(two, None, None))),
                two,
            ),
            (
                "with step (round up)",
                Some(two),
                three,
                Some(policy(one, range_of(one, None, Some(two)))),
                three,
            ),
            (
                "with step (no remaining)",
                Some(two),
                two,
                Some(policy(one, range_of(one, None, Some(one)))),
                two,
            ),
            (
                "valid value in set",
                Some(two),
                three,
                Some(policy(one, ValidAmounts::Values(vec![one, two, three]))),
                two,
            ),
            (
                "set (round up)",
                Some(two),
                three,
                Some(policy(one, ValidAmounts::Values(vec![one, three]))),
                three,
            ),
            (
                "larger than set",
                Some(three),
                three,
                Some(policy(one, ValidAmounts::Values(vec![one, two]))),
                three,
            ),
        ];
        for (name, requested, value, request_policy, expected) in rows {
            let mut capacity = capacity(0, None);
            capacity.value = value;
            capacity.request_policy = request_policy.map(Box::new);
            assert_eq!(consumed(requested, &capacity, false), expected, "{name}");
        }
        let violations: [(&str, i64, Option<RequestPolicy>, bool); 5] = [
            ("no constraint", one, None, false),
            (
                "less than maximum",
                one,
                Some(policy(one, range_of(one, Some(two), None))),
                false,
            ),
            (
                "more than maximum",
                two,
                Some(policy(one, range_of(one, Some(one), None))),
                true,
            ),
            (
                "in set",
                one,
                Some(policy(one, ValidAmounts::Values(vec![one]))),
                false,
            ),
            (
                "not in set",
                two,
                Some(policy(one, ValidAmounts::Values(vec![one]))),
                true,
            ),
        ];
        for (name, amount, request_policy, expected) in violations {
            assert_eq!(
                violates_policy(amount, request_policy.as_ref(), false),
                expected,
                "{name}"
            );
        }
        // Upstream's `get-consumed-capacity-from-request`: with a request (the amount),
        // without one but with a default (the default), with neither (the capacity).
        let key = |k: &str| Sym::new(k);
        let caps = [
            DeviceCapacity {
                request_policy: Some(Box::new(policy(two, range_of(one, None, None)))),
                ..DeviceCapacity::new(capacity(0, None).name, "capacity-0", two)
            },
            DeviceCapacity {
                request_policy: Some(Box::new(policy(one, range_of(one, None, None)))),
                ..DeviceCapacity::new(capacity(0, None).name, "capacity-1", two)
            },
            DeviceCapacity::new(capacity(0, None).name, "dummy", one),
        ];
        let requests = vec![(key("capacity-0"), one), (key("dummy"), one)];
        assert_eq!(
            consumed_by_request(&requests, &caps, false),
            vec![
                (key("capacity-0"), one),
                (key("capacity-1"), one),
                (key("dummy"), one)
            ]
        );
    }

    // Upstream's fractional rows (`consumable_capacity_test.go`, v1.37 with
    // DRAFractionalCapacityRange): min 0.2, step 0.1, max 1; without the gate the same
    // range works in whole units (`Value()` reads 0.1 and 0.2 as 1).
    #[test]
    fn fractional_ranges_round_in_thousandths_from_v1_37() {
        let range = policy(200, range_of(200, Some(1000), Some(100)));
        let mut capacity = capacity(0, None);
        capacity.value = 1000;
        capacity.request_policy = Some(Box::new(range.clone()));
        assert_eq!(
            consumed(Some(250), &capacity, true),
            300,
            "round up (0.25 to 0.3)"
        );
        assert_eq!(consumed(Some(400), &capacity, true), 400, "already aligned");
        assert!(
            !violates_policy(300, Some(&range), true),
            "aligned (0.3 = min + step)"
        );
        assert!(
            violates_policy(250, Some(&range), true),
            "0.25 is off the step"
        );
        // Without the gate: 0.25, 0.1 and 0.2 are each one whole unit.
        assert_eq!(consumed(Some(250), &capacity, false), 1000);
        assert!(!violates_policy(250, Some(&range), false));
        // Whole ranges round the same either way.
        let whole = policy(1000, range_of(1000, None, Some(2000)));
        let mut capacity = capacity.clone();
        capacity.request_policy = Some(Box::new(whole));
        for requested in [500, 1000, 2500, 3000, 4001] {
            assert_eq!(
                consumed(Some(requested), &capacity, true),
                consumed(Some(requested), &capacity, false),
                "{requested}"
            );
        }
    }

    /// Amounts at the ends of i64 (a quantity of about 9.2e15 units, or a negative
    /// minimum, which validation does not forbid) saturate instead of overflowing.
    #[test]
    fn extreme_amounts_saturate() {
        for (min, step) in [
            (i64::MIN, Some(1000)),
            (-5000, Some(i64::MAX)),
            (1000, Some(1)),
        ] {
            let policy = RequestPolicy {
                default: Some(min),
                valid: ValidAmounts::Range {
                    min,
                    max: None,
                    step,
                },
            };
            let mut capacity = capacity(0, None);
            capacity.value = i64::MAX;
            capacity.request_policy = Some(Box::new(policy.clone()));
            for fractional in [false, true] {
                for requested in [i64::MAX, i64::MIN, 0] {
                    let amount = consumed(Some(requested), &capacity, fractional);
                    let _ = violates_policy(amount, Some(&policy), fractional);
                    let key = capacity.key;
                    let asks = vec![(key, requested)];
                    let full = vec![(key, i64::MAX)];
                    let _ = fits(
                        &asks,
                        std::slice::from_ref(&capacity),
                        &full,
                        &full,
                        fractional,
                    );
                }
            }
        }
    }

    #[test]
    fn whole_units_round_up_before_the_step() {
        // A fractional request is rounded to whole units first, as `Value()` does.
        let stepped = capacity(10, Some(range(2, Some(8), Some(2))));
        assert_eq!(consumed(Some(2_500), &stepped, false), 4_000);
        assert!(
            violates_policy(3_000, stepped.request_policy.as_deref(), false),
            "off the step"
        );
        assert!(!violates_policy(
            6_000,
            stepped.request_policy.as_deref(),
            false
        ));
    }

    #[test]
    fn shares_fit_until_the_capacity_is_taken() {
        let memory = Sym::new("memory");
        let caps = [capacity(40 * GI, Some(range(GI, None, Some(GI))))];
        let ask = |gi: i64| vec![(memory, gi * GI * 1000)];
        assert_eq!(
            fits(&ask(10), &caps, &Vec::new(), &Vec::new(), false),
            Ok(())
        );
        assert_eq!(fits(&ask(10), &caps, &ask(25), &ask(5), false), Ok(()));
        assert_eq!(
            fits(&ask(11), &caps, &ask(25), &ask(5), false),
            Err(CapacityShortfall::Exhausted {
                key: memory,
                left: 10 * GI * 1000,
                wanted: 11 * GI * 1000
            })
        );
        let cores = Sym::new("cores");
        assert_eq!(
            fits(&vec![(cores, 1000)], &caps, &Vec::new(), &Vec::new(), false),
            Err(CapacityShortfall::Undefined(cores))
        );
        // No request: the default (1Gi), not the whole capacity.
        assert_eq!(consumed_by_request(&Vec::new(), &caps, false), ask(1));
    }

    #[test]
    fn removing_keeps_entries_and_reports_zero() {
        let memory = Sym::new("memory");
        let mut total = vec![(memory, 5)];
        add_amounts(&mut total, &vec![(memory, 5), (Sym::new("cores"), 1)], 1);
        assert_eq!(total, vec![(memory, 10), (Sym::new("cores"), 1)]);
        add_amounts(&mut total, &vec![(memory, 10), (Sym::new("cores"), 1)], -1);
        assert!(all_zero(&total));
    }
}
