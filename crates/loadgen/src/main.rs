//! `gatehouse-loadgen` CLI: parse the command line, run the requested
//! "proxy versus direct" experiment against real servers, print the report
//! (and optionally write it as JSON), and set the exit status; or generate a
//! load (many idle clients) for the benchmark scripts to measure.

#![forbid(unsafe_code)]

mod connect_cost;
mod idle_clients;
mod report;
mod series;
mod stats;
mod target;

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use crate::report::Report;
use crate::target::Target;

/// A run fails when more than this fraction of any row's iterations failed.
const MAX_FAILURE_RATE: f64 = 0.10;

#[derive(Parser)]
#[command(
    name = "gatehouse-loadgen",
    about = "Reference experiments: direct versus through Gatehouse"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Cost of a full connect (startup+auth, SELECT 1, close) and of one
    /// prepared SELECT 1 on an open connection, per PostgreSQL target.
    ConnectCost(ConnectCostArgs),
    /// Open many authenticated connections (SELECT 1 on each), hold them
    /// idle for a while, then close them.
    IdleClients(Box<IdleClientsArgs>),
}

#[derive(Args)]
struct ConnectCostArgs {
    /// NAME=CONNINFO (libpq key=value string); repeat. The first target is
    /// the baseline the others are compared to.
    #[arg(long = "target", value_name = "NAME=CONNINFO", required = true,
          value_parser = target::parse_target)]
    targets: Vec<Target>,
    /// Sequential iterations per measurement, per target, per round.
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// Round-robin rounds over the targets; samples are pooled across rounds.
    #[arg(long, default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct IdleClientsArgs {
    /// libpq key=value connection string.
    #[arg(long, value_name = "CONNINFO", value_parser = parse_conninfo)]
    target: tokio_postgres::Config,
    /// Connections to open.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    count: u32,
    /// Seconds to keep the connections open once all attempts finished.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    hold: u64,
    /// Connection attempts in flight at most.
    #[arg(long, default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: u32,
    /// Write the number of opened connections to FILE once all attempts
    /// finished (before the hold).
    #[arg(long, value_name = "FILE")]
    ready_file: Option<PathBuf>,
}

fn parse_conninfo(raw: &str) -> Result<tokio_postgres::Config, String> {
    tokio_postgres::Config::from_str(raw).map_err(|e| format!("bad conninfo: {e}"))
}

fn main() -> Result<ExitCode> {
    let cli = Cli::parse();
    // One thread: sequential latency measurements avoid cross-thread wakeups,
    // and idle clients need little CPU once their (client-side) auth is done.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building tokio runtime")?;
    match cli.cmd {
        Cmd::ConnectCost(args) => {
            check_unique(&args.targets)?;
            let settings = connect_cost::Settings {
                iterations: args.iterations,
                rounds: args.rounds,
            };
            let report = runtime.block_on(connect_cost::run(&args.targets, &settings))?;
            emit(&report, args.json.as_ref())?;
            Ok(report_status(&report))
        }
        Cmd::IdleClients(args) => {
            let settings = idle_clients::Settings {
                config: args.target,
                count: args.count,
                concurrency: args.concurrency,
                hold: Duration::from_secs(args.hold),
                ready_file: args.ready_file,
            };
            let local = tokio::task::LocalSet::new();
            let outcome = local.block_on(&runtime, idle_clients::run(&settings))?;
            println!(
                "idle-clients: requested={} opened={} failed={} lost_during_hold={}",
                args.count, outcome.opened, outcome.failed, outcome.lost
            );
            if let Some(err) = &outcome.first_error {
                println!("idle-clients: first error: {err}");
            }
            Ok(if outcome.failed == 0 && outcome.lost == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// Print the rows failing too often; failure status when there are any.
fn report_status(report: &Report) -> ExitCode {
    let failing = report.failing_rows(MAX_FAILURE_RATE);
    for row in &failing {
        eprintln!(
            "error: {} {}: {}/{} iterations failed (over {:.0}%)",
            row.target,
            row.measurement,
            row.series.errors,
            row.series.attempts,
            MAX_FAILURE_RATE * 100.0
        );
    }
    if failing.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn check_unique(targets: &[Target]) -> Result<()> {
    for (i, t) in targets.iter().enumerate() {
        if targets[..i].iter().any(|o| o.name == t.name) {
            bail!("target name {:?} given twice", t.name);
        }
    }
    Ok(())
}

fn emit(report: &Report, json: Option<&PathBuf>) -> Result<()> {
    print!("{}", report.render_text());
    if let Some(path) = json {
        std::fs::write(path, report::json::render(report)).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
