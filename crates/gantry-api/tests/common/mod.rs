//! What the decoding tests share.

use gantry_api::Release;
use gantry_api::decode::ClusterObjects;

/// `yaml` decoded as `release`'s API server would take it, or the error's line.
pub fn decode(yaml: &str, release: Release) -> Result<ClusterObjects, String> {
    let mut objects = ClusterObjects::for_release(release);
    objects
        .decode_more(yaml, "input.yaml")
        .map_err(|e| e.to_string())?;
    Ok(objects)
}
