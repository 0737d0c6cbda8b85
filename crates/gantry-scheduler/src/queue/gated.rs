//! The pods PreEnqueue held back, indexed by what may let them in: a PodGroup's members
//! by their group (a new member or the group itself), pods with resource claims by the
//! claims' arrival. An event then judges only the pods it may help, not the whole queue.

use std::collections::HashMap;
use std::sync::Arc;

use gantry_api::Pod;
use gantry_cache::GroupKey;

/// A held pod: its queue entry's version (a pod since moved or removed is skipped) and UID.
pub(super) type Held = (u64, Arc<str>);

#[derive(Default)]
pub(super) struct GatedPods {
    /// Members of each group, in the order they were held.
    by_group: HashMap<GroupKey, Vec<Held>>,
    /// Pods DynamicResources held until their claims exist, in the order they were held.
    with_claims: Vec<Held>,
}

impl GatedPods {
    /// Notes a pod just held back by the PreEnqueue plugin `by`.
    pub(super) fn hold(&mut self, pod: &Pod, version: u64, by: &str) {
        if let Some(group) = GroupKey::of(pod) {
            let held = self.by_group.entry(group).or_default();
            held.push((version, pod.uid.clone()));
        }
        if by == gantry_framework::plugins::dynamic_resources::NAME {
            self.with_claims.push((version, pod.uid.clone()));
        }
    }

    /// The held members of `group`, which are to be judged again.
    pub(super) fn take_group(&mut self, group: GroupKey) -> Vec<Held> {
        self.by_group.remove(&group).unwrap_or_default()
    }

    /// The held pods that name claims, which are to be judged again.
    pub(super) fn take_claim_users(&mut self) -> Vec<Held> {
        std::mem::take(&mut self.with_claims)
    }
}
