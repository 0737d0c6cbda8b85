//! Binds serialised across instances. Several instances decide optimistically, each on
//! its own cache, which lags the others' binds by the watch latency; re-checking against
//! that cache alone cannot see a bind another instance made a millisecond ago. So binds
//! that could change each other's Filter verdicts share a fence ([`fence_scope`] says
//! which: the node's, and the topology domains' its constraints reach): a Lease whose
//! annotation names the last pod bound behind it.
//!
//! A binder reads its fences (in one order, so that no two binders wait on each other in
//! a cycle), waits until its own watch has delivered each fence's last pod bound, with
//! the claims its binder wrote (then, the watch being ordered by resourceVersion, its
//! cache holds every bind serialised before), re-checks the placement, and moves each
//! fence to its own pod with an update conditioned on the resourceVersion it read (a
//! concurrent binder gets 409 and starts over). Only then does it write the pod's claims
//! and bind. A failed bind moves the fences back.
//!
//! Passing a fence costs one request in the common case: the fences are watched, so the
//! version to condition the update on is known without reading it (and a fence the
//! watch's list did not show is created without reading it); a stale one gets 409, and
//! the fence is read again.
//!
//! No wall clock orders anything. A fence whose last pod never shows up bound (its binder
//! crashed between the fence and the binding) is passed after [`SETTLED_AFTER`] of this
//! binder's own monotonic time since it first read that version, as client-go's leader
//! election measures a lease; and a binder binds only within [`BIND_DEADLINE`] of its
//! own time after it moved its fences, or gives the placement up, so a waiter never
//! passes a bind that is still coming.
//!
//! [`fence_scope`]: crate::fence_scope

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use parking_lot::Mutex;

use crate::Input;
use crate::fence_scope::NODE_FENCE_PREFIX;
use crate::writes::api_message;

/// The annotation naming the UID of the last pod bound behind the fence.
pub const LAST_BOUND: &str = "gantry.dev/last-bound-pod";
/// How long a waiter waits, by its own clock from when it first read a fence's version,
/// for that fence's last pod to show up bound before taking the bind as abandoned.
pub const SETTLED_AFTER: Duration = Duration::from_secs(5);
/// How long after moving its fences (by its own clock, from before the first write) a
/// binder may still send the binding: well inside [`SETTLED_AFTER`], which a waiter
/// counts from a later moment (its read of the moved fence).
pub const BIND_DEADLINE: Duration = Duration::from_millis(2500);
/// Attempts to move the fences before the placement counts as a conflict.
const ATTEMPTS: usize = 5;
/// How often unmoved fences are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// How many times longer a fence another instance moved last stays before this one
/// deletes it.
const IDLE_OTHERS: u32 = 5;
/// Deletes of unmoved fences in flight at once.
const SWEEP_DELETES_IN_FLIGHT: usize = 4;
/// How long a binder waits for the fence watch's first list before reading a fence it
/// does not know from the API instead.
const FIRST_LIST: Duration = Duration::from_secs(2);
/// How often a waiter asks its cache again.
const POLL: Duration = Duration::from_millis(5);

/// The label every fence carries, which the fence watch selects.
const FENCE_LABEL: &str = "gantry.dev/fence";

/// Where the fences live, and the newest version of each this instance has seen (its own
/// writes' responses and a watch of the fences), so that passing a fence costs one
/// request, the conditioned update, unless another binder moved it meanwhile.
#[derive(Clone)]
pub struct Fences {
    api: Api<Lease>,
    namespace: String,
    identity: String,
    known: Arc<Mutex<HashMap<String, Lease>>>,
    /// Whether the watch has listed every fence: from then on a fence not in `known`
    /// does not exist, unless a write found otherwise (`must_read`), and the first bind
    /// behind it creates it without reading it first.
    listed: tokio::sync::watch::Receiver<bool>,
    /// Fences a write found changed: read from the API before the next write.
    must_read: Arc<Mutex<HashSet<String>>>,
    /// When this instance first saw each fence's current version (its own monotonic
    /// time): a fence unmoved for long is garbage ([`Fences::sweep`]).
    unmoved_since: Arc<Mutex<HashMap<String, Instant>>>,
    /// How long a fence this instance moved last stays unmoved before it deletes it;
    /// another instance's waits [`IDLE_OTHERS`] times as long.
    idle: Duration,
    /// One turn per fence among this instance's own binders: they queue here rather
    /// than race each other through the API.
    turns: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    /// Where to say what no retry mends: the fences may not be read (403), or (shards
    /// dividing the nodes) another instance moved a node fence.
    fatal: std::sync::mpsc::Sender<Input>,
    /// Whether this shard divides the nodes (it moves no node fence of its own).
    divides_nodes: bool,
}

