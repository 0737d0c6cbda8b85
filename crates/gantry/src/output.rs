//! What the commands print goes through here, so that a failed write is an error like any
//! other: a reader that went away (`gantry explain ... | head -1`) ends the program
//! quietly, as Unix tools do, and a full disk (`> /dev/full`) is one line on stderr, never
//! a panic (`println!` panics on both).

use std::io::{self, Write};

use anyhow::Context;

/// Runs `write` against stdout and flushes it; a failure names stdout.
pub fn to_stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    write(&mut out)
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

/// Whether the error is a write to a pipe whose reader has gone.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Every output says which release it decided as: JSON objects carry it as
/// `kubernetes_release`.
pub fn with_release(
    mut value: serde_json::Value,
    release: gantry_api::Release,
) -> serde_json::Value {
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "kubernetes_release".into(),
            serde_json::Value::String(release.to_string()),
        );
    }
    value
}
