//! Leader election through a `coordination.k8s.io/v1` Lease, with client-go's protocol
//! (the one kube-scheduler uses, so the records read the same): a candidate takes the
//! lease when its holder has not renewed it for `lease_duration` (measured on the local
//! clock from when the record last changed, so clocks need not agree); every write is an
//! update with the read `resourceVersion`, so two candidates can never both win. A
//! leader that cannot renew within `renew_deadline` (shorter than the lease) steps down
//! before anyone else may take over.
//!
//! Not kube-lease-manager: its takeover of an expired lease is a patch without a
//! `resourceVersion` precondition (two candidates can both believe they won until the
//! next renewal), and its acquisition relies on server-side apply's field ownership.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::failure::lease_forbidden;
use crate::writes::api_message;

/// kube-scheduler's defaults.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    pub namespace: String,
    pub lease_name: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderElection {
    pub fn new(namespace: &str, lease_name: &str) -> LeaderElection {
        LeaderElection {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

pub struct Elector {
    api: Api<Lease>,
    config: LeaderElection,
    identity: String,
    /// The record last read, and when (locally) it was first seen: the holder's lease
    /// runs from then.
    observed: Option<(LeaseSpec, Instant)>,
}

impl Elector {
    pub fn new(client: Client, config: LeaderElection, identity: &str) -> Elector {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            identity: identity.into(),
            observed: None,
        }
    }

    /// Campaigns until it leads (then sends `true`), renews while it leads, and sends
    /// `false` if a renewal does not succeed within the deadline. Ends on `stop`,
    /// releasing the lease if it holds it.
    /// Ends with an error (one line) if Gantry may not use the lease (403): retrying
    /// would leave a replica that is ready but never schedules.
    pub async fn run(
        mut self,
        leading: watch::Sender<bool>,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), String> {
        let retry = self.config.retry_period;
        // Campaign: an attempt that hangs is given up after the renew deadline.
        loop {
            let attempt =
                tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew());
            if attempt.await.unwrap_or(Ok(false))? {
                break;
            }
            if sleep_or_stop(retry, &mut stop).await {
                return Ok(());
            }
        }
        tracing::info!(identity = %self.identity, lease = %self.config.lease_name, "acquired the leader lease");
        let _ = leading.send(true);
        // Renew.
        loop {
            if sleep_or_stop(retry, &mut stop).await {
                self.release().await;
                return Ok(());
            }
            let deadline = Instant::now() + self.config.renew_deadline;
            loop {
                // A request that hangs must not keep this instance leading past the
                // deadline (client-go bounds the renewal by it the same way).
                let left = deadline.saturating_duration_since(Instant::now());
                let Ok(renewed) = tokio::time::timeout(left, self.try_acquire_or_renew()).await
                else {
                    tracing::error!(identity = %self.identity, "renewing the leader lease timed out");
                    let _ = leading.send(false);
                    return Ok(());
                };
                if renewed? {
                    break;
                }
                if Instant::now() + retry > deadline {
                    tracing::error!(identity = %self.identity, "could not renew the leader lease in time");
                    let _ = leading.send(false);
                    return Ok(());
                }
                if sleep_or_stop(retry, &mut stop).await {
                    return Ok(());
                }
            }
        }
    }

    fn spec(&self, acquire: Timestamp, now: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
            acquire_time: Some(MicroTime(acquire)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// A 403 on the lease: the line `run` ends with.
    fn forbidden(&self, error: &kube::Error) -> Option<String> {
        match error {
            kube::Error::Api(status) if status.code == 403 => Some(lease_forbidden(
                &format!("write the leader lease {}", self.config.lease_name),
                &self.config.namespace,
                &status.message,
            )),
            _ => None,
        }
    }

    /// One attempt, as client-go's `tryAcquireOrRenew`: whether this candidate holds the
    /// lease now; an error if it may never.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, String> {
        let now = Timestamp::now();
        let name = self.config.lease_name.clone();
        let current = match self.api.get_opt(&name).await {
            Ok(current) => current,
            Err(error) => {
                if let Some(forbidden) = self.forbidden(&error) {
                    return Err(forbidden);
                }
                tracing::warn!(lease = %name, error = %api_message(error), "could not read the leader lease");
                return Ok(false);
            }
        };
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(now, now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created.spec.unwrap_or_default());
                    Ok(true)
                }
                Err(error) => match self.forbidden(&error) {
                    Some(forbidden) => Err(forbidden),
                    None => {
                        tracing::debug!(error = %api_message(error), "lease created by someone else first");
                        Ok(false)
                    }
                },
            };
        };
        let record = lease.spec.clone().unwrap_or_default();
        let observed_at = self.observe(record.clone());
        let holder = record.holder_identity.as_deref().unwrap_or("");
        let held_by_me = holder == self.identity;
        let duration =
            Duration::from_secs(record.lease_duration_seconds.unwrap_or(0).max(0) as u64);
        if !holder.is_empty() && !held_by_me && observed_at.elapsed() < duration {
            return Ok(false);
        }
        let transitions = record.lease_transitions.unwrap_or(0);
        lease.spec = Some(if held_by_me {
            let acquired = record.acquire_time.map_or(now, |t| t.0);
            self.spec(acquired, now, transitions)
        } else {
            self.spec(now, now, transitions + 1)
        });
        // `lease.metadata.resourceVersion` is the one read: a concurrent writer makes
        // this update fail with 409 Conflict.
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(updated.spec.unwrap_or_default());
                Ok(true)
            }
            Err(error) => match self.forbidden(&error) {
                Some(forbidden) => Err(forbidden),
                None => {
                    tracing::debug!(error = %api_message(error), "lease update lost a race");
                    Ok(false)
                }
            },
        }
    }

    /// Records the lease record read; returns since when this record is known.
    fn observe(&mut self, record: LeaseSpec) -> Instant {
        match &self.observed {
            Some((known, since)) if *known == record => *since,
            _ => {
                let now = Instant::now();
                self.observed = Some((record, now));
                now
            }
        }
    }

    /// Gives the lease up (as client-go's `ReleaseOnCancel`): an empty holder and a
    /// one-second duration, so a follower takes over at once.
    async fn release(&mut self) {
        let name = self.config.lease_name.clone();
        let Ok(Some(mut lease)) = self.api.get_opt(&name).await else {
            return;
        };
        let record = lease.spec.clone().unwrap_or_default();
        if record.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        let now = Timestamp::now();
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: record.lease_transitions,
            ..LeaseSpec::default()
        });
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %name, "released the leader lease"),
            Err(error) => {
                tracing::warn!(lease = %name, error = %api_message(error), "could not release the leader lease")
            }
        }
    }
}

/// Sleeps; returns true if `stop` turned true meanwhile.
async fn sleep_or_stop(duration: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    if *stop.borrow() {
        return true;
    }
    let stopped = tokio::select! {
        _ = tokio::time::sleep(duration) => false,
        _ = stop.wait_for(|s| *s) => true,
    };
    stopped || *stop.borrow()
}
