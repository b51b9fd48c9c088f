//! A proxy of a case's own, from the test configuration as the case edits
//! it, beside the binary's shared one: started, its endpoints' addresses,
//! a tokio-postgres client (alice on app1), and a stop that waits for it
//! to finish. [`OwnFile`] is one read from a file of its own, for reload
//! cases: the reload reads the file again, as SIGHUP does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

pub(crate) struct Own {
    addrs: HashMap<String, SocketAddr>,
    pub(crate) admin: Option<SocketAddr>,
    pub(crate) core: Arc<gatehouse::core::Core<gatehouse::engine::pg::PgEngine>>,
    pub(crate) rules: Arc<gatehouse::rules::Rules>,
    proxy: tokio::task::JoinHandle<Result<(), gatehouse::AppError>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Own {
    pub(crate) async fn start(settings: gatehouse::config::Settings) -> Result<Self> {
        let app = gatehouse::App::bind(settings).await?;
        let addrs = app
            .settings()
            .endpoints
            .iter()
            .filter_map(|e| Some((e.name.clone(), app.local_addr(&e.name)?)))
            .collect();
        let admin = app.admin_addr();
        let core = app.pg_core();
        let rules = app.settings().rules.clone();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        Ok(Self {
            addrs,
            admin,
            core,
            rules,
            proxy,
            stop,
        })
    }

    pub(crate) fn addr(&self, endpoint: &str) -> Result<SocketAddr> {
        self.addrs
            .get(endpoint)
            .copied()
            .with_context(|| format!("no {endpoint} endpoint"))
    }

    /// A tokio-postgres client (no TLS) as alice on app1, its connection driven.
    pub(crate) async fn client(&self, endpoint: &str) -> Result<tokio_postgres::Client> {
        let at = self.addr(endpoint)?;
        let info = format!(
            "host={} port={} user=alice password=alice-pw dbname=app1 sslmode=disable",
            at.ip(),
            at.port()
        );
        let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        Ok(client)
    }

    pub(crate) async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(15), self.proxy)
            .await
            .context("run() did not return")???;
        Ok(())
    }
}

/// A proxy of the case's own, started from a file of its own (a copy of
/// the test configuration, edited), and what its file said at start.
/// Stopped when dropped.
pub(crate) struct OwnFile {
    base: String,
    path: PathBuf,
    pub(crate) app_endpoints: Arc<gatehouse::endpoints::Endpoints>,
    pub(crate) reloader: Arc<gatehouse::reload::Reloader>,
    pub(crate) core: Arc<gatehouse::core::Core<gatehouse::engine::pg::PgEngine>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for OwnFile {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl OwnFile {
    /// Started from `file` in the test directory, a copy of the test
    /// configuration.
    pub(crate) async fn start(ctx: &crate::Ctx, file: &str) -> Result<Self> {
        Self::start_edited(ctx, file, |t| t).await
    }

    /// [`Self::start`] from the test configuration passed through `edit`.
    pub(crate) async fn start_edited(ctx: &crate::Ctx, file: &str, edit: impl Fn(String) -> String) -> Result<Self> {
        let base = {
            let _file = crate::reload::lock_config();
            edit(std::fs::read_to_string(ctx.dir.join("gatehouse.toml"))?)
        };
        let path = ctx.dir.join(file);
        std::fs::write(&path, &base)?;
        let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
        let app = gatehouse::App::bind(settings).await?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let own = Self {
            base,
            path,
            app_endpoints: app.endpoints(),
            reloader: app.reloader(),
            core: app.pg_core(),
            stop: Some(stop),
        };
        tokio::spawn(gatehouse::run(app, async {
            let _ = stopped.await;
        }));
        Ok(own)
    }

    /// Writes the starting file with `extra` appended, and reloads.
    pub(crate) async fn reload_with(
        &self,
        extra: &str,
    ) -> Result<gatehouse::reload::ReloadOutcome, gatehouse::reload::ReloadError> {
        self.reload_edited(|t| format!("{t}\n{extra}")).await
    }

    /// Writes the starting file passed through `edit`, and reloads.
    pub(crate) async fn reload_edited(
        &self,
        edit: impl Fn(String) -> String,
    ) -> Result<gatehouse::reload::ReloadOutcome, gatehouse::reload::ReloadError> {
        std::fs::write(&self.path, edit(self.base.clone()))
            .map_err(|e| gatehouse::reload::ReloadError::Failed(e.to_string()))?;
        self.reloader.reload().await
    }

    pub(crate) fn addr(&self, endpoint: &str) -> Result<SocketAddr> {
        self.app_endpoints
            .local_addr(endpoint)
            .with_context(|| format!("no endpoint {endpoint}"))
    }

    /// A tokio-postgres client (no TLS) as `user` on app1, its connection
    /// driven; the driver's error as it is, inside (outside: no such endpoint).
    pub(crate) async fn try_client(
        &self,
        endpoint: &str,
        user: &str,
        password: &str,
    ) -> Result<Result<tokio_postgres::Client, tokio_postgres::Error>> {
        let at = self.addr(endpoint)?;
        let info = format!(
            "host={} port={} user={user} password={password} dbname=app1 sslmode=disable",
            at.ip(),
            at.port()
        );
        Ok(tokio_postgres::connect(&info, tokio_postgres::NoTls)
            .await
            .map(|(client, conn)| {
                tokio::spawn(conn);
                client
            }))
    }
}
