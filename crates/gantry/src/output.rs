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
