//! PostgreSQL servers: initdb / pg_basebackup, configuration files,
//! pg_ctl start/stop/promote/reload, SIGKILL, and SQL through psql.
//!
//! Layout of a server directory `DIR/pgN` (owned by the server user):
//! `data/` (PGDATA), `postgres.log`, and the unix socket.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::model::Server;
use crate::ports::socket_dir;
use crate::sys::{
    Check, Tools, children_of, pid_alive, pid_state, read_pid, run, signal, stop_or_continue, tail, wait_dead, wait_for,
};
use crate::tls::Files;

pub(crate) const USER: &str = "postgres";

pub(crate) fn data_dir(s: &Server) -> PathBuf {
    s.dir.join("data")
}

pub(crate) fn log_file(s: &Server) -> PathBuf {
    s.dir.join("postgres.log")
}

fn pid_file(s: &Server) -> PathBuf {
    data_dir(s).join("postmaster.pid")
}

/// Pid of the running postmaster, if any.
pub(crate) fn running_pid(s: &Server) -> Option<u32> {
    read_pid(&pid_file(s)).filter(|pid| pid_alive(*pid))
}

fn make_server_dir(t: &Tools, s: &Server) -> Result<()> {
    std::fs::create_dir_all(&s.dir).with_context(|| format!("mkdir {}", s.dir.display()))?;
    t.give_to_pg(&s.dir)?;
    let sock = socket_dir(&s.dir);
    if sock != s.dir {
        std::fs::create_dir_all(&sock)?;
        t.give_to_pg(&sock)?;
    }
    Ok(())
}

/// Create a fresh primary with initdb and write its configuration.
pub(crate) fn init_primary(t: &Tools, s: &Server, password: &str, max_conn: u32, tls: Option<&Files>) -> Result<()> {
    make_server_dir(t, s)?;
    let pwfile = s.dir.join("pwfile");
    t.write_pg_file(&pwfile, password)?;
    let data = data_dir(s);
    let res = run(t
        .pg_cmd("initdb", &s.dir)
        .arg("-D")
        .arg(&data)
        .args(["-U", USER, "--auth-local=trust", "--auth-host=scram-sha-256"])
        .arg("--pwfile")
        .arg(&pwfile)
        .args(["-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"]));
    let _ = std::fs::remove_file(&pwfile);
    res.with_context(|| format!("initdb for {}", s.name))?;

    let conf = data.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf)?;
    text.push_str("\n# settings for this server, written by gatehouse-testkit\ninclude_if_exists = 'gatehouse.conf'\n");
    std::fs::write(&conf, text)?;
    let hba = "local all all trust\n\
               local replication all trust\n\
               host all all 127.0.0.1/32 scram-sha-256\n\
               host replication all 127.0.0.1/32 scram-sha-256\n";
    std::fs::write(data.join("pg_hba.conf"), hba)?;
    write_conf(t, s, max_conn, tls)
}

/// Clone `primary` into a streaming replica with pg_basebackup.
pub(crate) fn init_replica(
    t: &Tools,
    s: &Server,
    primary: &Server,
    password: &str,
    max_conn: u32,
    tls: Option<&Files>,
) -> Result<()> {
    make_server_dir(t, s)?;
    run(t
        .pg_cmd("pg_basebackup", &s.dir)
        .env("PGPASSWORD", password)
        .args(["-h", &primary.host, "-p", &primary.port.to_string(), "-U", USER])
        .arg("-D")
        .arg(data_dir(s))
        .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"]))
    .with_context(|| format!("pg_basebackup of {} from {}", s.name, primary.name))?;
    write_conf(t, s, max_conn, tls)
}

/// (Re)write `data/gatehouse.conf`: everything specific to this server,
/// including TLS (`ssl = on` with the cluster's certificate) when `tls`.
/// Replicas send `hot_standby_feedback`, as replicas that serve reads
/// usually do: without it a read on a replica that lags (the split tests
/// delay replay on purpose) is cancelled "due to conflict with recovery"
/// when the writer prunes a row version the read still needs.
pub(crate) fn write_conf(t: &Tools, s: &Server, max_conn: u32, tls: Option<&Files>) -> Result<()> {
    let sock = socket_dir(&s.dir);
    let mut text = format!(
        "port = {port}\n\
         listen_addresses = '127.0.0.1'\n\
         unix_socket_directories = '{sock}'\n\
         max_connections = {max_conn}\n\
         shared_buffers = 64MB\n\
         fsync = off\n\
         synchronous_commit = off\n\
         full_page_writes = off\n\
         wal_level = replica\n\
         max_wal_senders = 10\n\
         wal_keep_size = 256MB\n\
         hot_standby = on\n\
         hot_standby_feedback = on\n\
         password_encryption = 'scram-sha-256'\n\
         logging_collector = off\n\
         log_line_prefix = '%m [%p] %q%u@%d '\n",
        port = s.port,
        sock = sock.display(),
    );
    if let Some(f) = tls {
        let quoted = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "''"));
        text.push_str(&format!(
            "ssl = on\nssl_cert_file = {}\nssl_key_file = {}\nssl_ca_file = {}\n",
            quoted(&f.cert),
            quoted(&f.key),
            quoted(&f.ca)
        ));
    }
    t.write_pg_file(&data_dir(s).join("gatehouse.conf"), &text)
}

