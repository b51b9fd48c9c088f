//! MariaDB failover: the writer killed and the replica promoted under idle
//! and writing mysql_async clients, and the old writer restarted writable
//! beside the new one (split brain: fenced). The planned switchover is in
//! `crate::switchover`, with PostgreSQL's.
//!
//! A trigger writes the port of the server that stored each row (`@@port`)
//! into it, so where each write landed is checked on the servers
//! themselves; `SELECT @@port` through the proxy shows which server
//! answers a session now.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_proto_mysql::auth::native_password;
use gatehouse_testkit::{Cluster, Options};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use crate::Ctx;
use crate::common::{
    ATTEMPT_LIMIT, Attempt, Backends, FAILOVER_HOLD, Finished, HEALTH_KEYS, INTERVAL, LOOP_PAUSE, Log, Loopers,
    Outcome, Problems, Rig, all_errors, begin, first_ok_after, record, wait_until,
};
use crate::replica::{ReplicaLoss, lose_a_replica};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "mysql::idle_clients_survive_writer_loss",
            idle_clients_survive_writer_loss,
        ),
        ("mysql::old_writer_restarted_writable_is_fenced", old_writer_is_fenced),
        (
            "mysql::a_transaction_lost_with_its_writer_needs_a_rollback",
            lost_transaction,
        ),
        ("mysql::reads_leave_a_lost_replica_and_come_back", replica_loss),
        (
            "mysql::switchover_moves_writes_without_errors",
            crate::switchover::mysql,
        ),
    ]
}

pub(crate) const ENGINE: &str = "mysql";

/// The configuration of a case's proxy: one cluster over the servers
/// (replicas listed first: roles come from probing, never from the
/// order), a read_write endpoint "rw", a read_only endpoint "ro", the
/// admin API, tenant alice; and `extra` endpoints.
fn config(cluster: &Cluster, dir: &std::path::Path, extra: &str) -> String {
    let mut servers: Vec<String> = cluster.servers().iter().map(|s| format!("\"{}\"", s.addr())).collect();
    servers.reverse();
    format!(
        r#"
[proxy]
log_filter = "warn"
login_timeout = "5s"

[[clusters]]
name = "main"
engine = "mysql"
backends = [{backends}]
monitor_secret = "superuser"
# The switchover case's promote step (crate::switchover::command).
switchover_command = "{switch}"
{HEALTH_KEYS}

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"
pool_mode = "transaction"

[[endpoints]]
name = "ro"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_only"
{extra}
[admin]
listen = "127.0.0.1:0"
token_file = "{d}/admin.token"

[[tenants]]
name = "alice"
databases = ["app1"]
secret = "owner"
mysql_native_password = "{hash}"

[[secrets]]
name = "superuser"
user = "{su}"
password = "{su_pw}"

[[secrets]]
name = "owner"
user = "app_owner"
password = "owner-pw"
"#,
        backends = servers.join(", "),
        d = dir.display(),
        switch = crate::switchover::command(dir),
        hash = native_password::format_stored(&native_password::stored_hash(b"alice-pw")),
        su = cluster.mysql_user(),
        su_pw = cluster.mysql_password(),
    )
}

/// The owner, database app1, table `t` and its port trigger, on my0;
/// waits until every replica has replicated them.
fn prepare(cluster: &Cluster, replicas: usize) -> Result<()> {
    cluster.mysql_sql(
        "my0",
        "CREATE USER 'app_owner'@'%' IDENTIFIED BY 'owner-pw'; \
         CREATE DATABASE app1; GRANT ALL ON app1.* TO 'app_owner'@'%'; \
         CREATE TABLE app1.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, who VARCHAR(64) NOT NULL UNIQUE, \
           port INT NOT NULL DEFAULT 0); \
         CREATE TRIGGER app1.t_port BEFORE INSERT ON app1.t FOR EACH ROW SET NEW.port = @@port;",
    )?;
    for i in 1..=replicas {
        let replica = format!("my{i}");
        wait_until(
            &format!("{replica} to have table t and its trigger"),
            Duration::from_secs(30),
            || {
                let q = "SELECT COUNT(*) FROM information_schema.triggers WHERE trigger_schema = 'app1' AND trigger_name = 't_port'";
                Ok(match cluster.mysql_sql(&replica, q) {
                    Ok(v) if v == "1" => Ok(()),
                    Ok(v) => Err(v),
                    Err(e) => Err(format!("{e:#}")),
                })
            },
        )?;
    }
    Ok(())
}

