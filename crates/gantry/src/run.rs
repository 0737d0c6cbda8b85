//! `gantry run`: schedule a real cluster's pods through the Kubernetes API.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use gantry_api::Sym;
use gantry_framework::config::SchedulerConfig;
use gantry_framework::plugins::default_profile_for;
use gantry_kube::{LeaderElection, RunOptions, Shard};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::load;

/// The scheduler name Gantry answers to when neither a configuration nor
/// `--scheduler-name` names one.
const DEFAULT_NAME: &str = "gantry-scheduler";

#[derive(Args)]
pub struct RunArgs {
    /// Kubeconfig to use; without it: in-cluster configuration, then `KUBECONFIG`, then
    /// `~/.kube/config`.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): its profiles'
    /// scheduler names select the pods Gantry schedules.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The schedulerName Gantry's pods name (renames the configuration's only profile).
    #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    scheduler_name: Option<String>,
    /// Active-passive replicas: only the holder of the Lease schedules.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the leader Lease (and of the bind fences when sharded).
    #[arg(long, default_value = "kube-system")]
    lease_namespace: String,
    /// Name of the leader Lease.
    #[arg(long, default_value = DEFAULT_NAME)]
    lease_name: String,
    /// Where /metrics, /healthz and /readyz listen.
    #[arg(long, default_value = "0.0.0.0:10251")]
    metrics_addr: SocketAddr,
    /// This instance's share when several schedule the same pods: I/N (0-based).
    #[arg(long, default_value = "0/1", value_parser = Shard::parse)]
    shard: Shard,
    /// Seeds tie-breaking among equally scored nodes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    release: crate::release_args::ReleaseArgs,
}

/// The profiles, with `--scheduler-name` applied.
fn scheduler_config(args: &RunArgs) -> anyhow::Result<SchedulerConfig> {
    let release = args.release.release()?;
    let mut config = match &args.config {
        Some(file) => load::config(Some(file), release)?,
        None => SchedulerConfig {
            profiles: vec![default_profile_for(DEFAULT_NAME, release)],
            ..SchedulerConfig::for_release(release)
        },
    };
    if let Some(name) = &args.scheduler_name {
        match config.profiles.as_mut_slice() {
            [only] => only.scheduler_name = Sym::new(name),
            profiles => bail!(
                "--scheduler-name: the configuration has {} profiles; name them in it instead",
                profiles.len()
            ),
        }
    }
    Ok(config)
}

async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            // Bounded and parsed first (`/dev/zero` is refused at its first byte, a syntax
            // error is one plain line); kube then reads it again, making relative
            // certificate paths absolute.
            let text =
                crate::load::read_text(path, crate::load::MAX_KUBECONFIG_BYTES, "kubeconfig")
                    .with_context(|| format!("--kubeconfig {}", path.display()))?;
            gantry_api::decode::parse_yaml_value(&text)
                .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", path.display()))?;
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no cluster to talk to (in-cluster, KUBECONFIG or ~/.kube/config)")?,
    };
    kube::Client::try_from(config).context("cannot build the Kubernetes client")
}

/// This process's name in the lease and in events: the host name and a unique suffix,
/// as client-go's leader election names candidates.
fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "gantry".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}_{:x}{nanos:x}", std::process::id())
}

/// Completes on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let sigterm = async {
            match term.as_mut() {
                Some(term) => {
                    term.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = sigterm => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    eprintln!("gantry run: stopping (binds in flight finish first)");
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = scheduler_config(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let client = client(args.kubeconfig.as_ref()).await?;
        let identity = identity();
        let names: Vec<String> = config
            .profiles
            .iter()
            .map(|p| p.scheduler_name.to_string())
            .collect();
        eprintln!(
            "gantry run: {identity} schedules pods named {}{}, deciding as Kubernetes {}",
            names.join(", "),
            if args.leader_elect {
                " once it holds the leader lease"
            } else {
                ""
            },
            config.release
        );
        let options = RunOptions {
            client,
            config,
            identity,
            leader_election: args
                .leader_elect
                .then(|| LeaderElection::new(&args.lease_namespace, &args.lease_name)),
            metrics_addr: Some(args.metrics_addr),
            shard: args.shard,
            seed: args.seed,
            fence_namespace: args.lease_namespace.clone(),
            event_retry: gantry_kube::DEFAULT_EVENT_RETRY,
        };
        gantry_kube::run(options, stop_signal(), None).await?;
        Ok(())
    })
}
