//! Backend connections that change tenant (COM_CHANGE_USER), on a proxy of
//! the case's own whose cluster gives the proxy 1 % of the primary's
//! `max_connections` (3 of 300) and whose tenants each log in to MariaDB as
//! a backend user of their own, on a database of their own: one of them
//! identified via ed25519 (the server switches the change's plugin in the
//! middle). Checked: tenants taking turns on a full share (two other
//! sessions hold two of its connections in open transactions) share one connection, each
//! running as its own backend user on its own database; what one tenant
//! leaves on a connection (tracked variables, prepared statements, and the
//! state that pins: user variables, temporary tables, an open transaction,
//! `LAST_INSERT_ID()`) is never seen by the next; many tenants at once on 3
//! connections all finish, with the switches counted in `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;
use crate::openmetrics;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "switch::tenants_taking_turns_share_one_backend_connection_each_as_its_own_user",
            take_turns,
        ),
        (
            "switch::state_one_tenant_leaves_on_a_connection_is_never_seen_by_the_next",
            state_not_seen,
        ),
        (
            "switch::many_tenants_at_once_on_three_backend_connections_all_finish",
            many_at_once,
        ),
        (
            "switch::a_client_of_another_kind_gets_the_place_of_an_idle_connection_on_a_full_share",
            other_kind_gets_a_place,
        ),
        (
            "switch::a_connection_switched_between_ignore_space_clients_keeps_ignore_space",
            ignore_space_after_switch,
        ),
        (
            "switch::clients_of_two_kinds_at_once_on_three_backend_connections_all_finish_within_the_cap",
            two_kinds_at_once,
        ),
    ]
}

/// Tenants sw0..sw{N-1}: backend user swu{i}, database swdb{i}; swu1 is
/// identified via ed25519, the others with native passwords.
const N: usize = 12;

fn tenant(i: usize) -> (String, String, String) {
    (format!("sw{i}"), format!("swu{i}"), format!("swdb{i}"))
}

fn backend_password(i: usize) -> String {
    format!("swu{i}-backend-pw")
}

/// Creates the backend users and databases (each case runs it; what an
/// earlier case made stays).
fn prepare(ctx: &Ctx) -> Result<()> {
    let p = ctx.cluster.mysql_primary().context("no primary")?.name.clone();
    let installed = ctx.cluster.mysql_sql(
        &p,
        "SELECT COUNT(*) FROM information_schema.plugins WHERE plugin_name = 'ed25519'",
    )?;
    let mut sql = String::new();
    if installed.trim() == "0" {
        sql.push_str("INSTALL SONAME 'auth_ed25519';");
    }
    for i in 0..N {
        let (_, user, db) = tenant(i);
        let pw = backend_password(i);
        let how = if i == 1 {
            format!("IDENTIFIED VIA ed25519 USING PASSWORD('{pw}')")
        } else {
            format!("IDENTIFIED BY '{pw}'")
        };
        sql.push_str(&format!(
            "CREATE USER IF NOT EXISTS '{user}'@'%' {how}; CREATE DATABASE IF NOT EXISTS {db}; \
             GRANT ALL ON {db}.* TO '{user}'@'%'; \
             CREATE TABLE IF NOT EXISTS {db}.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(32)); \
             INSERT IGNORE INTO {db}.t (id, v) VALUES (1, '{db}');"
        ));
    }
    ctx.cluster.mysql_sql(&p, &sql)?;
    Ok(())
}

