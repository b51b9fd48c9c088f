//! `gatehouse-testkit` CLI: bring a cluster of real PostgreSQL / MariaDB
//! servers up under a directory, inspect it, break it (kill/pause/stop/promote),
//! run SQL on it, and tear it down. State lives in `DIR/cluster.env`.

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::PathBuf;

use std::os::unix::process::CommandExt;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use gatehouse_testkit::testbed::{self, Hosts, Testbed};
use gatehouse_testkit::{Cluster, Engine, Options};

#[derive(Parser)]
#[command(
    name = "gatehouse-testkit",
    about = "Real database servers on loopback ports, for tests and scripts"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args)]
struct DirArg {
    /// Cluster directory (holds cluster.env and one directory per server).
    #[arg(long)]
    dir: PathBuf,
}

#[derive(Args)]
struct Target {
    #[command(flatten)]
    dir: DirArg,
    /// Server name: pg0, pg1, ..., my0, my1, ...
    name: String,
}

/// The testbed options of `up` (see `gatehouse_testkit::testbed`).
#[derive(Args)]
struct TestbedArgs {
    /// Each database server's CPU budget, in cores (cgroup CPU quota).
    #[arg(long, value_name = "CORES")]
    server_cpu: Option<f64>,
    /// A round trip added between the client side and every database
    /// server (for example 0.5ms): a delaying relay in front of each.
    #[arg(long, value_name = "DURATION", value_parser = testbed::parse_duration)]
    az_latency: Option<std::time::Duration>,
    /// The one-way delay varies by up to this much (order kept).
    #[arg(long, value_name = "DURATION", value_parser = testbed::parse_duration, default_value = "0us")]
    az_jitter: std::time::Duration,
    /// The relays' host budget, in cores (default 0.25).
    #[arg(long, value_name = "CORES")]
    net_cpu: Option<f64>,
    /// The relay binary (default: gatehouse-loadgen beside this one).
    #[arg(long)]
    relay_bin: Option<PathBuf>,
    /// Open a testbed even without server budgets or latency, for the
    /// hosts `host` adds (the proxy, the load generator).
    #[arg(long)]
    testbed: bool,
}

