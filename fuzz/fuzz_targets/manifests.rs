//! Kubernetes manifests (`--cluster`, `--pods`, `--pod`): any bytes, streamed as a file
//! is, then admitted as a cluster. Errors are fine; a panic, a hang or a blow-up is not.
#![no_main]

use gantry_api::decode::{ClusterObjects, InputLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut objects = ClusterObjects::default();
    let limits = InputLimits {
        max_bytes: 1 << 20,
    };
    if objects.read(data, "fuzz.yaml", &limits).is_ok() {
        let _ = objects.admit();
    }
});
