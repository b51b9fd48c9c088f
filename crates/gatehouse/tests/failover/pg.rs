//! PostgreSQL failover: the writer killed and a replica promoted under
//! idle and writing clients; the old writer restarted writable beside the
//! new one (split brain: fenced); the writer hung (SIGSTOP) and continued;
//! a replica killed and restarted under read load on a read_only endpoint.
//!
//! Every row the clients insert carries a unique tag and, from a column
//! default, the port of the server that stored it (`inet_server_port()`),
//! so where each write landed is checked both in the client's answer and on
//! the servers themselves.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_proto_pg::auth::random_salt;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use gatehouse_testkit::{Cluster, Options};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use crate::Ctx;
use crate::common::{
    ATTEMPT_LIMIT, Attempt, Backends, FAILOVER_HOLD, Finished, HEALTH_KEYS, INTERVAL, LOOP_PAUSE, Log, Loopers,
    Outcome, Problems, Rig, all_errors, begin, first_ok_after, record, wait_until,
};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("pg::idle_clients_survive_writer_loss", idle_clients_survive_writer_loss),
        ("pg::old_writer_restarted_writable_is_fenced", old_writer_is_fenced),
        (
            "pg::hung_writer_holds_clients_until_it_resumes",
            super::pg_ops::hung_writer,
        ),
        (
            "pg::reads_leave_a_lost_replica_and_come_back",
            super::pg_ops::replica_loss,
        ),
        (
            "pg::a_transaction_lost_with_its_writer_needs_a_rollback",
            super::pg_ops::lost_transaction,
        ),
        ("pg::switchover_moves_writes_without_errors", crate::switchover::pg),
    ]
}

pub(crate) const ENGINE: &str = "postgres";

