//! openb trace CSVs (`gantry sweep --nodes`, `--pods`): any text, read as a node trace and
//! as a pod trace. When both read (a header with both sets of columns), the workload is
//! prepared and its tuning checked, and when the experiment is small, run. Errors are
//! fine; a panic (an overflow), a hang or a blow-up is not.
#![no_main]

use std::path::Path;

use gantry_framework::plugins::openb::Policy;
use gantry_sweep::engine::{self, Workload};
use gantry_sweep::trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.csv");
    let (Ok(nodes), Ok(pods)) = (
        trace::parse_nodes(path, text),
        trace::parse_pods(path, text),
    ) else {
        return;
    };
    let Ok(w) = Workload::new(&nodes, &pods) else {
        return;
    };
    let inflation = [0.0, 0.5, 1.3, 100.0][data.len() % 4];
    if w.check_tuning(inflation).is_err() {
        return;
    }
    let Ok((order, _)) = w.arrivals(1, inflation) else {
        return;
    };
    // Within libFuzzer's timeout: filtering is tasks × nodes.
    if order.len().saturating_mul(nodes.nodes.len()) <= 200_000 {
        let policy = Policy::ALL[data.len() % Policy::ALL.len()];
        let lines = engine::run(&w, policy, 1, inflation).expect("arrivals were drawn once");
        assert_eq!(lines.len(), order.len());
    }
});
