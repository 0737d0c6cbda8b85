//! Pods of one controller whose templates decoded equal share one copy: a Deployment's
//! replicas differ only in name, uid and node, and a million resident pods would otherwise
//! hold a million copies of one spec.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{Pod, Sym};

/// Distinct templates remembered per controller: a StatefulSet's pods (claims of their
/// own) never share, and comparing each with a few is enough for the rest.
const TEMPLATES_PER_CONTROLLER: usize = 4;

/// A controller, as its pods name it: namespace, kind, name and uid.
type ControllerKey = (Sym, Sym, Arc<str>, Arc<str>);

/// Gives each pod whose template equals one already seen for its controller that
/// template. Runs once admission has written priorities into the templates (a later
/// write would copy the template again, which is correct but wasted).
pub(super) fn share_templates(pods: &mut [Pod]) {
    // Looked up only, never iterated: the hash order decides nothing.
    let mut seen: HashMap<ControllerKey, Vec<usize>> = HashMap::new();
    for i in 0..pods.len() {
        let Some(owner) = pods[i].controller.as_ref() else {
            continue;
        };
        let key = (
            pods[i].namespace,
            owner.kind,
            owner.name.clone(),
            owner.uid.clone(),
        );
        let templates = seen.entry(key).or_default();
        let (before, rest) = pods.split_at_mut(i);
        let shared = templates
            .iter()
            .any(|&first| rest[0].share_template_of(&before[first]));
        if !shared && templates.len() < TEMPLATES_PER_CONTROLLER {
            templates.push(i);
        }
    }
}