/// Why a binder could not take its turn behind its fences.
#[derive(Debug)]
pub enum Refused {
    /// The placement no longer fits by the latest cache, or the fences stayed contended.
    Conflict(String),
    /// The API failed (retried as any failed bind).
    Failed(String),
    /// Gantry may not write its fences: no retry mends that.
    Forbidden(String),
}

/// The fences a binder moved: what each held before, to put back if the bind fails, and
/// when the binder started moving them.
pub struct Held {
    pod: String,
    moved: Vec<(String, Option<String>)>,
    since: Instant,
}

impl Held {
    /// Whether the binding may still be sent ([`BIND_DEADLINE`]).
    pub fn may_bind(&self) -> bool {
        self.since.elapsed() < BIND_DEADLINE
    }
}

/// What the binder needs from the scheduling loop while it holds a node's turn.
pub trait Loop {
    /// Whether the cache has seen this pod bound, with its claims reserved for it (or
    /// the pod deleted), the fence naming it being at `fence_version`.
    fn has_seen(
        &self,
        pod_uid: &str,
        fence_version: Option<&str>,
    ) -> impl Future<Output = bool> + Send;
    /// The placement check against the latest cache.
    fn check(&self) -> impl Future<Output = Result<(), String>> + Send;
}

/// A fence as read: the lease (to write back), and the pod it names.
struct Read {
    name: String,
    lease: Lease,
    previous: Option<String>,
}

impl Fences {
    /// Fences in `namespace`, watched until `stop`, and deleted once unmoved for `idle`.
    pub fn new(
        client: Client,
        namespace: &str,
        identity: &str,
        idle: Duration,
        stop: tokio::sync::watch::Receiver<bool>,
        fatal: std::sync::mpsc::Sender<Input>,
        divides_nodes: bool,
    ) -> Fences {
        let (listed_tx, listed) = tokio::sync::watch::channel(false);
        let fences = Fences {
            api: Api::namespaced(client, namespace),
            namespace: namespace.into(),
            identity: identity.into(),
            known: Arc::default(),
            listed,
            must_read: Arc::default(),
            unmoved_since: Arc::default(),
            idle,
            turns: Arc::default(),
            fatal,
            divides_nodes,
        };
        tokio::spawn(fences.clone().watch(listed_tx, stop.clone()));
        tokio::spawn(fences.clone().sweep_every(stop));
        fences
    }

