//! MariaDB servers: mariadb-install-db, launching mariadbd with explicit
//! options (always `--no-defaults`: the system instance and /etc/mysql are
//! never used), users, GTID replication, stop/kill/promote, and SQL through
//! the `mariadb` client.
//!
//! Layout of a server directory `DIR/myN`: `data/`, `mariadb.log`,
//! `mariadbd.pid`, and the unix socket `my.sock`.

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::model::{Role, Server};
use crate::ports::socket_dir;
use crate::sys::{
    Check, Tools, find_bin, pid_alive, pid_state, read_pid, run, signal, stop_or_continue, tail, wait_dead, wait_for,
};
use crate::tls::Files;

pub(crate) const USER: &str = "root";
const REPL_USER: &str = "repl";

fn data_dir(s: &Server) -> PathBuf {
    s.dir.join("data")
}

pub(crate) fn log_file(s: &Server) -> PathBuf {
    s.dir.join("mariadb.log")
}

fn pid_file(s: &Server) -> PathBuf {
    s.dir.join("mariadbd.pid")
}

fn socket(s: &Server) -> PathBuf {
    socket_dir(&s.dir).join("my.sock")
}

pub(crate) fn running_pid(s: &Server) -> Option<u32> {
    read_pid(&pid_file(s)).filter(|pid| pid_alive(*pid))
}

/// my0 -> 1, my1 -> 2, ...
fn server_id(s: &Server) -> Result<u32> {
    let n: u32 = s
        .name
        .trim_start_matches("my")
        .parse()
        .with_context(|| format!("bad MariaDB server name {:?}", s.name))?;
    Ok(n + 1)
}

fn client_bin() -> PathBuf {
    find_bin("mariadb", &["/usr/bin/mariadb", "/usr/bin/mysql"])
}

/// Create the data directory with mariadb-install-db. Its bootstrap server
/// gets a temporary directory of its own (`DIR/myN/tmp`): two installs
/// running at once with the shared /tmp failed now and then ("Could not
/// remove temporary table '/tmp/#sql-temptable-…'", then "Unknown table
/// 'mysql.tmp_user_…'"), as when test cases bring up clusters in parallel.
pub(crate) fn init(t: &Tools, s: &Server) -> Result<()> {
    std::fs::create_dir_all(&s.dir).with_context(|| format!("mkdir {}", s.dir.display()))?;
    std::fs::create_dir_all(socket_dir(&s.dir))?;
    let tmp = s.dir.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let bin = find_bin(
        "mariadb-install-db",
        &["/usr/bin/mariadb-install-db", "/usr/bin/mysql_install_db"],
    );
    let mut cmd = Command::new(bin);
    cmd.current_dir(&s.dir)
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data_dir(s).display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .args([
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--innodb-log-file-size=16M",
        ]);
    if t.is_root() {
        cmd.arg("--user=root");
    }
    run(&mut cmd).with_context(|| format!("mariadb-install-db for {}", s.name))?;
    Ok(())
}

