//! `gatehouse-loadgen` CLI: the load engine (`load`: virtual users against
//! any connection string), the same sampling around a load tool users
//! already run (`observe`: sysbench, pgbench), the side-by-side report of
//! their runs (`report`), a latency-adding relay (`relay`), and many idle
//! clients for the benchmark scripts to measure (`idle-clients`); parses
//! the command line and sets the exit status.

#![forbid(unsafe_code)]

mod bind;
mod html;
mod idle_clients;
mod load;
mod observe;
mod relay;
mod soak;

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

/// A run fails when more than this fraction of its requests failed.
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
    /// Open many authenticated connections (SELECT 1 on each), hold them
    /// idle for a while, then close them.
    IdleClients(Box<IdleClientsArgs>),
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
    /// An external load tool as the load (sysbench with
    /// `--report-interval=1`, pgbench with `-P 1`), its output parsed
    /// second by second while the watched processes, counted connections
    /// and proxy metrics are sampled as `load` samples them; writes the
    /// same JSON run, for `report`. Exits with the command's status.
    Observe(Box<ObserveArgs>),
    /// A mixed workload for a long time (transactions, prepared
    /// statements, connection churn, idle clients) against several
    /// targets at once, its counters written to a status file once a
    /// second; fails on any error. For `scripts/soak.sh`.
    Soak(Box<soak::SoakArgs>),
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
    /// SECS=URL: a target that joins the others from second SECS of the
    /// run on, as a replica added mid-run joins a DNS name; repeat.
    #[arg(long = "target-from", value_name = "SECS=URL", value_parser = parse_target_from)]
    targets_from: Vec<(u64, String)>,
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
    #[arg(long, value_name = "ISSUER,AUDIENCE,FILE", value_parser = load::tenants::TokenSpec::parse)]
    token: Option<load::tenants::TokenSpec>,
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
    #[command(flatten)]
    watch: WatchArgs,
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
    /// Make the connections from this local address (bind before
    /// connect); repeat to spread them over several (127.0.0.2,
    /// 127.0.0.3, …) when more than one address's ephemeral ports are
    /// needed. The target's host must then be an IP address.
    #[arg(long = "source", value_name = "IP")]
    sources: Vec<std::net::IpAddr>,
}

fn parse_conninfo(raw: &str) -> Result<tokio_postgres::Config, String> {
    tokio_postgres::Config::from_str(raw).map_err(|e| format!("bad conninfo: {e}"))
}

fn main() -> Result<ExitCode> {
    let cli = Cli::parse();
    // idle-clients runs on one thread: idle clients need little CPU once
    // their (client-side) auth is done.
    match cli.cmd {
        Cmd::IdleClients(args) => {
            let settings = idle_clients::Settings {
                config: args.target,
                count: args.count,
                concurrency: args.concurrency,
                hold: Duration::from_secs(args.hold),
                ready_file: args.ready_file,
                sources: args.sources,
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
        Cmd::Load(args) => load_main(*args),
        Cmd::Report(args) => report_main(*args),
        Cmd::Relay(args) => relay_main(&args),
        Cmd::Observe(args) => observe_main(*args),
        Cmd::Soak(args) => soak_main(&args),
    }
}

/// One thread (the proxy and the servers need the cores); exits with
/// failure when any workload counted an error.
fn soak_main(args: &soak::SoakArgs) -> Result<ExitCode> {
    let counters = runtime(1)?.block_on(soak::run(args))?;
    print!("{}", soak::table(&counters));
    let errors: u64 = counters.iter().map(|c| c.errors()).sum();
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
    let joining = args
        .targets
        .iter()
        .map(|t| (0, t))
        .chain(args.targets_from.iter().map(|(s, t)| (*s, t)));
    for (from, target) in joining {
        let mut built = load::tenants::build(target, args.tenants, tls.as_ref(), &auth, lifetime)?;
        for t in &mut built {
            t.from = Duration::from_secs(from);
        }
        tenants.extend(built);
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
        targets_added_at: args.targets_from.iter().map(|(s, _)| *s).collect(),
    };
    let watch = args.watch.build()?;
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

/// `NAME=VALUE`, split at the first `=`; the name must be non-empty and
/// without whitespace. Used as a clap value parser, hence the `String` error.
fn parse_named(raw: &str) -> Result<(String, String), String> {
    let (name, value) = raw.split_once('=').ok_or_else(|| "expected NAME=VALUE".to_string())?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("invalid name {name:?}"));
    }
    Ok((name.to_string(), value.to_string()))
}

/// `SECS=URL`: a target joining at second SECS.
fn parse_target_from(raw: &str) -> Result<(u64, String), String> {
    let (secs, url) = raw.split_once('=').ok_or_else(|| "expected SECS=URL".to_string())?;
    let secs = secs
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("{secs:?} is not a whole number of seconds"))?;
    if url.is_empty() {
        return Err("the URL is empty".to_string());
    }
    Ok((secs, url.to_string()))
}

