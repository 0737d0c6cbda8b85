//! Talking to a cluster, for the commands that read one: the client a kubeconfig names,
//! the release its API server runs (decided as when `--emulated-version` is not given),
//! and `--kubeconfig` for `simulate`, `explain` and `estimate`: the cluster read once,
//! read-only, instead of from a dump.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use gantry_api::Release;
use gantry_api::decode::ClusterObjects;
use gantry_kube::ImportOptions;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::output::{self, Say};
use crate::release_args::ReleaseArgs;

#[derive(Args, Clone, Default)]
pub struct LiveArgs {
    /// Read the cluster from its API server instead of files: read-only, one paged list
    /// per kind the scheduler reads (deploy/gantry-readonly.yaml grants it). Without FILE:
    /// `KUBECONFIG`, then `~/.kube/config`, or in a pod its ServiceAccount. Without
    /// --emulated-version, decides as the server's release.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    kubeconfig: Option<Option<PathBuf>>,
}

/// A cluster read from its API server.
pub struct LiveCluster {
    pub objects: ClusterObjects,
    /// The server's address, as messages and reports name the input.
    pub server: String,
}

/// The objects read live (if any), then those of the files.
pub fn with_files(live: Option<LiveCluster>, files: ClusterObjects) -> ClusterObjects {
    match live {
        Some(live) => {
            let mut objects = live.objects;
            objects.merge(files);
            objects
        }
        None => files,
    }
}

impl LiveArgs {
    /// The release to decide as, and the cluster read from its API server when
    /// `--kubeconfig` was given (its objects not yet admitted, as files' are not).
    /// `--kubeconfig`, when given (`Some(None)`: found as kubectl finds it).
    pub fn kubeconfig(&self) -> Option<&Option<PathBuf>> {
        self.kubeconfig.as_ref()
    }

    pub fn read(&self, release: &ReleaseArgs) -> anyhow::Result<(Release, Option<LiveCluster>)> {
        let Some(kubeconfig) = &self.kubeconfig else {
            return Ok((release.release()?, None));
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(async {
            let (client, server) = client(kubeconfig.as_ref()).await?;
            let (release, why) = self::release(release, &client, &server).await?;
            let started = Instant::now();
            let imported =
                gantry_kube::import(&client, &server, release, &ImportOptions::default())
                    .await
                    .map_err(anyhow::Error::msg)?;
            let counts: Vec<String> = (imported.listed.iter())
                .filter(|(_, n)| *n > 0)
                .map(|(resource, n)| format!("{n} {resource}"))
                .collect();
            let mut note = format!(
                "read {server} in {:.1} s: {}",
                started.elapsed().as_secs_f64(),
                counts.join(", ")
            );
            if !imported.not_served.is_empty() {
                note += &format!("; not served there: {}", imported.not_served.join(", "));
            }
            output::say(Say::Note, &format!("{note}; deciding as {release} ({why})"));
            Ok((
                release,
                Some(LiveCluster {
                    objects: imported.objects,
                    server,
                }),
            ))
        })
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn signalled() {
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
}

/// The release to decide as, and why: `--emulated-version`'s, else the API server's.
pub async fn release(
    args: &ReleaseArgs,
    client: &kube::Client,
    server: &str,
) -> anyhow::Result<(Release, String)> {
    if args.names_a_release() {
        return Ok((args.release()?, "--emulated-version".to_string()));
    }
    let version = tokio::time::timeout(VERSION_TIMEOUT, client.apiserver_version())
        .await
        .map_err(|_| format!("no answer in {} s", VERSION_TIMEOUT.as_secs()))
        .and_then(|answer| answer.map_err(|e| e.to_string()));
    release_of_server(args, server, version.as_ref().map_err(Clone::clone))
}

/// The client, and the server's address as messages name it.
pub async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<(kube::Client, String)> {
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
    let server = config.cluster_url.to_string();
    let server = server.trim_end_matches('/').to_string();
    let client = gantry_kube::build_client(config)
        .with_context(|| format!("cannot build a client for {server}"))?;
    Ok((client, server))
}

/// How long the API server's `/version` is waited for.
pub const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The release to decide as, and why, when `--emulated-version` is not given: the API
/// server's own where Gantry decides as it; otherwise the default, saying why.
pub fn release_of_server(
    args: &ReleaseArgs,
    server: &str,
    version: Result<&k8s_openapi::apimachinery::pkg::version::Info, String>,
) -> anyhow::Result<(gantry_api::Release, String)> {
    let default = args.release()?;
    let info = match version {
        Ok(info) => info,
        Err(e) => {
            return Ok((
                default,
                format!("the default: {server}'s version could not be read ({e})"),
            ));
        }
    };
    // `minor` may carry a suffix (`36+` on some providers).
    let minor = info.minor.trim_end_matches(|c: char| !c.is_ascii_digit());
    let supported = gantry_api::release::OLDEST_MINOR..=gantry_api::release::NEWEST_MINOR;
    match minor.parse::<u8>() {
        Ok(m) if info.major == "1" && supported.contains(&m) => Ok((
            args.release_at(&format!("1.{m}"))?,
            format!("the API server's release ({})", info.git_version),
        )),
        _ => Ok((
            default,
            format!(
                "the default: the API server runs {}, and Gantry decides as 1.{} to 1.{} (pass --emulated-version)",
                info.git_version,
                supported.start(),
                supported.end()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        release: ReleaseArgs,
    }

    /// Without `--emulated-version`, a live cluster is decided as the API server's release where Gantry
    /// models it, and otherwise as the default, saying why; a named release wins.
    #[test]
    fn the_release_follows_the_api_server_unless_named() {
        use clap::Parser;
        let info =
            |major: &str, minor: &str, git: &str| k8s_openapi::apimachinery::pkg::version::Info {
                major: major.into(),
                minor: minor.into(),
                git_version: git.into(),
                ..Default::default()
            };
        let args = Cli::try_parse_from(["run"]).unwrap();
        let decide = |version: Result<&k8s_openapi::apimachinery::pkg::version::Info, String>| {
            release_of_server(&args.release, "https://k:6443", version).unwrap()
        };
        let (release, why) = decide(Ok(&info("1", "35", "v1.35.4")));
        assert_eq!(release, gantry_api::Release::at(35));
        assert_eq!(why, "the API server's release (v1.35.4)");
        let (release, _) = decide(Ok(&info("1", "28+", "v1.28.15-gke.1")));
        assert_eq!(release, gantry_api::Release::at(28));
        let (release, why) = decide(Ok(&info("1", "38", "v1.38.0")));
        assert_eq!(release, gantry_api::Release::default());
        assert_eq!(
            why,
            "the default: the API server runs v1.38.0, and Gantry decides as 1.28 to 1.37 (pass --emulated-version)"
        );
        let (release, _) = decide(Ok(&info("1", "27", "v1.27.3")));
        assert_eq!(release, gantry_api::Release::default());
        let (release, why) = decide(Err("no answer in 10 s".into()));
        assert_eq!(release, gantry_api::Release::default());
        assert!(
            why.contains("version could not be read (no answer in 10 s)"),
            "{why}"
        );
        // The gates given apply to the server's release.
        let gated =
            Cli::try_parse_from(["run", "--feature-gates", "PodLevelResources=false"]).unwrap();
        let (release, _) =
            release_of_server(&gated.release, "s", Ok(&info("1", "34", "v1.34.1"))).unwrap();
        assert_eq!(release.to_string(), "v1.34 (PodLevelResources=false)");
    }
}
