//! VolumeBinding's PreBind against the API (upstream's `BindPodVolumes`, v1.28 to
//! v1.35 alike): the volumes Reserve matched to the pod's unbound WaitForFirstConsumer
//! claims get their `claimRef` (pre-binding them, as `GetBindVolumeToClaim` does), the
//! claims to provision get `volume.kubernetes.io/selected-node`, and the binder waits,
//! polling once a second for at most the profile's `bindTimeoutSeconds` (600 s unless
//! configured), until the PV controller (and the provisioner) have bound every claim, or
//! gives the placement up as upstream does when a claim's volume was unbound or its
//! provisioning failed.

use std::time::{Duration, Instant};

use gantry_api::storage::ClaimRef;
use gantry_api::{Pod, Sym};
use gantry_framework::plugins::volume_binding::VolumeWrites;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::writes::api_message;

/// The claim annotation a provisioner reads (and removes to ask for another node).
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The claim annotation the PV controller sets once a claim is fully bound.
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The volume annotation saying the binding was made by a controller, not by the user.
const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
#[derive(Clone)]
pub struct VolumeWriter {
    client: Client,
    poll: Duration,
}

impl VolumeWriter {
    pub fn new(client: Client, poll: Duration) -> VolumeWriter {
        VolumeWriter { client, poll }
    }

    fn claims(&self, claim: ClaimRef) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), claim.namespace.as_str())
    }

    /// Writes the bindings and provisioning requests of `pod` on `node`, then waits until
    /// every claim is bound, checking at each poll that comes before `writes.timeout` runs
    /// out (upstream's `PollUntilContextTimeout`, not immediate: a timeout of 0 gives up
    /// at once). The error reads as upstream's PreBind status.
    pub async fn bind(&self, pod: &Pod, node: Sym, writes: &VolumeWrites) -> Result<(), String> {
        for &(volume, claim) in &writes.bind {
            self.bind_volume(volume, claim).await?;
        }
        for &(claim, node) in &writes.provision {
            self.select_node(claim, node).await?;
        }
        // A timeout past what an Instant holds (bindTimeoutSeconds near i64::MAX) never
        // comes.
        let deadline = Instant::now().checked_add(writes.timeout);
        loop {
            let next = Instant::now() + self.poll;
            if let Some(deadline) = deadline.filter(|&d| next >= d) {
                tokio::time::sleep_until(deadline.into()).await;
                tracing::info!(pod = %pod.key(), "gave up waiting for the pod's volumes to be bound");
                return Err("binding volumes: context deadline exceeded".into());
            }
            tokio::time::sleep_until(next.into()).await;
            if self.all_bound(writes, node).await? {
                return Ok(());
            }
        }
    }

    /// `GetBindVolumeToClaim` and the update: the volume's `claimRef` names the claim (its
    /// UID and resourceVersion too), conditioned on the volume's resourceVersion read.
    async fn bind_volume(&self, volume: Sym, claim: ClaimRef) -> Result<(), String> {
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let mut pv = volumes.get(volume.as_str()).await.map_err(api_message)?;
        let pvc = self
            .claims(claim)
            .get(claim.name.as_str())
            .await
            .map_err(api_message)?;
        let spec = pv.spec.get_or_insert_with(Default::default);
        if let Some(bound) = &spec.claim_ref {
            if bound.name.as_deref() == Some(claim.name.as_str())
                && bound.namespace.as_deref() == Some(claim.namespace.as_str())
            {
                return Ok(());
            }
            return Err(format!(
                "pv {:?} is already bound to another claim",
                volume.as_str()
            ));
        }
        spec.claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: Some(claim.namespace.to_string()),
            name: Some(claim.name.to_string()),
            uid: pvc.metadata.uid.clone(),
            resource_version: pvc.metadata.resource_version.clone(),
            ..ObjectReference::default()
        });
        pv.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(BOUND_BY_CONTROLLER.into(), "yes".into());
        volumes
            .replace(volume.as_str(), &PostParams::default(), &pv)
            .await
            .map(|_| ())
            .map_err(api_message)
    }

    /// The claim is to be provisioned on `node`: the annotation the provisioner waits for.
    async fn select_node(&self, claim: ClaimRef, node: Sym) -> Result<(), String> {
        let claims = self.claims(claim);
        let mut pvc = claims.get(claim.name.as_str()).await.map_err(api_message)?;
        pvc.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(SELECTED_NODE.into(), node.to_string());
        claims
            .replace(claim.name.as_str(), &PostParams::default(), &pvc)
            .await
            .map(|_| ())
            .map_err(api_message)
    }

    /// Upstream's `checkBindings`: every claim fully bound (its volume named and the PV
    /// controller's bind-completed annotation set); an error where scheduling must start
    /// over (a volume's claimRef dropped, a provisioning given up).
    async fn all_bound(&self, writes: &VolumeWrites, node: Sym) -> Result<bool, String> {
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        for &(volume, claim) in &writes.bind {
            let pv = volumes.get(volume.as_str()).await.map_err(api_message)?;
            let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
            if claim_ref.is_none_or(|r| r.uid.as_deref().unwrap_or("").is_empty()) {
                return Err(format!(
                    "binding volumes: ClaimRef got reset for pv {:?}",
                    volume.as_str()
                ));
            }
            if !self.fully_bound(claim).await? {
                return Ok(false);
            }
        }
        for &(claim, _) in &writes.provision {
            let pvc = self
                .claims(claim)
                .get(claim.name.as_str())
                .await
                .map_err(api_message)?;
            let selected = pvc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SELECTED_NODE));
            if selected.map(String::as_str) != Some(node.as_str()) {
                return Err(format!(
                    "binding volumes: provisioning failed for PVC {:?}",
                    claim.name.as_str()
                ));
            }
            if !is_fully_bound(&pvc) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn fully_bound(&self, claim: ClaimRef) -> Result<bool, String> {
        let pvc = self
            .claims(claim)
            .get(claim.name.as_str())
            .await
            .map_err(api_message)?;
        Ok(is_fully_bound(&pvc))
    }
}

/// Upstream's `isPVCFullyBound`.
fn is_fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    let named = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty());
    let completed = pvc
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(BIND_COMPLETED));
    named && completed
}
