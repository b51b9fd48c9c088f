//! One running proxy: binds every endpoint, starts the topology monitors and
//! accept loops, and on shutdown stops accepting, tells sessions to finish,
//! and waits for them (up to the shutdown timeout).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::config::{EndpointSettings, EngineKind, Settings};
use crate::core::Core;
use crate::engine::pg::PgEngine;
use crate::engine::{ClientConn, Engine};
use crate::topology;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot listen on {addr} for endpoint \"{endpoint}\": {source}")]
    Bind {
        endpoint: String,
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Held by every session; shutdown waits until all are dropped.
#[derive(Clone)]
pub struct DrainGuard(#[allow(dead_code)] mpsc::Sender<()>);

/// A proxy with its listeners bound, ready to [`run`].
pub struct App {
    settings: Arc<Settings>,
    listeners: Vec<(Arc<EndpointSettings>, TcpListener, SocketAddr)>,
    pg: Arc<Core<PgEngine>>,
    shutdown_tx: watch::Sender<bool>,
}

impl App {
    /// Binds every endpoint (port 0 picks a free port; see [`App::local_addr`]).
    pub async fn bind(settings: Settings) -> Result<App, AppError> {
        let settings = Arc::new(settings);
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut listeners = Vec::new();
        for e in &settings.endpoints {
            let listener = TcpListener::bind(e.listen).await.map_err(|source| AppError::Bind {
                endpoint: e.name.clone(),
                addr: e.listen,
                source,
            })?;
            let addr = listener.local_addr().map_err(|source| AppError::Bind {
                endpoint: e.name.clone(),
                addr: e.listen,
                source,
            })?;
            listeners.push((e.clone(), listener, addr));
        }
        let pg = Arc::new(Core::new(settings.clone(), PgEngine::default(), shutdown_rx));
        Ok(App {
            settings,
            listeners,
            pg,
            shutdown_tx,
        })
    }

    /// The address an endpoint actually listens on.
    pub fn local_addr(&self, endpoint: &str) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|(e, _, _)| e.name == endpoint)
            .map(|(_, _, a)| *a)
    }

    /// The PostgreSQL core (pools, topology), for reports and tests.
    pub fn pg_core(&self) -> Arc<Core<PgEngine>> {
        self.pg.clone()
    }

    pub fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }
}

/// Runs `app` until `shutdown` completes, then drains sessions.
pub async fn run(app: App, shutdown: impl Future<Output = ()>) -> Result<(), AppError> {
    let (drain_tx, mut drain_rx) = mpsc::channel::<()>(1);
    let drain = DrainGuard(drain_tx);
    for cluster in &app.settings.clusters {
        match cluster.engine {
            EngineKind::Postgres => {
                topology::probe_once(&app.pg, cluster).await;
                tokio::spawn(topology::monitor(app.pg.clone(), cluster.clone()));
            }
        }
    }
    let mut accept_tasks = Vec::new();
    for (endpoint, listener, addr) in app.listeners {
        tracing::info!(endpoint = %endpoint.name, %addr, cluster = %endpoint.cluster.name, role = ?endpoint.role, "listening");
        let task = match endpoint.cluster.engine {
            EngineKind::Postgres => tokio::spawn(accept_loop(app.pg.clone(), endpoint, listener, drain.clone())),
        };
        accept_tasks.push(task);
    }
    drop(drain);
    shutdown.await;
    tracing::info!("shutting down: no new connections; waiting for sessions");
    for t in &accept_tasks {
        t.abort();
    }
    let _ = app.shutdown_tx.send(true);
    if tokio::time::timeout(app.settings.proxy.shutdown_timeout, drain_rx.recv())
        .await
        .is_err()
    {
        tracing::warn!("shutdown timeout reached with sessions still open");
    }
    Ok(())
}

async fn accept_loop<E: Engine>(
    core: Arc<Core<E>>,
    endpoint: Arc<EndpointSettings>,
    listener: TcpListener,
    drain: DrainGuard,
) {
    let slots = Arc::new(Semaphore::new(endpoint.max_client_connections as usize));
    loop {
        match listener.accept().await {
            Ok((socket, peer)) => {
                let _ = socket.set_nodelay(true);
                let client = ClientConn {
                    socket,
                    peer,
                    endpoint: endpoint.clone(),
                    admission: slots.clone().try_acquire_owned().ok(),
                    drain: drain.clone(),
                };
                tokio::spawn(E::serve(core.clone(), client));
            }
            Err(e) => {
                // Out of file descriptors and similar: back off briefly.
                tracing::warn!(endpoint = %endpoint.name, error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}
