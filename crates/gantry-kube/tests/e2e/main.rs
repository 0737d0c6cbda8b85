//! `gantry run` end to end against the in-process API server (scheduling, DRA, shards,
//! start-up failures, the shadow), and the read-only clients (the live import, `gantry
//! record`): one test binary, so that the API server and the helpers are compiled once.
//! `connections.rs` stays apart: it installs a global tracing subscriber.

#[path = "../apiserver/mod.rs"]
mod apiserver;
#[path = "../common/mod.rs"]
mod common;

mod coscheduling;
mod dra;
mod gangs;
mod import;
mod node_shards;
mod record;
mod run;
mod shadow;
mod shards;
mod startup;
