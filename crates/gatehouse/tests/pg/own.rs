//! A proxy of a case's own, from the test configuration as the case edits
//! it, beside the binary's shared one: started, its endpoints' addresses,
//! a tokio-postgres client (alice on app1), and a stop that waits for it
//! to finish.

use std::collections::HashMap;
use std::net::SocketAddr;
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
