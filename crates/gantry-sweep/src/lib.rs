//! `gantry sweep`: openb trace import (the engine follows).

pub mod trace;

pub use trace::{NodeTrace, PodTrace, TraceError};
