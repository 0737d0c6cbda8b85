//! Traces `gantry record` wrote (`gantry simulate --trace`): the reader (gzip or plain,
//! order and count checks) and the replay's decoding of every change.
#![no_main]

use gantry_api::Release;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let input = std::io::Cursor::new(data.to_vec());
    let _ = gantry_sim::replay::read(input, "fuzz.jsonl", Release::default(), &|name| {
        name == "default-scheduler"
    });
});
