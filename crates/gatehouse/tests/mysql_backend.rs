//! The MySQL engine's backend connections against a real MariaDB primary and
//! replica: login (root and a native-password user, with and without a
//! database, wrong password), text queries (NULLs, several result sets,
//! server errors), MariaDB's ed25519 plugin (key derivation checked
//! against the server's), COM_RESET_CONNECTION, COM_CHANGE_USER between users
//! of both plugins (a tenant switch: no state of the previous user left),
//! role probes, `KILL QUERY` cancels and the idle liveness check. One cluster serves every check, run in order.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse::backend_tls::BackendTls;
use gatehouse::engine::Probe;
use gatehouse::engine::mysql::backend::{self, MyConn};
use gatehouse::error::{Condition, ProxyError};
use gatehouse_proto_mysql::consts::COM_QUERY;
use gatehouse_testkit::{Cluster, Options};

const TIMEOUT: Duration = Duration::from_secs(10);
const USER: &str = "gh_be_user";
const PASSWORD: &str = "be-secret-pw";
const DATABASE: &str = "gh_be_db";
/// A user of MariaDB's ed25519 plugin (the server switches logins to it).
const ED_USER: &str = "gh_ed_user";
const ED_PASSWORD: &str = "ed-secret-pw";

struct Env {
    primary: String,
    replica: String,
    root_password: String,
    max_connections: u32,
}

impl Env {
    /// A connection as [`USER`], on `database` when given.
    async fn user(&self, database: Option<&str>) -> Result<MyConn, ProxyError> {
        connect(&self.primary, USER, PASSWORD.as_bytes(), database).await
    }

    /// The probe of `addr`, as root.
    async fn probe(&self, addr: &str) -> Result<Probe, ProxyError> {
        backend::probe(
            addr,
            "root",
            self.root_password.as_bytes(),
            TIMEOUT,
            &BackendTls::default(),
        )
        .await
    }

    async fn root(&self) -> Result<MyConn> {
        connect(&self.primary, "root", self.root_password.as_bytes(), None)
            .await
            .context("root connect")
    }
}

/// [`backend::connect`] within [`TIMEOUT`], without TLS.
async fn connect(addr: &str, user: &str, password: &[u8], database: Option<&str>) -> Result<MyConn, ProxyError> {
    backend::connect(addr, user, password, database, 0, TIMEOUT, &BackendTls::default()).await
}

fn rows(v: &[&[Option<&str>]]) -> Vec<Vec<Option<String>>> {
    v.iter()
        .map(|r| r.iter().map(|c| c.map(str::to_owned)).collect())
        .collect()
}

fn one(r: &backend::QueryResult) -> Result<Option<String>> {
    r.rows.first().and_then(|row| row.first()).cloned().context("no value")
}

#[test]
fn mysql_backend_connections() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("gatehouse-mysql-backend-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = Cluster::up(
        &dir,
        &Options {
            pg: false,
            mysql: true,
            mysql_replicas: 1,
            ..Options::default()
        },
    )?;
    let primary = cluster.mysql_primary().context("no primary")?;
    let replica = *cluster.mysql_replicas().first().context("no replica")?;
    cluster.mysql_sql(
        &primary.name,
        &format!(
            "CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'; CREATE DATABASE {DATABASE}; \
             GRANT ALL ON {DATABASE}.* TO '{USER}'@'%';"
        ),
    )?;
    let max_connections = cluster
        .mysql_sql(&primary.name, "SELECT @@global.max_connections")?
        .parse()?;
    let env = Env {
        primary: primary.addr(),
        replica: replica.addr(),
        root_password: cluster.mysql_password().to_owned(),
        max_connections,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        login(&env).await.context("login")?;
        ed25519_login(&env, &cluster, &primary.name).await.context("ed25519")?;
        queries(&env).await.context("queries")?;
        reset(&env).await.context("reset")?;
        change_user(&env).await.context("change_user")?;
        probe(&env).await.context("probe")?;
        cancel(&env).await.context("cancel")?;
        usable(&env).await.context("is_usable")
    })?;
    // Stop the servers first: their pid files live in `dir`, and without
    // them the cluster's drop could not find the servers to stop (they
    // were left running after every run).
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