/// A case's own MariaDB primary my0 and replica my1, and its own proxy.
pub(crate) fn rig(ctx: &Ctx, name: &str) -> Result<Rig> {
    rig_with(ctx, name, 1)
}

/// A case's own MariaDB primary my0 and `replicas` replicas my1.., and its
/// own proxy.
fn rig_with(ctx: &Ctx, name: &str, replicas: usize) -> Result<Rig> {
    rig_endpoints(ctx, name, replicas, &[])
}

/// [`rig_with`], with `extra` endpoints (name, TOML) besides "rw" and "ro".
pub(crate) fn rig_endpoints(ctx: &Ctx, name: &str, replicas: usize, extra: &[(&str, &str)]) -> Result<Rig> {
    let dir = ctx.case_dir(name)?;
    let opts = Options {
        pg: false,
        mysql: true,
        mysql_replicas: replicas,
        mysql_max_connections: 100,
        ..Options::default()
    };
    let cluster = Cluster::up(&dir.join("cluster"), &opts)?;
    prepare(&cluster, replicas)?;
    let extra_toml: String = extra.iter().map(|(_, t)| *t).collect();
    let text = config(&cluster, &dir, &extra_toml);
    let mut names = vec!["rw", "ro"];
    names.extend(extra.iter().map(|(n, _)| *n));
    Rig::start(&dir, cluster, &text, &names)
}

/// A mysql_async connection as alice to app1 through the proxy at `addr`.
pub(crate) async fn connect(addr: SocketAddr) -> Result<Conn> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some("alice"))
        .pass(Some("alice-pw"))
        .db_name(Some("app1"))
        .prefer_socket(false);
    Ok(Conn::new(opts).await?)
}

fn outcome_of(e: &mysql_async::Error) -> Outcome {
    match e {
        mysql_async::Error::Server(s) => Outcome::Failed {
            code: s.code.to_string(),
            state: s.state.clone(),
            text: s.message.clone(),
        },
        other => Outcome::Closed(other.to_string()),
    }
}

/// A looping writer (autocommit INSERTs of rows tagged `NAME-N`) or,
/// with `read`, reader (`SELECT @@port`), until `stop`, recording each
/// attempt (a read with the port of the server that answered it).
async fn run_loop(mut conn: Conn, name: String, log: Log, stop: Arc<AtomicBool>, read: bool) -> Conn {
    let mut n = 0u32;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let tag = format!("{name}-{n}");
        let start = begin(&log, &tag);
        let outcome = if read {
            match tokio::time::timeout(ATTEMPT_LIMIT, conn.query_first::<u16, _>("SELECT @@port")).await {
                Err(_) => Outcome::Hung,
                Ok(Ok(port)) => Outcome::Ok { port },
                Ok(Err(e)) => outcome_of(&e),
            }
        } else {
            let sql = format!("INSERT INTO t (who) VALUES ('{tag}')");
            match tokio::time::timeout(ATTEMPT_LIMIT, conn.query_drop(sql)).await {
                Err(_) => Outcome::Hung,
                Ok(Ok(())) => Outcome::Ok { port: None },
                Ok(Err(e)) => outcome_of(&e),
            }
        };
        let gone = matches!(outcome, Outcome::Hung | Outcome::Closed(_));
        record(&log, tag, start, outcome);
        if gone {
            break;
        }
        tokio::time::sleep(LOOP_PAUSE).await;
    }
    conn
}

/// `SELECT @@port` on `conn`: the port of the server answering it now.
async fn port_on(conn: &mut Conn) -> Result<u16> {
    let port: Option<u16> = tokio::time::timeout(ATTEMPT_LIMIT, conn.query_first("SELECT @@port"))
        .await
        .context("SELECT @@port hung")??;
    port.context("SELECT @@port returned no row")
}

async fn insert_on(conn: &mut Conn, tag: &str) -> Result<()> {
    tokio::time::timeout(ATTEMPT_LIMIT, conn.exec_drop("INSERT INTO t (who) VALUES (?)", (tag,)))
        .await
        .with_context(|| format!("INSERT {tag} hung"))?
        .with_context(|| format!("INSERT {tag}"))
}

