//! Gantry against a real cluster, through the Kubernetes API (kube-rs): watches of every
//! resource the scheduler reads feed Gantry's own cache and queue; the scheduling loop
//! decides as the simulation does; writer tasks bind (`pods/{name}/binding`, with the
//! pod's UID as a precondition) concurrently with the next cycle, and write the events
//! and conditions kube-scheduler writes. Leader election (a Lease) makes several replicas
//! active-passive; shards (a stable hash of the pod UID) make several instances share one
//! cluster optimistically, each binder re-checking its decisions against its latest cache.
//! Dynamic resource allocation (resource.k8s.io/v1) is watched when a profile runs
//! DynamicResources; binders write the claims' allocations before the binding. [`import`]
//! reads a cluster once, for the commands that take `--kubeconfig` instead of a dump.
//!
//! It owns everything that talks to a real API server. It depends on `gantry-api`,
//! `gantry-cache`, `gantry-framework` and `gantry-scheduler` (its tests also on `gantry-sim`,
//! to compare with the simulation); nothing but the command line depends on it.

mod claim_writes;
mod client;
mod coscheduling_groups;
mod dra;
mod events;
mod failure;
mod fence;
mod fence_scope;
mod http;
mod import;
mod leader;
mod metrics;
mod objects;
mod pod_groups;
mod record;
mod scheduling_loop;
mod shadow;
mod volume_writes;
mod watch;
mod writes;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gantry_api::{Gate, Pod, Sym};
use gantry_cache::Cache;
use gantry_framework::ApiObjects;
use gantry_framework::config::SchedulerConfig;
use gantry_framework::plugins::dynamic_resources;
use gantry_scheduler::Scheduler;
use gantry_scheduler::queue::SchedulingQueue;
use kube::Client;
use parking_lot::Mutex;
use thiserror::Error;
use tokio::sync::oneshot;

pub use client::{USER_AGENT, build as build_client};
pub use failure::{Failure, Startup, describe};
pub use gantry_scheduler::shard::{Divide, Shard, owner};
pub use import::{ImportOptions, Imported, ListedKind, import};
pub use leader::LeaderElection;
pub use metrics::KubeMetrics;
pub use record::{RecordOptions, Recorded, record};
pub use shadow::{Disagreement, SCORED_LOWER, ShadowCounts};
pub use watch::POD_FIELD_SELECTOR;
pub use writes::{
    MAX_BINDS_IN_FLIGHT, MAX_WRITES_IN_FLIGHT, REASON_SCHEDULER_ERROR, REASON_UNSCHEDULABLE,
};

use crate::claim_writes::ClaimWriter;
use crate::dra::{ClaimStore, DraMirror};
use crate::objects::ObjectMirror;
use crate::scheduling_loop::{LoopEnd, SchedulingLoop};
use crate::writes::{ApiWriter, BindDone, WriterSetup};

/// A running instance's failures to reach the API server are logged at most this often.
const OUTAGE_REPORT_EVERY: Duration = Duration::from_secs(60);

/// What reaches the scheduling loop.
pub(crate) enum Input {
    Watch(watch::Change),
    BindDone(Box<BindDone>),
    /// A binder asks whether its pod (or its gang's members, together) still fits its
    /// node by the latest cache.
    Check {
        pods: Vec<Arc<Pod>>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// A binder waiting at a node's fence asks whether the cache has seen this pod bound,
    /// with its claims reserved for it (or deleted).
    Seen {
        uid: Arc<str>,
        /// The fence's resourceVersion: a pod the loop does not know counts as deleted
        /// only once the pod watch has passed it (the pod was created before the fence
        /// named it; before that, it is a pod not yet seen at all).
        fence_version: Option<Arc<str>>,
        reply: oneshot::Sender<bool>,
    },
    Leader(bool),
    /// A preemption in the background deletes its last victim now.
    PreemptionDeletingLastVictim {
        preemptor: gantry_scheduler::queue::Preemptor,
        victim: Arc<str>,
    },
    /// A preemption in the background has removed its victims.
    PreemptionDone(gantry_scheduler::queue::Preemptor),
    /// Something no retry mends (Gantry may not write its leases): end with this line.
    Fatal(String),
    /// Stop taking pods; finish (or, after a grace period, forget) the binds in flight.
    Stop,
    /// End at once: `run` was dropped before it finished (its runtime is going away).
    Abort,
}

/// Aborts the scheduling loop if `run` is dropped before it ends, so that the loop's
/// thread never outlives its runtime.
struct AbortOnDrop(std::sync::mpsc::Sender<Input>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(Input::Abort);
    }
}