async fn login(env: &Env) -> Result<()> {
    let mut root = env.root().await?;
    let who = root.query("SELECT CURRENT_USER(), DATABASE()").await?;
    ensure!(
        matches!(who.rows.as_slice(), [row] if row.len() == 2 && row[0].as_deref().is_some_and(|u| u.starts_with("root@")) && row[1].is_none()),
        "{who:?}"
    );
    ensure!(
        root.connection_id > 0 && root.server_version.contains("MariaDB"),
        "{root:?}"
    );
    ensure!(root.charset == 45, "charset {}", root.charset);
    let cs = root
        .query("SELECT @@character_set_client, @@collation_connection")
        .await?;
    ensure!(
        cs.rows == rows(&[&[Some("utf8mb4"), Some("utf8mb4_general_ci")]]),
        "{cs:?}"
    );
    root.close().await;

    for db in [Some(DATABASE), None] {
        let mut c = env
            .user(db)
            .await
            .with_context(|| format!("user connect with database {db:?}"))?;
        let who = c.query("SELECT CURRENT_USER(), DATABASE()").await?;
        ensure!(
            who.rows == vec![vec![Some(format!("{USER}@%")), db.map(str::to_owned)]],
            "{who:?}"
        );
        c.close().await;
    }

    let wrong = "not-the-right-pw";
    let err = connect(&env.primary, USER, wrong.as_bytes(), Some(DATABASE))
        .await
        .err()
        .context("login with a wrong password succeeded")?;
    let text = format!("{err} {err:?}");
    ensure!(
        !text.contains(wrong) && !text.contains(PASSWORD),
        "password leaked: {text}"
    );
    ensure!(
        err.message.contains("could not log in") && err.message.contains(USER),
        "{err}"
    );
    ensure!(
        err.condition == Condition::BackendUnavailable && !err.retry_safe,
        "{err:?}"
    );
    ensure!(err.detail.as_deref().is_some_and(|d| d.contains("1045")), "{err:?}");

    let err = env
        .user(Some("no_such_db"))
        .await
        .err()
        .context("login to a missing database succeeded")?;
    ensure!(
        matches!(err.condition, Condition::UnknownDatabase | Condition::NotAllowed),
        "{err:?}"
    );

    // Nothing listens there: a quick BackendUnavailable, not a hang.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")?;
    let dead_addr = dead.local_addr()?.to_string();
    drop(dead);
    let err = connect(&dead_addr, USER, PASSWORD.as_bytes(), None)
        .await
        .err()
        .context("connect to a closed port succeeded")?;
    ensure!(
        err.condition == Condition::BackendUnavailable && err.retry_safe,
        "{err:?}"
    );
    Ok(())
}

/// A user identified via MariaDB's ed25519 plugin: the server switches the
/// backend login to `client_ed25519`, and the key the proxy derives from the
/// password is the one the server stored.
async fn ed25519_login(env: &Env, cluster: &Cluster, primary: &str) -> Result<()> {
    use base64::Engine as _;
    use gatehouse_proto_mysql::auth::ed25519;
    cluster.mysql_sql(
        primary,
        &format!(
            "INSTALL SONAME 'auth_ed25519'; \
             CREATE USER '{ED_USER}'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('{ED_PASSWORD}'); \
             GRANT ALL ON {DATABASE}.* TO '{ED_USER}'@'%';"
        ),
    )?;
    let stored = cluster.mysql_sql(
        primary,
        &format!("SELECT JSON_VALUE(Priv, '$.authentication_string') FROM mysql.global_priv WHERE User = '{ED_USER}'"),
    )?;
    let ours = base64::engine::general_purpose::STANDARD_NO_PAD.encode(ed25519::public_key(ED_PASSWORD.as_bytes()));
    ensure!(
        stored.trim() == ours,
        "server stored {stored:?}, the proxy derives {ours:?}"
    );

    let mut c = connect(&env.primary, ED_USER, ED_PASSWORD.as_bytes(), Some(DATABASE))
        .await
        .context("ed25519 user connect")?;
    let who = c.query("SELECT CURRENT_USER(), DATABASE()").await?;
    ensure!(
        who.rows == vec![vec![Some(format!("{ED_USER}@%")), Some(DATABASE.to_owned())]],
        "{who:?}"
    );
    c.close().await;
    let err = connect(&env.primary, ED_USER, b"wrong-ed-pw", None)
        .await
        .err()
        .context("ed25519 login with a wrong password succeeded")?;
    ensure!(err.detail.as_deref().is_some_and(|d| d.contains("1045")), "{err:?}");
    Ok(())
}