/// Tag -> port of every row of `t` on `server`, read there directly.
pub(crate) fn rows_on(cluster: &Cluster, server: &str) -> Result<HashMap<String, u16>> {
    let out = cluster.mysql_sql(server, "SELECT who, port FROM app1.t")?;
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (who, port) = l.split_once('\t').with_context(|| format!("row {l:?}"))?;
            Ok((who.to_string(), port.parse()?))
        })
        .collect()
}

/// A statement in flight when the writer was lost: 1053 (server shutdown,
/// SQLSTATE 08S01), 2013 (lost connection) or another class 08 error, never
/// 1105 (unknown error).
fn lost_in_flight(a: &Attempt) -> bool {
    matches!(&a.outcome, Outcome::Failed { code, state, .. }
        if code != "1105" && (code == "1053" || code == "2013" || state.starts_with("08")))
}

fn check_writer_loss(l: &Finished<Conn>, t0: Instant) -> Result<()> {
    let errors = l.errors();
    ensure!(errors.len() <= 1, "more than one error: {}", l.show_errors(t0));
    if let Some(e) = errors.iter().find(|a| !lost_in_flight(a)) {
        bail!("{}: not a lost statement's error: {}", l.name, e.show(t0));
    }
    Ok(())
}

pub(crate) fn spawn_loopers(rig: &Rig, n: usize) -> Result<Loopers<Conn>> {
    spawn_loopers_on(rig, "rw", "w", n, false)
}

/// `n` loopers on `endpoint`, named `prefix0`..; readers with `read`.
fn spawn_loopers_on(rig: &Rig, endpoint: &str, prefix: &str, n: usize, read: bool) -> Result<Loopers<Conn>> {
    let h = rig.handle();
    let addr = rig.addr(endpoint);
    let mut loopers = Loopers::default();
    for i in 0..n {
        let c = h.block_on(connect(addr))?;
        loopers.spawn(&h, &format!("{prefix}{i}"), move |name, log, stop| {
            run_loop(c, name, log, stop, read)
        });
    }
    Ok(loopers)
}

/// Kills my0, promotes my1, waits until the proxy elects my1.
fn fail_over(rig: &mut Rig) -> Result<(Instant, Instant)> {
    rig.cluster.kill("my0")?;
    let killed = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    rig.cluster.promote("my1")?;
    Ok((killed, Instant::now()))
}

fn idle_clients_survive_writer_loss(ctx: &Ctx) -> Result<()> {
    let mut rig = rig(ctx, "my-writer-loss")?;
    let h = rig.handle();
    let (port0, port1) = (rig.server_port("my0")?, rig.server_port("my1")?);
    let (addr0, addr1) = (rig.server_addr("my0")?, rig.server_addr("my1")?);
    rig.wait_roles(ENGINE, "my0", &["my1"])?;
    // The replica's probes read its lag and replication position.
    rig.wait_replica_reports(ENGINE, "my1")?;
    let mut idle = h.block_on(async {
        let mut idle = Vec::new();
        for _ in 0..10 {
            let mut c = connect(rig.addr("rw")).await?;
            ensure!(port_on(&mut c).await? == port0, "a session on the writer is not on my0");
            idle.push(c);
        }
        anyhow::Ok(idle)
    })?;
    let loopers = spawn_loopers(&rig, 4)?;
    let started = Instant::now();
    loopers.wait_each("a write", Duration::from_secs(10), started, Attempt::ok)?;

    let (killed, promoted) = fail_over(&mut rig)?;
    loopers.wait_each(
        "a write after the promotion",
        FAILOVER_HOLD + Duration::from_secs(5),
        promoted,
        Attempt::ok,
    )?;
    std::thread::sleep(Duration::from_secs(1));
    let mut done = loopers.stop(&h)?;

    let t0 = rig.t0;
    let first = first_ok_after(&done, promoted).context("no write answered after the promotion")?;
    eprintln!(
        "mysql::idle_clients_survive_writer_loss: first write answered {:.3}s after promote() returned \
         (probe interval {:?}); writes stalled {:.3}s from the kill; errors seen by the writers: {:?}",
        first.as_secs_f64(),
        INTERVAL,
        (promoted - killed + first).as_secs_f64(),
        all_errors(&done)
    );
    let mut problems = Problems::default();
    problems.require(first <= INTERVAL + Duration::from_millis(1500), || {
        format!("the first write after the promotion took {first:?} (interval {INTERVAL:?} + 1.5 s allowed)")
    });
    for l in &done {
        problems.check(check_writer_loss(l, t0));
    }
    // The same sessions go on, on my1: the loopers', and the idle ones.
    let mut tags = Vec::new();
    h.block_on(async {
        let sessions = done
            .iter_mut()
            .map(|l| (l.name.clone(), &mut l.client))
            .chain(idle.iter_mut().enumerate().map(|(i, c)| (format!("idle{i}"), c)));
        for (name, c) in sessions {
            let tag = format!("{name}-after");
            let r = async {
                insert_on(c, &tag).await?;
                let port = port_on(c).await?;
                ensure!(port == port1, "answered by port {port}, not my1 ({port1})");
                anyhow::Ok(())
            }
            .await
            .with_context(|| format!("{name} on its own connection after the failover"));
            if r.is_ok() {
                tags.push(tag);
            }
            problems.check(r);
        }
    });
    // my1 itself holds every row written after the kill, stored there.
    let rows = rows_on(&rig.cluster, "my1")?;
    let after_kill = done
        .iter()
        .flat_map(|l| &l.attempts)
        .filter(|a| a.ok() && a.start > killed)
        .map(|a| &a.tag);
    for tag in after_kill.chain(&tags) {
        problems.require(rows.get(tag) == Some(&port1), || {
            format!("{tag}: on my1 {:?} (port {port1})", rows.get(tag))
        });
    }
    let b = Backends(rig.backends(ENGINE)?);
    let elected = |addr: &str| b.get(addr).is_some_and(|r| r.elected && r.role == "writer");
    problems.require(elected(&addr1) && !elected(&addr0), || {
        format!("after the failover: {b}")
    });
    h.block_on(async {
        for c in idle.into_iter().chain(done.into_iter().map(|l| l.client)) {
            let _ = c.disconnect().await;
        }
    });
    problems.finish()
}

