//! Binds to one node, serialised across instances. Several instances decide
//! optimistically, each on its own cache, which lags the others' binds by the watch
//! latency; re-checking against that cache alone cannot see a bind another instance made
//! a millisecond ago. So each node has a fence: a Lease whose annotation names the last
//! pod bound there. A binder reads the fence, waits until its own cache has seen that pod
//! bound, and its resource claims as that pod's binder wrote them (then its cache includes
//! every earlier bind to the node, and every device allocated with it), re-checks the
//! placement, and moves the fence to its own pod with an update conditioned on the
//! fence's resourceVersion (a concurrent binder gets 409 and starts over). Only then does
//! it write the pod's claims and bind. A failed bind moves the fence back.

use std::time::{Duration, Instant};

use gantry_api::Sym;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};

use crate::writes::api_message;

/// The annotation naming the UID of the last pod bound to the node.
pub const LAST_BOUND: &str = "gantry.dev/last-bound-pod";
/// A fence older than this is taken as settled: its bind either landed long ago or failed.
pub const SETTLED_AFTER: Duration = Duration::from_secs(5);
/// Attempts to move a fence before the placement counts as a conflict.
const ATTEMPTS: usize = 5;

/// Where the fences live.
#[derive(Clone)]
pub struct Fences {
    api: Api<Lease>,
    namespace: String,
    identity: String,
}

/// Why a binder could not take a node's turn.
#[derive(Debug)]
pub enum Refused {
    /// The placement no longer fits by the latest cache, or the node stayed contended.
    Conflict(String),
    /// The API failed (retried as any failed bind).
    Failed(String),
    /// Gantry may not write its fences: no retry mends that.
    Forbidden(String),
}

impl Fences {
    fn refused(&self, error: kube::Error) -> Refused {
        match error {
            kube::Error::Api(status) if status.code == 403 => {
                Refused::Forbidden(crate::failure::lease_forbidden(
                    "the bind fences",
                    &self.namespace,
                    &status.message,
                ))
            }
            other => Refused::Failed(api_message(other)),
        }
    }
}

/// A fence this binder moved: what it held before, to put back if the bind fails.
pub struct Held {
    name: String,
    previous: Option<String>,
}

/// What the binder needs from the scheduling loop while it holds a node's turn.
pub trait Loop {
    /// Whether the cache has seen this pod bound, with its claims reserved for it (or
    /// the pod deleted).
    fn has_seen(&self, pod_uid: &str) -> impl Future<Output = bool> + Send;
    /// The placement check against the latest cache.
    fn check(&self) -> impl Future<Output = Result<(), String>> + Send;
}

fn lease_name(node: Sym) -> String {
    let name = format!("gantry-bind-{node}");
    if name.len() <= 253 {
        name
    } else {
        format!(
            "gantry-bind-{:016x}",
            gantry_scheduler::shard::owner(node.as_str(), u32::MAX)
        )
    }
}

impl Fences {
    pub fn new(client: Client, namespace: &str, identity: &str) -> Fences {
        Fences {
            api: Api::namespaced(client, namespace),
            namespace: namespace.into(),
            identity: identity.into(),
        }
    }

    /// Takes the node's turn for `pod_uid`: returns the fence held, or why not (a
    /// conflict: the placement no longer fits, or the node stayed contended).
    pub async fn acquire(
        &self,
        node: Sym,
        pod_uid: &str,
        binder: &impl Loop,
    ) -> Result<Held, Refused> {
        let name = lease_name(node);
        for _ in 0..ATTEMPTS {
            let current = self.api.get_opt(&name).await.map_err(|e| self.refused(e))?;
            let (mut lease, previous, set_at) = match current {
                Some(lease) => {
                    let previous = lease
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(LAST_BOUND))
                        .cloned();
                    let set_at = lease.spec.as_ref().and_then(|s| s.renew_time.clone());
                    (lease, previous, set_at)
                }
                None => (self.fresh(&name), None, None),
            };
            if let Some(previous) = previous.as_deref() {
                self.wait_until_seen(previous, set_at, binder).await;
            }
            binder.check().await.map_err(Refused::Conflict)?;
            lease
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(LAST_BOUND.into(), pod_uid.into());
            lease.spec = Some(self.spec());
            let written = if lease.metadata.resource_version.is_some() {
                self.api
                    .replace(&name, &PostParams::default(), &lease)
                    .await
            } else {
                self.api.create(&PostParams::default(), &lease).await
            };
            match written {
                Ok(_) => return Ok(Held { name, previous }),
                // Another binder moved the fence (or created it) first: read it again.
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(error) => return Err(self.refused(error)),
            }
        }
        Err(Refused::Conflict(format!(
            "node {node} stayed contended by other binders"
        )))
    }

    /// Puts the fence back after a failed bind, so that others do not wait for a pod
    /// that will never show up bound (best effort: a fence also settles with time).
    pub async fn release_failed(&self, held: Held) {
        let Ok(Some(mut lease)) = self.api.get_opt(&held.name).await else {
            return;
        };
        let annotations = lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        match held.previous {
            Some(previous) => annotations.insert(LAST_BOUND.into(), previous),
            None => annotations.remove(LAST_BOUND),
        };
        if let Err(error) = self
            .api
            .replace(&held.name, &PostParams::default(), &lease)
            .await
        {
            tracing::debug!(fence = %held.name, error = %api_message(error), "fence left to settle");
        }
    }

    fn fresh(&self, name: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: None,
        }
    }

    fn spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        }
    }

    /// Waits until the cache has seen the previous pod bound, for at most what is left
    /// of the fence's settling time.
    async fn wait_until_seen(&self, pod_uid: &str, set_at: Option<MicroTime>, binder: &impl Loop) {
        let age = set_at
            .and_then(|t| Timestamp::now().duration_since(t.0).try_into().ok())
            .unwrap_or(SETTLED_AFTER);
        let deadline = Instant::now() + SETTLED_AFTER.saturating_sub(age);
        while Instant::now() < deadline {
            if binder.has_seen(pod_uid).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