/// Start with pg_ctl and wait until it answers `SELECT 1`.
pub(crate) fn start(t: &Tools, s: &Server, password: &str) -> Result<()> {
    let pidf = pid_file(s);
    if let Some(pid) = read_pid(&pidf) {
        if pid_alive(pid) {
            bail!("{} is already running (pid {pid})", s.name);
        }
        // Stale lock files of a killed server; the pid may even be a
        // zombie, which PostgreSQL would take for a live postmaster.
        std::fs::remove_file(&pidf).ok();
        let sock_lock = socket_dir(&s.dir).join(format!(".s.PGSQL.{}.lock", s.port));
        if read_pid(&sock_lock).is_some_and(|p| !pid_alive(p)) {
            std::fs::remove_file(&sock_lock).ok();
        }
    }
    let log = log_file(s);
    run(t
        .pg_cmd("pg_ctl", &s.dir)
        .arg("-D")
        .arg(data_dir(s))
        .arg("-l")
        .arg(&log)
        .args(["-w", "-t", "60", "-s", "start"]))
    .map_err(|e| {
        anyhow::anyhow!(
            "starting {}: {e:#}\n--- last lines of {} ---\n{}",
            s.name,
            log.display(),
            tail(&log, 30)
        )
    })?;
    wait_for(&format!("{} to answer SELECT 1", s.name), &log, || {
        Ok(match sql(t, s, password, "postgres", "SELECT 1") {
            Ok(_) => Check::Ready,
            Err(e) => Check::NotYet(format!("{e:#}")),
        })
    })
}

/// Fast shutdown; no-op if not running. A paused server is continued
/// first (a stopped postmaster would not see the shutdown request).
pub(crate) fn stop(t: &Tools, s: &Server) -> Result<()> {
    if running_pid(s).is_none() {
        return Ok(());
    }
    if is_paused(s) {
        resume(s)?;
    }
    run(t
        .pg_cmd("pg_ctl", &s.dir)
        .arg("-D")
        .arg(data_dir(s))
        .args(["-m", "fast", "-w", "-t", "60", "-s", "stop"]))
    .with_context(|| format!("stopping {}", s.name))?;
    Ok(())
}

/// SIGKILL the postmaster and all its children (like a machine crash).
pub(crate) fn kill(s: &Server) -> Result<()> {
    let Some(pid) = running_pid(s) else {
        bail!("{} is not running", s.name);
    };
    let children = children_of(pid);
    signal("KILL", &[pid])?;
    // Best effort: a child (e.g. a backend) may have exited meanwhile.
    for child in &children {
        let _ = signal("KILL", &[*child]);
    }
    let mut pids = vec![pid];
    pids.extend(children);
    wait_dead(&pids, &format!("{} to die", s.name), &log_file(s))
}

/// SIGSTOP the postmaster, then every child of it (backends, walsenders,
/// background processes), like a machine that hangs: sockets stay open,
/// nothing answers. The postmaster is stopped first so it forks no child
/// that would be missed; children are listed again until none is new.
/// Waits until each of them is stopped.
pub(crate) fn pause(s: &Server) -> Result<()> {
    let Some(pid) = running_pid(s) else {
        bail!("{} is not running", s.name);
    };
    stop_or_continue(&[pid], true, &format!("{} postmaster to stop", s.name), &log_file(s))?;
    let mut stopped = vec![pid];
    loop {
        let new: Vec<u32> = children_of(pid).into_iter().filter(|c| !stopped.contains(c)).collect();
        if new.is_empty() {
            return Ok(());
        }
        stop_or_continue(&new, true, &format!("{} children to stop", s.name), &log_file(s))?;
        stopped.extend(new);
    }
}

