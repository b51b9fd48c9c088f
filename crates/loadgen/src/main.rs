//! `gatehouse-loadgen` CLI: parse the command line, run the requested
//! "proxy versus direct" experiment against real servers, print the report
//! (and optionally write it as JSON), and set the exit status; or generate a
//! load (many idle clients) for the benchmark scripts to measure; or run
//! the load engine (`load`: virtual users against any connection string).

#![forbid(unsafe_code)]

mod connect_cost;
mod html;
mod idle_clients;
mod load;
mod relay;
mod report;
mod series;
mod stats;
mod target;
mod tenant_storm;

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
    /// Many tenants, each with its own database: virtual users connect as a
    /// random tenant, run SELECT current_database(), and disconnect, as fast
    /// as they can for a fixed time, per target.
    TenantStorm(Box<TenantStormArgs>),
    /// Virtual users spawned at a rate up to a count, each looping one
    /// request (a query on its connection, or connect-query-disconnect)
    /// with think time, against any PostgreSQL or MySQL connection string;
    /// a live progress line, then latencies, requests/s and failures by
    /// error code, and the watched processes' CPU and RSS.
    Load(Box<LoadArgs>),
    /// Runs of `load` side by side in one self-contained HTML page: per
    /// target (the first the baseline) its rounds merged, ratios, failures
    /// by code, and charts over time; the summary also as JSON and text.
    Report(Box<html::ReportArgs>),
    /// A TCP relay that delays every chunk by a one-way delay (and
    /// jitter), each direction in order, so a server on this machine
    /// answers as one a few milliseconds away; runs until SIGINT/SIGTERM.
    Relay(relay::RelayArgs),
}

#[derive(Args)]
struct LoadArgs {
    /// `postgres://user:pw@host:port/db`, a libpq `key=value` string, or
    /// `mysql://user:pw@host:port/db`; with --tenants, `{tenant}` in it
    /// stands for each tenant's name (`mysql://{tenant}:pw-{tenant}@h/{tenant}`).
    /// Repeat for several servers (replicas): each connection goes to a
    /// random one, as a DNS name over several addresses spreads them.
    #[arg(long = "target", required = true)]
    targets: Vec<String>,
    /// The target's name in the report.
    #[arg(long, default_value = "target")]
    name: String,
    /// Tenants t000, t001, … filled into the target's `{tenant}`; each
    /// request (or each user, on its own connection) picks one at random.
    #[arg(long, default_value_t = 0)]
    tenants: u32,
    /// ISSUER,AUDIENCE,HS256_SECRET_FILE: log in with a token minted per
    /// tenant (subject its user, database its database) before the run,
    /// instead of the target's password.
    #[arg(long, value_name = "ISSUER,AUDIENCE,FILE", value_parser = parse_token_spec)]
    token: Option<tenant_storm::spec::TokenSpec>,
    /// Connect with TLS, the server's certificate verified against the CA
    /// certificates in FILE (PEM).
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// The round of an experiment this run is (in the report).
    #[arg(long)]
    round: Option<u32>,
    /// Virtual users at full load.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    users: u32,
    /// Users started per second (0: all at once).
    #[arg(long, default_value_t = 10.0)]
    spawn_rate: f64,
    /// Length of the run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Pause after each request, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    think_ms: u64,
    /// Connect, query and disconnect in each request.
    #[arg(long)]
    connect_each: bool,
    /// The request's SQL; `{tenant}` is the tenant's name and `{ids:K:N}`
    /// K distinct random integers in 1..=N, comma-separated.
    #[arg(long, default_value = "SELECT 1")]
    sql: String,
    /// Seconds before a request counts as failed (`timeout`).
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// NAME=PID: sample this process and its descendants once a second
    /// (CPU, RSS); repeat.
    #[arg(long = "watch", value_name = "NAME=PID", value_parser = tenant_storm::spec::parse_pid)]
    watch: Vec<(String, u32)>,
    /// NAME=PID: as --watch, for the proxy (reported as proxy CPU and RSS,
    /// not backend).
    #[arg(long = "watch-proxy", value_name = "NAME=PID", value_parser = tenant_storm::spec::parse_pid)]
    watch_proxy: Vec<(String, u32)>,
    /// HOST:PORT of the proxy's admin API: read its /metrics once a second.
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<String>,
    /// A series of the proxy's metrics to sample, `name` or
    /// `name{label="value"}`, summed over its other labels; repeat
    /// (default: clients, pool connections leased and idle, leases, pinned
    /// and waiting sessions).
    #[arg(long = "metric", value_name = "SERIES")]
    metric: Vec<String>,
    /// The admin API's bearer token, if it requires one.
    #[arg(long, value_name = "TOKEN")]
    metrics_token: Option<String>,
    /// NAME=URL: count this server's client connections once a second,
    /// over a connection of its own (URL as --target); repeat.
    #[arg(long = "count-connections", value_name = "NAME=URL", value_parser = tenant_storm::spec::parse_named)]
    count_connections: Vec<(String, String)>,
    /// Clock ticks per second in /proc/PID/stat (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    clk_tck: u64,
    /// Worker threads of the client.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    threads: u32,
    /// Also write the run, second by second, as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
    /// Exit with failure when more than this fraction of requests failed.
    #[arg(long, default_value_t = MAX_FAILURE_RATE)]
    max_failure_rate: f64,
}