/// `NAME=PID`.
fn parse_pid(raw: &str) -> Result<(String, u32), String> {
    let (name, value) = parse_named(raw)?;
    let pid = value
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("{name}: {value:?} is not a process id"))?;
    Ok((name, pid))
}

#[derive(Args)]
struct ObserveArgs {
    /// The target's name in the report.
    #[arg(long)]
    name: String,
    /// The round of an experiment this run is (in the report).
    #[arg(long)]
    round: Option<u32>,
    /// Also write the run, second by second, as JSON to FILE (the format
    /// of `load --json`, for `report`).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Copy every line the command prints (stdout and stderr) to FILE;
    /// without it, its output is read and dropped.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    #[command(flatten)]
    watch: WatchArgs,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
    /// The load tool's command, after `--`: sysbench with
    /// `--report-interval=1` (and `--histogram=on` for percentiles), or
    /// pgbench with `-P 1`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// What a run samples once a second besides its requests: the options
/// `load` and `observe` share, with the same meaning.
#[derive(Args)]
struct WatchArgs {
    /// NAME=PID: sample this process and its descendants once a second
    /// (CPU, RSS); repeat.
    #[arg(long = "watch", value_name = "NAME=PID", value_parser = parse_pid)]
    watch: Vec<(String, u32)>,
    /// NAME=PID: as --watch, for the proxy (reported as proxy CPU and RSS,
    /// not backend).
    #[arg(long = "watch-proxy", value_name = "NAME=PID", value_parser = parse_pid)]
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
    /// over a connection of its own (a postgres:// or mysql:// URL, or a
    /// libpq key=value string); repeat.
    #[arg(long = "count-connections", value_name = "NAME=URL", value_parser = parse_named)]
    count_connections: Vec<(String, String)>,
    /// Clock ticks per second in /proc/PID/stat (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    clk_tck: u64,
}

impl WatchArgs {
    /// The processes, servers and proxy metrics to sample, as `load_main`
    /// builds them.
    fn build(self) -> Result<load::Watch> {
        let roles = [
            (self.watch, load::procs::Role::Server),
            (self.watch_proxy, load::procs::Role::Proxy),
        ];
        let watched = roles
            .into_iter()
            .flat_map(|(list, role)| {
                list.into_iter()
                    .map(move |(name, pid)| load::procs::Watched { name, pid, role })
            })
            .collect();
        let mut servers = Vec::new();
        for (name, url) in self.count_connections {
            servers.push(load::conns::Counted::new(name, load::client::Target::parse(&url)?));
        }
        let metrics = match &self.metrics {
            Some(address) => {
                let names: Vec<String> = if self.metric.is_empty() {
                    load::metrics::DEFAULT_SERIES.iter().map(|s| s.to_string()).collect()
                } else {
                    self.metric
                };
                let series = names
                    .iter()
                    .map(|n| load::metrics::Series::parse(n))
                    .collect::<Result<Vec<_>>>()?;
                Some(load::metrics::Scraper::new(address, self.metrics_token, series))
            }
            None => None,
        };
        Ok(load::Watch {
            processes: load::procs::Sampler::new(watched, self.clk_tck),
            servers,
            metrics,
        })
    }
}

/// Runs the tool, writes the JSON and the summary; the exit status is the
/// command's (1 when it printed no per-second line).
fn observe_main(args: ObserveArgs) -> Result<ExitCode> {
    let settings = observe::Settings {
        name: args.name,
        round: args.round,
        command: args.command,
        log: args.log,
        progress: !args.quiet,
    };
    let watch = args.watch.build()?;
    let observed = runtime(2)?.block_on(observe::run(settings, watch))?;
    print!("{}", observed.table());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&observed.json())?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::from(observed.exit_code()))
}
