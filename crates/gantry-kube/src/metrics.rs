//! The backend's own counters (binds, conflicts, watch failures and relists, leadership),
//! in a prometheus-client registry; `/metrics` serves them after the scheduler's metrics,
//! which keep kube-scheduler's names.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::watch::Kind;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabel {
    resource: &'static str,
}

pub struct KubeMetrics {
    registry: Registry,
    binds: Family<ResultLabel, Counter>,
    conflicts: Counter,
    watch_errors: Family<ResourceLabel, Counter>,
    relists: Family<ResourceLabel, Counter>,
    leader: Gauge,
}

impl Default for KubeMetrics {
    fn default() -> KubeMetrics {
        let mut registry = Registry::default();
        let binds = Family::<ResultLabel, Counter>::default();
        let conflicts = Counter::default();
        let watch_errors = Family::<ResourceLabel, Counter>::default();
        let relists = Family::<ResourceLabel, Counter>::default();
        let leader = Gauge::default();
        registry.register(
            "gantry_binds",
            "Binds written through pods/binding, by result",
            binds.clone(),
        );
        registry.register(
            "gantry_bind_conflicts",
            "Placements the binder refused because the latest cache no longer fits them",
            conflicts.clone(),
        );
        registry.register(
            "gantry_watch_errors",
            "Watch or list failures, retried with backoff",
            watch_errors.clone(),
        );
        registry.register(
            "gantry_watch_relists",
            "Complete lists of a resource (at start, and after 410 Gone)",
            relists.clone(),
        );
        registry.register(
            "gantry_leader",
            "1 while this instance holds the leader lease (or runs without election)",
            leader.clone(),
        );
        KubeMetrics {
            registry,
            binds,
            conflicts,
            watch_errors,
            relists,
            leader,
        }
    }
}

impl KubeMetrics {
    pub fn bind(&self, ok: bool) {
        let result = if ok { "bound" } else { "failed" };
        self.binds.get_or_create(&ResultLabel { result }).inc();
    }

    pub fn conflict(&self) {
        self.conflicts.inc();
    }

    pub fn conflicts(&self) -> u64 {
        self.conflicts.get()
    }

    pub fn watch_error(&self, kind: Kind) {
        let resource = kind.name();
        self.watch_errors
            .get_or_create(&ResourceLabel { resource })
            .inc();
    }

    pub fn relisted(&self, kind: Kind) {
        let resource = kind.name();
        self.relists
            .get_or_create(&ResourceLabel { resource })
            .inc();
    }

    /// Complete lists of a resource so far (by its plural, e.g. `pods`).
    pub fn relists_of(&self, resource: &str) -> u64 {
        let Some(kind) = Kind::ALL.into_iter().find(|k| k.name() == resource) else {
            return 0;
        };
        let resource = kind.name();
        self.relists
            .get_or_create(&ResourceLabel { resource })
            .get()
    }

    pub fn is_leader(&self) -> bool {
        self.leader.get() == 1
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// The counters in Prometheus text format (without the closing `# EOF`, so that the
    /// text can follow the scheduler's metrics).
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode_registry(&mut out, &self.registry).is_err() {
            tracing::error!("could not encode the backend metrics");
        }
        out
    }
}