async fn queries(env: &Env) -> Result<()> {
    let mut c = env.user(Some(DATABASE)).await?;
    let r = c.query("SELECT 1, NULL, 'x'").await?;
    ensure!(r.rows == rows(&[&[Some("1"), None, Some("x")]]), "{r:?}");

    let r = c.query("SELECT 1; SELECT 2 UNION ALL SELECT 3").await?;
    ensure!(r.rows == rows(&[&[Some("1")], &[Some("2")], &[Some("3")]]), "{r:?}");

    let r = c
        .query("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1), (2)")
        .await?;
    ensure!(r.affected_rows == 2 && r.rows.is_empty(), "{r:?}");
    let r = c.query("SELECT id FROM t ORDER BY id").await?;
    ensure!(r.rows == rows(&[&[Some("1")], &[Some("2")]]), "{r:?}");

    let err = c.query("SELEC 1").await.err().context("a syntax error succeeded")?;
    ensure!(err.detail.as_deref().is_some_and(|d| d.contains("1064")), "{err:?}");
    // An error ends a multi-statement reply; the connection stays in step.
    let err = c
        .query("SELECT 1; SELECT * FROM no_such_table; SELECT 3")
        .await
        .err()
        .context("a missing table succeeded")?;
    ensure!(err.detail.as_deref().is_some_and(|d| d.contains("1146")), "{err:?}");
    let r = c.query("SELECT 'still in step'").await?;
    ensure!(one(&r)?.as_deref() == Some("still in step"), "{r:?}");
    ensure!(c.is_usable(), "connection unusable after server errors");
    c.close().await;
    Ok(())
}

async fn reset(env: &Env) -> Result<()> {
    let mut c = env.user(Some(DATABASE)).await?;
    let default_mode = one(&c.query("SELECT @@session.sql_mode").await?)?;
    c.query("SET @@session.sql_mode = 'ANSI'; SET @leftover = 42").await?;
    let r = c.query("SELECT @@session.sql_mode, @leftover").await?;
    ensure!(r.rows[0][1].as_deref() == Some("42"), "{r:?}");
    ensure!(r.rows[0][0] != default_mode, "sql_mode did not change: {r:?}");
    c.query("BEGIN").await?;
    ensure!(c.status & 1 != 0, "BEGIN did not set SERVER_STATUS_IN_TRANS");
    c.reset().await?;
    ensure!(c.status & 1 == 0, "still in a transaction after reset");
    let r = c.query("SELECT @@session.sql_mode, @leftover, DATABASE()").await?;
    ensure!(
        r.rows == vec![vec![default_mode.clone(), None, Some(DATABASE.to_owned())]],
        "{r:?} (default sql_mode {default_mode:?})"
    );
    let cs = c.query("SELECT @@character_set_client").await?;
    ensure!(one(&cs)?.as_deref() == Some("utf8mb4"), "charset after reset: {cs:?}");
    c.close().await;
    Ok(())
}

