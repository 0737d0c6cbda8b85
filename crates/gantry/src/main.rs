//! The `gantry` command line.
//!
//! It owns flags, files, output and reports, and may depend on every crate; no crate
//! depends on it.

mod bench;
mod compare;
mod counterfactual;
mod drain;
mod estimate;
mod estimate_gang;
mod estimate_gangs;
mod explain;
mod explain_gang;
mod live;
mod load;
mod output;
mod record;
mod release_args;
mod replay;
mod report;
mod run;
mod simulate;
mod sweep;

use std::io::IsTerminal;

use clap::{Parser, Subcommand, ValueEnum};

#[global_allocator]
static ALLOCATOR: gantry_sim::alloc_counter::CountingAllocator =
    gantry_sim::alloc_counter::CountingAllocator;

#[derive(Parser)]
#[command(
    name = "gantry",
    version,
    about = "A Kubernetes-compatible pod scheduler and scheduling simulator"
)]
struct Cli {
    /// How log lines are written to stderr: `text` (coloured only on a terminal), or
    /// `json` (one object per line, for log collectors).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Without RUST_LOG, what kube-scheduler prints at its default verbosity: Gantry's own
/// info lines (`run`'s start and stop, leases, binds that failed) and every warning
/// (objects skipped). kube-runtime's watcher dumps a 403 it meets as a warning: Gantry
/// says each watch failure itself, in one line naming what to grant.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,gantry_kube=info,gantry::run=info,kube_runtime::watcher=error",
        )
    });
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        // Colour codes only where a person reads them: not in files, pipes, collectors.
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().with_ansi(false).init(),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the scheduler over a cluster (built-in, from manifests, or a scenario) and report.
    Simulate(simulate::SimulateArgs),
    /// Run a built-in benchmark and print its figures.
    Bench(bench::BenchArgs),
    /// Explain one pod: every Filter plugin's verdict on every node, the scores, and
    /// where the scheduler would place it (or why it stays pending).
    Explain(explain::ExplainArgs),
    /// Schedule a real cluster's pods (those naming Gantry's scheduler name) through the
    /// Kubernetes API, alone, as leader-elected replicas, or as shards.
    Run(run::RunArgs),
    /// Capacity questions on forks of the cluster: how many nodes of a template pending
    /// pods need (--node-template), whether nodes can be drained (--drain), whether a
    /// gang of pods fits at once (--gang).
    Estimate(estimate::EstimateArgs),
    /// Record a live cluster's history (read-only) as a trace for `simulate --trace`.
    Record(record::RecordArgs),
    /// The FGD paper's experiments: policies × openb traces × seeds, written as the
    /// published allocation and fragmentation curves (shards, merges, a report page).
    Sweep(sweep::SweepArgs),
}

/// Errors are the user's to read: one line with its causes, never a backtrace. A reader
/// that closed stdout early (`| head`) is not an error: the program stops quietly.
fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    output::set_json_logs(matches!(cli.log_format, LogFormat::Json));
    // `run` and `record` write nothing to stdout; every other command's answer is there.
    let writes_stdout = !matches!(cli.command, Command::Run(_) | Command::Record(_));
    let result = match cli.command {
        _ if writes_stdout && let Err(closed) = output::stdout_is_open() => Err(closed),
        Command::Simulate(args) => simulate::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Run(args) => run::run(args),
        Command::Estimate(args) => estimate::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Record(args) => record::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) if output::is_broken_pipe(&error) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            output::say(output::Say::Error, &one_line(&error));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, each cause once: some libraries' messages
/// already end with their cause's text, which the chain would then print again.
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_said_is_not_said_again() {
        let error = anyhow::anyhow!("bad base64: Invalid symbol 33")
            .context("failed to load certificate authority: bad base64: Invalid symbol 33")
            .context("--kubeconfig kc.yaml");
        assert_eq!(
            one_line(&error),
            "--kubeconfig kc.yaml: failed to load certificate authority: bad base64: Invalid symbol 33"
        );
        let multi = anyhow::anyhow!("line one\nline two").context("reading x");
        assert_eq!(one_line(&multi), "reading x: line one line two");
    }
}
