//! One running proxy: binds every endpoint (or takes the listeners over from
//! the process it upgrades, [`crate::upgrade`]), starts the topology
//! monitors and accept loops ([`crate::endpoints`]), offers its listeners to
//! a successor (with `[proxy] upgrade_socket`), and on shutdown, or once a
//! successor took over, stops accepting, tells sessions to finish, and
//! waits for them (up to the shutdown timeout).

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
    #[error(transparent)]
    Bind(#[from] crate::endpoints::BindError),
    #[error("cannot listen on {addr} for the admin API: {source}")]
    BindAdmin { addr: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Park(#[from] crate::park::ParkError),
}

/// Held by every session; shutdown waits until all are dropped (the core
/// defines it: sessions hold it, and they sit below the app).
pub use gatehouse_core::drain::DrainGuard;

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
    /// The admin listener as offered to a successor (the same socket).
    admin_offer: Option<(crate::upgrade::Offered, std::os::fd::OwnedFd)>,
    /// Told once the proxy accepts on every endpoint.
    serving: Option<tokio::sync::oneshot::Sender<()>>,
    /// Listeners are offered to a successor only after this resolves (a
    /// successor itself: once its predecessor let go of the socket path).
    offer_gate: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl App {
    /// Binds every endpoint (port 0 picks a free port; see [`App::local_addr`]).
    pub async fn bind(settings: Settings) -> Result<App, AppError> {
        Self::bind_inheriting(settings, crate::upgrade::Inherited::none()).await
    }

    /// [`Self::bind`], taking the listeners `inherited` holds for an
    /// endpoint (or the admin API) of the same name and configured address.
    pub async fn bind_inheriting(
        settings: Settings,
        mut inherited: crate::upgrade::Inherited,
    ) -> Result<App, AppError> {
        use std::os::fd::AsFd;
        let settings = Arc::new(settings);
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let admin = match &settings.admin {
            None => None,
            Some(a) => {
                let err = |source| AppError::BindAdmin { addr: a.listen, source };
                let listener = match inherited.take(crate::upgrade::ADMIN, a.listen) {
                    Some(l) => TcpListener::from_std(l).map_err(err)?,
                    None => TcpListener::bind(a.listen).await.map_err(err)?,
                };
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
        let endpoints = Arc::new(Endpoints::bind(&settings, pg.clone(), mysql.clone(), &mut inherited).await?);
        let admin_offer = match (&admin, &settings.admin) {
            (Some((l, addr)), Some(a)) => l.as_fd().try_clone_to_owned().ok().map(|fd| {
                let offered = crate::upgrade::Offered {
                    name: crate::upgrade::ADMIN.to_owned(),
                    listen: a.listen,
                    addr: *addr,
                };
                (offered, fd)
            }),
            _ => None,
        };
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
            admin_offer,
            serving: None,
            offer_gate: None,
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

    /// Resolves once [`run`] accepts on every endpoint.
    pub fn when_serving(&mut self) -> tokio::sync::oneshot::Receiver<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.serving = Some(tx);
        rx
    }

    /// Offers the listeners to a successor only once `gate` resolves.
    pub fn offer_after(&mut self, gate: tokio::sync::oneshot::Receiver<()>) {
        self.offer_gate = Some(gate);
    }
}

/// Offers the app's listeners on `[proxy] upgrade_socket` (after its gate);
/// when a successor is ready, asks [`run`] (through `handover`) to stop
/// accepting, and tells the successor once it has.
fn spawn_offer(
    app: &mut App,
    handover: mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
) -> Option<tokio::task::JoinHandle<()>> {
    let path = app.settings.proxy.upgrade_socket.clone()?;
    let endpoints = app.endpoints.clone();
    let admin = app.admin_offer.take();
    let gate = app.offer_gate.take();
    Some(tokio::spawn(async move {
        if let Some(g) = gate
            && g.await.is_err()
        {
            return;
        }
        let listeners = move || {
            let mut all = endpoints.listeners();
            if let Some((o, fd)) = &admin
                && let Ok(fd) = fd.try_clone()
            {
                all.push((o.clone(), fd));
            }
            all
        };
        let handed_over = || async move {
            let (ack_tx, ack_rx) = tokio::sync::oneshot::channel();
            if handover.send(ack_tx).await.is_ok() {
                let _ = ack_rx.await;
            }
        };
        tracing::info!(path = %path.display(), "offering the listeners to a successor (gatehouse upgrade)");
        if let Err(e) = crate::upgrade::offer(path, listeners, handed_over).await {
            tracing::warn!(error = %e, "upgrade socket: no hand-over possible");
        }
    }))
}

/// Runs `app` until `shutdown` completes or a successor took the listeners
/// over, then drains sessions.
pub async fn run(mut app: App, shutdown: impl Future<Output = ()>) -> Result<(), AppError> {
    let (handover_tx, mut handover_rx) = mpsc::channel::<tokio::sync::oneshot::Sender<()>>(1);
    let offering = spawn_offer(&mut app, handover_tx);
    let (drain_tx, mut drain_rx) = mpsc::channel::<()>(1);
    let drain = DrainGuard::new(drain_tx);
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
    if let Some(tx) = app.serving.take() {
        let _ = tx.send(());
    }
    let handed_over = tokio::select! {
        () = shutdown => None,
        Some(ack) = handover_rx.recv() => Some(ack),
    };
    match handed_over {
        Some(_) => tracing::info!("a successor took the listeners over: no new connections here; waiting for sessions"),
        None => tracing::info!("shutting down: no new connections; waiting for sessions"),
    }
    app.endpoints.stop().await;
    let mut drained = false;
    if let Some(ack) = handed_over {
        let _ = ack.send(());
        // The successor hears that this process stopped accepting.
        if let Some(task) = offering {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        }
        // Clients that logged in just before (a connection per
        // transaction) send their first statement within the grace and
        // finish; only sessions idle through it are closed.
        drained = tokio::time::timeout(crate::upgrade::DRAIN_IDLE_GRACE, drain_rx.recv())
            .await
            .is_ok();
    } else if let Some(task) = offering {
        // It holds copies of the listeners' descriptors.
        task.abort();
        let _ = task.await;
    }
    // Awaited too, so that the admin API's port is closed as well.
    for t in tasks {
        t.abort();
        let _ = t.await;
    }
    let _ = app.shutdown_tx.send(true);
    // Idle sessions wait on their sockets, not on the shutdown signal.
    app.pg.cancels.wake_idle();
    app.mysql.cancels.wake_idle();
    // The timeout as last reloaded.
    let timeout = app.pg.settings().proxy.shutdown_timeout;
    if !drained && tokio::time::timeout(timeout, drain_rx.recv()).await.is_err() {
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
