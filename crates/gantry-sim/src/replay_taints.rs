//! DeviceTaintRules in a replayed trace (DRADeviceTaintRules): the rules of the start
//! state and those created, changed and deleted during the recording, applied to every
//! slice as the scheduler's slice tracker applies them (in the order the rules were first
//! seen). A slice published during the recording gets the rules standing then; a rule's
//! change gives every slice whose taints it changes to the simulation again.

use std::collections::BTreeMap;
use std::sync::Arc;

use gantry_api::dra::ResourceSlice;
use gantry_api::dra_taint_rules::{self, DeviceTaintRule};
use gantry_api::{Gate, Release, Sym};
use serde_json::Value;

/// The rules standing and the slices as their drivers published them.
#[derive(Default)]
pub(crate) struct TaintRules {
    /// Whether the release applies rules at all (off: rules change nothing).
    enabled: bool,
    rules: Vec<DeviceTaintRule>,
    /// Each slice as published, untainted by rules, by name.
    published: BTreeMap<Sym, Arc<ResourceSlice>>,
    /// Each slice as the simulation has it (with the rules' taints), by name.
    given: BTreeMap<Sym, Arc<ResourceSlice>>,
}

impl TaintRules {
    pub fn new(release: Release) -> TaintRules {
        TaintRules {
            enabled: release.enabled(Gate::DRADeviceTaintRules)
                && release.enabled(Gate::DRADeviceTaints),
            rules: Vec::new(),
            published: BTreeMap::new(),
            given: BTreeMap::new(),
        }
    }

    /// A slice published (added or changed): the slice to give the simulation.
    pub fn slice_published(&mut self, slice: Arc<ResourceSlice>) -> Arc<ResourceSlice> {
        let given = self.tainted(&slice);
        self.published.insert(slice.name, slice);
        self.given.insert(given.name, given.clone());
        given
    }

    pub fn slice_deleted(&mut self, name: Sym) {
        self.published.remove(&name);
        self.given.remove(&name);
    }

    /// A rule created or changed (`Some`), or deleted (`None` with its name): the slices
    /// whose taints change, to give the simulation again. An error names the field.
    pub fn rule_changed(
        &mut self,
        object: &Value,
        deleted: bool,
        position: &str,
    ) -> Result<Vec<Arc<ResourceSlice>>, String> {
        if !self.enabled {
            return Ok(Vec::new());
        }
        let name = object.pointer("/metadata/name").and_then(Value::as_str);
        let name = Sym::new(name.unwrap_or_default());
        let at = self.rules.iter().position(|r| r.name == name);
        match (deleted, at) {
            (true, Some(i)) => {
                self.rules.remove(i);
            }
            (true, None) => return Ok(Vec::new()),
            (false, at) => {
                let object_name = format!("DeviceTaintRule {name} ({position})");
                let rule =
                    dra_taint_rules::decode(object, &object_name).map_err(|e| e.to_string())?;
                match at {
                    Some(i) => self.rules[i] = rule,
                    None => self.rules.push(rule),
                }
            }
        }
        let mut changed = Vec::new();
        for (name, slice) in &self.published {
            let given = self.tainted(slice);
            if self.given.get(name) != Some(&given) {
                changed.push(given);
            }
        }
        for slice in &changed {
            self.given.insert(slice.name, slice.clone());
        }
        Ok(changed)
    }

    fn tainted(&self, slice: &Arc<ResourceSlice>) -> Arc<ResourceSlice> {
        if !self.enabled {
            return slice.clone();
        }
        dra_taint_rules::apply(&self.rules, slice).map_or_else(|| slice.clone(), Arc::new)
    }
}
