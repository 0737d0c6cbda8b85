//! KubeSchedulerConfiguration files (`--config`).
#![no_main]

use gantry_framework::config::SchedulerConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = SchedulerConfig::parse(text, "fuzz.yaml");
    }
});
