//! Device taints and the tolerations of requests (DRADeviceTaints: v1.33 alpha, v1.36 beta
//! and on, v1.37 GA): a device with a NoSchedule or NoExecute taint goes only to a request
//! that tolerates it (the structured allocator's `taintPreventsAllocation`). Decoded as
//! the API server validates them (`validateDeviceTaint`, `validateDeviceToleration`;
//! an unset operator defaults to `Equal`) and dropped while the gate is off, as it drops
//! them.

use k8s_openapi::api::resource::v1 as resource;

use crate::Sym;
use crate::decode::{ObjectError, field_error, validation};

/// What a taint does. Only NoSchedule and NoExecute keep a device from being allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaintEffect {
    NoSchedule,
    NoExecute,
    None,
}

/// `validDeviceTaintEffects`, sorted as upstream lists them.
const EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "None"];

impl TaintEffect {
    fn parse(text: &str) -> Option<TaintEffect> {
        match text {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            "None" => Some(TaintEffect::None),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTaint {
    pub key: Sym,
    pub value: Sym,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceToleration {
    /// `None`: every key.
    pub key: Option<Sym>,
    /// Operator `Exists` (any value) rather than `Equal`.
    pub exists: bool,
    pub value: Sym,
    /// `None`: every effect.
    pub effect: Option<TaintEffect>,
}

impl DeviceToleration {
    /// Upstream's `ToleratesTaint`.
    pub fn tolerates(&self, taint: &DeviceTaint) -> bool {
        self.effect.is_none_or(|e| e == taint.effect)
            && self.key.is_none_or(|k| k == taint.key)
            && (self.exists || self.value == taint.value)
    }
}

/// Upstream's `taintPreventsAllocation`: a NoSchedule or NoExecute taint that none of
/// `tolerations` tolerates.
pub fn taints_prevent_allocation(taints: &[DeviceTaint], tolerations: &[DeviceToleration]) -> bool {
    untolerated(taints, tolerations).is_some()
}

/// The first taint that keeps the device from a request with `tolerations`.
pub fn untolerated<'t>(
    taints: &'t [DeviceTaint],
    tolerations: &[DeviceToleration],
) -> Option<&'t DeviceTaint> {
    taints.iter().find(|taint| {
        taint.effect != TaintEffect::None && !tolerations.iter().any(|t| t.tolerates(taint))
    })
}

impl std::fmt::Display for DeviceTaint {
    /// `key=value:Effect`, as kubectl prints taints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let effect = match self.effect {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
            TaintEffect::None => "None",
        };
        if self.value.as_str().is_empty() {
            write!(f, "{}:{effect}", self.key.as_str())
        } else {
            write!(f, "{}={}:{effect}", self.key.as_str(), self.value.as_str())
        }
    }
}

/// A device's `taints` at `field`.
pub(crate) fn taints(
    list: Option<&Vec<resource::DeviceTaint>>,
    object: &str,
    field: &str,
) -> Result<Vec<DeviceTaint>, ObjectError> {
    (list.into_iter().flatten().enumerate())
        .map(|(i, t)| taint(t, object, &format!("{field}.taints[{i}]")))
        .collect()
}

/// One taint at `at`, validated as `validateDeviceTaint` does.
pub(crate) fn taint(
    t: &resource::DeviceTaint,
    object: &str,
    at: &str,
) -> Result<DeviceTaint, ObjectError> {
    let key_errors = if t.key.is_empty() {
        vec!["name part must be non-empty".to_string()]
    } else {
        validation::qualified_name(&t.key)
    };
    validation::check(key_errors, object, &format!("{at}.key"), &t.key)?;
    let value = t.value.as_deref().unwrap_or_default();
    if !value.is_empty() {
        let errors = validation::label_value(value);
        validation::check(errors, object, &format!("{at}.value"), value)?;
    }
    let effect = effect(&t.effect, object, &format!("{at}.effect"))?
        .ok_or_else(|| field_error(object, format!("{at}.effect"), validation::required("")))?;
    Ok(DeviceTaint {
        key: Sym::new(&t.key),
        value: Sym::new(value),
        effect,
    })
}