/// A proxy of the case's own: its "rw" endpoint and admin address, and its
/// core (for the pools' counts).
struct Proxy {
    rw: SocketAddr,
    admin: SocketAddr,
    core: Arc<gatehouse::core::Core<gatehouse::engine::mysql::MyEngine>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

async fn proxy(ctx: &Ctx, name: &str) -> Result<Proxy> {
    prepare(ctx)?;
    let p = ctx.cluster.mysql_primary().context("no primary")?;
    let mut text = format!(
        r#"
[proxy]
log_filter = "warn"

[admin]
listen = "127.0.0.1:0"

[[clusters]]
name = "sw"
engine = "mysql"
backends = ["{addr}"]
monitor_secret = "superuser"
health_check_interval = "1s"
pool = {{ size = 4, borrow_timeout = "20s", max_connections_percent = 1 }}

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "sw"
role = "read_write"

[[secrets]]
name = "superuser"
user = "{su}"
password = "{su_pw}"
"#,
        addr = p.addr(),
        su = ctx.cluster.mysql_user(),
        su_pw = ctx.cluster.mysql_password(),
    );
    for i in 0..N {
        let (name, user, db) = tenant(i);
        let hash = gatehouse_proto_mysql::auth::native_password::format_stored(
            &gatehouse_proto_mysql::auth::native_password::stored_hash(format!("{name}-pw").as_bytes()),
        );
        text.push_str(&format!(
            "\n[[tenants]]\nname = \"{name}\"\ndatabases = [\"{db}\"]\nsecret = \"{user}\"\nmysql_native_password = \"{hash}\"\n\
             \n[[secrets]]\nname = \"{user}\"\nuser = \"{user}\"\npassword = \"{pw}\"\n",
            pw = backend_password(i)
        ));
    }
    let path = ctx.dir.join(format!("switch-{name}.toml"));
    std::fs::write(&path, text)?;
    let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
    let app = gatehouse::App::bind(settings).await?;
    let rw = app.local_addr("rw").context("no rw")?;
    let admin = app.admin_addr().context("no admin")?;
    let core = app.mysql_core();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(gatehouse::run(app, async {
        let _ = stopped.await;
    }));
    // The cap (3 connections) applies once the monitor has read the
    // server's max_connections.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while core.topology.cluster("sw").and_then(|c| c.writer()).is_none() {
        ensure!(
            std::time::Instant::now() < deadline,
            "the monitor never found the writer"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(Proxy { rw, admin, core, stop })
}

/// Runs `body` against a proxy of the case's own named `name`, then stops
/// the proxy.
fn with_proxy<F, Fut>(ctx: &Ctx, name: &str, body: F) -> Result<()>
where
    F: FnOnce(Arc<Proxy>) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    ctx.rt.block_on(async {
        let proxy = Arc::new(proxy(ctx, name).await?);
        let result = body(proxy.clone()).await;
        if let Ok(p) = Arc::try_unwrap(proxy) {
            p.stop();
        }
        result
    })
}

impl Proxy {
    async fn conn(&self, i: usize) -> Result<mysql_async::Conn> {
        self.conn_with(i, false).await
    }

    /// A session of tenant `i`, with `CLIENT_FOUND_ROWS` if `found_rows`.
    async fn conn_with(&self, i: usize, found_rows: bool) -> Result<mysql_async::Conn> {
        let (name, _, db) = tenant(i);
        let opts =
            mysql_async::OptsBuilder::from_opts(crate::opts_at(self.rw, &name, &format!("{name}-pw"), Some(&db)))
                .client_found_rows(found_rows);
        mysql_async::Conn::new(opts)
            .await
            .with_context(|| format!("{name} login"))
    }

    /// Two sessions (sw10, sw11) inside open transactions: they hold two
    /// of the share's three connections, so the share is full once a
    /// third is open, and a tenant without an idle connection of its own
    /// switches another's (with room, it would open one of its own).
    async fn hold_two(&self) -> Result<Vec<mysql_async::Conn>> {
        let mut held = Vec::new();
        for i in [10, 11] {
            let mut c = self.conn(i).await?;
            c.query_drop("BEGIN").await?;
            whoami(&mut c).await?;
            held.push(c);
        }
        Ok(held)
    }

    /// (opened, switched, switch failures) summed over the cluster's backends.
    fn counts(&self) -> (u64, u64, u64) {
        self.core
            .pools
            .backend_connects()
            .iter()
            .filter(|b| b.cluster == "sw")
            .fold((0, 0, 0), |a, b| {
                (a.0 + b.opened, a.1 + b.switched, a.2 + b.switch_failed)
            })
    }

    /// Waits until no backend connection is lent but those [`Proxy::hold_two`]
    /// holds (a session that just ended has given its connection back).
    async fn settle(&self) -> Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let held = |p: &gatehouse::pool::Pool<_>| ["swu10", "swu11"].contains(&p.key().user.as_str());
        while self.core.pools.all().iter().any(|p| !held(p) && p.leased_count() > 0) {
            ensure!(std::time::Instant::now() < deadline, "a connection stays lent");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Ok(())
    }

