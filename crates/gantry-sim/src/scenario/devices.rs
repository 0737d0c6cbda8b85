//! Dynamic resource allocation (resource.k8s.io/v1) in scenarios: `nodeGroups[].devices`
//! (each node publishes one ResourceSlice per entry), `deviceClasses`, and
//! `workloads[].claims` (a ResourceClaimTemplate per claim, named in every pod's
//! `spec.resourceClaims`). Each becomes a manifest that is then decoded like any other;
//! what the decoder does not check (driver, attribute and claim names, the scenario's own
//! limits, selectors that do not compile) is checked here.
//!
//! ```yaml
//! deviceClasses:
//! - {name: gpu, driver: gpu.example.com, extendedResourceName: example.com/gpu}
//! nodeGroups:
//! - name: gpu
//!   devices:
//!   - {driver: gpu.example.com, count: 2, attributes: {model: a100, cores: 108, fw: {version: 1.2.3}}, capacity: {memory: 80Gi}}
//!   - {driver: fabric.example.com, count: 1, bindingConditions: [example.com/attached], bindingFailureConditions: [example.com/failed], bindsToNode: true}
//! workloads:
//! - name: train
//!   claims: [{name: gpu, deviceClass: gpu, count: 1, selectors: ['device.attributes["gpu.example.com"].model == "a100"']}]
//! ```

use gantry_api::decode::validation::{dns1123_label, dns1123_subdomain};
use gantry_framework::plugins::dynamic_resources::cel::Selector;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The one API version of the DRA kinds the decoder reads.
const API_VERSION: &str = "resource.k8s.io/v1";
/// The most devices one entry gives a node.
const MAX_DEVICES_PER_NODE: u32 = 128;
/// Upstream's `DriverNameMaxLength`.
const DRIVER_NAME_MAX_LENGTH: usize = 63;
/// Upstream's `DeviceMaxIDLength`: the part of an attribute or capacity name after the
/// domain.
const ID_MAX_LENGTH: usize = 32;
/// Upstream's `DeviceMaxDomainLength`.
const DOMAIN_MAX_LENGTH: usize = 63;
/// What an error is about, below the entry it is in (`attributes.model`), and why.
pub(super) type FieldError = (String, String);

/// `nodeGroups[].devices[]`: devices of one driver on every node of the group.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct DeviceSpec {
    pub(super) driver: String,
    /// Devices per node.
    count: u32,
    /// Name → a string, an integer, a boolean, or `{version: 1.2.3}`.
    #[serde(default)]
    attributes: Map<String, Value>,
    /// Name → a quantity (`80Gi`, or a plain integer).
    #[serde(default)]
    capacity: Map<String, Value>,
    /// Conditions the driver must set True on a claim's status before a pod using the
    /// device is bound, and conditions that fail the binding (DRADeviceBindingConditions;
    /// `simulate --binding-conditions` says how the simulated drivers answer).
    #[serde(default)]
    binding_conditions: Vec<String>,
    #[serde(default)]
    binding_failure_conditions: Vec<String>,
    /// The allocation of the device is usable on the node chosen only.
    #[serde(default)]
    binds_to_node: bool,
}

/// The name of a node's `index`-th device of an entry.
fn device_name(index: u32) -> String {
    format!("dev-{index}")
}

/// The name of the ResourceSlice a node publishes for a driver.
pub(super) fn slice_name(node: &str, driver: &str) -> String {
    format!("{node}-{driver}")
}