/// A request's or subrequest's `tolerations` at `field`.
pub(crate) fn tolerations(
    list: Option<&Vec<resource::DeviceToleration>>,
    object: &str,
    field: &str,
) -> Result<Vec<DeviceToleration>, ObjectError> {
    let mut out = Vec::new();
    for (i, t) in list.into_iter().flatten().enumerate() {
        let at = format!("{field}.tolerations[{i}]");
        let key = t.key.as_deref().unwrap_or_default();
        if !key.is_empty() {
            let errors = validation::qualified_name(key);
            validation::check(errors, object, &format!("{at}.key"), key)?;
        }
        let value = t.value.as_deref().unwrap_or_default();
        let exists = match t.operator.as_deref().unwrap_or("Equal") {
            "Exists" if !value.is_empty() => {
                return Err(field_error(
                    object,
                    format!("{at}.value"),
                    validation::invalid(value, "must be empty for operator `Exists`"),
                ));
            }
            "Exists" => true,
            "Equal" => {
                let errors = validation::label_value(value);
                validation::check(errors, object, &format!("{at}.value"), value)?;
                false
            }
            other => {
                return Err(field_error(
                    object,
                    format!("{at}.operator"),
                    validation::not_supported(other, &["Equal", "Exists"]),
                ));
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(text) => effect(text, object, &format!("{at}.effect"))?,
        };
        out.push(DeviceToleration {
            key: (!key.is_empty()).then(|| Sym::new(key)),
            exists,
            value: Sym::new(value),
            effect,
        });
    }
    Ok(out)
}

/// An effect: `None` when empty, an error when not one of upstream's.
fn effect(text: &str, object: &str, field: &str) -> Result<Option<TaintEffect>, ObjectError> {
    if text.is_empty() {
        return Ok(None);
    }
    TaintEffect::parse(text)
        .map(Some)
        .ok_or_else(|| field_error(object, field, validation::not_supported(text, &EFFECTS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(value: &str, effect: TaintEffect) -> DeviceTaint {
        DeviceTaint {
            key: Sym::new("taint-key"),
            value: Sym::new(value),
            effect,
        }
    }

    fn toleration(
        key: Option<&str>,
        exists: bool,
        value: &str,
        effect: Option<TaintEffect>,
    ) -> DeviceToleration {
        DeviceToleration {
            key: key.map(Sym::new),
            exists,
            value: Sym::new(value),
            effect,
        }
    }

    /// `ToleratesTaint`'s rules: an empty effect matches every effect, `Exists` every
    /// value, an empty key (with `Exists`) every key; and only NoSchedule and NoExecute
    /// taints prevent allocation.
    #[test]
    fn tolerations_match_as_upstream_matches_them() {
        let no_schedule = taint("taint-value", TaintEffect::NoSchedule);
        let no_execute = taint("taint-value-2", TaintEffect::NoExecute);
        let exists_no_schedule =
            toleration(Some("taint-key"), true, "", Some(TaintEffect::NoSchedule));
        let equal_no_execute = toleration(
            Some("taint-key"),
            false,
            "taint-value-2",
            Some(TaintEffect::NoExecute),
        );
        assert!(exists_no_schedule.tolerates(&no_schedule));
        assert!(!exists_no_schedule.tolerates(&no_execute));
        assert!(equal_no_execute.tolerates(&no_execute));
        assert!(!toleration(Some("taint-key"), false, "other", None).tolerates(&no_execute));
        assert!(!toleration(Some("key1"), true, "", None).tolerates(&no_schedule));
        assert!(toleration(None, true, "", None).tolerates(&no_execute));
        let both = [no_schedule.clone(), no_execute.clone()];
        assert!(taints_prevent_allocation(
            &both,
            std::slice::from_ref(&exists_no_schedule)
        ));
        assert!(!taints_prevent_allocation(
            &both,
            &[exists_no_schedule, equal_no_execute]
        ));
        assert!(!taints_prevent_allocation(
            &[taint("v", TaintEffect::None)],
            &[]
        ));
        assert!(!taints_prevent_allocation(&[], &[]));
    }
}