impl TestbedArgs {
    fn testbed(self) -> Result<Testbed> {
        let relay_bin = match (self.az_latency, self.relay_bin) {
            (None, _) => None,
            (Some(_), Some(bin)) => Some(bin),
            (Some(_), None) => {
                let me = std::env::current_exe()?;
                let bin = me.with_file_name("gatehouse-loadgen");
                anyhow::ensure!(bin.exists(), "--az-latency needs {} (or --relay-bin)", bin.display());
                Some(bin)
            }
        };
        Ok(Testbed {
            server_cpu: self.server_cpu,
            latency: self.az_latency,
            jitter: self.az_jitter,
            net_cpu: self.net_cpu,
            relay_bin,
            open: self.testbed,
        })
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Start servers, leave them running, print cluster.env and a table.
    Up {
        #[command(flatten)]
        dir: DirArg,
        /// Number of PostgreSQL streaming replicas.
        #[arg(long, default_value_t = 0)]
        pg_replicas: usize,
        /// Do not start PostgreSQL.
        #[arg(long)]
        no_pg: bool,
        /// Start a MariaDB primary.
        #[arg(long)]
        mysql: bool,
        /// Number of MariaDB replicas (implies --mysql).
        #[arg(long, default_value_t = 0)]
        mysql_replicas: usize,
        #[arg(long, default_value_t = 200)]
        pg_max_connections: u32,
        #[arg(long, default_value_t = 200)]
        mysql_max_connections: u32,
        /// Start every server with TLS too (certificates under DIR/tls,
        /// CA in cluster.env as GH_TLS_CA); plain connections still work.
        #[arg(long)]
        tls: bool,
        /// PostgreSQL server binaries other than the host's (for example
        /// PostgreSQL 17's, from `scripts/pg17/setup.sh`).
        #[arg(long)]
        pg_bindir: Option<PathBuf>,
        #[command(flatten)]
        testbed: TestbedArgs,
    },
    /// Run a command as a host of the cluster's testbed (the proxy, the
    /// load generator): with a CPU budget of its own, refused when the
    /// budgets would add up to more than the machine's cores. The command
    /// replaces this process (same pid).
    Host {
        #[command(flatten)]
        dir: DirArg,
        /// The host's name (proxy, client, ...).
        #[arg(long)]
        name: String,
        /// Its CPU budget in cores; without it, its CPU is only counted.
        #[arg(long, value_name = "CORES")]
        cpu: Option<f64>,
        /// The command and its arguments.
        #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// The testbed's hosts: budget, CPU used so far, throttled periods.
    Hosts(DirArg),
    /// One line per server: name, engine, role, address, up/down.
    Status(DirArg),
    /// Stop every server (dead ones are skipped).
    Down(DirArg),
    /// SIGKILL one server.
    Kill(Target),
    /// Hang one server (SIGSTOP; PostgreSQL: the postmaster and its children).
    Pause(Target),
    /// Continue a paused server (SIGCONT).
    Resume(Target),
    /// Cleanly stop one server.
    Stop(Target),
    /// Start one server again (same port and directory).
    Restart(Target),
    /// Promote a replica to primary.
    Promote(Target),
    /// Run SQL on one server and print the output.
    Sql {
        #[command(flatten)]
        target: Target,
        sql: String,
        /// PostgreSQL database to connect to.
        #[arg(long, default_value = "postgres")]
        database: String,
    },
}

fn print_table(c: &Cluster) {
    // Write errors (e.g. a closed pipe) are ignored: the cluster is fine.
    let mut out = std::io::stdout().lock();
    for s in c.servers() {
        let state = if c.is_up(&s.name) { "up" } else { "down" };
        let _ = writeln!(
            out,
            "{:<5} {:<9} {:<8} {:<16} {state}",
            s.name,
            s.engine,
            s.role,
            s.client_addr()
        );
    }
}

/// One line per testbed host: name, budget, CPU used, throttled periods;
/// and the sum of the budgets against the machine's cores.
fn print_hosts(hosts: &Hosts) -> Result<()> {
    let list = hosts.list()?;
    let mut out = std::io::stdout().lock();
    let mut sum = 0.0;
    for h in &list {
        sum += h.cpu.unwrap_or(0.0);
        let budget = h.cpu.map_or("unlimited".to_string(), |c| format!("{c:.2} cores"));
        let _ = writeln!(
            out,
            "host {:<10} {budget:<12} used {:.3} s, throttled in {} periods",
            h.name,
            h.used.as_secs_f64(),
            h.throttled_periods
        );
    }
    let _ = writeln!(out, "hosts' budgets: {sum:.2} of {} cores", testbed::cores());
    Ok(())
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Up {
            dir,
            pg_replicas,
            no_pg,
            mysql,
            mysql_replicas,
            pg_max_connections,
            mysql_max_connections,
            tls,
            pg_bindir,
            testbed,
        } => {
            if no_pg && pg_replicas > 0 {
                anyhow::bail!("--pg-replicas conflicts with --no-pg");
            }
            let opts = Options {
                pg: !no_pg,
                pg_replicas,
                pg_max_connections,
                mysql: mysql || mysql_replicas > 0,
                mysql_replicas,
                mysql_max_connections,
                tls,
                pg_bindir,
                testbed: testbed.testbed()?,
            };
            let mut c = Cluster::up(&dir.dir, &opts)?;
            c.detach();
            println!("{}", c.env_file().display());
            print_table(&c);
            if let Some(hosts) = c.testbed_hosts() {
                print_hosts(&hosts)?;
            }
        }
        Cmd::Host {
            dir,
            name,
            cpu,
            command,
        } => {
            let c = Cluster::attach(&dir.dir)?;
            let hosts = c
                .testbed_hosts()
                .context("this cluster has no testbed (start it with --server-cpu or --az-latency)")?;
            hosts.create(&name, cpu)?;
            hosts.enter(&name, std::process::id())?;
            let err = std::process::Command::new(&command[0]).args(&command[1..]).exec();
            anyhow::bail!("cannot run {}: {err}", command[0]);
        }
        Cmd::Hosts(d) => {
            let c = Cluster::attach(&d.dir)?;
            let hosts = c.testbed_hosts().context("this cluster has no testbed")?;
            print_hosts(&hosts)?;
        }
        Cmd::Status(d) => print_table(&Cluster::attach(&d.dir)?),
        Cmd::Down(d) => Cluster::attach(&d.dir)?.down()?,
        Cmd::Kill(t) => Cluster::attach(&t.dir.dir)?.kill(&t.name)?,
        Cmd::Pause(t) => Cluster::attach(&t.dir.dir)?.pause(&t.name)?,
        Cmd::Resume(t) => Cluster::attach(&t.dir.dir)?.resume(&t.name)?,
        Cmd::Stop(t) => Cluster::attach(&t.dir.dir)?.stop(&t.name)?,
        Cmd::Restart(t) => Cluster::attach(&t.dir.dir)?.restart(&t.name)?,
        Cmd::Promote(t) => Cluster::attach(&t.dir.dir)?.promote(&t.name)?,
        Cmd::Sql { target, sql, database } => {
            let c = Cluster::attach(&target.dir.dir)?;
            let out = match c.server(&target.name)?.engine {
                Engine::Postgres => c.pg_sql(&target.name, &database, &sql)?,
                Engine::Mysql => c.mysql_sql(&target.name, &sql)?,
            };
            if !out.is_empty() {
                println!("{out}");
            }
        }
    }
    Ok(())
}