impl DeviceSpec {
    /// The ResourceSlice `node` publishes: its own pool, generation 1, one slice.
    pub(super) fn slice(&self, node: &str) -> Result<Value, FieldError> {
        dns_subdomain(&self.driver, DRIVER_NAME_MAX_LENGTH).map_err(|m| ("driver".into(), m))?;
        if !(1..=MAX_DEVICES_PER_NODE).contains(&self.count) {
            return Err((
                "count".into(),
                format!("must be 1 to {MAX_DEVICES_PER_NODE}, not {}", self.count),
            ));
        }
        let mut attributes = Map::new();
        for (name, value) in &self.attributes {
            let field = format!("attributes.{name}");
            qualified_name(name).map_err(|m| (field.clone(), m))?;
            attributes.insert(name.clone(), attribute(value).map_err(|m| (field, m))?);
        }
        let mut capacity = Map::new();
        for (name, value) in &self.capacity {
            let field = format!("capacity.{name}");
            qualified_name(name).map_err(|m| (field.clone(), m))?;
            let quantity = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
                other => {
                    return Err((
                        field,
                        format!("{other} is not a quantity (like 80Gi, or an integer)"),
                    ));
                }
            };
            capacity.insert(name.clone(), json!({"value": quantity}));
        }
        let mut device = json!({"attributes": attributes, "capacity": capacity});
        if !self.binding_conditions.is_empty() || !self.binding_failure_conditions.is_empty() {
            device["bindingConditions"] = json!(self.binding_conditions);
            device["bindingFailureConditions"] = json!(self.binding_failure_conditions);
        }
        if self.binds_to_node {
            device["bindsToNode"] = json!(true);
        }
        let devices: Vec<Value> = (0..self.count)
            .map(|i| {
                let mut named = device.clone();
                named["name"] = json!(device_name(i));
                named
            })
            .collect();
        Ok(json!({
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": slice_name(node, &self.driver)},
            "spec": {
                "driver": self.driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }))
    }
}

/// A field of a decoded slice (`spec.devices[0].capacity.memory.value`) as the entry
/// names it (`capacity.memory`). Every device of an entry is alike, so the first one
/// speaks for all.
pub(super) fn own_slice_field(decoded: &str) -> String {
    if decoded.starts_with("metadata.name") {
        return "driver".into();
    }
    let Some(rest) = decoded
        .strip_prefix("spec.devices[")
        .and_then(|r| r.split_once(']'))
        .map(|(_, rest)| rest.trim_start_matches('.'))
    else {
        return decoded.to_string();
    };
    let typed = ["value", "string", "version", "int", "bool"]
        .iter()
        .find_map(|t| rest.strip_suffix(&format!(".{t}")));
    typed.unwrap_or(rest).to_string()
}

/// A scalar as a ResourceSlice writes it: `{string: ...}`, `{int: ...}`, `{bool: ...}`,
/// or `{version: ...}` as given.
fn attribute(value: &Value) -> Result<Value, String> {
    match value {
        Value::String(s) => Ok(json!({"string": s})),
        Value::Bool(b) => Ok(json!({"bool": b})),
        Value::Number(n) if n.is_i64() => Ok(json!({"int": n})),
        Value::Object(o) if o.len() == 1 && o.get("version").is_some_and(Value::is_string) => {
            Ok(value.clone())
        }
        other => Err(format!(
            "{other} is not an attribute: use a string, an integer, a boolean, or {{version: 1.2.3}}"
        )),
    }
}

/// `deviceClasses[]`: a DeviceClass whose devices are the driver's, or those its
/// selectors match, or both.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct DeviceClassSpec {
    pub(super) name: String,
    #[serde(default)]
    driver: Option<String>,
    /// CEL expressions, all of which a device must satisfy.
    #[serde(default)]
    selectors: Vec<String>,
    /// The extended resource the class serves (DRAExtendedResource): pods asking for it,
    /// `example.com/gpu: 1`, get devices of the class.
    #[serde(default)]
    extended_resource_name: Option<String>,
}

impl DeviceClassSpec {
    pub(super) fn manifest(&self) -> Result<Value, FieldError> {
        let mut expressions = Vec::new();
        if let Some(driver) = &self.driver {
            dns_subdomain(driver, DRIVER_NAME_MAX_LENGTH).map_err(|m| ("driver".into(), m))?;
            expressions.push(format!("device.driver == {driver:?}"));
        } else if self.selectors.is_empty() {
            return Err((
                String::new(),
                "needs a driver or selectors (or both)".into(),
            ));
        }
        compile_all(&self.selectors)?;
        expressions.extend(self.selectors.iter().cloned());
        let mut spec = json!({"selectors": cel_selectors(&expressions)});
        if let Some(name) = &self.extended_resource_name {
            spec["extendedResourceName"] = json!(name);
        }
        Ok(json!({
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": self.name},
            "spec": spec,
        }))
    }
}

