//! Running the built `gantry` binary as a user would.

#![allow(dead_code)] // each test file uses its own share of these

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A command for the binary, run from the repository's root.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gantry"));
    command.args(args).current_dir(repo_root());
    command
}

pub fn gantry(args: &[&str]) -> Output {
    command(args).output().expect("the binary runs")
}

/// Runs the binary and fails the test if it has not ended within `limit`: the cases
/// that used to loop forever.
pub fn gantry_within(args: &[&str], limit: Duration) -> Output {
    let child = command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    wait_within(child, limit, args)
}

pub fn wait_within(mut child: Child, limit: Duration, what: &[&str]) -> Output {
    let start = Instant::now();
    while child.try_wait().expect("waiting works").is_none() {
        if start.elapsed() > limit {
            child.kill().ok();
            panic!("gantry {what:?} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("the output is readable")
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails, showing the whole stdout, unless it contains `needle`.
pub fn assert_stdout_contains(o: &Output, needle: &str) {
    let out = stdout(o);
    assert!(out.contains(needle), "{needle:?} not in stdout:\n{out}");
}

/// Fails, showing the whole stderr, unless it contains `needle`.
pub fn assert_stderr_contains(o: &Output, needle: &str) {
    let err = stderr(o);
    assert!(err.contains(needle), "{needle:?} not in stderr:\n{err}");
}

/// Writes `text` into `dir/file`; returns the path as a string.
pub fn write(dir: &Path, file: &str, text: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}