pub(crate) const RW: (&str, &str) = (
    "rw",
    r#"
[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"
pool_mode = "transaction"
"#,
);

/// Reads spread over the replicas; the writer only when none is usable.
pub(crate) const RO: (&str, &str) = (
    "ro",
    r#"
[[endpoints]]
name = "ro"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_only"
pool_mode = "transaction"
max_replica_lag = "10s"
reader_fallback = "writer"
"#,
);

/// The configuration of a case's proxy: one cluster over every server
/// (replicas listed first: roles come from probing, never from the order),
/// `endpoints`, the admin API, tenant alice (SCRAM) for app1.
pub(crate) fn config(cluster: &Cluster, dir: &std::path::Path, endpoints: &[(&str, &str)]) -> String {
    let mut servers: Vec<String> = cluster.servers().iter().map(|s| format!("\"{}\"", s.addr())).collect();
    servers.reverse();
    let endpoints: String = endpoints.iter().map(|(_, toml)| *toml).collect();
    format!(
        r#"
[proxy]
log_filter = "warn"
login_timeout = "5s"

[[clusters]]
name = "main"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
# The switchover case's promote step (crate::switchover::command).
switchover_command = "{switch}"
{HEALTH_KEYS}
{endpoints}
[admin]
listen = "127.0.0.1:0"
token_file = "{d}/admin.token"

[[tenants]]
name = "alice"
databases = ["app1"]
secret = "owner"
scram_verifier = "{verifier}"

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
        verifier = ScramVerifier::from_password("alice-pw", &random_salt(), 4096),
        su = cluster.pg_user(),
        su_pw = cluster.pg_password(),
    )
}

/// The owner, database app1 and its table `t`, on the primary; waits until
/// every replica has the table.
pub(crate) fn prepare(cluster: &Cluster) -> Result<()> {
    cluster.pg_sql("pg0", "postgres", "CREATE ROLE app_owner LOGIN PASSWORD 'owner-pw'")?;
    cluster.pg_sql("pg0", "postgres", "CREATE DATABASE app1 OWNER app_owner")?;
    cluster.pg_sql(
        "pg0",
        "app1",
        "CREATE TABLE t (id bigserial PRIMARY KEY, who text NOT NULL UNIQUE, \
         port int NOT NULL DEFAULT inet_server_port(), at timestamptz NOT NULL DEFAULT clock_timestamp()); \
         ALTER TABLE t OWNER TO app_owner",
    )?;
    for r in cluster.pg_replicas() {
        wait_until(&format!("{} to have table t", r.name), Duration::from_secs(30), || {
            Ok(
                match cluster.pg_sql(&r.name, "app1", "SELECT to_regclass('t') IS NOT NULL") {
                    Ok(v) if v == "t" => Ok(()),
                    Ok(v) => Err(v),
                    Err(e) => Err(format!("{e:#}")),
                },
            )
        })?;
    }
    Ok(())
}

/// A case's own PostgreSQL primary pg0 with `replicas` streaming replicas
/// (pg1, ...), and its own proxy with `endpoints`.
pub(crate) fn rig(ctx: &Ctx, name: &str, replicas: usize, endpoints: &[(&str, &str)]) -> Result<Rig> {
    let dir = ctx.case_dir(name)?;
    let opts = Options {
        pg_replicas: replicas,
        pg_max_connections: 100,
        ..Options::default()
    };
    let cluster = Cluster::up(&dir.join("cluster"), &opts)?;
    prepare(&cluster)?;
    let text = config(&cluster, &dir, endpoints);
    let names: Vec<&str> = endpoints.iter().map(|(n, _)| *n).collect();
    Rig::start(&dir, cluster, &text, &names)
}

/// A tokio-postgres connection as alice to app1 through the proxy at
/// `addr`, driven on the current runtime.
pub(crate) async fn connect(addr: SocketAddr) -> Result<Client> {
    let conninfo = format!(
        "host={} port={} user=alice password=alice-pw dbname=app1 sslmode=disable connect_timeout=10",
        addr.ip(),
        addr.port()
    );
    let (client, conn) = tokio_postgres::connect(&conninfo, NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// `n` connections through `addr`, each of which has run one query.
pub(crate) async fn idle_clients(addr: SocketAddr, n: usize) -> Result<Vec<Client>> {
    let mut out = Vec::new();
    for _ in 0..n {
        let c = connect(addr).await?;
        c.simple_query("SELECT 1").await?;
        out.push(c);
    }
    Ok(out)
}

pub(crate) fn insert_sql(tag: &str) -> String {
    format!("INSERT INTO t (who) VALUES ('{tag}') RETURNING port")
}

pub(crate) fn read_sql(_tag: &str) -> String {
    "SELECT inet_server_port()".to_string()
}

/// The first column of the first row, as a port.
pub(crate) fn port_of(msgs: &[SimpleQueryMessage]) -> Option<u16> {
    msgs.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(r) => r.get(0)?.parse().ok(),
        _ => None,
    })
}

/// An error answer as an [`Outcome`]; `text` starts with the severity.
pub(crate) fn outcome_of(e: &tokio_postgres::Error) -> Outcome {
    match (e.code(), e.as_db_error()) {
        (Some(code), Some(db)) => Outcome::Failed {
            code: code.code().to_string(),
            state: code.code().to_string(),
            text: format!("{}: {}", db.severity(), db.message()),
        },
        _ => Outcome::Closed(e.to_string()),
    }
}

/// A looping client: `sql(tag)` in the simple protocol (one autocommit
/// statement, one round trip) until `stop`, recording each attempt.
pub(crate) async fn run_loop(
    client: Client,
    name: String,
    log: Log,
    stop: Arc<AtomicBool>,
    sql: fn(&str) -> String,
) -> Client {
    let mut n = 0u32;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let tag = format!("{name}-{n}");
        let start = begin(&log, &tag);
        let outcome = match tokio::time::timeout(ATTEMPT_LIMIT, client.simple_query(&sql(&tag))).await {
            Err(_) => Outcome::Hung,
            Ok(Ok(msgs)) => Outcome::Ok { port: port_of(&msgs) },
            Ok(Err(e)) => outcome_of(&e),
        };
        let answered = matches!(outcome, Outcome::Ok { .. } | Outcome::Failed { .. });
        record(&log, tag.clone(), start, outcome);
        if !answered {
            break;
        }
        if client.is_closed() {
            // Answered, and then the connection was closed under a client
            // between transactions.
            let why = "the connection was closed after the statement was answered".to_string();
            record(&log, format!("{tag}-closed"), Instant::now(), Outcome::Closed(why));
            break;
        }
        tokio::time::sleep(LOOP_PAUSE).await;
    }
    client
}

pub(crate) fn spawn_loopers(
    rig: &Rig,
    endpoint: &str,
    prefix: &str,
    n: usize,
    sql: fn(&str) -> String,
) -> Result<Loopers<Client>> {
    let h = rig.handle();
    let addr = rig.addr(endpoint);
    let mut loopers = Loopers::default();
    for i in 0..n {
        let c = h.block_on(connect(addr))?;
        loopers.spawn(&h, &format!("{prefix}{i}"), move |name, log, stop| {
            run_loop(c, name, log, stop, sql)
        });
    }
    Ok(loopers)
}