#[derive(Args)]
struct TenantStormArgs {
    /// NAME=CONNINFO_TEMPLATE: a libpq key=value string where `{tenant}` is
    /// replaced by the tenant name (`user={tenant} dbname={tenant}`); repeat.
    /// The first target is the baseline.
    #[arg(long = "target", value_name = "NAME=TEMPLATE", required = true,
          value_parser = tenant_storm::spec::parse_target)]
    targets: Vec<(String, String)>,
    /// NAME=TEMPLATE: the target's clients log in with this password
    /// (`pw-{tenant}`).
    #[arg(long = "target-password", value_name = "NAME=TEMPLATE",
          value_parser = tenant_storm::spec::parse_named)]
    passwords: Vec<(String, String)>,
    /// NAME=ISSUER,AUDIENCE,HS256_SECRET_FILE: the target's clients log in
    /// with a token (sub = user, db = database), one minted per tenant
    /// before the run and valid for all of it.
    #[arg(long = "target-token", value_name = "NAME=ISSUER,AUDIENCE,FILE",
          value_parser = tenant_storm::spec::parse_token)]
    tokens: Vec<(String, tenant_storm::spec::TokenSpec)>,
    /// NAME=PID: report this process's CPU per 1,000 connections while the
    /// target runs (the proxy in front of it).
    #[arg(long = "target-pid", value_name = "NAME=PID",
          value_parser = tenant_storm::spec::parse_pid)]
    pids: Vec<(String, u32)>,
    /// Tenants t000, t001, ...
    #[arg(long, default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..))]
    tenants: u32,
    /// Concurrent virtual users.
    #[arg(long, default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..))]
    clients: u32,
    /// Duration of each target's phase, per round.
    #[arg(long, value_name = "SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Rounds; targets alternate within each (A B A B).
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Seconds to pause after each phase.
    #[arg(long, value_name = "SECS", default_value_t = 2)]
    pause: u64,
    /// Seconds before one connect+query+close attempt counts as failed.
    #[arg(long, value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    attempt_timeout: u64,
    /// Worker threads of the client (1: a single-threaded runtime).
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    threads: u32,
    /// Keep FILE holding the running phase (`NAME ROUND`), `idle` between
    /// phases and `done` at the end, for outside samplers.
    #[arg(long, value_name = "FILE")]
    phase_file: Option<PathBuf>,
    /// Clock ticks per second in /proc/PID/stat (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..))]
    clk_tck: u64,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
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
    // connect-cost and idle-clients run on one thread: sequential latency
    // measurements avoid cross-thread wakeups,
    // and idle clients need little CPU once their (client-side) auth is done.
    match cli.cmd {
        Cmd::ConnectCost(args) => {
            check_unique(&args.targets)?;
            let settings = connect_cost::Settings {
                iterations: args.iterations,
                rounds: args.rounds,
            };
            let report = runtime(1)?.block_on(connect_cost::run(&args.targets, &settings))?;
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
            let outcome = local.block_on(&runtime(1)?, idle_clients::run(&settings))?;
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
        Cmd::TenantStorm(args) => tenant_storm_main(*args),
        Cmd::Load(args) => load_main(*args),
        Cmd::Report(args) => report_main(*args),
        Cmd::Relay(args) => relay_main(&args),
    }
}

/// One thread: the relay's work is timers and copies.
fn relay_main(args: &relay::RelayArgs) -> Result<ExitCode> {
    runtime(1)?.block_on(relay::serve(args))?;
    Ok(ExitCode::SUCCESS)
}