/// State the HTTP endpoints read.
pub struct Shared {
    scheduler_metrics: Mutex<String>,
    synced: AtomicBool,
    pub kube: Arc<KubeMetrics>,
}

impl Shared {
    fn new(kube: Arc<KubeMetrics>) -> Shared {
        Shared {
            scheduler_metrics: Mutex::new(String::new()),
            synced: AtomicBool::new(false),
            kube,
        }
    }

    pub fn scheduler_metrics(&self) -> String {
        self.scheduler_metrics.lock().clone()
    }

    fn set_scheduler_metrics(&self, text: String) {
        *self.scheduler_metrics.lock() = text;
    }

    /// Every watch has listed its resource at least once.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::Release);
    }
}

/// How to run.
pub struct RunOptions {
    pub client: Client,
    /// The API server's address, as messages name it.
    pub server: String,
    /// How long to try the API server at start before giving up.
    pub startup: Startup,
    /// Profiles (their scheduler names select the pods), backoff.
    pub config: SchedulerConfig,
    /// Names this instance in events and in the lease.
    pub identity: String,
    /// `None`: schedule at once, alone.
    pub leader_election: Option<LeaderElection>,
    /// Where `/metrics`, `/healthz` and `/readyz` listen (port 0 picks one).
    pub metrics_addr: Option<SocketAddr>,
    /// This instance's share of the pods when several schedule the same cluster.
    pub shard: Shard,
    /// What shards divide: the pods (each behind node fences) or the nodes.
    pub divide: Divide,
    /// Seeds tie-breaking among equally scored nodes.
    pub seed: u64,
    /// With several shards: the namespace of the per-node bind fences (Leases).
    pub fence_namespace: String,
    /// With several shards: how long a bind fence this instance moved last stays unmoved
    /// before the instance deletes it ([`DEFAULT_FENCE_IDLE`]; other instances' fences,
    /// five times as long).
    pub fence_idle: Duration,
    /// The pause between tries of an event write ([`DEFAULT_EVENT_RETRY`], as client-go).
    pub event_retry: Duration,
    /// `--shadow`: decide the pods of the profiles' scheduler names as another scheduler
    /// places them, write nothing, and compare; the disagreements go to this writer
    /// (JSON Lines) when given.
    pub shadow: Option<Option<Box<dyn std::io::Write + Send>>>,
}

/// client-go's pause between tries of an event write.
pub const DEFAULT_EVENT_RETRY: Duration = Duration::from_secs(10);
/// A bind fence unmoved this long is garbage to the instance that moved it last: every
/// bind behind it is long done.
pub const DEFAULT_FENCE_IDLE: Duration = Duration::from_secs(60);

#[derive(Debug, Error)]
pub enum RunError {
    #[error("metrics address {addr}: {source}")]
    MetricsAddr {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("lost the leader lease; restarting is the safe way back")]
    LostLeadership,
    /// The API server cannot be used (at start), or refuses what Gantry must do.
    #[error("{0}")]
    Server(String),
    #[error("the scheduling loop failed: {0}")]
    Loop(String),
}

/// A running instance's handles that outlive `run`'s setup, for callers (tests) that
/// want to look inside.
#[derive(Clone)]
pub struct Running {
    pub shared: Arc<Shared>,
    /// Where the metrics server listens, once bound.
    pub metrics_addr: Option<SocketAddr>,
}

