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

/// Fails when stdout was closed at start (`gantry simulate >&-`), where Unix tools say
/// `write error: Bad file descriptor`. Rust's runtime reopens a closed stdout on
/// `/dev/null` before `main`, read-write, so writes would vanish and the command end 0
/// having written nothing. A shell's `> /dev/null` opens it write-only and passes. Read from
/// `/proc`; where that is not mounted, nothing is refused.
pub fn stdout_is_open() -> anyhow::Result<()> {
    const ACCESS_MODE: u32 = 0o3;
    const READ_WRITE: u32 = 0o2;
    let reopened_by_runtime = std::fs::read_link("/proc/self/fd/1")
        .is_ok_and(|target| target == std::path::Path::new("/dev/null"))
        && std::fs::read_to_string("/proc/self/fdinfo/1").is_ok_and(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("flags:"))
                .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
                .is_some_and(|flags| flags & ACCESS_MODE == READ_WRITE)
        });
    if reopened_by_runtime {
        anyhow::bail!("cannot write to stdout: it was closed when Gantry started");
    }
    Ok(())
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

/// Whether stderr carries JSON log objects (`--log-format json`), set once at start.
static JSON_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_json_logs(on: bool) {
    JSON_LOGS.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// How loud a line for the person reading stderr is.
#[derive(Clone, Copy)]
pub enum Say {
    Note,
    Warning,
    Error,
}

/// A line on stderr for the person running Gantry: `note: ...`, `warning: ...` or `error:
/// ...` as text, or with `--log-format json` a log object like every other line there, so
/// that a log collector reads stderr as JSON to its last line.
pub fn say(how: Say, text: &str) {
    if JSON_LOGS.load(std::sync::atomic::Ordering::Relaxed) {
        let level = match how {
            Say::Note => "INFO",
            Say::Warning => "WARN",
            Say::Error => "ERROR",
        };
        let line = serde_json::json!({
            "timestamp": timestamp(),
            "level": level,
            "fields": {"message": text},
            "target": "gantry",
        });
        eprintln!("{line}");
    } else {
        let prefix = match how {
            Say::Note => "note",
            Say::Warning => "warning",
            Say::Error => "error",
        };
        eprintln!("{prefix}: {text}");
    }
}

/// Now as RFC 3339 in UTC, as the JSON log lines write it.
fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_micros()
    )
}

#[cfg(test)]
mod say_tests {
    #[test]
    fn timestamps_are_rfc3339() {
        let t = super::timestamp();
        assert_eq!(t.len(), "2026-12-03T10:13:23.123456Z".len(), "{t}");
        assert!(
            t.starts_with("20") && t.ends_with('Z') && t.as_bytes()[10] == b'T',
            "{t}"
        );
    }
}
