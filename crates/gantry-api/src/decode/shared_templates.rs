//! Pods of one controller whose templates decoded equal share one copy: a Deployment's
//! replicas differ only in name, uid and node, and a million resident pods would otherwise
//! hold a million copies of one spec.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use crate::Pod;

/// Gives each pod whose template equals its controller's first pod's that pod's template.
/// Runs once admission has written priorities into the templates (a later write would
/// copy the template again, which is correct but wasted).
pub(super) fn share_templates(pods: &mut [Pod]) {
    // Looked up only, never iterated: the hash order decides nothing.
    let mut first_of_controller: HashMap<Arc<str>, usize> = HashMap::new();
    for i in 0..pods.len() {
        let Some(controller) = pods[i].controller.as_ref().map(|c| c.uid.clone()) else {
            continue;
        };
        match first_of_controller.entry(controller) {
            Entry::Occupied(first) => {
                let (before, rest) = pods.split_at_mut(i);
                rest[0].share_template_of(&before[*first.get()]);
            }
            Entry::Vacant(slot) => {
                slot.insert(i);
            }
        }
    }
}