/// Everything a session can leave behind, left on purpose: a user
/// variable, a temporary table, session variables, a prepared statement,
/// `LAST_INSERT_ID()` and an open transaction with a row in it.
async fn leave_state(c: &mut MyConn) -> Result<()> {
    c.query(&format!(
        "CREATE TABLE IF NOT EXISTS {DATABASE}.switched (id INT AUTO_INCREMENT PRIMARY KEY, v INT); \
         SET @leftover = 42; CREATE TEMPORARY TABLE {DATABASE}.tmp_left (a INT); \
         SET SESSION sql_mode = 'ANSI', SESSION wait_timeout = 77, SESSION autocommit = 0; \
         PREPARE left_stmt FROM 'SELECT 1'; INSERT INTO {DATABASE}.switched (v) VALUES (7)"
    ))
    .await?;
    let r = c.query("SELECT LAST_INSERT_ID(), @leftover, @@in_transaction").await?;
    ensure!(r.rows[0][0].as_deref() != Some("0"), "{r:?}");
    ensure!(
        r.rows[0][1].as_deref() == Some("42") && r.rows[0][2].as_deref() == Some("1"),
        "{r:?}"
    );
    Ok(())
}

/// Checks that the session on `c` is a fresh one of `user` on `database`:
/// nothing [`leave_state`] left is visible, and the row of the open
/// transaction was rolled back.
async fn fresh_session(c: &mut MyConn, user: &str, database: Option<&str>, root: &mut MyConn) -> Result<()> {
    let r = c
        .query(
            "SELECT CURRENT_USER(), DATABASE(), @leftover, LAST_INSERT_ID(), @@in_transaction, \
             @@session.sql_mode = @@global.sql_mode, @@session.wait_timeout = @@global.wait_timeout, \
             @@session.autocommit, @@character_set_client",
        )
        .await?;
    let want = [
        Some(format!("{user}@%")),
        database.map(str::to_owned),
        None,
        Some("0".into()),
        Some("0".into()),
        Some("1".into()),
        Some("1".into()),
        Some("1".into()),
        Some("utf8mb4".into()),
    ];
    ensure!(r.rows == vec![want.to_vec()], "{r:?}");
    let err = c
        .query(&format!("SELECT * FROM {DATABASE}.tmp_left"))
        .await
        .err()
        .context("the temporary table survived")?;
    ensure!(err.detail.as_deref().is_some_and(|d| d.contains("1146")), "{err:?}");
    let err = c
        .query("EXECUTE left_stmt")
        .await
        .err()
        .context("the prepared statement survived")?;
    ensure!(err.detail.as_deref().is_some_and(|d| d.contains("1243")), "{err:?}");
    let rows = root.query(&format!("SELECT COUNT(*) FROM {DATABASE}.switched")).await?;
    ensure!(
        one(&rows)?.as_deref() == Some("0"),
        "the open transaction's row was kept: {rows:?}"
    );
    Ok(())
}