fn old_writer_is_fenced(ctx: &Ctx) -> Result<()> {
    let mut rig = rig(ctx, "my-fence")?;
    let h = rig.handle();
    let (port0, port1) = (rig.server_port("my0")?, rig.server_port("my1")?);
    let (addr0, addr1) = (rig.server_addr("my0")?, rig.server_addr("my1")?);
    rig.wait_roles(ENGINE, "my0", &["my1"])?;
    let mut old = h.block_on(connect(rig.addr("rw")))?;
    ensure!(h.block_on(port_on(&mut old))? == port0, "the writer is not my0");

    fail_over(&mut rig)?;
    rig.wait_backends(ENGINE, "my1 elected", FAILOVER_HOLD, |b| {
        b.get(&addr1).is_some_and(|r| r.elected)
    })?;
    let mut problems = Problems::default();
    match h.block_on(port_on(&mut old)) {
        Ok(port) => problems.require(port == port1, || {
            format!("after the promotion, answered by port {port}, not my1 ({port1})")
        }),
        // Idle sessions keep their connections (mysql::idle_clients_survive_writer_loss);
        // noted, and the fencing is checked on a new one.
        Err(e) => {
            problems.add(format!("the session idle during the failover: {e:#}"));
            old = h.block_on(connect(rig.addr("rw")))?;
        }
    }

    // The old writer comes back as it was: read_only off.
    rig.cluster.restart("my0")?;
    let ro = rig.cluster.mysql_sql("my0", "SELECT @@global.read_only")?;
    ensure!(ro == "0", "my0 came back read-only ({ro}): nothing to fence");
    rig.wait_backends(
        ENGINE,
        "the proxy to probe my0 back as a writer",
        Duration::from_secs(10),
        |b| b.get(&addr0).is_some_and(|r| r.up && r.role == "writer"),
    )?;
    std::thread::sleep(INTERVAL * 3);

    let ports = h.block_on(async {
        let mut fresh = connect(rig.addr("rw")).await?;
        let mut ports = Vec::new();
        for i in 0..10 {
            insert_on(&mut old, &format!("after-old-{i}")).await?;
            insert_on(&mut fresh, &format!("after-new-{i}")).await?;
            ports.push(port_on(&mut old).await?);
            ports.push(port_on(&mut fresh).await?);
        }
        let _ = fresh.disconnect().await;
        anyhow::Ok(ports)
    })?;
    problems.require(ports.iter().all(|p| *p == port1), || {
        format!("sessions answered by {ports:?}, not only my1 ({port1})")
    });
    let q = "SELECT COUNT(*) FROM app1.t WHERE who LIKE 'after-%'";
    let on0 = rig.cluster.mysql_sql("my0", q)?;
    problems.require(on0 == "0", || format!("{on0} rows reached the fenced my0"));
    let on1 = rig.cluster.mysql_sql("my1", q)?;
    problems.require(on1 == "20", || format!("my1 holds {on1} of the 20 rows"));
    let b = Backends(rig.backends(ENGINE)?);
    let (r0, r1) = (b.row(&addr0)?, b.row(&addr1)?);
    problems.require(r0.fenced && !r0.elected, || format!("my0 is not fenced: {b}"));
    problems.require(r1.elected && !r1.fenced, || {
        format!("my1 is not the elected writer: {b}")
    });
    h.block_on(async {
        let _ = old.disconnect().await;
    });
    problems.finish()
}

