//! A certificate and an RSA key rotated in their files, for a MariaDB
//! endpoint, on a proxy of the test's own read from a file of its own (the
//! reload reads it again, as SIGHUP does): the reload's answer names both,
//! handshakes from then on get the new certificate (after MySQL's SSL
//! request, which the PostgreSQL tests do not cover), and a TLS session
//! from before goes on.

use std::net::SocketAddr;

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::Queryable;

use crate::Ctx;
use crate::tls_probe::{TestCa, Upgrade, served_certificate};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "reload::rotated_tls_certificate_serves_new_handshakes",
        rotated_certificate,
    )]
}

fn tls_opts(addr: SocketAddr, ca: &TestCa) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some("alice"))
        .pass(Some("alice-pw"))
        .db_name(Some("app1"))
        .prefer_socket(false)
        .ssl_opts(
            mysql_async::SslOpts::default()
                .with_root_certs(vec![ca.pem().into_bytes().into()])
                .with_danger_tls_hostname_override(Some("localhost")),
        )
        .into()
}

/// A new 2048-bit RSA key at `path`.
fn rsa_key(path: &std::path::Path) -> Result<()> {
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(path)
        .output()
        .context("running openssl genpkey")?;
    ensure!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn rotated_certificate(ctx: &Ctx) -> Result<()> {
    let ca = TestCa::new()?;
    let (a, b) = (ca.leaf()?, ca.leaf()?);
    let (cert, key, rsa) = (
        ctx.dir.join("rotating.pem"),
        ctx.dir.join("rotating.key"),
        ctx.dir.join("rotating-rsa.pem"),
    );
    a.write(&cert, &key)?;
    rsa_key(&rsa)?;
    let text = crate::own_config_text(
        ctx,
        "",
        &format!(
            "tls = {{ cert = \"{}\", key = \"{}\" }}\nmysql_rsa_key = \"{}\"\n",
            cert.display(),
            key.display(),
            rsa.display()
        ),
    )?;
    let path = ctx.dir.join("own-tls.toml");
    std::fs::write(&path, &text)?;
    ctx.rt.block_on(async {
        let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
        let app = gatehouse::App::bind(settings).await?;
        let (endpoints, reloader) = (app.endpoints(), app.reloader());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(gatehouse::run(app, async {
            let _ = stopped.await;
        }));
        let result = async {
            let at = endpoints.local_addr("rw").context("no rw")?;
            ensure!(
                served_certificate(at, Upgrade::Mysql, &ca).await? == a.der,
                "not the first certificate at start"
            );
            let mut before = mysql_async::Conn::new(tls_opts(at, &ca)).await?;
            let one: Option<i32> = before.query_first("SELECT 1").await?;
            ensure!(one == Some(1));

            // Rotated in place: same paths, new content.
            b.write(&cert, &key)?;
            rsa_key(&rsa)?;
            let outcome = reloader.reload().await?;
            let said = |what: &str| outcome.applied.iter().any(|c| c.starts_with(what));
            ensure!(said("endpoint \"rw\": TLS certificate reloaded"), "{outcome:?}");
            ensure!(said("endpoint \"rw\": mysql_rsa_key reloaded"), "{outcome:?}");
            ensure!(outcome.not_applied.is_empty(), "{outcome:?}");
            ensure!(
                served_certificate(at, Upgrade::Mysql, &ca).await? == b.der,
                "a handshake after the reload got the old certificate"
            );
            let one: Option<i32> = before.query_first("SELECT 1").await?;
            ensure!(one == Some(1), "the TLS session from before the reload");
            let mut after = mysql_async::Conn::new(tls_opts(at, &ca)).await?;
            let two: Option<i32> = after.query_first("SELECT 2").await?;
            ensure!(two == Some(2));
            before.disconnect().await?;
            after.disconnect().await?;
            Ok(())
        }
        .await;
        let _ = stop.send(());
        result
    })
}