/// INSERTs a row tagged `tag` over the extended protocol; the port of the
/// server that stored it.
pub(crate) async fn insert_on(c: &Client, tag: &str) -> Result<u16> {
    let row = tokio::time::timeout(
        ATTEMPT_LIMIT,
        c.query_one("INSERT INTO t (who) VALUES ($1) RETURNING port", &[&tag]),
    )
    .await
    .with_context(|| format!("INSERT {tag} hung"))?
    .with_context(|| format!("INSERT {tag}"))?;
    Ok(u16::try_from(row.get::<_, i32>(0))?)
}

/// Tag -> port of every row of `t` on `server`, read there directly.
pub(crate) fn rows_on(cluster: &Cluster, server: &str) -> Result<HashMap<String, u16>> {
    let out = cluster.pg_sql(server, "app1", "SELECT who || ' ' || port FROM t")?;
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (who, port) = l.split_once(' ').with_context(|| format!("row {l:?}"))?;
            Ok((who.to_string(), port.parse()?))
        })
        .collect()
}

/// A statement in flight when its server was lost: SQLSTATE class 08
/// (writers also 57P01), with severity ERROR. The session goes on, so the
/// client must not be told FATAL: that tells it its connection is ending
/// (some drivers close it at once).
pub(crate) fn lost_in_flight(a: &Attempt, also_57p01: bool) -> bool {
    matches!(&a.outcome, Outcome::Failed { code, text, .. }
        if (code.starts_with("08") || (also_57p01 && code == "57P01")) && text.starts_with("ERROR"))
}

/// What a looping client may have seen of its server's loss: at most one
/// error, a lost statement's, and its connection still open.
pub(crate) fn check_loss(l: &Finished<Client>, t0: Instant, also_57p01: bool) -> Result<()> {
    let errors = l.errors();
    ensure!(errors.len() <= 1, "more than one error: {}", l.show_errors(t0));
    if let Some(e) = errors.iter().find(|a| !lost_in_flight(a, also_57p01)) {
        bail!(
            "{}: not the error of a statement lost with its server (class 08{}, severity ERROR): {}",
            l.name,
            if also_57p01 { " or 57P01" } else { "" },
            e.show(t0)
        );
    }
    ensure!(!l.client.is_closed(), "{}: the connection was closed", l.name);
    Ok(())
}

pub(crate) fn idle_clients_survive_writer_loss(ctx: &Ctx) -> Result<()> {
    let mut rig = rig(ctx, "pg-writer-loss", 1, &[RW])?;
    let h = rig.handle();
    let (port0, port1) = (rig.server_port("pg0")?, rig.server_port("pg1")?);
    let (addr0, addr1) = (rig.server_addr("pg0")?, rig.server_addr("pg1")?);
    rig.wait_roles(ENGINE, "pg0", &["pg1"])?;
    // The replica's probes read its lag and replication position.
    rig.wait_replica_reports(ENGINE, "pg1")?;
    let idle = h.block_on(idle_clients(rig.addr("rw"), 10))?;
    let loopers = spawn_loopers(&rig, "rw", "w", 4, insert_sql)?;
    let started = Instant::now();
    loopers.wait_each("a write on pg0", Duration::from_secs(10), started, |a| {
        a.port() == Some(port0)
    })?;

    rig.cluster.kill("pg0")?;
    let killed = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    rig.cluster.promote("pg1")?;
    let promoted = Instant::now();
    loopers.wait_each(
        "a write after the promotion",
        FAILOVER_HOLD + Duration::from_secs(5),
        promoted,
        Attempt::ok,
    )?;
    std::thread::sleep(Duration::from_secs(1));
    let done = loopers.stop(&h)?;

    let t0 = rig.t0;
    let first = first_ok_after(&done, promoted).context("no write answered after the promotion")?;
    eprintln!(
        "pg::idle_clients_survive_writer_loss: first write answered {:.3}s after promote() returned \
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
        problems.check(check_loss(l, t0, true));
        if let Some(a) = l
            .attempts
            .iter()
            .find(|a| a.start > killed && a.ok() && a.port() != Some(port1))
        {
            problems.add(format!(
                "{}: a write after the kill was not stored on pg1: {}",
                l.name,
                a.show(t0)
            ));
        }
    }
    // The same connections write on: the loopers', and the idle clients'.
    let mut tags = Vec::new();
    h.block_on(async {
        let clients = done
            .iter()
            .map(|l| (l.name.clone(), &l.client))
            .chain(idle.iter().enumerate().map(|(i, c)| (format!("idle{i}"), c)));
        for (name, c) in clients {
            let tag = format!("{name}-after");
            let r = insert_on(c, &tag)
                .await
                .with_context(|| format!("{name} on its own connection after the failover"));
            problems.check(r.and_then(|port| {
                ensure!(port == port1, "{tag} stored on port {port}, not pg1 ({port1})");
                tags.push(tag);
                Ok(())
            }));
        }
    });
    // pg1 itself holds every row written after the kill.
    let rows = rows_on(&rig.cluster, "pg1")?;
    let after_kill = done
        .iter()
        .flat_map(|l| &l.attempts)
        .filter(|a| a.ok() && a.start > killed)
        .map(|a| &a.tag);
    for tag in after_kill.chain(&tags) {
        problems.require(rows.get(tag) == Some(&port1), || {
            format!("{tag}: on pg1 {:?} (port {port1})", rows.get(tag))
        });
    }
    let b = Backends(rig.backends(ENGINE)?);
    let elected = |addr: &str| b.get(addr).is_some_and(|r| r.elected && r.role == "writer");
    problems.require(elected(&addr1) && !elected(&addr0), || {
        format!("after the failover: {b}")
    });
    problems.finish()
}