    fn stop(self) {
        let _ = self.stop.send(());
    }
}

/// (CURRENT_USER(), DATABASE(), the server thread (`@@pseudo_thread_id`: the proxy answers `CONNECTION_ID()` with its own id), the table's one value).
async fn whoami(c: &mut mysql_async::Conn) -> Result<(String, String, u64, String)> {
    let row: Option<(String, String, u64)> = c
        .query_first("SELECT CURRENT_USER(), DATABASE(), @@pseudo_thread_id")
        .await?;
    let (user, db, id) = row.context("no row")?;
    let v: Option<String> = c.query_first("SELECT v FROM t ORDER BY id LIMIT 1").await?;
    Ok((user, db, id, v.context("no value")?))
}

fn take_turns(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "turns", |proxy| async move {
        let held = proxy.hold_two().await?;
        let mut ids = Vec::new();
        // Two rounds over four tenants (the ed25519 user among them):
        // each login and statement finds the last tenant's connection
        // idle, the share full, and switches it.
        for round in 0..2 {
            for i in 0..4 {
                let mut c = proxy.conn(i).await?;
                proxy.settle().await?;
                let (user, db, id, v) = whoami(&mut c).await?;
                let (_, want_user, want_db) = tenant(i);
                ensure!(user == format!("{want_user}@%"), "round {round}, sw{i}: user {user}");
                ensure!(db == want_db && v == want_db, "round {round}, sw{i}: {db} / {v}");
                ids.push(id);
                c.disconnect().await?;
            }
        }
        ensure!(ids.iter().all(|id| *id == ids[0]), "not one connection: {ids:?}");
        let (opened, switched, failed) = proxy.counts();
        ensure!(opened == 3, "opened {opened} connections (two held, one shared)");
        ensure!(switched >= 7 && failed == 0, "switched {switched}, failed {failed}");
        // The same counts in /metrics.
        let m = openmetrics::scrape(proxy.admin, None)?;
        let labels = [("engine", "mysql"), ("cluster", "sw")];
        let metric = m.total("gatehouse_database_connections_switched_total", &labels);
        ensure!(metric == switched as f64, "metrics {metric} vs {switched}");
        let phases = m.total("gatehouse_database_lease_phases_total", &[("phase", "switch")]);
        ensure!(phases >= switched as f64, "switch phases {phases}");
        for c in held {
            c.disconnect().await?;
        }
        Ok(())
    })
}

fn state_not_seen(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "state", |proxy| async move {
        let held = proxy.hold_two().await?;
        // sw2 leaves what transaction pooling keeps on an idle
        // connection: a tracked session variable and a prepared
        // statement; and what pins and is reset: a user variable, a
        // temporary table, an untracked session variable, an open
        // transaction with a row in it, LAST_INSERT_ID().
        let mut a = proxy.conn(2).await?;
        a.query_drop("SET SESSION sql_mode = 'ANSI', SESSION time_zone = '+05:00'")
            .await?;
        let one: Option<i64> = a.exec_first("SELECT ? + 1", (1,)).await?;
        ensure!(one == Some(2), "{one:?}");
        let (_, _, first_id, _) = whoami(&mut a).await?;
        a.disconnect().await?;
        proxy.settle().await?;
        // sw3 gets that connection, switched: the server's fresh
        // session, and the same statement prepared anew.
        let mut b = proxy.conn(3).await?;
        let (user, _, id, _) = whoami(&mut b).await?;
        ensure!(
            id == first_id && user.starts_with("swu3@"),
            "{user} on {id}, not {first_id}"
        );
        let row: Option<(u8, u8)> = b
            .query_first("SELECT @@session.sql_mode = @@global.sql_mode, @@session.time_zone = @@global.time_zone")
            .await?;
        ensure!(row == Some((1, 1)), "sw2's variables seen by sw3: {row:?}");
        let two: Option<i64> = b.exec_first("SELECT ? + 1", (2,)).await?;
        ensure!(two == Some(3), "{two:?}");
        b.disconnect().await?;

        let mut a = proxy.conn(2).await?;
        a.query_drop(
            "SET @leftover = 42; CREATE TEMPORARY TABLE tmp_left (a INT); \
             SET SESSION wait_timeout = 77",
        )
        .await?;
        a.query_drop("BEGIN").await?;
        a.query_drop("INSERT INTO t (v) VALUES ('uncommitted')").await?;
        let (_, _, id_a, _) = whoami(&mut a).await?;
        a.disconnect().await?; // gone with the transaction open
        proxy.settle().await?;
        let mut b = proxy.conn(4).await?;
        let (user, _, id_b, _) = whoami(&mut b).await?;
        ensure!(
            user.starts_with("swu4@") && id_b == id_a,
            "{user} on {id_b}, sw2 was on {id_a}"
        );
        let row: Option<(Option<i64>, u8, u64, u8)> = b
            .query_first(
                "SELECT @leftover, @@session.wait_timeout = @@global.wait_timeout, LAST_INSERT_ID(), @@in_transaction",
            )
            .await?;
        ensure!(
            row == Some((None, 1, 0, 0)),
            "sw2's state seen by sw4 (on {id_b}, sw2 was on {id_a}): {row:?}"
        );
        let tmp = b.query_drop("SELECT * FROM swdb2.tmp_left").await;
        ensure!(tmp.is_err(), "sw4 reached sw2's temporary table");
        // sw2's backend user's database is not sw4's to read.
        let other = b.query_drop("SELECT * FROM swdb2.t").await;
        ensure!(
            matches!(&other, Err(mysql_async::Error::Server(e)) if e.code == 1142),
            "{other:?}"
        );
        b.disconnect().await?;
        // The open transaction's row was rolled back.
        let mut a = proxy.conn(2).await?;
        let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM t WHERE v = 'uncommitted'").await?;
        ensure!(n == Some(0), "the open transaction's row was kept: {n:?}");
        a.disconnect().await?;
        let (_, switched, failed) = proxy.counts();
        ensure!(switched >= 3 && failed == 0, "switched {switched}, failed {failed}");
        for c in held {
            c.disconnect().await?;
        }
        Ok(())
    })
}

