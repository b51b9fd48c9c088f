//! No secret ever shows: against its own PostgreSQL, a proxy whose backend
//! credentials come from the encrypted secrets store serves good and bad
//! logins (tokens valid, expired, tampered, for another endpoint; passwords
//! right and wrong; a backend secret the server refuses) with every log
//! line captured at TRACE level. Then the logs, every error the clients
//! saw, and the configuration's `Debug` form are searched for each
//! password, token, key and secret used: none may appear. The same for
//! everything the admin API (metrics, pools, stats, backends, reload) shows.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_proto_pg::auth::random_salt;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use gatehouse_secrets::{MasterKey, SecretsFile};
use gatehouse_testkit::http::request;
use gatehouse_testkit::{Cluster, Options};
use gatehouse_token::{IssueRequest, IssuingKey, issue, unix_seconds};

const OWNER_PW: &str = "store-owner-pw-4f1c";
const REFUSED_PW: &str = "refused-backend-pw-9d2e";
const ADMIN_TOKEN: &str = "leak-check-admin-token-5a1f";
const HS256: &str = "leak-check-hs256-secret-0123456789abcdef";
const TENANT_PW: &str = "tenant-pw-77a1";
const WRONG_PW: &str = "wrong-pw-3b8c";

/// Collects everything the proxy logs.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn config(cluster: &Cluster, verifier: &ScramVerifier) -> Result<String> {
    let p = cluster.pg_primary().context("no primary")?;
    Ok(format!(
        r#"
[proxy]
log_filter = "trace"

[admin]
listen = "127.0.0.1:0"
token_file = "admin.token"

[secrets_store]
file = "secrets.toml"
key_file = "master.key"

[tokens]
issuer = "leak-check"
hs256_secret_file = "hs256.secret"

[[clusters]]
name = "main"
engine = "postgres"
backends = ["{host}:{port}"]
monitor_secret = "superuser"
pool = {{ size = 4, borrow_timeout = "2s" }}

[[endpoints]]
name = "pw"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"
client_auth = "password"
allow_plaintext_tokens = true

[[endpoints]]
name = "scram"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"

[[tenants]]
name = "tess"
databases = ["app1"]
secret = "owner"
token = true
scram_verifier = "{verifier}"

[[tenants]]
name = "rex"
databases = ["app1"]
secret = "refused"
scram_verifier = "{verifier}"

[[secrets]]
name = "superuser"
user = "{su}"
password = "{su_pw}"
"#,
        host = p.host,
        port = p.port,
        su = cluster.pg_user(),
        su_pw = cluster.pg_password(),
    ))
}

async fn try_connect(addr: std::net::SocketAddr, user: &str, password: &str) -> Result<(), String> {
    let info = format!(
        "host={} port={} user={user} password={password} dbname=app1 sslmode=disable",
        addr.ip(),
        addr.port()
    );
    match tokio_postgres::connect(&info, tokio_postgres::NoTls).await {
        Ok((client, conn)) => {
            tokio::spawn(conn);
            client
                .query_one("SELECT 1", &[])
                .await
                .map(|_| ())
                .map_err(|e| format!("{e} {e:?}"))
        }
        Err(e) => Err(format!("{e} {e:?}")),
    }
}

