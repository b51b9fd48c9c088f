//! One running proxy: binds every endpoint, starts the topology monitors and
//! accept loops, and on shutdown stops accepting, tells sessions to finish,
//! and waits for them (up to the shutdown timeout).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::admin::{self, AdminState, EndpointSlots, view::CoreView};
use crate::config::{EndpointSettings, EngineKind, Settings};
use crate::core::Core;
use crate::engine::mysql::MyEngine;
use crate::engine::pg::PgEngine;
use crate::engine::{ClientConn, Serve};
use crate::park::ParkingLot;
use crate::reload::Reloader;
use crate::topology;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot listen on {addr} for endpoint \"{endpoint}\": {source}")]
    Bind {
        endpoint: String,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr} for the admin API: {source}")]
    BindAdmin { addr: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Park(#[from] crate::park::ParkError),
}

/// Held by every session; shutdown waits until all are dropped.
#[derive(Clone)]
pub struct DrainGuard(#[allow(dead_code)] mpsc::Sender<()>);

/// A proxy with its listeners bound, ready to [`run`].
pub struct App {
    settings: Arc<Settings>,
    listeners: Vec<(Arc<EndpointSettings>, TcpListener, SocketAddr, Arc<Semaphore>)>,
    admin: Option<(TcpListener, SocketAddr)>,
    pg: Arc<Core<PgEngine>>,
    mysql: Arc<Core<MyEngine>>,
    /// The one parking lot both engines' sessions park in, if parking is on.
    parking: Option<ParkingLot>,
    reloader: Arc<Reloader>,
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
            let slots = Arc::new(Semaphore::new(e.max_client_connections as usize));
            listeners.push((e.clone(), listener, addr, slots));
        }
        let admin = match &settings.admin {
            None => None,
            Some(a) => {
                let listener = TcpListener::bind(a.listen)
                    .await
                    .map_err(|source| AppError::BindAdmin { addr: a.listen, source })?;
                let addr = listener
                    .local_addr()
                    .map_err(|source| AppError::BindAdmin { addr: a.listen, source })?;
                Some((listener, addr))
            }
        };
        let parking = match settings.proxy.park_idle_after {
            Some(_) => Some(ParkingLot::start(tokio::runtime::Handle::current())?),
            None => None,
        };
        let pg = Arc::new(Core::new(
            settings.clone(),
            PgEngine::default(),
            shutdown_rx.clone(),
            parking.clone(),
        ));
        let mysql = Arc::new(Core::new(
            settings.clone(),
            MyEngine::default(),
            shutdown_rx,
            parking.clone(),
        ));
        let cores: Vec<Arc<dyn CoreView>> = vec![pg.clone(), mysql.clone()];
        let reloader = Arc::new(Reloader::new(settings.source.clone(), cores));
        Ok(App {
            settings,
            listeners,
            admin,
            pg,
            mysql,
            parking,
            reloader,
            shutdown_tx,
        })
    }

    /// The address the admin API listens on, with `[admin]`.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|(_, a)| *a)
    }

    /// Reloads the configuration file (SIGHUP and the admin API use it).
    pub fn reloader(&self) -> Arc<Reloader> {
        self.reloader.clone()
    }

    /// The address an endpoint actually listens on.
    pub fn local_addr(&self, endpoint: &str) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|(e, _, _, _)| e.name == endpoint)
            .map(|(_, _, a, _)| *a)
    }

    /// The PostgreSQL core (pools, topology), for reports and tests.
    pub fn pg_core(&self) -> Arc<Core<PgEngine>> {
        self.pg.clone()
    }

    /// The MySQL core (pools, topology), for reports and tests.
    pub fn mysql_core(&self) -> Arc<Core<MyEngine>> {
        self.mysql.clone()
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
            EngineKind::Mysql => {
                topology::probe_once(&app.mysql, cluster).await;
                tokio::spawn(topology::monitor(app.mysql.clone(), cluster.clone()));
            }
        }
    }
    let mut accept_tasks = Vec::new();
    let mut endpoint_slots = Vec::new();
    for (endpoint, listener, addr, slots) in app.listeners {
        tracing::info!(endpoint = %endpoint.name, %addr, cluster = %endpoint.cluster.name, role = ?endpoint.role, "listening");
        endpoint_slots.push(EndpointSlots {
            name: endpoint.name.clone(),
            max: endpoint.max_client_connections as usize,
            slots: slots.clone(),
        });
        let task = match endpoint.cluster.engine {
            EngineKind::Postgres => tokio::spawn(accept_loop(app.pg.clone(), endpoint, listener, slots, drain.clone())),
            EngineKind::Mysql => tokio::spawn(accept_loop(app.mysql.clone(), endpoint, listener, slots, drain.clone())),
        };
        accept_tasks.push(task);
    }
    if let Some((listener, addr)) = app.admin {
        tracing::info!(%addr, "admin API listening");
        let state = Arc::new(AdminState {
            cores: vec![
                app.pg.clone() as Arc<dyn CoreView>,
                app.mysql.clone() as Arc<dyn CoreView>,
            ],
            endpoints: endpoint_slots,
            reloader: app.reloader.clone(),
            token: app.settings.admin.as_ref().and_then(|a| a.token.clone()),
            parking: app.parking.clone(),
        });
        accept_tasks.push(tokio::spawn(admin::serve(listener, state, app.shutdown_tx.subscribe())));
    }
    if let Some(every) = app.settings.proxy.park_idle_after {
        accept_tasks.push(tokio::spawn(park_sweeps(app.pg.clone(), app.mysql.clone(), every)));
    }
    drop(drain);
    shutdown.await;
    tracing::info!("shutting down: no new connections; waiting for sessions");
    for t in &accept_tasks {
        t.abort();
    }
    let _ = app.shutdown_tx.send(true);
    // Idle sessions wait on their sockets, not on the shutdown signal.
    app.pg.cancels.wake_idle();
    app.mysql.cancels.wake_idle();
    if tokio::time::timeout(app.settings.proxy.shutdown_timeout, drain_rx.recv())
        .await
        .is_err()
    {
        tracing::warn!("shutdown timeout reached with sessions still open");
    }
    if let Some(lot) = &app.parking {
        lot.stop();
    }
    Ok(())
}

/// Asks sessions of both engines idle for `every` (and up to twice that)
/// to park: one timer for both.
async fn park_sweeps(pg: Arc<Core<PgEngine>>, mysql: Arc<Core<MyEngine>>, every: std::time::Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        pg.cancels.ask_idle_to_park();
        mysql.cancels.ask_idle_to_park();
    }
}

async fn accept_loop<E: Serve>(
    core: Arc<Core<E>>,
    endpoint: Arc<EndpointSettings>,
    listener: TcpListener,
    slots: Arc<Semaphore>,
    drain: DrainGuard,
) {
    loop {
        match listener.accept().await {
            Ok((socket, peer)) => {
                let _ = socket.set_nodelay(true);
                core.stats.record_accept();
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