fn report_main(args: html::ReportArgs) -> Result<ExitCode> {
    let runs = html::read_runs(&args.runs)?;
    let report = html::render(&args.title, &args.config, runs)?;
    std::fs::write(&args.out, &report.html).with_context(|| format!("writing {}", args.out.display()))?;
    if let Some(path) = &args.json_out {
        let text = serde_json::to_string_pretty(&report.summary)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    print!("{}", report.text);
    println!("report: {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

fn load_main(args: LoadArgs) -> Result<ExitCode> {
    let tls = args
        .tls_ca
        .as_deref()
        .map(load::client::Tls::from_ca_file)
        .transpose()?;
    let auth = match args.token {
        Some(spec) => load::tenants::Auth::Token(spec),
        None => load::tenants::Auth::Password,
    };
    let lifetime = Duration::from_secs(args.seconds + args.timeout);
    let mut tenants = Vec::new();
    for target in &args.targets {
        tenants.extend(load::tenants::build(
            target,
            args.tenants,
            tls.as_ref(),
            &auth,
            lifetime,
        )?);
    }
    let sql = load::scenario::Sql::parse(&args.sql)?;
    let plan = load::Plan {
        users: args.users,
        spawn_rate: args.spawn_rate,
        duration: Duration::from_secs(args.seconds),
        think: Duration::from_millis(args.think_ms),
        connect_each: args.connect_each,
        sql: args.sql,
        timeout: Duration::from_secs(args.timeout),
        tenants: args.tenants,
        auth: auth.name(),
        tls: tls.is_some(),
        round: args.round,
    };
    let roles = [
        (args.watch, load::procs::Role::Server),
        (args.watch_proxy, load::procs::Role::Proxy),
    ];
    let watched = roles
        .into_iter()
        .flat_map(|(list, role)| {
            list.into_iter()
                .map(move |(name, pid)| load::procs::Watched { name, pid, role })
        })
        .collect();
    let mut servers = Vec::new();
    for (name, url) in args.count_connections {
        servers.push(load::conns::Counted::new(name, load::client::Target::parse(&url)?));
    }
    let scraper = match &args.metrics {
        Some(address) => {
            let names: Vec<String> = if args.metric.is_empty() {
                load::metrics::DEFAULT_SERIES.iter().map(|s| s.to_string()).collect()
            } else {
                args.metric.clone()
            };
            let series = names
                .iter()
                .map(|n| load::metrics::Series::parse(n))
                .collect::<Result<Vec<_>>>()?;
            Some(load::metrics::Scraper::new(address, args.metrics_token.clone(), series))
        }
        None => None,
    };
    let watch = load::Watch {
        processes: load::procs::Sampler::new(watched, args.clk_tck),
        servers,
        metrics: scraper,
    };
    let report = runtime(args.threads)?.block_on(load::run(&args.name, tenants, sql, plan, watch, !args.quiet));
    print!("{}", report.table());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report.json())?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    let rate = if report.measured.requests == 0 {
        1.0
    } else {
        report.failures() as f64 / report.measured.requests as f64
    };
    Ok(if rate <= args.max_failure_rate {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn tenant_storm_main(args: TenantStormArgs) -> Result<ExitCode> {
    let specs = tenant_storm::spec::assemble(args.targets, args.passwords, args.tokens, args.pids)
        .map_err(anyhow::Error::msg)?;
    let settings = tenant_storm::Settings {
        tenants: args.tenants,
        clients: args.clients,
        duration: Duration::from_secs(args.seconds),
        rounds: args.rounds,
        pause: Duration::from_secs(args.pause),
        attempt_timeout: Duration::from_secs(args.attempt_timeout),
        phase_file: args.phase_file,
        clk_tck: args.clk_tck,
    };
    let targets = tenant_storm::prepare(specs, &settings)?;
    let report = runtime(args.threads)?.block_on(tenant_storm::run(&targets, &settings))?;
    print!("{}", report.render_text());
    if let Some(path) = &args.json {
        std::fs::write(path, report.render_json()).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut status = ExitCode::SUCCESS;
    for row in &report.rows {
        if row.series.failure_rate() > MAX_FAILURE_RATE || row.series.samples.len() == 0 {
            eprintln!(
                "error: {}: {}/{} attempts failed (over {:.0}%, or none succeeded)",
                row.target,
                row.series.errors,
                row.series.attempts,
                MAX_FAILURE_RATE * 100.0
            );
            status = ExitCode::FAILURE;
        }
    }
    Ok(status)
}

/// A tokio runtime: single-threaded for 1, else with `threads` workers.
fn runtime(threads: u32) -> Result<tokio::runtime::Runtime> {
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads as usize)
            .enable_all()
            .build()
    }
    .context("building tokio runtime")
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

/// `--token ISSUER,AUDIENCE,HS256_SECRET_FILE` (clap's value parser).
fn parse_token_spec(raw: &str) -> Result<tenant_storm::spec::TokenSpec, String> {
    tenant_storm::spec::parse_token(&format!("token={raw}")).map(|(_, spec)| spec)
}
