//! Reserve and Unreserve: the chosen node's bindings assumed until the pod is bound or
//! given up.

use gantry_api::{Pod, Sym};
use gantry_cache::NodeInfo;
use smallvec::SmallVec;

use super::filter::Plan;
use super::{NAME, PreFilterState, VolumeBinding};
use crate::{CycleState, ReservePlugin, Status};

impl ReservePlugin for VolumeBinding {
    /// Upstream's `AssumePodVolumes`: the volumes matched on the chosen node are promised
    /// to their claims, and claims to provision are pinned to the node, until Unreserve.
    fn reserve(&self, state: &mut CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>(NAME) else {
            // The pod has no claims (PreFilter said Skip): nothing to assume.
            return Status::success();
        };
        let Some(node) = node.node() else {
            return Status::error("node not found");
        };
        let (bindings, provisions): (SmallVec<[_; 4]>, SmallVec<[_; 4]>) = match s.plan(node) {
            Plan::Fits(matches, provisions) => (
                (matches.iter())
                    .filter(|m| !m.promised)
                    .map(|m| (m.volume.name, m.claim.claim))
                    .collect(),
                provisions.iter().map(|c| c.claim).collect(),
            ),
            Plan::Conflict | Plan::NotEnoughSpace => {
                return Status::error(format!(
                    "pod's volumes no longer fit node {:?}",
                    node.name.as_str()
                ));
            }
        };
        let mut assumed = self.assumed.lock();
        for (pv, claim) in bindings {
            assumed.volumes.push((pv, claim));
            s.reserved.volumes.push((pv, claim));
        }
        for claim in provisions {
            assumed.provisioned.push((claim, node.name));
            s.reserved.provisioned.push((claim, node.name));
        }
        Status::success()
    }

    /// Upstream's `RevertAssumedPodVolumes`.
    fn unreserve(&self, state: &mut CycleState, _pod: &Pod, _node: Sym) {
        let Some(s) = state.read_mut::<PreFilterState>(NAME) else {
            return;
        };
        let reserved = std::mem::take(&mut s.reserved);
        let mut assumed = self.assumed.lock();
        assumed
            .volumes
            .retain(|entry| !reserved.volumes.contains(entry));
        assumed
            .provisioned
            .retain(|entry| !reserved.provisioned.contains(entry));
    }
}
