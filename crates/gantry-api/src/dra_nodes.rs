//! Which nodes reach a ResourceSlice's devices: the slice's `nodeName`, `nodeSelector` or
//! `allNodes`, or, with `perDeviceNodeSelection` (DRAPartitionableDevices: v1.33 alpha,
//! v1.36 beta and on), each device's own. Validated as the API server validates them
//! (`validateResourceSliceSpec` and `validateDevice` in `pkg/apis/resource/validation`,
//! v1.36.2); with the gate off its strategy drops the per-device fields first, so a slice
//! that only had those then has none.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::resource::v1 as resource;

use crate::Sym;
use crate::decode::{ObjectError, field_error, node_selector, validation};
use crate::dra::SliceNodes;
use crate::release::{Gate, Release};

/// The nodes of the slice, whose devices are `devices` as the API holds them.
pub(crate) fn slice_nodes(
    spec: &resource::ResourceSliceSpec,
    object: &str,
    release: Release,
) -> Result<SliceNodes, ObjectError> {
    let per_device = match release.enabled(Gate::DRAPartitionableDevices) {
        true => spec.per_device_node_selection,
        false => None,
    };
    let fields = NodeFields {
        name: &spec.node_name,
        selector: spec.node_selector.as_ref(),
        all: spec.all_nodes,
        per_device,
    };
    let set = fields.exactly_one(
        object,
        "spec",
        "must be either unset or set to a non-empty string",
        "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
    )?;
    Ok(match set {
        Set::Name(name) => SliceNodes::Node(Sym::new(name)),
        Set::Selector(selector) => {
            let field = "spec.nodeSelector";
            let selector = node_selector(selector, object, &field)?;
            if selector.terms.len() != 1 {
                return Err(field_error(
                    object,
                    format!("{field}.nodeSelectorTerms"),
                    "Invalid value: must have exactly one node selector term",
                ));
            }
            SliceNodes::Selector(selector)
        }
        Set::All => SliceNodes::All,
        Set::PerDevice => {
            let devices = spec.devices.iter().flatten().enumerate();
            let nodes =
                devices.map(|(i, d)| device_nodes(d, object, &format!("spec.devices[{i}]")));
            SliceNodes::PerDevice(nodes.collect::<Result<Arc<[_]>, _>>()?)
        }
    })
}

/// Refuses a device's node fields in a slice without per-device node selection (with the
/// gate off they are dropped, and nothing is refused).
pub(crate) fn no_device_nodes(
    device: &resource::Device,
    per_device: bool,
    object: &str,
    field: &str,
    release: Release,
) -> Result<(), ObjectError> {
    let any =
        device.node_name.is_some() || device.node_selector.is_some() || device.all_nodes.is_some();
    if any && !per_device && release.enabled(Gate::DRAPartitionableDevices) {
        return Err(field_error(
            object,
            field,
            validation::invalid(
                "null",
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            ),
        ));
    }
    Ok(())
}

/// One device's nodes in a slice with per-device node selection.
fn device_nodes(
    device: &resource::Device,
    object: &str,
    field: &str,
) -> Result<SliceNodes, ObjectError> {
    let fields = NodeFields {
        name: &device.node_name,
        selector: device.node_selector.as_ref(),
        all: device.all_nodes,
        per_device: None,
    };
    let set = fields.exactly_one(
        object,
        field,
        "must not be empty",
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
    )?;
    Ok(match set {
        Set::Name(name) => SliceNodes::Node(Sym::new(name)),
        Set::Selector(selector) => {
            let selector = node_selector(selector, object, &format!("{field}.nodeSelector"))?;
            // Upstream's allocator cannot say where a device of several terms is usable
            // (`createNodeSelector` fails the allocation); Gantry refuses it up front.
            if selector.terms.len() != 1 {
                return Err(field_error(
                    object,
                    format!("{field}.nodeSelector.nodeSelectorTerms"),
                    "a device's node selector of several terms is not supported by Gantry's allocator (kube-scheduler fails to allocate it)",
                ));
            }
            SliceNodes::Selector(selector)
        }
        Set::All => SliceNodes::All,
        Set::PerDevice => unreachable!("a device has no perDeviceNodeSelection"),
    })
}

/// Which of the node fields is set.
enum Set<'a> {
    Name(&'a str),
    Selector(&'a k8s::NodeSelector),
    All,
    PerDevice,
}

/// A slice's or a device's node fields.
struct NodeFields<'a> {
    name: &'a Option<String>,
    selector: Option<&'a k8s::NodeSelector>,
    all: Option<bool>,
    per_device: Option<bool>,
}

impl<'a> NodeFields<'a> {
    /// Upstream's check that exactly one of the fields is set: an empty name (`empty_name`
    /// says why), or a flag set to false, is invalid; none set is `rule` required; several
    /// are named.
    fn exactly_one(
        &self,
        object: &str,
        field: &str,
        empty_name: &str,
        rule: &str,
    ) -> Result<Set<'a>, ObjectError> {
        let NodeFields {
            name,
            selector,
            all,
            per_device,
        } = *self;
        let mut set = Vec::new();
        if let Some(name) = name {
            if name.is_empty() {
                return Err(field_error(
                    object,
                    format!("{field}.nodeName"),
                    validation::invalid("", empty_name),
                ));
            }
            set.push(("`nodeName`", Set::Name(name)));
        }
        if let Some(selector) = selector {
            set.push(("`nodeSelector`", Set::Selector(selector)));
        }
        for (flag, key, quoted, value) in [
            (all, "allNodes", "`allNodes`", Set::All),
            (
                per_device,
                "perDeviceNodeSelection",
                "`perDeviceNodeSelection`",
                Set::PerDevice,
            ),
        ] {
            match flag {
                Some(true) => set.push((quoted, value)),
                Some(false) => {
                    return Err(field_error(
                        object,
                        format!("{field}.{key}"),
                        "Invalid value: false: must be either unset or set to true",
                    ));
                }
                None => {}
            }
        }
        match set.len() {
            0 => Err(field_error(object, field, validation::required(rule))),
            1 => Ok(set.pop().expect("one field").1),
            _ => {
                let names: Vec<&str> = set.iter().map(|(n, _)| *n).collect();
                Err(field_error(
                    object,
                    field,
                    format!(
                        "Invalid value: \"{{{}}}\": {rule}, but multiple fields are set",
                        names.join(", ")
                    ),
                ))
            }
        }
    }
}