/// `workloads[].claims[]`: devices each pod of the workload gets a claim to.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ClaimSpec {
    pub(super) name: String,
    pub(super) device_class: String,
    /// Devices of the class the claim asks for.
    #[serde(default = "one")]
    count: u32,
    /// CEL expressions, all of which each device must satisfy.
    #[serde(default)]
    selectors: Vec<String>,
}

fn one() -> u32 {
    1
}

/// The name of the template a workload's claim is made from.
pub(super) fn template_name(workload: &str, claim: &str) -> String {
    format!("{workload}-{claim}")
}

impl ClaimSpec {
    /// The ResourceClaimTemplate of the claim: one request, named as the claim.
    pub(super) fn template(&self, workload: &str, namespace: &str) -> Result<Value, FieldError> {
        let max = gantry_api::dra::ALLOCATION_RESULTS_MAX_SIZE;
        if !(1..=max as u32).contains(&self.count) {
            return Err((
                "count".into(),
                format!("must be 1 to {max}, not {}", self.count),
            ));
        }
        compile_all(&self.selectors)?;
        Ok(json!({
            "apiVersion": API_VERSION,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": template_name(workload, &self.name), "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{
                "name": self.name,
                "exactly": {
                    "deviceClassName": self.device_class,
                    "allocationMode": "ExactCount",
                    "count": self.count,
                    "selectors": cel_selectors(&self.selectors),
                },
            }]}}},
        }))
    }

    /// The pod's `spec.resourceClaims` entry.
    pub(super) fn pod_entry(&self, workload: &str) -> Value {
        json!({"name": self.name, "resourceClaimTemplateName": template_name(workload, &self.name)})
    }
}

/// Every selector compiles, within upstream's limits.
fn compile_all(selectors: &[String]) -> Result<(), FieldError> {
    for (i, expression) in selectors.iter().enumerate() {
        Selector::compile(expression).map_err(|m| (format!("selectors[{i}]"), m))?;
    }
    Ok(())
}

fn cel_selectors(expressions: &[String]) -> Vec<Value> {
    expressions
        .iter()
        .map(|e| json!({"cel": {"expression": e}}))
        .collect()
}

/// apimachinery's `IsDNS1123Label`, its errors joined.
pub(super) fn dns_label(value: &str) -> Result<(), String> {
    joined(dns1123_label(value))
}

/// apimachinery's `IsDNS1123Subdomain`, within `max` bytes (a driver's name: 63).
fn dns_subdomain(value: &str, max: usize) -> Result<(), String> {
    if value.len() > max {
        return Err(format!("must be no more than {max} bytes"));
    }
    joined(dns1123_subdomain(value))
}

