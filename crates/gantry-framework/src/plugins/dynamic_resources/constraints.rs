//! A claim's constraints as the allocator keeps them while it searches (upstream's
//! `constraint.go`: `matchAttributeConstraint` and, with DRAConsumableCapacity,
//! `distinctAttributeConstraint`), added to device by device and taken back when the
//! search backtracks.

use std::sync::Arc;

use gantry_api::dra::{AttributeValue, ConstraintKind, Device, DeviceConstraint, QualifiedName};

pub(super) struct ConstraintState {
    requests: Vec<Arc<str>>,
    attribute: QualifiedName,
    kind: ConstraintKind,
    /// `matchAttribute`: the value every device must have (the first device's).
    value: Option<AttributeValue>,
    /// `distinctAttribute`: per request (by its base name), the value of the device
    /// picked for it last, as upstream's `distinctAttributeConstraint.attributes`.
    distinct: Vec<(Arc<str>, AttributeValue)>,
    count: usize,
}

impl ConstraintState {
    pub(super) fn new(constraint: &DeviceConstraint) -> ConstraintState {
        ConstraintState {
            requests: constraint.requests.clone(),
            attribute: constraint.attribute,
            kind: constraint.kind,
            value: None,
            distinct: Vec::new(),
            count: 0,
        }
    }

    /// Upstream's `matchAttributeConstraint.matches`: the constraint lists the request,
    /// or (for a subrequest) `<request>/<subrequest>`; an empty list covers everything.
    fn applies(&self, request: &str, sub: Option<&str>) -> bool {
        self.requests.is_empty()
            || self.requests.iter().any(|name| {
                &**name == request
                    || sub.is_some_and(|sub| {
                        name.len() == request.len() + 1 + sub.len()
                            && name.starts_with(request)
                            && name[request.len()..].starts_with('/')
                            && name.ends_with(sub)
                    })
            })
    }

    pub(super) fn add(&mut self, request: &str, sub: Option<&str>, device: &Device) -> bool {
        if !self.applies(request, sub) {
            return true;
        }
        let Some(value) = device.attribute(self.attribute) else {
            return false;
        };
        match self.kind {
            ConstraintKind::Match => match &self.value {
                Some(current) if self.count > 0 && current != value => return false,
                _ if self.count == 0 => self.value = Some(value.clone()),
                _ => {}
            },
            // Upstream's `distinctAttributeConstraint.add`: the first device always fits;
            // later ones must differ from the value kept for each request, and replace
            // their request's.
            ConstraintKind::Distinct => {
                if self.count > 0 && self.distinct.iter().any(|(_, v)| v == value) {
                    return false;
                }
                match self.distinct.iter_mut().find(|(r, _)| &**r == request) {
                    Some(entry) => entry.1 = value.clone(),
                    None => self.distinct.push((Arc::from(request), value.clone())),
                }
            }
        }
        self.count += 1;
        true
    }

    /// Upstream's `remove`: for `distinctAttribute`, the request's value is forgotten
    /// whichever of its devices goes.
    pub(super) fn remove(&mut self, request: &str, sub: Option<&str>) {
        if self.applies(request, sub) {
            self.count -= 1;
            if self.kind == ConstraintKind::Distinct {
                self.distinct.retain(|(r, _)| &**r != request);
            }
        }
    }
}