/// The share's 3 connections idle, opened for clients without
/// `CLIENT_FOUND_ROWS`; a client with it (whose connections must be opened
/// with it: a switch keeps a connection's capabilities) gets the place of
/// one of them, closed for it, and its UPDATE counts matched rows; a plain
/// client after it still counts changed ones. The backend never has more
/// than 3 open.
fn other_kind_gets_a_place(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "otherkind", |proxy| async move {
        let mut plain = Vec::new();
        for i in 0..3 {
            let mut c = proxy.conn(i).await?;
            c.query_drop("BEGIN").await?;
            whoami(&mut c).await?;
            plain.push(c);
        }
        for mut c in plain {
            c.query_drop("COMMIT").await?;
            c.disconnect().await?;
        }
        proxy.settle().await?;
        let idle: usize = proxy.core.pools.all().iter().map(|p| p.idle_count()).sum();
        ensure!(idle == 3, "{idle} idle connections, want the share's 3");
        let mut found = proxy.conn_with(3, true).await?;
        found.query_drop("UPDATE t SET v = v WHERE id = 1").await?;
        ensure!(
            found.affected_rows() == 1,
            "found_rows client: {} affected rows",
            found.affected_rows()
        );
        let mut other = proxy.conn(0).await?;
        other.query_drop("UPDATE t SET v = v WHERE id = 1").await?;
        ensure!(
            other.affected_rows() == 0,
            "plain client: {} affected rows",
            other.affected_rows()
        );
        for c in [found, other] {
            c.disconnect().await?;
        }
        let b = proxy.core.pools.backend_connects();
        let (opened, closed) = b.iter().fold((0, 0), |a, b| (a.0 + b.opened, a.1 + b.closed));
        ensure!(
            opened == 4 && closed == 1,
            "opened {opened}, closed {closed}: want one closed for the new kind"
        );
        Ok(())
    })
}

/// `mysql -i` (`CLIENT_IGNORE_SPACE`) as one tenant, then as another on
/// the full share: the second switches the first's connection
/// (COM_CHANGE_USER, which gives the session the global `sql_mode`
/// without the IGNORE_SPACE the login added) and still finds it, as a new
/// connection of its own would (`COUNT (*)` parses).
fn ignore_space_after_switch(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "ignorespace", |proxy| async move {
        let held = proxy.hold_two().await?;
        let sql = "SELECT FIND_IN_SET('IGNORE_SPACE', @@sql_mode) > 0; SELECT COUNT (*) FROM t";
        for i in [2, 3, 2] {
            let (name, _, db) = tenant(i);
            let out = tokio::process::Command::new("mysql")
                .args(["--no-defaults", "-h", &proxy.rw.ip().to_string()])
                .args(["-P", &proxy.rw.port().to_string(), "-u", &name, &format!("-p{name}-pw")])
                .args(["--skip-ssl", "-N", "-B", "-i", &db, "-e", sql])
                .output()
                .await
                .context("running mysql")?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            ensure!(
                out.status.success() && stdout.lines().collect::<Vec<_>>() == ["1", "1"],
                "sw{i} with -i: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            proxy.settle().await?;
        }
        let (opened, switched, failed) = proxy.counts();
        ensure!(
            opened == 3 && switched >= 2 && failed == 0,
            "opened {opened}, switched {switched}, failed {failed}: want the third connection switched"
        );
        for c in held {
            c.disconnect().await?;
        }
        Ok(())
    })
}