fn joined(errors: Vec<String>) -> Result<(), String> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// An attribute or capacity name: a C identifier of at most 32 characters, optionally
/// after a DNS subdomain and `/` (without one, the driver is its domain).
fn qualified_name(name: &str) -> Result<(), String> {
    let id = match name.split_once('/') {
        Some((domain, id)) => {
            dns_subdomain(domain, DOMAIN_MAX_LENGTH)?;
            id
        }
        None => name,
    };
    let b = id.as_bytes();
    let ok = b.len() <= ID_MAX_LENGTH
        && b.first()
            .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{id:?} is not a C identifier of at most {ID_MAX_LENGTH} characters (letters, digits and '_', not starting with a digit)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> DeviceSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn a_slice_lists_the_nodes_devices_in_its_own_pool() {
        let slice = spec(
            "{driver: gpu.example.com, count: 2, attributes: {model: a100, cores: 108, nvlink: true, fw: {version: 1.2.3}}, capacity: {memory: 80Gi, lanes: 16}}",
        )
        .slice("gpu-3")
        .unwrap();
        assert_eq!(slice["metadata"]["name"], "gpu-3-gpu.example.com");
        assert_eq!(
            slice["spec"]["pool"],
            json!({"name": "gpu-3", "generation": 1, "resourceSliceCount": 1})
        );
        assert_eq!(slice["spec"]["nodeName"], "gpu-3");
        let devices = slice["spec"]["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[1]["name"], "dev-1");
        assert_eq!(
            devices[1]["attributes"],
            json!({"model": {"string": "a100"}, "cores": {"int": 108}, "nvlink": {"bool": true}, "fw": {"version": "1.2.3"}})
        );
        assert_eq!(
            devices[1]["capacity"],
            json!({"memory": {"value": "80Gi"}, "lanes": {"value": "16"}})
        );
    }

    #[test]
    fn bad_devices_name_the_field() {
        for (yaml, field) in [
            ("{driver: GPU.example.com, count: 1}", "driver"),
            ("{driver: gpu..example.com, count: 1}", "driver"),
            ("{driver: gpu.example.com, count: 0}", "count"),
            ("{driver: gpu.example.com, count: 129}", "count"),
            (
                "{driver: gpu.example.com, count: 1, attributes: {1model: a}}",
                "attributes.1model",
            ),
            (
                "{driver: gpu.example.com, count: 1, attributes: {Bad_Domain/model: a}}",
                "attributes.Bad_Domain/model",
            ),
            (
                "{driver: gpu.example.com, count: 1, attributes: {ratio: 1.5}}",
                "attributes.ratio",
            ),
            (
                "{driver: gpu.example.com, count: 1, attributes: {fw: {semver: 1.2.3}}}",
                "attributes.fw",
            ),
            (
                "{driver: gpu.example.com, count: 1, capacity: {memory: [1]}}",
                "capacity.memory",
            ),
            (
                "{driver: gpu.example.com, count: 1, capacity: {mem-ory: 1Gi}}",
                "capacity.mem-ory",
            ),
        ] {
            assert_eq!(
                spec(yaml).slice("n").err().map(|e| e.0),
                Some(field.to_string()),
                "{yaml}"
            );
        }
    }

    #[test]
    fn decoded_fields_read_as_the_entry_names_them() {
        for (decoded, own) in [
            ("spec.devices[0].capacity.memory.value", "capacity.memory"),
            (
                "spec.devices[0].attributes.model.string",
                "attributes.model",
            ),
            ("spec.devices[0].attributes.fw.version", "attributes.fw"),
            ("spec.devices[0]", ""),
            ("metadata.name", "driver"),
            ("spec", "spec"),
        ] {
            assert_eq!(own_slice_field(decoded), own, "{decoded}");
        }
    }

    #[test]
    fn classes_and_claims_check_what_the_decoder_does_not() {
        let class = |yaml: &str| {
            serde_saphyr::from_str::<DeviceClassSpec>(yaml)
                .unwrap()
                .manifest()
        };
        let made = class("{name: gpu, driver: gpu.example.com, selectors: ['device.attributes[\"gpu.example.com\"].model == \"a100\"']}").unwrap();
        assert_eq!(
            made["spec"]["selectors"][0]["cel"]["expression"],
            "device.driver == \"gpu.example.com\""
        );
        assert_eq!(made["spec"]["selectors"].as_array().unwrap().len(), 2);
        assert_eq!(class("{name: any}").unwrap_err().0, "");
        assert_eq!(class("{name: x, driver: X_Y}").unwrap_err().0, "driver");
        assert_eq!(
            class("{name: x, selectors: ['true', 'device.driver ==']}")
                .unwrap_err()
                .0,
            "selectors[1]"
        );
        let claim = |yaml: &str| {
            serde_saphyr::from_str::<ClaimSpec>(yaml)
                .unwrap()
                .template("train", "ml")
        };
        let made = claim("{name: gpu, deviceClass: gpu, count: 2}").unwrap();
        assert_eq!(
            made["metadata"],
            json!({"name": "train-gpu", "namespace": "ml"})
        );
        assert_eq!(
            made["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"],
            2
        );
        // The claim's name is checked with the workload's others (`check_claim_names`).
        for (yaml, field) in [
            ("{name: gpu, deviceClass: gpu, count: 0}", "count"),
            ("{name: gpu, deviceClass: gpu, count: 33}", "count"),
            (
                "{name: gpu, deviceClass: gpu, selectors: ['(']}",
                "selectors[0]",
            ),
        ] {
            assert_eq!(claim(yaml).unwrap_err().0, field, "{yaml}");
        }
    }
}
