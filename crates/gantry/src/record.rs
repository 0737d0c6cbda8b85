//! `gantry record`: a live cluster's history written as a trace for `gantry simulate
//! --trace` (the recorder is `gantry_kube::record`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use gantry_kube::{RecordOptions, Recorded};

use crate::live;
use crate::output::{self, Say};

#[derive(Args)]
pub struct RecordArgs {
    /// Kubeconfig to use; without it: in-cluster configuration, then `KUBECONFIG`, then
    /// `~/.kube/config`.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Where to write the trace; a name ending in `.gz` is gzip-compressed.
    #[arg(long, short)]
    output: PathBuf,
    /// Stop after this long (`90s`, `10m`, `2h`, or seconds); without it, on Ctrl-C or
    /// SIGTERM. Either way the trace is finished with its end record.
    #[arg(long, value_parser = duration)]
    duration: Option<Duration>,
}

/// `90s`, `10m`, `2h`, `1d` or plain seconds, up to 31 days.
fn duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: give a number with s, m, h or d (10m)")),
    };
    let seconds = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|s| (1..=31 * 86_400).contains(s))
        .ok_or_else(|| format!("{text:?}: from 1 s to 31 days"))?;
    Ok(Duration::from_secs(seconds))
}

/// The trace's file, compressed or not.
enum Sink {
    Plain(BufWriter<File>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
}

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Plain(file) => file.write(bytes),
            Sink::Gzip(gzip) => gzip.write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Plain(file) => file.flush(),
            Sink::Gzip(gzip) => gzip.flush(),
        }
    }
}

impl Sink {
    /// Writes what is buffered (and gzip's trailer).
    fn finish(self) -> std::io::Result<()> {
        match self {
            Sink::Plain(mut file) => file.flush(),
            Sink::Gzip(gzip) => gzip.finish()?.flush(),
        }
    }
}

pub fn run(args: RecordArgs) -> anyhow::Result<()> {
    let name = args.output.display().to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let recorded = runtime.block_on(async {
        let (client, server) = live::client(args.kubeconfig.as_ref()).await?;
        // Created once there is a cluster to record, before anything is asked of it.
        let file = File::create(&args.output).with_context(|| format!("cannot create {name}"))?;
        let file = BufWriter::with_capacity(1 << 20, file);
        let version = tokio::time::timeout(live::VERSION_TIMEOUT, client.apiserver_version())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|info| info.git_version);
        let stop = async {
            match args.duration {
                Some(duration) => tokio::select! {
                    () = tokio::time::sleep(duration) => {}
                    () = live::signalled() => {}
                },
                None => live::signalled().await,
            }
        };
        let options = RecordOptions::default();
        let mut progress = |line: &str| output::say(Say::Note, line);
        let sink = if name.ends_with(".gz") {
            Sink::Gzip(flate2::write::GzEncoder::new(
                file,
                flate2::Compression::default(),
            ))
        } else {
            Sink::Plain(file)
        };
        let (sink, recorded) = gantry_kube::record(
            &client,
            &server,
            version,
            sink,
            &options,
            stop,
            &mut progress,
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e} ({name} ends with what was recorded)"))?;
        sink.finish()
            .with_context(|| format!("cannot write {name}"))?;
        Ok::<Recorded, anyhow::Error>(recorded)
    })?;
    output::say(
        Say::Note,
        &format!(
            "wrote {name}: {} objects at the start, {} changes ({} from {} relists) over {:.1} s",
            recorded.listed,
            recorded.changes,
            recorded.from_relists,
            recorded.relists,
            recorded.duration_ms as f64 / 1e3
        ),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(duration("45"), Ok(Duration::from_secs(45)));
        for bad in ["", "0s", "10x", "-5m", "32d", "99999999999999999999d", "m"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }
}