fn many_at_once(ctx: &Ctx) -> Result<()> {
    at_once(ctx, "many", false)
}

/// As [`many_at_once`], with every other client asking for
/// `CLIENT_FOUND_ROWS`: its leases take connections opened with it, which
/// a switch keeps, so a lease of one kind that finds only the other kind
/// idle on the full share gets the place of one closed for it. Every
/// client finishes, each sees its own kind's affected rows, and the
/// backend never has more than its 3 connections open.
fn two_kinds_at_once(ctx: &Ctx) -> Result<()> {
    at_once(ctx, "kinds", true)
}

/// Three clients per tenant at once, 15 transactions each, on a share of
/// 3 connections; `mixed`: every other client with `CLIENT_FOUND_ROWS`.
fn at_once(ctx: &Ctx, name: &str, mixed: bool) -> Result<()> {
    const CLIENTS_PER_TENANT: usize = 3;
    const TRANSACTIONS: usize = 15;
    ctx.rt.block_on(async {
        let proxy = Arc::new(proxy(ctx, name).await?);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The connections open on the backend, sampled while the clients run.
        let sampler = {
            let (proxy, done) = (proxy.clone(), done.clone());
            tokio::spawn(async move {
                let mut most = 0u64;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    for b in proxy.core.pools.backend_connects() {
                        most = most.max(b.opened.saturating_sub(b.closed));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
                most
            })
        };
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..N {
            for k in 0..CLIENTS_PER_TENANT {
                let proxy = proxy.clone();
                let found_rows = mixed && (i * CLIENTS_PER_TENANT + k) % 2 == 1;
                tasks.spawn(async move {
                    let mut c = proxy.conn_with(i, found_rows).await?;
                    let (_, want_user, want_db) = tenant(i);
                    for n in 0..TRANSACTIONS {
                        let (user, db, _, v) = whoami(&mut c).await?;
                        ensure!(
                            user == format!("{want_user}@%") && db == want_db && v == want_db,
                            "sw{i} client {k} transaction {n}: {user} on {db} read {v}"
                        );
                        let got: Option<i64> = c.exec_first("SELECT ? * 2", (n as i64,)).await?;
                        ensure!(got == Some(2 * n as i64), "{got:?}");
                        if mixed {
                            // Matched rows for CLIENT_FOUND_ROWS, changed ones otherwise.
                            c.query_drop("UPDATE t SET v = v WHERE id = 1").await?;
                            let want = u64::from(found_rows);
                            ensure!(
                                c.affected_rows() == want,
                                "sw{i} client {k} (found_rows {found_rows}) transaction {n}: {} affected rows",
                                c.affected_rows()
                            );
                        }
                    }
                    c.disconnect().await?;
                    anyhow::Ok(())
                });
            }
        }
        let mut errors = Vec::new();
        while let Some(r) = tasks.join_next().await {
            if let Err(e) = r.map_err(anyhow::Error::from).and_then(|r| r) {
                errors.push(format!("{e:#}"));
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let most_open = sampler.await?;
        let (opened, switched, failed) = proxy.counts();
        let peak = proxy.core.pools.backend_connects().iter().filter_map(|b| b.cap).max();
        if let Ok(p) = Arc::try_unwrap(proxy) {
            p.stop();
        }
        ensure!(errors.is_empty(), "{} clients failed: {:?}", errors.len(), errors);
        ensure!(peak == Some(3), "cap {peak:?}");
        ensure!(most_open <= 3, "{most_open} connections open at once on a cap of 3");
        if !mixed {
            ensure!(opened <= 3 + failed, "opened {opened} connections on a cap of 3");
        }
        ensure!(switched > 0, "no connection switched");
        Ok(())
    })
}
