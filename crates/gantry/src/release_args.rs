//! `--emulated-version` and `--feature-gates`: the Kubernetes release Gantry decides as,
//! shared by every command that schedules.

use clap::Args;
use gantry_api::Release;

#[derive(Args, Clone, Default)]
pub struct ReleaseArgs {
    /// Decide as this Kubernetes release, MAJOR.MINOR (1.28 to 1.37; default 1.37, the
    /// newest, derived from v1.36.3's recorded rules and v1.37's gates): its default
    /// feature gates, plugins and messages.
    #[arg(long, value_name = "MAJOR.MINOR")]
    emulated_version: Option<String>,
    /// Feature gates away from the release's defaults, as kube-scheduler takes them:
    /// `Name=true|false,...` (e.g. `PodLevelResources=false`).
    #[arg(long, value_name = "NAME=BOOL,...")]
    feature_gates: Option<String>,
}

impl ReleaseArgs {
    pub fn release(&self) -> anyhow::Result<Release> {
        Ok(Release::parse(
            self.emulated_version.as_deref(),
            self.feature_gates.as_deref(),
        )?)
    }

    /// Whether `--emulated-version` was given (else a cluster's own release may decide).
    pub fn names_a_release(&self) -> bool {
        self.emulated_version.is_some()
    }

    /// The release a comparison's B decides as: `version` (else A's) with `gates` (else
    /// `--feature-gates`).
    pub fn other_release(
        &self,
        version: Option<&str>,
        gates: Option<&str>,
        a: Release,
    ) -> anyhow::Result<Release> {
        let a_version = format!("1.{}", a.minor());
        let release = Release::parse(
            Some(version.unwrap_or(&a_version)),
            gates.or(self.feature_gates.as_deref()),
        );
        // The error names B's own flag, or says A's gates were taken for B.
        release.map_err(|mut e| {
            e.flag = match (e.flag, gates) {
                ("--emulated-version", _) => "--compare-emulated-version",
                ("--feature-gates", Some(_)) => "--compare-feature-gates",
                _ => "--feature-gates (for B's release)",
            };
            e.into()
        })
    }

    /// The release `MAJOR.MINOR` with the `--feature-gates` given.
    pub fn release_at(&self, version: &str) -> anyhow::Result<Release> {
        Ok(Release::parse(
            Some(version),
            self.feature_gates.as_deref(),
        )?)
    }
}