/// The MySQL error code of a statement's failure, if it failed on the server side.
fn server_code(r: &std::result::Result<(), mysql_async::Error>) -> Option<u16> {
    match r {
        Err(mysql_async::Error::Server(e)) => Some(e.code),
        _ => None,
    }
}

/// A client inside a transaction when its writer dies: its next statement
/// gets 1053 (the transaction was rolled back with the server; nothing it
/// sends runs outside the transaction it meant) until it sends ROLLBACK;
/// then the same connection writes on the new writer.
fn lost_transaction(ctx: &Ctx) -> Result<()> {
    let mut rig = rig(ctx, "my-lost-txn")?;
    let h = rig.handle();
    let port1 = rig.server_port("my1")?;
    let addr1 = rig.server_addr("my1")?;
    rig.wait_roles(ENGINE, "my0", &["my1"])?;
    let mut c = h.block_on(async {
        let mut c = connect(rig.addr("rw")).await?;
        c.query_drop("START TRANSACTION").await?;
        c.exec_drop("INSERT INTO t (who) VALUES (?)", ("in-lost-txn",)).await?;
        anyhow::Ok(c)
    })?;
    fail_over(&mut rig)?;
    rig.wait_backends(ENGINE, "my1 elected", FAILOVER_HOLD, |b| {
        b.get(&addr1).is_some_and(|r| r.elected)
    })?;
    let mut problems = Problems::default();
    h.block_on(async {
        let first = c.exec_drop("INSERT INTO t (who) VALUES (?)", ("after-loss",)).await;
        problems.require(server_code(&first) == Some(1053), || {
            format!("the statement in flight: {first:?}")
        });
        let again = c.query_drop("INSERT INTO t (who) VALUES ('still-lost')").await;
        problems.require(server_code(&again) == Some(1053), || {
            format!("a statement in the lost transaction: {again:?}")
        });
        problems.check(
            c.query_drop("ROLLBACK")
                .await
                .context("ROLLBACK of the lost transaction"),
        );
        problems.check(insert_on(&mut c, "after-rollback").await);
        problems.check(port_on(&mut c).await.and_then(|p| {
            ensure!(p == port1, "after the rollback: answered by {p}, not my1 ({port1})");
            Ok(())
        }));
    });
    let rows = rows_on(&rig.cluster, "my1")?;
    problems.require(rows.get("after-rollback") == Some(&port1), || {
        format!("after-rollback: {rows:?}")
    });
    for tag in ["in-lost-txn", "after-loss", "still-lost"] {
        problems.require(!rows.contains_key(tag), || format!("{tag} is on my1"));
    }
    problems.finish()
}

/// A replica killed under read load on the read-only endpoint: only the
/// reads in flight on it fail (with a lost-connection class error, never
/// 1105), every reader keeps its connection, reads go to the other replica
/// (never to the writer while a replica is up), and come back to the
/// restarted replica.
fn replica_loss(ctx: &Ctx) -> Result<()> {
    let mut rig = rig_with(ctx, "my-replica-loss", 2)?;
    rig.wait_roles(ENGINE, "my0", &["my1", "my2"])?;
    let readers = spawn_loopers_on(&rig, "ro", "r", 6, true)?;
    let loss = ReplicaLoss {
        case: "mysql::reads_leave_a_lost_replica_and_come_back",
        writer: "my0",
        kept: "my1",
        lost: "my2",
    };
    lose_a_replica(&mut rig, readers, &loss, check_writer_loss)
}