/// Launch mariadbd in the background and wait until it answers a ping.
/// With `tls` it also accepts TLS, with the cluster's certificate; `extra`
/// server options go last.
pub(crate) fn start(t: &Tools, s: &Server, max_conn: u32, tls: Option<&Files>, extra: &[&str]) -> Result<()> {
    if let Some(pid) = running_pid(s) {
        bail!("{} is already running (pid {pid})", s.name);
    }
    let bin = find_bin(
        "mariadbd",
        &["/usr/sbin/mariadbd", "/usr/bin/mariadbd", "/usr/libexec/mariadbd"],
    );
    let read_only = if s.role == Role::Replica { "ON" } else { "OFF" };
    let mut args = vec![
        "--no-defaults".to_string(),
        format!("--datadir={}", data_dir(s).display()),
        format!("--port={}", s.port),
        "--bind-address=127.0.0.1".into(),
        format!("--socket={}", socket(s).display()),
        format!("--pid-file={}", pid_file(s).display()),
        format!("--log-error={}", log_file(s).display()),
        format!("--server-id={}", server_id(s)?),
        "--log-bin=mysql-bin".into(),
        "--relay-log=relay-bin".into(),
        "--binlog-format=ROW".into(),
        "--gtid-domain-id=0".into(),
        "--log-slave-updates=ON".into(),
        "--innodb-buffer-pool-size=64M".into(),
        "--innodb-log-file-size=16M".into(),
        "--innodb-flush-log-at-trx-commit=0".into(),
        "--sync-binlog=0".into(),
        "--skip-name-resolve".into(),
        format!("--max-connections={max_conn}"),
        format!("--read-only={read_only}"),
        "--character-set-server=utf8mb4".into(),
        "--collation-server=utf8mb4_general_ci".into(),
    ];
    if let Some(f) = tls {
        args.push(format!("--ssl-cert={}", f.cert.display()));
        args.push(format!("--ssl-key={}", f.key.display()));
        args.push(format!("--ssl-ca={}", f.ca.display()));
    }
    if t.is_root() {
        args.push("--user=root".into());
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    // Background it through sh so it is not our child (like pg_ctl does);
    // its own process group keeps terminal signals away from it.
    let log = log_file(s);
    let mut cmd = Command::new("sh");
    cmd.current_dir(&s.dir)
        .arg("-c")
        .arg(r#""$0" "$@" </dev/null >>"$GH_LOG" 2>&1 & echo $!"#)
        .arg(bin)
        .args(&args)
        .env("GH_LOG", &log)
        .process_group(0);
    let pid: u32 = run(&mut cmd)?.parse().context("pid of mariadbd")?;

    let admin = find_bin("mariadb-admin", &["/usr/bin/mariadb-admin", "/usr/bin/mysqladmin"]);
    wait_for(&format!("{} to accept connections", s.name), &log, || {
        if !pid_alive(pid) {
            bail!("mariadbd (pid {pid}) exited");
        }
        // `ping` succeeds as soon as the server answers, even if the
        // credentials are refused. No TLS on the socket: it adds nothing
        // there, and a server started with a TLS it cannot serve (a case's
        // `restart_with`) would fail every ping.
        let mut ping = Command::new(&admin);
        ping.arg("--no-defaults")
            .arg(format!("--socket={}", socket(s).display()))
            .args(["-uroot", "--skip-ssl", "--connect-timeout=2", "ping"]);
        Ok(match run(&mut ping) {
            Ok(_) => Check::Ready,
            Err(e) => Check::NotYet(format!("{e:#}")),
        })
    })
}

/// Fresh server: set passwords, create remote root and the replication
/// user. Not binlogged, so replicas can replicate from the very start.
pub(crate) fn bootstrap(s: &Server, password: &str) -> Result<()> {
    let pw = password.replace('\'', "''");
    let users = format!(
        "SET sql_log_bin = 0;\n\
         DELETE FROM mysql.global_priv WHERE User = '';\n\
         FLUSH PRIVILEGES;\n\
         ALTER USER 'root'@'localhost' IDENTIFIED BY '{pw}';\n\
         CREATE OR REPLACE USER 'root'@'127.0.0.1' IDENTIFIED BY '{pw}';\n\
         GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;\n\
         CREATE OR REPLACE USER 'root'@'%' IDENTIFIED BY '{pw}';\n\
         GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;\n\
         CREATE OR REPLACE USER '{REPL_USER}'@'%' IDENTIFIED BY '{pw}';\n\
         GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{REPL_USER}'@'%';\n\
         FLUSH PRIVILEGES;"
    );
    let mut cmd = Command::new(client_bin());
    cmd.arg("--no-defaults")
        .arg(format!("--socket={}", socket(s).display()))
        .args(["-uroot", "-e", &users]);
    run(&mut cmd).with_context(|| format!("creating users on {}", s.name))?;
    Ok(())
}

/// Point a replica at `primary` (GTID, slave_pos) and start replicating.
pub(crate) fn replicate_from(s: &Server, primary: &Server, password: &str) -> Result<()> {
    let pw = password.replace('\'', "''");
    sql(
        s,
        password,
        &format!(
            "CHANGE MASTER TO MASTER_HOST='{}', MASTER_PORT={}, MASTER_USER='{REPL_USER}', \
             MASTER_PASSWORD='{pw}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1; \
             START SLAVE;",
            primary.host, primary.port
        ),
    )?;
    Ok(())
}

fn client(s: &Server, password: &str) -> Command {
    let mut cmd = Command::new(client_bin());
    cmd.arg("--no-defaults")
        .args(["-h", &s.host, "-P", &s.port.to_string(), "-u", USER])
        .arg(format!("-p{password}"))
        .arg("--connect-timeout=5");
    cmd
}

/// Run SQL through the mariadb client over TCP (-N -B); trimmed stdout.
pub(crate) fn sql(s: &Server, password: &str, sql: &str) -> Result<String> {
    run(client(s, password).args(["-N", "-B", "-e", sql])).with_context(|| format!("SQL on {}", s.name))
}

/// `SHOW SLAVE STATUS` as field -> value (empty if not a replica).
fn slave_status(s: &Server, password: &str) -> Result<HashMap<String, String>> {
    let out = run(client(s, password).args(["-E", "-e", "SHOW SLAVE STATUS"]))?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect())
}

/// Wait until both replication threads of `s` run.
pub(crate) fn wait_replicating(s: &Server, password: &str) -> Result<()> {
    wait_for(&format!("{} to replicate", s.name), &log_file(s), || {
        let st = match slave_status(s, password) {
            Ok(st) => st,
            Err(e) => return Ok(Check::NotYet(format!("{e:#}"))),
        };
        let field = |k: &str| st.get(k).map(String::as_str).unwrap_or("");
        if field("Slave_IO_Running") == "Yes" && field("Slave_SQL_Running") == "Yes" {
            return Ok(Check::Ready);
        }
        Ok(Check::NotYet(format!(
            "Slave_IO_Running={} Slave_SQL_Running={} Last_IO_Error={} Last_SQL_Error={}",
            field("Slave_IO_Running"),
            field("Slave_SQL_Running"),
            field("Last_IO_Error"),
            field("Last_SQL_Error"),
        )))
    })
}

/// Clean shutdown (SIGTERM, wait for exit); no-op if not running. A
/// paused server is continued first (a stopped process would not see it).
pub(crate) fn stop(s: &Server) -> Result<()> {
    let Some(pid) = running_pid(s) else {
        return Ok(());
    };
    if pid_state(pid) == Some('T') {
        resume(s)?;
    }
    signal("TERM", &[pid])?;
    wait_dead(&[pid], &format!("{} to shut down", s.name), &log_file(s))
}

/// SIGKILL mariadbd.
pub(crate) fn kill(s: &Server) -> Result<()> {
    let Some(pid) = running_pid(s) else {
        bail!("{} is not running", s.name);
    };
    signal("KILL", &[pid])?;
    wait_dead(&[pid], &format!("{} to die", s.name), &log_file(s))
}

/// SIGSTOP mariadbd (one process: every thread stops), like a machine
/// that hangs: its sockets stay open, nothing answers. Waits until stopped.
pub(crate) fn pause(s: &Server) -> Result<()> {
    let Some(pid) = running_pid(s) else {
        bail!("{} is not running", s.name);
    };
    stop_or_continue(&[pid], true, &format!("{} to stop", s.name), &log_file(s))
}

/// SIGCONT mariadbd: undoes [`pause`]. A no-op signal when not paused.
pub(crate) fn resume(s: &Server) -> Result<()> {
    let Some(pid) = running_pid(s) else {
        bail!("{} is not running", s.name);
    };
    stop_or_continue(&[pid], false, &format!("{} to continue", s.name), &log_file(s))
}

/// Turn a replica into a writable primary.
pub(crate) fn promote(s: &Server, password: &str) -> Result<()> {
    sql(s, password, "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF;")?;
    Ok(())
}

pub(crate) fn is_up(s: &Server, password: &str) -> bool {
    let mut cmd = client(s, password);
    cmd.args(["--connect-timeout=2", "-N", "-B", "-e", "SELECT 1"]);
    run(&mut cmd).is_ok_and(|out| out == "1")
}

/// Does the server log say the port was taken (so a retry may help)?
pub(crate) fn port_conflict(s: &Server) -> bool {
    let log = tail(&log_file(s), 30);
    log.contains("Address already in use") || log.contains("Can't start server: Bind")
}