/// COM_CHANGE_USER moves one connection between users of both plugins
/// (native, then ed25519 through an auth switch, then native again), with
/// and without a database; each time the session is fresh. A same-user
/// move (reset and COM_INIT_DB) is fresh too. A wrong password fails with
/// the server's refusal.
async fn change_user(env: &Env) -> Result<()> {
    let mut root = env.root().await?;
    let mut c = env.user(Some(DATABASE)).await?;
    let id = c.connection_id;
    let tls = BackendTls::default();
    let hops: [(&str, &str, Option<&str>); 4] = [
        (ED_USER, ED_PASSWORD, Some(DATABASE)),
        (USER, PASSWORD, None),
        (ED_USER, ED_PASSWORD, None),
        (USER, PASSWORD, Some(DATABASE)),
    ];
    for (user, password, database) in hops {
        leave_state(&mut c)
            .await
            .with_context(|| format!("before moving to {user}"))?;
        c.change_user(user, password.as_bytes(), database, TIMEOUT, &tls)
            .await
            .with_context(|| format!("COM_CHANGE_USER to {user} on {database:?}"))?;
        fresh_session(&mut c, user, database, &mut root)
            .await
            .with_context(|| format!("after moving to {user} on {database:?}"))?;
        let same = c.query("SELECT CONNECTION_ID()").await?;
        ensure!(
            one(&same)?.as_deref() == Some(id.to_string().as_str()),
            "{same:?} vs {id}"
        );
    }
    // The same user on another database: reset and COM_INIT_DB.
    root.query(&format!(
        "CREATE DATABASE IF NOT EXISTS gh_be_other; GRANT ALL ON gh_be_other.* TO '{USER}'@'%'"
    ))
    .await?;
    leave_state(&mut c).await?;
    c.reset_to_database("gh_be_other", TIMEOUT).await?;
    let r = c.query("SELECT DATABASE(), @leftover, @@in_transaction").await?;
    let moved = vec![vec![Some("gh_be_other".to_owned()), None, Some("0".to_owned())]];
    ensure!(r.rows == moved, "{r:?}");
    // A database the server refuses: the connection stays usable, reset,
    // on the database it had.
    leave_state(&mut c).await?;
    let refused = c
        .reset_to_database("gh_be_no_such_db", TIMEOUT)
        .await
        .err()
        .context("COM_INIT_DB of a missing database succeeded")?;
    ensure!(refused.intact, "{refused:?}");
    let r = c.query("SELECT DATABASE(), @leftover, @@in_transaction").await?;
    ensure!(r.rows == moved, "{r:?}");
    // A wrong password: the server's 1045, in the detail only.
    let err = c
        .change_user(ED_USER, b"wrong-ed-pw", None, TIMEOUT, &tls)
        .await
        .err()
        .context("COM_CHANGE_USER with a wrong password succeeded")?;
    ensure!(err.detail.as_deref().is_some_and(|d| d.contains("1045")), "{err:?}");
    ensure!(!err.message.contains("wrong-ed-pw"), "{err:?}");
    c.close().await;
    root.close().await;
    Ok(())
}

async fn probe(env: &Env) -> Result<()> {
    let p = env.probe(&env.primary).await?;
    ensure!(p.writable, "primary not writable: {p:?}");
    ensure!(p.max_connections == Some(env.max_connections), "{p:?}");
    let p = env.probe(&env.replica).await?;
    ensure!(!p.writable, "replica writable: {p:?}");
    ensure!(p.max_connections.is_some(), "{p:?}");
    Ok(())
}

async fn cancel(env: &Env) -> Result<()> {
    let mut c = env.user(None).await?;
    let target = c.cancel.clone();
    let shown = format!("{target:?}");
    ensure!(!shown.contains(PASSWORD), "Debug shows the password: {shown}");
    ensure!(target.connection_id() == c.connection_id, "{shown}");

    let started = Instant::now();
    let mut sleep = vec![COM_QUERY];
    sleep.extend_from_slice(b"SELECT SLEEP(20)");
    c.send_command(&sleep).await?;
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        backend::cancel(target).await
    });
    let reply = tokio::time::timeout(Duration::from_secs(15), c.read_result())
        .await
        .context("no reply to the cancelled query")??;
    canceller.await??;
    match &reply {
        Ok(r) if r.rows == rows(&[&[Some("1")]]) => {}
        Err(e) if e.code == 1317 => {}
        other => bail!("unexpected reply to a cancelled SLEEP: {other:?}"),
    }
    ensure!(
        started.elapsed() < Duration::from_secs(10),
        "cancel took {:?}",
        started.elapsed()
    );
    let r = c.query("SELECT 'alive'").await?;
    ensure!(one(&r)?.as_deref() == Some("alive"), "{r:?}");
    // Cancelling a connection that is gone is not an error.
    let gone = c.cancel.clone();
    c.close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    backend::cancel(gone).await.context("cancel of a closed connection")?;
    Ok(())
}

async fn usable(env: &Env) -> Result<()> {
    let mut victim = env.user(None).await?;
    ensure!(victim.is_usable(), "idle connection reported unusable");
    tokio::time::sleep(Duration::from_millis(200)).await;
    ensure!(victim.is_usable(), "idle connection reported unusable after a pause");
    let mut root = env.root().await?;
    root.query(&format!("KILL {}", victim.connection_id)).await?;
    root.close().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while victim.is_usable() {
        ensure!(Instant::now() < deadline, "killed connection still reported usable");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