#[test]
fn no_secret_in_logs_errors_or_settings() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("gatehouse-pg-secrets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let cluster = Cluster::up(&dir.join("cluster"), &Options::default())?;
    let primary = cluster.pg_primary().context("no primary")?.name.clone();
    cluster.pg_sql(
        &primary,
        "postgres",
        &format!("CREATE ROLE app_owner LOGIN PASSWORD '{OWNER_PW}'"),
    )?;
    cluster.pg_sql(
        &primary,
        "postgres",
        "CREATE ROLE refused_owner LOGIN PASSWORD 'something-else'",
    )?;
    cluster.pg_sql(&primary, "postgres", "CREATE DATABASE app1 OWNER app_owner")?;

    let key = MasterKey::generate()?;
    let key_text = key.to_text().to_string();
    std::fs::write(dir.join("master.key"), &key_text)?;
    let mut store = SecretsFile::new();
    store.set(&key, "owner", "app_owner", OWNER_PW)?;
    store.set(&key, "refused", "refused_owner", REFUSED_PW)?;
    store.save(dir.join("secrets.toml"))?;
    std::fs::write(dir.join("hs256.secret"), HS256)?;
    let verifier = ScramVerifier::from_password(TENANT_PW, &random_salt(), 4096);
    std::fs::write(dir.join("admin.token"), ADMIN_TOKEN)?;
    let text = config(&cluster, &verifier)?;
    std::fs::write(dir.join("gatehouse.toml"), &text)?;
    let settings = gatehouse::config::load(&dir.join("gatehouse.toml")).map_err(|p| anyhow::anyhow!("{p}"))?;
    let settings_debug = format!("{settings:?}");

    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("trace")
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut secrets: Vec<String> = vec![
        OWNER_PW.into(),
        REFUSED_PW.into(),
        HS256.into(),
        TENANT_PW.into(),
        WRONG_PW.into(),
        key_text.trim().into(),
        cluster.pg_password().to_owned(),
        ADMIN_TOKEN.into(),
    ];
    let (seen_errors, admin_output) = rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let (pw, scram) = (
            app.local_addr("pw").context("pw")?,
            app.local_addr("scram").context("scram")?,
        );
        let admin = app.admin_addr().context("no admin listener")?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let signing = IssuingKey::hs256(HS256.as_bytes(), None)?;
        let now = unix_seconds(std::time::SystemTime::now());
        let token = |audience: &str, issued: u64| {
            issue(
                &signing,
                &IssueRequest {
                    issuer: "leak-check".into(),
                    audience: audience.into(),
                    tenant: "tess".into(),
                    database: "app1".into(),
                    ttl: Duration::from_secs(120),
                    now: issued,
                },
            )
        };
        let good = token("pw", now)?;
        let expired = token("pw", now - 3600)?;
        let other_endpoint = token("scram", now)?;
        let mut tampered = good.clone();
        tampered.insert(good.find('.').context("no dot")? + 5, 'A');
        secrets.extend([good.clone(), expired.clone(), other_endpoint.clone(), tampered.clone()]);

        let mut errors = Vec::new();
        ensure!(try_connect(pw, "tess", &good).await.is_ok(), "good token refused");
        ensure!(try_connect(pw, "tess", TENANT_PW).await.is_ok(), "password refused");
        ensure!(try_connect(scram, "tess", TENANT_PW).await.is_ok(), "SCRAM refused");
        for (user, password) in [
            ("tess", expired.as_str()),
            ("tess", other_endpoint.as_str()),
            ("tess", tampered.as_str()),
            ("tess", WRONG_PW),
            ("nobody", WRONG_PW),
            ("nobody", good.as_str()),
        ] {
            errors.push(
                try_connect(pw, user, password)
                    .await
                    .err()
                    .context("bad login accepted")?,
            );
        }
        errors.push(
            try_connect(scram, "tess", WRONG_PW)
                .await
                .err()
                .context("bad SCRAM accepted")?,
        );
        // The server refuses this tenant's backend secret.
        errors.push(
            try_connect(scram, "rex", TENANT_PW)
                .await
                .err()
                .context("refused backend accepted")?,
        );
        // Everything the admin API shows after that traffic, and a reload.
        let admin_output = tokio::task::spawn_blocking(move || {
            let mut out = String::new();
            for (method, path) in [
                ("GET", "/metrics"),
                ("GET", "/api/pools"),
                ("GET", "/api/stats"),
                ("GET", "/api/backends"),
                ("POST", "/api/reload"),
                ("GET", "/metrics"),
            ] {
                let r = request(admin, method, path, Some(ADMIN_TOKEN))?;
                ensure!(r.status == 200, "{method} {path}: {} {}", r.status, r.body);
                out.push_str(&r.body);
            }
            anyhow::Ok(out)
        })
        .await??;
        ensure!(
            admin_output.contains("gatehouse_pool_connections") && admin_output.contains("app_owner"),
            "the admin output lacks the pools: {admin_output}"
        );
        let _ = tx.send(());
        let _ = tokio::time::timeout(Duration::from_secs(5), proxy).await;
        anyhow::Ok((errors, admin_output))
    })?;

    let logs = String::from_utf8_lossy(&logs.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)).into_owned();
    ensure!(
        logs.contains("password authentication refused"),
        "the logs were not captured"
    );
    for secret in &secrets {
        ensure!(
            !logs.contains(secret.as_str()),
            "the logs show a secret ({} chars)",
            secret.len()
        );
        ensure!(
            !settings_debug.contains(secret.as_str()),
            "the settings' Debug shows a secret"
        );
        ensure!(
            !admin_output.contains(secret.as_str()),
            "the admin API shows a secret ({} chars)",
            secret.len()
        );
        for e in &seen_errors {
            ensure!(!e.contains(secret.as_str()), "a client error shows a secret: {e}");
        }
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
