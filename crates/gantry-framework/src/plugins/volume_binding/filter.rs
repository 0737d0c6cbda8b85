//! PreFilter and Filter: the pod's bound volumes and its unbound WaitForFirstConsumer
//! claims' candidates, gathered once, then each node's plan for them.

use std::sync::Arc;

use gantry_api::storage::{ClaimPhase, VolumeBindingMode};
use gantry_api::{Labels, PersistentVolume, PersistentVolumeClaim, Pod, Sym};
use gantry_cache::NodeInfo;
use smallvec::SmallVec;

use super::{
    Assumed, HOSTNAME_LABEL, NAME, PreFilterState, REASON_BIND_CONFLICT, REASON_NODE_CONFLICT,
    REASON_NOT_ENOUGH_SPACE, REASON_PV_NODE_AFFINITY, REASON_PV_NOT_EXIST,
    REASON_UNBOUND_IMMEDIATE, UnboundClaim, VolumeBinding, claim_ref,
};
use crate::objects::ephemeral_claim_is_for_pod;
use crate::plugins::volume_restrictions::claim_not_found;
use crate::{Cluster, CycleState, Detail, FilterPlugin, PreFilterPlugin, PreFilterResult, Status};

/// Upstream's `GetLocalPersistentVolumeNodeNames`: per required term, the intersection of
/// its `kubernetes.io/hostname In` values; the union over the terms.
fn local_volume_node_names(pv: &PersistentVolume) -> Vec<Sym> {
    let Some(affinity) = &pv.node_affinity else {
        return Vec::new();
    };
    let hostname = Sym::new(HOSTNAME_LABEL);
    let mut union = Vec::new();
    for term in &affinity.terms {
        union.extend(term.admitted_values(hostname, false).unwrap_or_default());
    }
    union.sort_unstable();
    union.dedup();
    union
}