    /// Keeps `known` current from a watch of the fences (a stale entry costs one 409),
    /// and says when its first list is in.
    async fn watch(
        self,
        listed: tokio::sync::watch::Sender<bool>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let config = watcher::Config::default().labels(FENCE_LABEL);
        let mut events = watcher(self.api.clone(), config).default_backoff().boxed();
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                _ = stop.wait_for(|s| *s) => return,
            };
            match event {
                Some(Ok(watcher::Event::InitApply(lease))) => self.remember(lease),
                Some(Ok(watcher::Event::Apply(lease))) => {
                    self.check_mode(&lease);
                    self.remember(lease)
                }
                Some(Ok(watcher::Event::Delete(lease))) => {
                    if let Some(name) = &lease.metadata.name {
                        self.forget(name);
                    }
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    listed.send_replace(true);
                }
                Some(Ok(_)) => {}
                // At start, not at the first bind that needs a fence (with shards
                // dividing the nodes, only cross-node constraints need one).
                Some(Err(watcher::Error::InitialListFailed(kube::Error::Api(status))))
                    if status.code == 403 =>
                {
                    let forbidden = crate::failure::lease_forbidden(
                        "list the bind fences",
                        &self.namespace,
                        &status.message,
                    );
                    let _ = self.fatal.send(Input::Fatal(forbidden));
                    return;
                }
                Some(Err(error)) => tracing::debug!(%error, "fence watch failed; retrying"),
                None => return,
            }
        }
    }

    /// Shards dividing the nodes move no node fence: one moved now (not one left from
    /// before, which the first list shows) is a live instance dividing the pods, which
    /// may bind onto this shard's nodes unseen. Nothing safe is left to do but stop.
    fn check_mode(&self, lease: &Lease) {
        if !self.divides_nodes {
            return;
        }
        let name = lease.metadata.name.as_deref().unwrap_or("");
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .unwrap_or("");
        if name.starts_with(NODE_FENCE_PREFIX) && holder != self.identity {
            let _ = self.fatal.send(Input::Fatal(format!(
                "instance {holder:?} moved the bind fence {}/{name}: it divides the pods (--shard-by pods) where this one divides the nodes; give every shard the same --shard-by, or two may bind onto one node",
                self.namespace
            )));
        }
    }

    /// Keeps the newer of the known version and `lease` (resourceVersions of one
    /// object grow; a watch event older than a write's response is ignored).
    fn remember(&self, lease: Lease) {
        let Some(name) = lease.metadata.name.clone() else {
            return;
        };
        let version = |l: &Lease| {
            l.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        let mut known = self.known.lock();
        let (newer, moved) = match known.get(&name) {
            Some(old) => (
                version(&lease) >= version(old),
                version(&lease) > version(old),
            ),
            None => (true, true),
        };
        if moved {
            self.unmoved_since
                .lock()
                .insert(name.clone(), Instant::now());
        }
        if newer {
            known.insert(name, lease);
        }
    }

    fn forget(&self, name: &str) {
        self.known.lock().remove(name);
        self.unmoved_since.lock().remove(name);
    }

    /// Whether the watch has listed the fences, waiting a little for its first list
    /// (a fresh instance's first binds).
    async fn is_listed(&self) -> bool {
        let mut listed = self.listed.clone();
        tokio::time::timeout(FIRST_LIST, listed.wait_for(|l| *l))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn refused(&self, error: kube::Error) -> Refused {
        match error {
            kube::Error::Api(status) if status.code == 403 => {
                Refused::Forbidden(crate::failure::lease_forbidden(
                    "write the bind fences",
                    &self.namespace,
                    &status.message,
                ))
            }
            other => Refused::Failed(api_message(other)),
        }
    }

    /// Takes the turn behind every fence in `names` (sorted) for `pod_uid`: returns the
    /// fences held, or why not.
    pub async fn acquire(
        &self,
        names: &[String],
        pod_uid: &str,
        binder: &impl Loop,
    ) -> Result<Held, Refused> {
        // This instance's turn at each fence, in the fences' order.
        let mut turns = Vec::with_capacity(names.len());
        for name in names {
            let turn = self.turns.lock().entry(name.clone()).or_default().clone();
            turns.push(turn.lock_owned().await);
        }
        'attempt: for _ in 0..ATTEMPTS {
            let mut read = Vec::with_capacity(names.len());
            for name in names {
                let fence = self.read(name).await?;
                if let Some(previous) = fence.previous.as_deref() {
                    let version = fence.lease.metadata.resource_version.as_deref();
                    let deadline = Instant::now() + SETTLED_AFTER;
                    wait_until_seen(previous, version, deadline, binder).await;
                }
                read.push(fence);
            }
            binder.check().await.map_err(Refused::Conflict)?;
            let mut held = Held {
                pod: pod_uid.into(),
                moved: Vec::with_capacity(read.len()),
                since: Instant::now(),
            };
            for fence in read {
                match self.write(fence.lease, &fence.name, Some(pod_uid)).await {
                    Ok(()) => held.moved.push((fence.name, fence.previous)),
                    Err(WriteError::Moved) => {
                        // Another binder moved it first: put back what this attempt
                        // moved, and read everything again.
                        self.release_failed(held).await;
                        continue 'attempt;
                    }
                    Err(WriteError::Other(error)) => {
                        self.release_failed(held).await;
                        return Err(self.refused(error));
                    }
                }
            }
            return Ok(held);
        }
        Err(Refused::Conflict(
            "its node stayed contended by other binders".into(),
        ))
    }

    /// The fence as last seen; as absent if the watch has listed the fences without it
    /// (and no write found it since); otherwise as the API has it.
    async fn read(&self, name: &str) -> Result<Read, Refused> {
        let known = self.known.lock().get(name).cloned();
        let absent = || Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        let lease = match known {
            Some(lease) => lease,
            None if self.is_listed().await && !self.must_read.lock().remove(name) => absent(),
            None => {
                let lease = self.api.get_opt(name).await.map_err(|e| self.refused(e))?;
                lease.unwrap_or_else(absent)
            }
        };
        let previous = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LAST_BOUND))
            .cloned();
        Ok(Read {
            name: name.into(),
            lease,
            previous,
        })
    }

    /// Writes the fence naming `last` (or no pod), conditioned on the version read.
    async fn write(
        &self,
        mut lease: Lease,
        name: &str,
        last: Option<&str>,
    ) -> Result<(), WriteError> {
        lease
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(FENCE_LABEL.into(), "bind".into());
        let annotations = lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        match last {
            Some(uid) => annotations.insert(LAST_BOUND.into(), uid.into()),
            None => annotations.remove(LAST_BOUND),
        };
        // For people reading the lease: who moved it, and when by that one's clock.
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        });
        let is_update = lease.metadata.resource_version.is_some();
        let written = if is_update {
            self.api.replace(name, &PostParams::default(), &lease).await
        } else {
            self.api.create(&PostParams::default(), &lease).await
        };
        match written {
            Ok(written) => {
                self.remember(written);
                Ok(())
            }
            Err(kube::Error::Api(status))
                if status.code == 409 || (status.code == 404 && is_update) =>
            {
                // Known no longer (moved, created by another binder, or deleted as
                // garbage): read it from the API next time.
                self.known.lock().remove(name);
                self.must_read.lock().insert(name.into());
                Err(WriteError::Moved)
            }
            Err(error) => Err(WriteError::Other(error)),
        }
    }

    /// Puts the fences back after a failed bind, so that others do not wait for a pod
    /// that will never show up bound (best effort: a fence also settles with time). A
    /// fence another binder moved since is left to it.
    pub async fn release_failed(&self, held: Held) {
        for (name, previous) in held.moved {
            let Ok(read) = self.read(&name).await else {
                continue;
            };
            if read.previous.as_deref() != Some(held.pod.as_str()) {
                continue;
            }
            if self
                .write(read.lease, &name, previous.as_deref())
                .await
                .is_err()
            {
                tracing::debug!(fence = %name, "fence left to settle");
            }
        }
    }
}

