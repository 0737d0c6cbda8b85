//! `gantry run`: schedule a real cluster's pods through the Kubernetes API.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use gantry_api::Sym;
use gantry_api::decode::validation;
use gantry_framework::config::SchedulerConfig;
use gantry_framework::plugins::default_profile_for;
use gantry_kube::{Divide, LeaderElection, RunOptions, Shard, Startup};

use crate::{live, load};

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
    /// Namespace of the leader Lease (and of the bind fences when sharded); by default
    /// the namespace Gantry runs in (its ServiceAccount's), or the kubeconfig context's.
    #[arg(long, value_parser = namespace_name)]
    lease_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(long, default_value = DEFAULT_NAME, value_parser = lease_object_name)]
    lease_name: String,
    /// Where /metrics, /healthz and /readyz listen.
    #[arg(long, default_value = "0.0.0.0:10251")]
    metrics_addr: SocketAddr,
    /// This instance's share when several schedule the same pods: I/N (0-based).
    #[arg(long, default_value = "0/1", value_parser = Shard::parse)]
    shard: Shard,
    /// What shards divide: `nodes` (each shard places pods on its own nodes only, with no
    /// node fence; a pod that fits none is handed on to the next shard) or `pods` (each
    /// shard places its pods on any node, behind a bind fence per node: one more write
    /// per bind). Every shard must be given the same.
    #[arg(long, default_value = "nodes", value_parser = Divide::parse)]
    shard_by: Divide,
    /// Seeds tie-breaking among equally scored nodes as Kubernetes 1.28 to 1.34 (from 1.35
    /// the score heap's order breaks ties, as upstream).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Decide the pods another scheduler places (the profiles' scheduler names;
    /// `default-scheduler` without --config or --scheduler-name), write nothing to the
    /// cluster, and compare each decision with the real binding: a summary line a
    /// minute, `gantry_shadow_*` on /metrics.
    #[arg(long, conflicts_with_all = ["leader_elect"])]
    shadow: bool,
    /// With --shadow: write each disagreement (pod, both nodes, the reason) to this file,
    /// as JSON Lines.
    #[arg(long, requires = "shadow")]
    disagreements: Option<PathBuf>,
    #[command(flatten)]
    release: crate::release_args::ReleaseArgs,
}

/// The scheduler a shadow decides alongside when no name is given.
const SHADOWED_NAME: &str = "default-scheduler";

/// A namespace as the API server validates it (a DNS-1123 label): the value becomes a
/// segment of request paths, so `../..` or `Bad NS!` must never reach a request.
fn namespace_name(value: &str) -> Result<String, String> {
    checked_name(value, validation::dns1123_label(value))
}

/// A Lease's name as the API server validates it (a DNS-1123 subdomain), for the same
/// reason; with shards the name gains `-I-of-N`, checked again once known.
fn lease_object_name(value: &str) -> Result<String, String> {
    checked_name(value, validation::dns1123_subdomain(value))
}

fn checked_name(value: &str, errors: Vec<String>) -> Result<String, String> {
    if errors.is_empty() {
        Ok(value.to_string())
    } else {
        Err(errors.join(", "))
    }
}