pub(crate) fn old_writer_is_fenced(ctx: &Ctx) -> Result<()> {
    let mut rig = rig(ctx, "pg-fence", 1, &[RW])?;
    let h = rig.handle();
    let (port0, port1) = (rig.server_port("pg0")?, rig.server_port("pg1")?);
    let (addr0, addr1) = (rig.server_addr("pg0")?, rig.server_addr("pg1")?);
    rig.wait_roles(ENGINE, "pg0", &["pg1"])?;
    let mut old = h.block_on(connect(rig.addr("rw")))?;
    ensure!(
        h.block_on(insert_on(&old, "before"))? == port0,
        "the first write missed pg0"
    );
    let mut problems = Problems::default();

    rig.cluster.kill("pg0")?;
    rig.cluster.promote("pg1")?;
    rig.wait_backends(ENGINE, "pg1 elected", FAILOVER_HOLD, |b| {
        b.get(&addr1).is_some_and(|r| r.elected)
    })?;
    match h.block_on(insert_on(&old, "between")) {
        Ok(port) => problems.require(port == port1, || {
            format!("a write after the promotion was stored on port {port}, not pg1 ({port1})")
        }),
        // Idle clients keep their connections (pg::idle_clients_survive_writer_loss);
        // noted, and the fencing is checked on a new one.
        Err(e) => {
            problems.add(format!("the client idle during the failover: {e:#}"));
            old = h.block_on(connect(rig.addr("rw")))?;
        }
    }

    // The old writer comes back as it was: a primary, writable.
    rig.cluster.restart("pg0")?;
    let writable = rig.cluster.pg_sql("pg0", "postgres", "SELECT pg_is_in_recovery()")?;
    ensure!(writable == "f", "pg0 came back in recovery: nothing to fence");
    rig.wait_backends(
        ENGINE,
        "the proxy to probe pg0 back as a writer",
        Duration::from_secs(10),
        |b| b.get(&addr0).is_some_and(|r| r.up && r.role == "writer"),
    )?;
    std::thread::sleep(INTERVAL * 3);

    let ports = h.block_on(async {
        let fresh = connect(rig.addr("rw")).await?;
        let mut ports = Vec::new();
        for i in 0..10 {
            ports.push((
                format!("after-old-{i}"),
                insert_on(&old, &format!("after-old-{i}")).await?,
            ));
            ports.push((
                format!("after-new-{i}"),
                insert_on(&fresh, &format!("after-new-{i}")).await?,
            ));
        }
        anyhow::Ok(ports)
    })?;
    if let Some((tag, port)) = ports.iter().find(|(_, p)| *p != port1) {
        problems.add(format!(
            "{tag} was stored on port {port}, not on the elected writer pg1 ({port1})"
        ));
    }
    let q = "SELECT count(*) FROM t WHERE who LIKE 'after-%'";
    let on0 = rig.cluster.pg_sql("pg0", "app1", q)?;
    problems.require(on0 == "0", || format!("{on0} rows reached the fenced pg0"));
    let on1 = rig.cluster.pg_sql("pg1", "app1", q)?;
    problems.require(on1 == "20", || format!("pg1 holds {on1} of the 20 rows"));
    let b = Backends(rig.backends(ENGINE)?);
    let (r0, r1) = (b.row(&addr0)?, b.row(&addr1)?);
    problems.require(r0.fenced && !r0.elected, || format!("pg0 is not fenced: {b}"));
    problems.require(r1.elected && !r1.fenced, || {
        format!("pg1 is not the elected writer: {b}")
    });
    problems.finish()
}