impl Fences {
    /// Deletes the fence of a node that is gone (every instance that sees the deletion
    /// tries; the first wins, the others find nothing), so fences do not outlive nodes.
    pub async fn delete(&self, name: &str) {
        self.turns.lock().remove(name);
        match self.api.delete(name, &Default::default()).await {
            Ok(_) => tracing::debug!(fence = %name, "deleted the fence of a deleted node"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => tracing::debug!(fence = %name, error = %api_message(error), "fence left"),
        }
    }
}

impl Fences {
    /// Sweeps for garbage every [`SWEEP_EVERY`] until `stop`.
    async fn sweep_every(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(SWEEP_EVERY.min(self.idle)) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            self.sweep().await;
        }
    }

    /// Deletes the fences left unmoved: those this instance moved last after `idle` of
    /// its own time since it saw that version, any other after [`IDLE_OTHERS`] times
    /// that (its instance may be gone). Each delete is conditioned on the version seen,
    /// so a fence moved meanwhile stays. Safe as a waiter's [`SETTLED_AFTER`] is: any bind
    /// behind that version was sent long before, and a binder that finds the fence gone
    /// creates it again. Fences so never outlive their use by long, whoever stops.
    pub async fn sweep(&self) {
        self.delete_unmoved(self.idle, Some(self.idle * IDLE_OTHERS))
            .await;
    }

    /// At a graceful stop, once the scheduling loop has ended: deletes the fences this
    /// instance moved last as soon as a waiter would pass them anyway ([`SETTLED_AFTER`]
    /// after the last move; every binder of this instance has bound or given up by then,
    /// [`BIND_DEADLINE`]), so that fences do not outlive the instances that stopped.
    /// Other instances' fences are left to their sweeps.
    pub async fn delete_own_at_stop(&self) {
        let newest_move = self.unmoved_since.lock().values().max().copied();
        if let Some(at) = newest_move {
            tokio::time::sleep(SETTLED_AFTER.saturating_sub(at.elapsed())).await;
        }
        self.delete_unmoved(SETTLED_AFTER, None).await;
    }

    /// Deletes the fences unmoved for `mine` (moved last by this instance) or `others`
    /// (by another; `None`: never), each conditioned on the version seen.
    async fn delete_unmoved(&self, mine_after: Duration, others_after: Option<Duration>) {
        let due: Vec<(String, String)> = {
            let known = self.known.lock();
            let since = self.unmoved_since.lock();
            known
                .iter()
                .filter_map(|(name, lease)| {
                    let mine = lease
                        .spec
                        .as_ref()
                        .and_then(|s| s.holder_identity.as_deref())
                        == Some(self.identity.as_str());
                    let idle = if mine { mine_after } else { others_after? };
                    let version = lease.metadata.resource_version.clone()?;
                    since
                        .get(name)
                        .is_some_and(|at| at.elapsed() >= idle)
                        .then(|| (name.clone(), version))
                })
                .collect()
        };
        let deletes = futures::stream::iter(due).map(|(name, version)| async move {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(version),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match self.api.delete(&name, &params).await {
                Ok(_) => self.forget(&name),
                Err(kube::Error::Api(status)) if status.code == 404 => self.forget(&name),
                Err(error) => {
                    tracing::debug!(fence = %name, error = %api_message(error), "unmoved fence left")
                }
            }
        });
        deletes
            .buffer_unordered(SWEEP_DELETES_IN_FLIGHT)
            .collect::<()>()
            .await;
    }
}

enum WriteError {
    /// 409: another binder moved the fence since it was read.
    Moved,
    Other(kube::Error),
}

/// Waits until the cache has seen `pod_uid` bound (or gone), until `deadline` at most.
async fn wait_until_seen(
    pod_uid: &str,
    fence_version: Option<&str>,
    deadline: Instant,
    binder: &impl Loop,
) {
    while Instant::now() < deadline {
        if binder.has_seen(pod_uid, fence_version).await {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
}
