//! The simulation's integration tests in one test binary (each file a module), so that
//! the workspace links one binary for them, not fifteen. `budgets.rs` stays apart: it
//! counts allocations with a global allocator of its own.

#[path = "../step_corpus/mod.rs"]
mod step_corpus;

mod backoff_parity;
mod batch_parity;
mod burst_parity;
mod coscheduling;
mod coscheduling_parity;
mod dra_admin_access;
mod dra_binding;
mod dra_distinct;
mod dra_extended;
mod dra_partitionable;
mod dra_pre_enqueue;
mod dra_scoring;
mod dra_shared;
mod dra_state;
mod dra_taint_rules;
mod gang_parity;
mod gangs;
mod gpu;
mod group_preemption;
mod instances;
mod parity;
mod requeue;
mod scenario_dra;
mod shared_state;
mod simulate;
mod storage_parity;
mod verdict_memo;
mod verdict_memo_dra;