/// Schedules until `stop` completes (then stops taking pods, finishes or forgets the
/// binds in flight, releases the lease) or leadership is lost. `started` receives the
/// instance's handles once it serves.
pub async fn run(
    options: RunOptions,
    stop: impl Future<Output = ()>,
    started: Option<oneshot::Sender<Running>>,
) -> Result<(), RunError> {
    // Coscheduling holds a gang's members at Permit in one instance's memory: instances
    // dividing the pods would each hold part of a gang.
    let coscheduling = (options.config.profiles.iter())
        .any(|p| p.queue_sort == gantry_framework::QueueSort::Coscheduling);
    if coscheduling && options.shard.is_shared() {
        return Err(RunError::Server(
            "Coscheduling is scheduled by one instance: its pods wait at Permit in that instance's memory, and instances sharing the cluster would each hold part of a gang (run one instance, with leader election for a standby)".into(),
        ));
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (inputs, inputs_rx) = std::sync::mpsc::channel();
    let kube_metrics = Arc::new(KubeMetrics::default());
    let shared = Arc::new(Shared::new(kube_metrics.clone()));

    let mut metrics_addr = None;
    let mut server = None;
    if let Some(addr) = options.metrics_addr {
        let (bound, handle) = http::serve(addr, shared.clone(), stop_rx.clone())
            .await
            .map_err(|source| RunError::MetricsAddr { addr, source })?;
        tracing::info!(%bound, "serving /metrics, /healthz, /readyz");
        metrics_addr = Some(bound);
        server = Some(handle);
    }

    // Nothing starts before the server answers, takes the credentials and lets Gantry
    // list pods: otherwise one line says why, and `run` ends.
    failure::probe(&options.client, &options.server, &options.startup)
        .await
        .map_err(RunError::Server)?;
    let outage = Arc::new(failure::Outage::new(&options.server, OUTAGE_REPORT_EVERY));

    // The resource.k8s.io/v1 kinds and PodGroups only when scheduling needs them: a
    // cluster that does not serve them would otherwise never be listed in full.
    let release = options.config.release;
    let mut optional = watch::Optional {
        dra: options.config.profiles.iter().any(|p| {
            p.pre_filter
                .iter()
                .any(|plugin| plugin.name() == dynamic_resources::NAME)
        }),
        pod_groups: release.enabled(Gate::GenericWorkload),
        coscheduling_groups: coscheduling,
        taint_rules: None,
    };
    if optional.dra {
        failure::probe_dra(&options.client, &options.server, release, &options.startup)
            .await
            .map_err(RunError::Server)?;
        if release.enabled(Gate::DRADeviceTaintRules) {
            optional.taint_rules =
                failure::served_taint_rules(&options.client, &options.server, &options.startup)
                    .await;
            if optional.taint_rules.is_none() {
                tracing::warn!(
                    %release,
                    "the server serves no DeviceTaintRules (resource.k8s.io v1, v1beta2 or v1alpha3): DRADeviceTaintRules is on, but no rule taints a device"
                );
            }
        }
    }
    if optional.coscheduling_groups {
        failure::probe_coscheduling_groups(&options.client, &options.server, &options.startup)
            .await
            .map_err(RunError::Server)?;
    }
    if optional.pod_groups {
        failure::probe_pod_groups(&options.client, &options.server, release, &options.startup)
            .await
            .map_err(RunError::Server)?;
    }
    let watched = watch::spawn_all(
        &options.client,
        &inputs,
        &kube_metrics,
        &stop_rx,
        &outage,
        release,
        optional,
    );

    let mut elector = None;
    let leading_from_start = options.leader_election.is_none();
    kube_metrics.set_leader(leading_from_start);
    if let Some(config) = options.leader_election {
        let (leading_tx, mut leading_rx) = tokio::sync::watch::channel(false);
        let candidate = leader::Elector::new(options.client.clone(), config, &options.identity);
        let (stop, fatal) = (stop_rx.clone(), inputs.clone());
        elector = Some(tokio::spawn(async move {
            if let Err(message) = candidate.run(leading_tx, stop).await {
                let _ = fatal.send(Input::Fatal(message));
            }
        }));
        let inputs = inputs.clone();
        let kube_metrics = kube_metrics.clone();
        tokio::spawn(async move {
            while leading_rx.changed().await.is_ok() {
                let leading = *leading_rx.borrow();
                kube_metrics.set_leader(leading);
                if inputs.send(Input::Leader(leading)).is_err() {
                    return;
                }
            }
        });
    }

    let scheduler_names: Vec<Sym> = options
        .config
        .profiles
        .iter()
        .map(|p| p.scheduler_name)
        .collect();
    let cache = Arc::new(Cache::new());
    let claims = Arc::new(ClaimStore::new(cache.clone(), options.config.release));
    let mut queue = SchedulingQueue::with_backoff(
        &options.config.profiles,
        Duration::from_secs(options.config.pod_initial_backoff_seconds),
        Duration::from_secs(options.config.pod_max_backoff_seconds),
    );
    // Without SchedulerAsyncPreemption nothing holds a preemptor back while its
    // victims' deletions are in flight (upstream's cycle waits for them; the writer here
    // does not).
    let async_preemption =
        (options.config.profiles.iter()).all(|p| p.release.enabled(Gate::SchedulerAsyncPreemption));
    if !async_preemption {
        queue.wait_out_backoffs();
    }
    queue.share_pod_groups(cache.pod_groups().clone());
    queue.share_claims(cache.dra().clone());
    let gang_scheduling =
        (options.config.profiles.iter()).any(|p| p.release.enabled(Gate::GangScheduling));
    let mut scheduler = Scheduler::new(
        cache.clone(),
        options.config.profiles,
        ApiObjects::default(),
        options.shard.tie_break_seed(options.seed),
    );
    scheduler.random_ties = options.shard.is_shared();
    if options.divide == Divide::Nodes {
        scheduler.divide_nodes(options.shard);
    }
    let fences = options.shard.is_shared().then(|| {
        fence::Fences::new(
            options.client.clone(),
            &options.fence_namespace,
            &options.identity,
            options.fence_idle,
            stop_rx.clone(),
            inputs.clone(),
            options.divide == Divide::Nodes,
        )
    });
    let writer = ApiWriter::new(WriterSetup {
        client: options.client.clone(),
        runtime: tokio::runtime::Handle::current(),
        inputs: inputs.clone(),
        identity: options.identity.clone(),
        metrics: kube_metrics.clone(),
        fences: fences.clone(),
        claims: ClaimWriter::new(options.client.clone(), claims.clone()),
        release: options.config.release,
        event_retry: options.event_retry,
        outage,
    });
    let dra = DraMirror::new(cache.clone(), claims);
    let mut scheduler = scheduler;
    if options.shadow.is_some() {
        // A disagreement says how Gantry's cycle judged the node the other scheduler chose.
        scheduler.keep_last_cycle();
    }
    let scheduling = SchedulingLoop {
        scheduler,
        queue,
        cache,
        writer,
        inputs: inputs_rx,
        shared: shared.clone(),
        shard: options.shard,
        divide: options.divide,
        scheduler_names,
        leader: leading_from_start,
        mirror: ObjectMirror::default(),
        dra,
        pods: HashMap::new(),
        pods_version: 0,
        nodes: HashMap::new(),
        reaching: HashMap::new(),
        binding: HashMap::new(),
        reported: HashMap::new(),
        rounds_reported: HashMap::new(),
        maybe_bound: HashMap::new(),
        synced: HashSet::new(),
        watched,
        start: Instant::now(),
        shadow: options.shadow.map(shadow::Shadow::new),
        gang_scheduling,
        pod_groups: HashMap::new(),
        waiting: scheduling_loop::WaitingPods::default(),
        bind_failures: failure::RepeatedBindFailures::default(),
    };
    let thread = std::thread::Builder::new()
        .name("gantry-scheduler".into())
        .spawn(move || scheduling.run())
        .map_err(|e| RunError::Loop(e.to_string()))?;
    let mut joined = tokio::task::spawn_blocking(move || thread.join());
    let _abort_on_drop = AbortOnDrop(inputs.clone());

    if let Some(started) = started {
        let _ = started.send(Running {
            shared: shared.clone(),
            metrics_addr,
        });
    }

    let end = tokio::select! {
        _ = stop => {
            let _ = inputs.send(Input::Stop);
            (&mut joined).await
        }
        end = &mut joined => end,
    };
    let _ = stop_tx.send(true);
    if let (Some(fences), Ok(Ok(LoopEnd::Stopped))) = (&fences, &end) {
        // Bounded: an API server gone at stop leaves the fences to the others' sweeps.
        let within = fence::SETTLED_AFTER + Duration::from_secs(10);
        if tokio::time::timeout(within, fences.delete_own_at_stop())
            .await
            .is_err()
        {
            tracing::warn!(
                "stopped before deleting every bind fence it moved; other instances' sweeps will"
            );
        }
    }
    if let Some(elector) = elector {
        let _ = tokio::time::timeout(Duration::from_secs(5), elector).await;
    }
    if let Some(server) = server {
        let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    }
    match end {
        Ok(Ok(LoopEnd::Stopped)) => Ok(()),
        Ok(Ok(LoopEnd::LostLeadership)) => Err(RunError::LostLeadership),
        Ok(Ok(LoopEnd::Fatal(message))) => Err(RunError::Server(message)),
        Ok(Err(_)) => Err(RunError::Loop("the scheduling thread panicked".into())),
        Err(e) => Err(RunError::Loop(e.to_string())),
    }
}