/// Upstream's `GetEligibleNodes`: the nodes every bound local volume names, or `None`
/// (all nodes) when none names nodes or a volume is missing (Filter reports that).
fn eligible_nodes(bound: &[Option<Arc<PersistentVolume>>]) -> Option<Vec<Sym>> {
    let mut eligible: Option<Vec<Sym>> = None;
    for pv in bound {
        let names = local_volume_node_names(pv.as_ref()?);
        if names.is_empty() {
            continue;
        }
        eligible = Some(match eligible {
            None => names,
            Some(previous) => previous.into_iter().filter(|n| names.contains(n)).collect(),
        });
    }
    eligible
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        cluster: Cluster<'_>,
    ) -> (PreFilterResult, Status) {
        let storage = cluster.objects.storage();
        let mut claims: Vec<&PersistentVolumeClaim> = Vec::new();
        for (volume, claim) in storage.claims_of(pod) {
            let name = volume.claim_name.as_deref().unwrap_or_default();
            let Some(claim) = claim else {
                // Normal for an ephemeral volume just after the pod was created.
                let message = if volume.ephemeral {
                    format!(
                        "waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}"
                    )
                } else {
                    claim_not_found(name)
                };
                return (None, Status::unresolvable(message));
            };
            if claim.phase == ClaimPhase::Lost {
                let volume = claim.volume_name.map_or("", |v| v.as_str());
                return (
                    None,
                    Status::unresolvable(format!(
                        "persistentvolumeclaim {name:?} bound to non-existent persistentvolume {volume:?}"
                    )),
                );
            }
            if claim.terminating {
                return (
                    None,
                    Status::unresolvable(format!(
                        "persistentvolumeclaim {name:?} is being deleted"
                    )),
                );
            }
            if volume.ephemeral
                && let Err(message) = ephemeral_claim_is_for_pod(claim, pod)
            {
                return (None, Status::unresolvable(message));
            }
            claims.push(claim);
        }
        if claims.is_empty() {
            return (None, Status::skip());
        }
        let assumed = self.assumed.lock();
        let mut bound = Vec::new();
        let mut unbound: Vec<(i64, UnboundClaim)> = Vec::new();
        for claim in claims {
            if claim.is_bound() {
                bound.push(claim.volume_name.and_then(|v| storage.pv(v)).cloned());
                continue;
            }
            // A claim without a (known) class binds immediately, as does one naming its
            // volume in advance: either way the PV controller should have bound it.
            let class = claim.storage_class.and_then(|c| storage.storage_class(c));
            let Some(class) = class.filter(|c| {
                c.binding_mode == VolumeBindingMode::WaitForFirstConsumer
                    && claim.volume_name.is_none()
            }) else {
                return (None, Status::unresolvable(REASON_UNBOUND_IMMEDIATE));
            };
            let this = claim_ref(claim);
            let candidates = storage
                .pvs_of_class(claim.storage_class)
                .filter_map(|pv| {
                    let promised = pv.claim_ref.or_else(|| assumed.volume_claim(pv.name));
                    match promised {
                        None => Some((pv.clone(), false)),
                        Some(c) if c == this => Some((pv.clone(), true)),
                        Some(_) => None,
                    }
                })
                .filter(|(pv, reserved)| {
                    pv.capacity >= claim.requested
                        && (*reserved || pv.available)
                        && (*reserved
                            || claim
                                .access_modes
                                .iter()
                                .all(|m| pv.access_modes.contains(m)))
                })
                .collect();
            let capacities =
                (cluster.objects.storage_capacities()).candidates(class, claim.requested);
            unbound.push((
                claim.requested,
                UnboundClaim {
                    claim: this,
                    requested: claim.requested,
                    class: class.clone(),
                    candidates,
                    // The claim as the assume cache holds it: annotated by an earlier
                    // pod's Reserve, else as the API has it.
                    selected_node: assumed.selected_node(this).or(claim.selected_node),
                    capacities,
                },
            ));
        }
        drop(assumed);
        // Claims with a selected node first, in the pod's order (upstream provisions them
        // without looking for a volume), then the others by increasing size, as
        // `findMatchingVolumes` sorts them.
        let selected = unbound
            .iter()
            .filter(|(_, c)| c.selected_node.is_some())
            .count();
        unbound.sort_by_key(|(requested, c)| match c.selected_node {
            Some(_) => (false, 0),
            None => (true, *requested),
        });
        let eligible = if self.narrows_to_hostnames {
            eligible_nodes(&bound)
        } else {
            None
        };
        state.write(
            NAME,
            PreFilterState {
                bound,
                unbound: unbound.into_iter().map(|(_, c)| c).collect(),
                selected,
                reserved: Assumed::default(),
                bind_timeout: self.bind_timeout,
            },
        );
        (eligible, Status::success())
    }
}

impl UnboundClaim {
    /// Upstream's `FindMatchingVolume` on one node: a volume promised to the claim decides
    /// alone; otherwise the smallest reachable one wins (the first of equals). `chosen`
    /// holds the volumes the pod's earlier claims took on this node. The flag says the
    /// volume was already promised to the claim.
    fn find_match(&self, labels: &Labels, chosen: &[Sym]) -> Option<(&PersistentVolume, bool)> {
        let mut best: Option<&PersistentVolume> = None;
        for (pv, reserved) in &self.candidates {
            if chosen.contains(&pv.name) {
                continue;
            }
            let fits = pv.fits_node(labels);
            if *reserved {
                return fits.then_some((pv, true));
            }
            if fits && best.is_none_or(|b| pv.capacity < b.capacity) {
                best = Some(pv);
            }
        }
        best.map(|pv| (pv, false))
    }

    /// Upstream's `checkVolumeProvisions` but for the capacity check.
    fn can_provision_on(&self, labels: &Labels) -> bool {
        self.class.can_provision() && self.class.allows_node(labels)
    }

    /// Upstream's `hasEnoughCapacity`: no capacity is tracked for the claim, or one of its
    /// class's capacity objects large enough reaches the node.
    fn has_capacity_on(&self, labels: &Labels) -> bool {
        (self.capacities.as_ref()).is_none_or(|c| c.iter().any(|c| c.reaches(labels)))
    }
}

