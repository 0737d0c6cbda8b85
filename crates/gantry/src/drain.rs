//! `gantry estimate --drain`: can these nodes be removed?

use gantry_api::decode::ClusterObjects;
use gantry_whatif::ClusterSnapshot;

pub fn run(
    nodes: &[String],
    _snapshot: ClusterSnapshot,
    _cluster: &ClusterObjects,
    _json: bool,
) -> anyhow::Result<()> {
    anyhow::bail!("--drain {}: not built yet", nodes.join(" "))
}