/// The profiles, with `--scheduler-name` applied.
fn scheduler_config(
    args: &RunArgs,
    release: gantry_api::Release,
) -> anyhow::Result<SchedulerConfig> {
    let mut config = match &args.config {
        Some(file) => load::config(Some(file), release)?,
        None => {
            let name = if args.shadow {
                SHADOWED_NAME
            } else {
                DEFAULT_NAME
            };
            SchedulerConfig {
                profiles: vec![default_profile_for(name, release)],
                ..SchedulerConfig::for_release(release)
            }
        }
    };
    // Coscheduling's members wait at Permit in one instance's memory.
    if let Some(profile) =
        (config.profiles.iter()).find(|p| p.queue_sort == gantry_framework::QueueSort::Coscheduling)
        && args.shard.is_shared()
    {
        bail!(
            "--shard: profile {} enables Coscheduling, whose pods wait at Permit in one instance's memory: instances sharing the cluster would each hold part of a gang (run one instance; --leader-elect for a standby)",
            profile.scheduler_name
        );
    }
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

/// `--lease-namespace`, else the client's default namespace: in a pod, its
/// ServiceAccount's (where deploy/gantry.yaml grants the Leases); from a kubeconfig, its
/// context's (`default` when the context names none).
fn lease_namespace(args: &RunArgs, client: &kube::Client) -> anyhow::Result<String> {
    match &args.lease_namespace {
        Some(namespace) => Ok(namespace.clone()),
        None => {
            let namespace = client.default_namespace();
            namespace_name(namespace).map_err(|e| {
                anyhow::anyhow!(
                    "the client's namespace {namespace:?} (the kubeconfig context's, or the pod's ServiceAccount's) cannot name the leases: {e}; give --lease-namespace"
                )
            })
        }
    }
}

/// The leader Lease's name: `--lease-name`, and with several shards the shard too
/// (`gantry-1-of-2`), so that each shard elects its own leader among its replicas rather
/// than all shards one.
fn lease_name(args: &RunArgs) -> anyhow::Result<String> {
    if !args.shard.is_shared() {
        return Ok(args.lease_name.clone());
    }
    let name = format!(
        "{}-{}-of-{}",
        args.lease_name, args.shard.index, args.shard.count
    );
    lease_object_name(&name)
        .map_err(|e| anyhow::anyhow!("--lease-name with --shard makes the Lease {name:?}: {e}"))
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
    live::signalled().await;
    // Log lines, not plain text, so that `--log-format json` is JSON throughout.
    tracing::info!("stopping (binds in flight finish first)");
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    // Flags are checked before any request: the release named, the configuration, names.
    let named = args.release.release()?;
    // Shards dividing the nodes hand a pod that fits none of theirs to the next: a gang
    // would be split across them.
    if named.enabled(gantry_api::Gate::GangScheduling)
        && args.shard.is_shared()
        && args.shard_by == Divide::Nodes
    {
        bail!(
            "--feature-gates: GangScheduling places a gang in one cycle, which shards dividing the nodes would split: give --shard-by pods (each gang is then one shard's)"
        );
    }
    scheduler_config(&args, named)?;
    let lease_name = lease_name(&args)?;
    anyhow::ensure!(
        !args.shadow || !args.shard.is_shared(),
        "--shadow decides every pod of the shadowed scheduler: give no --shard"
    );
    let disagreements = match &args.disagreements {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            Some(Box::new(std::io::BufWriter::new(file)) as Box<dyn std::io::Write + Send>)
        }
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let (client, server) = live::client(args.kubeconfig.as_ref()).await?;
        let lease_namespace = lease_namespace(&args, &client)?;
        let (release, why) = live::release(&args.release, &client, &server).await?;
        let config = scheduler_config(&args, release)?;
        let identity = identity();
        let names: Vec<String> = config
            .profiles
            .iter()
            .map(|p| p.scheduler_name.to_string())
            .collect();
        tracing::info!(
            "{identity} {} pods named {}{}, deciding as Kubernetes {} ({why})",
            if args.shadow {
                "shadows (decides, writes nothing, compares) the scheduler of"
            } else {
                "schedules"
            },
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
            server,
            startup: Startup::default(),
            config,
            identity,
            leader_election: args
                .leader_elect
                .then(|| LeaderElection::new(&lease_namespace, &lease_name)),
            metrics_addr: Some(args.metrics_addr),
            shard: args.shard,
            divide: args.shard_by,
            seed: args.seed,
            fence_namespace: lease_namespace,
            fence_idle: gantry_kube::DEFAULT_FENCE_IDLE,
            event_retry: gantry_kube::DEFAULT_EVENT_RETRY,
            shadow: args.shadow.then_some(disagreements),
        };
        gantry_kube::run(options, stop_signal(), None).await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    /// A kubeconfig whose context names namespace `team-a`.
    fn kubeconfig(dir: &std::path::Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{name: k, cluster: {server: 'https://10.0.0.1:6443'}}]\n\
             users: [{name: u, user: {token: t}}]\n\
             contexts: [{name: c, context: {cluster: k, user: u, namespace: team-a}}]\n",
        )
        .unwrap();
        path
    }

    /// Without `--lease-namespace`, the leases go where Gantry runs (the kubeconfig
    /// context's namespace here; in a pod, its ServiceAccount's), not to kube-system,
    /// which deploy/gantry.yaml does not grant.
    #[test]
    fn the_lease_namespace_defaults_to_the_clients() {
        use clap::Parser;
        let dir = tempfile::tempdir().unwrap();
        let path = kubeconfig(dir.path());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (client, server) = runtime.block_on(live::client(Some(&path))).unwrap();
        assert_eq!(server, "https://10.0.0.1:6443");
        let args = Cli::try_parse_from(["run", "--leader-elect"]).unwrap().run;
        assert_eq!(lease_namespace(&args, &client).unwrap(), "team-a");
        let named = Cli::try_parse_from(["run", "--lease-namespace", "gantry-system"])
            .unwrap()
            .run;
        assert_eq!(lease_namespace(&named, &client).unwrap(), "gantry-system");
        assert!(Cli::try_parse_from(["run", "--lease-namespace", ""]).is_err());
    }

    /// Replicas of one shard share a lease; shards do not.
    #[test]
    fn each_shard_elects_its_own_leader() {
        use clap::Parser;
        let name = |argv: &[&str]| lease_name(&Cli::try_parse_from(argv).unwrap().run).unwrap();
        assert_eq!(name(&["run", "--leader-elect"]), DEFAULT_NAME);
        assert_eq!(
            name(&["run", "--leader-elect", "--shard", "1/2"]),
            format!("{DEFAULT_NAME}-1-of-2")
        );
        assert_eq!(
            name(&["run", "--lease-name", "x", "--shard", "0/3"]),
            "x-0-of-3"
        );
    }
}
