//! Scenario files (`--scenario`): node groups, workloads, timed events.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = gantry_sim::scenario::Scenario::parse(text, "fuzz.yaml");
    }
});
