//! `gatehouse-loadgen` CLI: parse the command line, run the requested
//! "proxy versus direct" experiment against real servers, print the report
//! (and optionally write it as JSON), and set the exit status.

#![forbid(unsafe_code)]

mod connect_cost;
mod report;
mod series;
mod stats;
mod target;

use std::path::PathBuf;
use std::process::ExitCode;

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

fn main() -> Result<ExitCode> {
    let cli = Cli::parse();
    // Sequential latency measurements: one thread avoids cross-thread wakeups.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building tokio runtime")?;
    let report = match cli.cmd {
        Cmd::ConnectCost(args) => {
            check_unique(&args.targets)?;
            let settings = connect_cost::Settings {
                iterations: args.iterations,
                rounds: args.rounds,
            };
            let report = runtime.block_on(connect_cost::run(&args.targets, &settings))?;
            emit(&report, args.json.as_ref())?;
            report
        }
    };
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
    Ok(if failing.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
