//! One running proxy: binds every endpoint, starts the topology monitors and
//! accept loops ([`crate::endpoints`]), and on shutdown stops accepting,
//! tells sessions to finish, and waits for them (up to the shutdown timeout).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::admin::{self, AdminState, view::CoreView};
use crate::config::Settings;
use crate::core::Core;
use crate::endpoints::Endpoints;
use crate::engine::mysql::MyEngine;
use crate::engine::pg::PgEngine;
use crate::park::ParkingLot;
use crate::reload::Reloader;

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
    endpoints: Arc<Endpoints>,
    admin: Option<(TcpListener, SocketAddr)>,
    pg: Arc<Core<PgEngine>>,
    mysql: Arc<Core<MyEngine>>,
    /// The one parking lot both engines' sessions park in, if parking is on.
    parking: Option<ParkingLot>,
    reloader: Arc<Reloader>,
    shutdown_tx: watch::Sender<bool>,
    /// What console sessions' commands run on (see [`crate::console`]).
    _console: Arc<dyn crate::console::Commands>,
}

impl App {
    /// Binds every endpoint (port 0 picks a free port; see [`App::local_addr`]).
    pub async fn bind(settings: Settings) -> Result<App, AppError> {
        let settings = Arc::new(settings);
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
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
        let endpoints = Arc::new(Endpoints::bind(&settings, pg.clone(), mysql.clone()).await?);
        let cores: Vec<Arc<dyn CoreView>> = vec![pg.clone(), mysql.clone()];
        let reloader = Arc::new(Reloader::new(settings.clone(), cores.clone(), endpoints.clone()));
        // Both cores answer console sessions with the one console over
        // every core (held here; the cores hold it weakly).
        let console: Arc<dyn crate::console::Commands> = Arc::new(admin::console::Console {
            cores,
            endpoints: endpoints.clone(),
            reloader: reloader.clone(),
        });
        let _ = pg.console.set(Arc::downgrade(&console));
        let _ = mysql.console.set(Arc::downgrade(&console));
        Ok(App {
            _console: console,
            settings,
            endpoints,
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
        self.endpoints.local_addr(endpoint)
    }

    /// The running endpoints (a reload adds and removes some).
    pub fn endpoints(&self) -> Arc<Endpoints> {
        self.endpoints.clone()
    }

    /// The PostgreSQL core (pools, topology), for reports and tests.
    pub fn pg_core(&self) -> Arc<Core<PgEngine>> {
        self.pg.clone()
    }

    /// The MySQL core (pools, topology), for reports and tests.
    pub fn mysql_core(&self) -> Arc<Core<MyEngine>> {
        self.mysql.clone()
    }

    /// The configuration the proxy started with.
    pub fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }
}

/// Runs `app` until `shutdown` completes, then drains sessions.
pub async fn run(app: App, shutdown: impl Future<Output = ()>) -> Result<(), AppError> {
    let (drain_tx, mut drain_rx) = mpsc::channel::<()>(1);
    let drain = DrainGuard(drain_tx);
    app.pg.start_monitors().await;
    app.mysql.start_monitors().await;
    app.endpoints.start(drain.clone());
    let mut tasks = Vec::new();
    if let Some((listener, addr)) = app.admin {
        tracing::info!(%addr, "admin API listening");
        let state = Arc::new(AdminState {
            cores: vec![
                app.pg.clone() as Arc<dyn CoreView>,
                app.mysql.clone() as Arc<dyn CoreView>,
            ],
            endpoints: app.endpoints.clone(),
            reloader: app.reloader.clone(),
            token: app.settings.admin.as_ref().and_then(|a| a.token.clone()),
            parking: app.parking.clone(),
        });
        tasks.push(tokio::spawn(admin::serve(listener, state, app.shutdown_tx.subscribe())));
    }
    if let Some(every) = app.settings.proxy.park_idle_after {
        tasks.push(tokio::spawn(park_sweeps(app.pg.clone(), app.mysql.clone(), every)));
    }
    drop(drain);
    shutdown.await;
    tracing::info!("shutting down: no new connections; waiting for sessions");
    app.endpoints.stop();
    for t in &tasks {
        t.abort();
    }
    let _ = app.shutdown_tx.send(true);
    // Idle sessions wait on their sockets, not on the shutdown signal.
    app.pg.cancels.wake_idle();
    app.mysql.cancels.wake_idle();
    // The timeout as last reloaded.
    let timeout = app.pg.settings().proxy.shutdown_timeout;
    if tokio::time::timeout(timeout, drain_rx.recv()).await.is_err() {
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
