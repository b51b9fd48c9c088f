//! `gatehouse-testkit` CLI: bring a cluster of real PostgreSQL / MariaDB
//! servers up under a directory, inspect it, break it (kill/pause/stop/promote),
//! run SQL on it, and tear it down. State lives in `DIR/cluster.env`.

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
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
    },
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
            s.addr()
        );
    }
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
            };
            let mut c = Cluster::up(&dir.dir, &opts)?;
            c.detach();
            println!("{}", c.env_file().display());
            print_table(&c);
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