/// How the pod's unbound claims would be served on one node.
pub(super) enum Plan<'s> {
    /// The claims matched with a volume, then the claims to provision, in order.
    Fits(SmallVec<[Match<'s>; 4]>, SmallVec<[&'s UnboundClaim; 4]>),
    Conflict,
    /// A claim to provision fits no storage capacity that reaches the node (upstream
    /// then drops the "didn't find available persistent volumes" reason).
    NotEnoughSpace,
}

/// An unbound claim and the volume it would be bound to on the node (upstream's
/// `BindingInfo`).
pub(super) struct Match<'s> {
    pub claim: &'s UnboundClaim,
    pub volume: &'s PersistentVolume,
    /// The volume was promised to the claim already (by an earlier pod's Reserve).
    pub promised: bool,
}

impl PreFilterState {
    /// Upstream's `FindPodVolumes` for the unbound claims on one node: a claim with a
    /// selected node other than this one is a conflict at once; the others are matched
    /// with volumes (`findMatchingVolumes`); then the claims with a selected node and
    /// those no volume matched, in that order, are checked for provisioning
    /// (`checkVolumeProvisions`), the first that cannot be deciding.
    pub(super) fn plan(&self, node: &gantry_api::Node) -> Plan<'_> {
        let (selected, to_match) = self.unbound.split_at(self.selected);
        if selected
            .iter()
            .any(|claim| claim.selected_node != Some(node.name))
        {
            return Plan::Conflict;
        }
        let mut chosen: SmallVec<[Sym; 4]> = SmallVec::new();
        let mut bindings = SmallVec::new();
        let mut unmatched: SmallVec<[&UnboundClaim; 4]> = SmallVec::new();
        for claim in to_match {
            match claim.find_match(&node.labels, &chosen) {
                Some((volume, promised)) => {
                    chosen.push(volume.name);
                    bindings.push(Match {
                        claim,
                        volume,
                        promised,
                    });
                }
                None => unmatched.push(claim),
            }
        }
        let mut provisions = SmallVec::new();
        for claim in selected.iter().chain(unmatched) {
            if !claim.can_provision_on(&node.labels) {
                return Plan::Conflict;
            }
            if !claim.has_capacity_on(&node.labels) {
                return Plan::NotEnoughSpace;
            }
            provisions.push(claim);
        }
        Plan::Fits(bindings, provisions)
    }
}

impl FilterPlugin for VolumeBinding {
    /// With StorageCapacityScoring on, the share of storage each class of the pod's
    /// volumes would take on the node, which its score reads.
    fn details(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Vec<Detail> {
        self.score_details(state, node)
    }

    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(NAME) else {
            return Status::error(format!("cannot read {NAME:?} PreFilter state"));
        };
        let Some(node) = node.node() else {
            return Status::unresolvable("node not found");
        };
        // Upstream's `checkBoundClaims` stops at the first missing or unreachable volume.
        let mut node_conflict = false;
        let mut pv_missing = false;
        for pv in &s.bound {
            match pv {
                None => pv_missing = true,
                Some(pv) => node_conflict = !pv.fits_node(&node.labels),
            }
            if pv_missing || node_conflict {
                break;
            }
        }
        let plan = s.plan(node);
        let bind_conflict = matches!(plan, Plan::Conflict);
        let not_enough_space = matches!(plan, Plan::NotEnoughSpace);
        let node_conflict_reason = if self.says_pv_node_affinity {
            REASON_PV_NODE_AFFINITY
        } else {
            REASON_NODE_CONFLICT
        };
        let reasons = [
            (node_conflict, node_conflict_reason),
            (bind_conflict, REASON_BIND_CONFLICT),
            (not_enough_space, REASON_NOT_ENOUGH_SPACE),
            (pv_missing, REASON_PV_NOT_EXIST),
        ];
        let mut failed = reasons.iter().filter(|(f, _)| *f).map(|(_, r)| *r);
        let Some(first) = failed.next() else {
            return Status::success();
        };
        failed.fold(Status::unresolvable(first), Status::with_reason)
    }
}
