//! The claims a pod names, checked as upstream's `foreachPodResourceClaim` checks them,
//! by PreFilter in a cycle and by PreEnqueue before the pod enters the queue at all.

use std::sync::Arc;

use gantry_api::dra::{ClaimKey, ClaimSource, PodResourceClaim, ResourceClaim};
use gantry_api::{Pod, Sym};

use super::DynamicResources;
use crate::{PreEnqueuePlugin, PreEnqueueView, Status};

/// The claim a `spec.resourceClaims` entry names, looked up by `claim`: it exists, is not
/// being deleted, and a claim made from a template was made for this pod. A template
/// entry the claim controller has not named yet is looked up under the name a what-if
/// gives it (`Pod::claim_name`).
pub(super) fn pod_claim(
    pod: &Pod,
    entry: &PodResourceClaim,
    claim: impl Fn(ClaimKey) -> Option<Arc<ResourceClaim>>,
) -> Result<Arc<ResourceClaim>, String> {
    let name = pod.claim_name(entry);
    let key = ClaimKey {
        namespace: pod.namespace,
        name: Sym::new(&name),
    };
    let Some(claim) = claim(key) else {
        return Err(format!(
            "could not find ResourceClaim \"{}/{name}\"",
            pod.namespace
        ));
    };
    if claim.deleting {
        return Err(format!("resourceclaim {name:?} is being deleted"));
    }
    let from_template = matches!(entry.source, ClaimSource::Template(_));
    if from_template && claim.owner_pod.as_deref() != Some(&*pod.uid) {
        return Err(format!(
            "ResourceClaim {}/{} was not created for pod {} (pod is not owner)",
            claim.namespace,
            claim.name,
            pod.key()
        ));
    }
    Ok(claim)
}

/// Upstream's PreEnqueue (v1.36.3 `dynamicresources.go`): a pod one of whose claims is
/// not there yet, is being deleted or was made for another pod is held back, never
/// tried and given no event, until a claim or the pod itself changes. A template entry
/// counts as not there until the pod's status names its claim (`resourceclaim.Name`),
/// whatever claims exist.
impl PreEnqueuePlugin for DynamicResources {
    fn pre_enqueue(&self, pod: &Pod, cluster: &PreEnqueueView<'_>) -> Status {
        let Some(claims) = cluster.claims else {
            return Status::success();
        };
        for entry in pod.resource_claims.iter() {
            if matches!(entry.source, ClaimSource::Template(_))
                && !pod.has_claim_status(&entry.name)
            {
                return Status::unresolvable(format!(
                    "pod \"{}\": ResourceClaim not created yet",
                    pod.key()
                ));
            }
            if let Err(message) = pod_claim(pod, entry, |key| claims.claim(key)) {
                return Status::unresolvable(message);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use gantry_api::dra::{ClaimSpec, ResourceClaimStatus};
    use gantry_cache::{DraCache, PodGroupStates};

    use super::*;
    use crate::Code;

    fn pod_with(entries: &[(&str, ClaimSource)], statuses: &[(&str, &str)]) -> Pod {
        let mut pod = Pod::new("default", "train-0");
        pod.uid = "uid-train-0".into();
        pod.resource_claims = entries
            .iter()
            .map(|(name, source)| PodResourceClaim {
                name: (*name).into(),
                source: source.clone(),
            })
            .collect();
        if !statuses.is_empty() {
            pod.claim_statuses = Some(
                statuses
                    .iter()
                    .map(|(name, claim)| ResourceClaimStatus {
                        name: (*name).into(),
                        claim: (*claim).into(),
                    })
                    .collect(),
            );
        }
        pod
    }

    fn claim(name: &str, owner: Option<&str>, deleting: bool) -> Arc<ResourceClaim> {
        let mut claim = ResourceClaim::unallocated(
            Sym::new("default"),
            name,
            &format!("uid-{name}"),
            ClaimSpec::default(),
        );
        claim.owner_pod = owner.map(Arc::from);
        claim.deleting = deleting;
        Arc::new(claim)
    }

    /// Upstream's PreEnqueue cases (`TestPlugin`'s "claim not found", "deleted claim",
    /// "not owner"), and a template entry before and after the controller named its claim.
    #[test]
    fn pre_enqueue_holds_a_pod_until_its_claims_are_there() {
        let named = ClaimSource::Claim("shared".into());
        let template = ClaimSource::Template(Sym::new("gpu-template"));
        type Case<'a> = (&'a str, Pod, Vec<Arc<ResourceClaim>>, Option<&'a str>);
        let cases: Vec<Case<'_>> = vec![
            ("no claims", pod_with(&[], &[]), vec![], None),
            (
                "named claim missing",
                pod_with(&[("nic", named.clone())], &[]),
                vec![],
                Some(r#"could not find ResourceClaim "default/shared""#),
            ),
            (
                "named claim there",
                pod_with(&[("nic", named.clone())], &[]),
                vec![claim("shared", None, false)],
                None,
            ),
            (
                "named claim being deleted",
                pod_with(&[("nic", named)], &[]),
                vec![claim("shared", None, true)],
                Some(r#"resourceclaim "shared" is being deleted"#),
            ),
            (
                "template not named in the pod's status, a claim of the what-if name there",
                pod_with(&[("gpu", template.clone())], &[]),
                vec![claim("train-0-gpu", Some("uid-train-0"), false)],
                Some(r#"pod "default/train-0": ResourceClaim not created yet"#),
            ),
            (
                "template named, claim not in the cache yet",
                pod_with(
                    &[("gpu", template.clone())],
                    &[("gpu", "train-0-gpu-x7k2p")],
                ),
                vec![],
                Some(r#"could not find ResourceClaim "default/train-0-gpu-x7k2p""#),
            ),
            (
                "template named, made for another pod",
                pod_with(
                    &[("gpu", template.clone())],
                    &[("gpu", "train-0-gpu-x7k2p")],
                ),
                vec![claim("train-0-gpu-x7k2p", Some("uid-other"), false)],
                Some(
                    "ResourceClaim default/train-0-gpu-x7k2p was not created for pod \
                     default/train-0 (pod is not owner)",
                ),
            ),
            (
                "template named and made for the pod",
                pod_with(&[("gpu", template)], &[("gpu", "train-0-gpu-x7k2p")]),
                vec![claim("train-0-gpu-x7k2p", Some("uid-train-0"), false)],
                None,
            ),
        ];
        let groups = PodGroupStates::default();
        for (name, pod, claims, want) in cases {
            let cache = DraCache::default();
            for claim in claims {
                cache.set_claim(claim);
            }
            let view = PreEnqueueView {
                groups: &groups,
                claims: Some(&cache),
            };
            let plugin = DynamicResources::for_release(gantry_api::Release::default());
            let status = plugin.pre_enqueue(&pod, &view);
            match want {
                None => assert!(status.is_success(), "{name}: {}", status.message()),
                Some(message) => {
                    assert_eq!(status.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(status.message(), message, "{name}");
                }
            }
            // Without the cache's claims the queue cannot tell: PreFilter decides.
            let blind = plugin.pre_enqueue(&pod, &PreEnqueueView::of_groups(&groups));
            assert!(blind.is_success(), "{name}");
        }
    }
}