/// SIGCONT the children of the postmaster, then the postmaster: undoes
/// [`pause`]. A no-op signal for a server that is not paused.
pub(crate) fn resume(s: &Server) -> Result<()> {
    let Some(pid) = running_pid(s) else {
        bail!("{} is not running", s.name);
    };
    let mut pids = children_of(pid);
    pids.push(pid);
    stop_or_continue(&pids, false, &format!("{} to continue", s.name), &log_file(s))
}

/// Is the postmaster stopped by a signal ([`pause`])?
pub(crate) fn is_paused(s: &Server) -> bool {
    running_pid(s).is_some_and(|pid| pid_state(pid) == Some('T'))
}

/// pg_ctl promote, then wait until pg_is_in_recovery() is false.
pub(crate) fn promote(t: &Tools, s: &Server, password: &str) -> Result<()> {
    run(t
        .pg_cmd("pg_ctl", &s.dir)
        .arg("-D")
        .arg(data_dir(s))
        .args(["-w", "-t", "60", "-s", "promote"]))
    .with_context(|| format!("promoting {}", s.name))?;
    wait_for(&format!("{} to leave recovery", s.name), &log_file(s), || {
        Ok(match sql(t, s, password, "postgres", "SELECT pg_is_in_recovery()") {
            Ok(v) if v == "f" => Check::Ready,
            Ok(v) => Check::NotYet(format!("pg_is_in_recovery() = {v}")),
            Err(e) => Check::NotYet(format!("{e:#}")),
        })
    })
}

/// Prepend `rule` to pg_hba.conf and reload the server if it runs.
pub(crate) fn add_hba_rule(t: &Tools, s: &Server, rule: &str) -> Result<()> {
    let path = data_dir(s).join("pg_hba.conf");
    let old = std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    std::fs::write(&path, format!("{}\n{old}", rule.trim_end()))?;
    if running_pid(s).is_some() {
        run(t
            .pg_cmd("pg_ctl", &s.dir)
            .arg("-D")
            .arg(data_dir(s))
            .args(["-s", "reload"]))
        .with_context(|| format!("reloading {}", s.name))?;
    }
    Ok(())
}

fn psql(t: &Tools, s: &Server, password: &str, database: &str) -> Command {
    let mut cmd = Command::new(t.pg_bin("psql"));
    cmd.env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "5")
        .env_remove("PGSERVICE")
        .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"])
        .args(["-h", &s.host, "-p", &s.port.to_string(), "-U", USER, "-d", database]);
    cmd
}

/// Run SQL through psql over TCP; trimmed stdout.
pub(crate) fn sql(t: &Tools, s: &Server, password: &str, database: &str, sql: &str) -> Result<String> {
    run(psql(t, s, password, database).arg("-c").arg(sql)).with_context(|| format!("SQL on {}", s.name))
}

pub(crate) fn is_up(t: &Tools, s: &Server, password: &str) -> bool {
    let mut cmd = psql(t, s, password, "postgres");
    cmd.env("PGCONNECT_TIMEOUT", "2").args(["-c", "SELECT 1"]);
    run(&mut cmd).is_ok_and(|out| out == "1")
}

/// Wait until the primary reports `n` replicas in state 'streaming'.
pub(crate) fn wait_streaming(t: &Tools, primary: &Server, password: &str, n: usize) -> Result<()> {
    let q = "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'";
    wait_for(
        &format!("{n} streaming replica(s) on {}", primary.name),
        &log_file(primary),
        || {
            Ok(match sql(t, primary, password, "postgres", q) {
                Ok(v) if v.parse::<usize>().is_ok_and(|c| c >= n) => Check::Ready,
                Ok(v) => Check::NotYet(format!("{v} streaming")),
                Err(e) => Check::NotYet(format!("{e:#}")),
            })
        },
    )
}

/// Does the server log say the port was taken (so a retry may help)?
pub(crate) fn port_conflict(s: &Server) -> bool {
    let log = tail(&log_file(s), 30);
    log.contains("could not bind") || log.contains("Address already in use")
}
