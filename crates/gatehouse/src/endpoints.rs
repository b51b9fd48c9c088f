//! The endpoints' listeners while the proxy runs: one accept loop each,
//! handing clients to the engine of the endpoint's cluster. A reload
//! changes them in two steps, so that an error changes nothing:
//! [`Endpoints::prepare`] binds what the new configuration adds (any
//! failure refuses the whole reload), then [`Endpoints::commit`], after
//! the cores took the rest of the configuration, starts the added
//! endpoints, restarts the kept ones' accept loops with their new settings
//! (clients accepted from then on get them, a new TLS certificate too:
//! each handshake takes the configuration of the endpoint settings its
//! client was accepted with; sessions keep theirs; a new
//! `max_client_connections` applies to the clients connected too), and
//! stops the removed ones: their listener closes at once, and their
//! sessions end as at shutdown, each between two transactions.
//!
//! A listener is kept, not bound again, when an endpoint keeps its address;
//! an address an endpoint gives up can be taken by another in the same
//! reload (its socket passes over, so no client sees it closed).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::config::{EndpointSettings, EngineKind, Settings};
use crate::core::Core;
use crate::drain::DrainGuard;
use crate::engine::mysql::MyEngine;
use crate::engine::pg::PgEngine;
use crate::pool::Capacity;
use crate::serve::{ClientConn, Serve};

/// A running endpoint.
struct Running {
    settings: Arc<EndpointSettings>,
    /// `None` once [`Endpoints::stop`] closed it (shutdown).
    listener: Option<Arc<TcpListener>>,
    addr: SocketAddr,
    /// Client connections (`max_client_connections`; resized by a reload).
    slots: Arc<Capacity>,
    task: Option<JoinHandle<()>>,
}

impl Running {
    /// Aborts the accept loop; its handle, to wait until the task (and its
    /// hold on the listener) is gone.
    fn stop_accepting(&mut self) -> Option<JoinHandle<()>> {
        let t = self.task.take()?;
        t.abort();
        Some(t)
    }
}

/// An endpoint's connected clients, defined where the admin API shows it.
pub use gatehouse_admin::process::EndpointLoad;

/// Listeners a reload bound ahead of applying anything.
pub struct Prepared {
    bound: Vec<(String, Arc<TcpListener>, SocketAddr)>,
}

pub struct Endpoints {
    pg: Arc<Core<PgEngine>>,
    mysql: Arc<Core<MyEngine>>,
    running: Mutex<Vec<Running>>,
    /// Held while accept loops may start; `None` before [`Self::start`]
    /// and after [`Self::stop`].
    drain: Mutex<Option<DrainGuard>>,
    /// Set by [`Self::stop`]: a reload during the drain binds nothing.
    stopped: AtomicBool,
}

/// An endpoint's listener could not be bound (or taken over).
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for endpoint \"{endpoint}\": {source}")]
pub struct BindError {
    pub endpoint: String,
    pub addr: SocketAddr,
    pub source: std::io::Error,
}

async fn bind(e: &EndpointSettings) -> Result<(Arc<TcpListener>, SocketAddr), BindError> {
    let err = |source| BindError {
        endpoint: e.name.clone(),
        addr: e.listen,
        source,
    };
    let listener = TcpListener::bind(e.listen).await.map_err(err)?;
    let addr = listener.local_addr().map_err(err)?;
    Ok((Arc::new(listener), addr))
}

impl Endpoints {
    /// Binds every endpoint of `settings` (port 0 picks a free port), or
    /// takes its listener from `inherited` (an upgrade: the same name and
    /// configured address as in the process before).
    pub async fn bind(
        settings: &Settings,
        pg: Arc<Core<PgEngine>>,
        mysql: Arc<Core<MyEngine>>,
        inherited: &mut crate::upgrade::Inherited,
    ) -> Result<Self, BindError> {
        let mut running = Vec::new();
        for e in &settings.endpoints {
            let (listener, addr) = match inherited.take(&e.name, e.listen) {
                Some(l) => {
                    let err = |source| BindError {
                        endpoint: e.name.clone(),
                        addr: e.listen,
                        source,
                    };
                    let l = TcpListener::from_std(l).map_err(err)?;
                    let addr = l.local_addr().map_err(err)?;
                    tracing::info!(endpoint = %e.name, %addr, "listener taken over from the previous process");
                    (Arc::new(l), addr)
                }
                None => bind(e).await?,
            };
            running.push(Running {
                settings: e.clone(),
                listener: Some(listener),
                addr,
                slots: Arc::new(Capacity::new(e.max_client_connections as usize)),
                task: None,
            });
        }
        Ok(Self {
            pg,
            mysql,
            running: Mutex::new(running),
            drain: Mutex::new(None),
            stopped: AtomicBool::new(false),
        })
    }

    /// Starts accepting on every endpoint; sessions hold `drain`.
    pub fn start(&self, drain: DrainGuard) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        for r in running.iter_mut() {
            tracing::info!(endpoint = %r.settings.name, addr = %r.addr, cluster = %r.settings.cluster.name, role = ?r.settings.role, "listening");
            r.task = self.spawn(r, drain.clone());
        }
        *self.drain.lock().unwrap_or_else(PoisonError::into_inner) = Some(drain);
    }

    /// Stops accepting everywhere and closes every listener (shutdown):
    /// once this returns, connecting to an endpoint is refused, whoever
    /// still holds these endpoints (an admin request, a reload). The
    /// aborted accept loops are awaited, since the runtime drops an
    /// aborted task (and its hold on the listener) only a moment later.
    pub async fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.drain.lock().unwrap_or_else(PoisonError::into_inner).take();
        let loops: Vec<JoinHandle<()>> = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter_mut()
            .filter_map(|r| {
                r.listener = None;
                r.stop_accepting()
            })
            .collect();
        for t in loops {
            let _ = t.await;
        }
    }

    /// Starts `r`'s accept loop, unless its listener is closed.
    fn spawn(&self, r: &Running, drain: DrainGuard) -> Option<JoinHandle<()>> {
        let (endpoint, listener, slots) = (r.settings.clone(), r.listener.clone()?, r.slots.clone());
        Some(match r.settings.cluster.engine {
            EngineKind::Postgres => tokio::spawn(accept_loop(self.pg.clone(), endpoint, listener, slots, drain)),
            EngineKind::Mysql => tokio::spawn(accept_loop(self.mysql.clone(), endpoint, listener, slots, drain)),
        })
    }

    /// Every endpoint's listener, as an upgrade offers them to a successor
    /// (duplicated descriptors: the same sockets).
    pub fn listeners(&self) -> crate::upgrade::Listeners {
        use std::os::fd::AsFd;
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|r| {
                let fd = r.listener.as_ref()?.as_fd().try_clone_to_owned().ok()?;
                let offered = crate::upgrade::Offered {
                    name: r.settings.name.clone(),
                    listen: r.settings.listen,
                    addr: r.addr,
                };
                Some((offered, fd))
            })
            .collect()
    }

    /// The address an endpoint listens on now.
    pub fn local_addr(&self, endpoint: &str) -> Option<SocketAddr> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|r| r.settings.name == endpoint)
            .map(|r| r.addr)
    }

    /// Each endpoint's connected clients.
    pub fn load(&self) -> Vec<EndpointLoad> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|r| EndpointLoad {
                name: r.settings.name.clone(),
                connected: r.slots.in_use(),
                max: r.slots.size(),
            })
            .collect()
    }

    /// The running listener `new` can keep or take over: its own (same
    /// name, same configured address), or one whose endpoint gives its
    /// fixed address up in `settings`.
    fn reusable<'a>(running: &'a [Running], settings: &Settings, new: &EndpointSettings) -> Option<&'a Running> {
        if let Some(r) = running
            .iter()
            .find(|r| r.settings.name == new.name && r.settings.listen == new.listen)
        {
            return Some(r);
        }
        if new.listen.port() == 0 {
            return None;
        }
        running.iter().find(|r| {
            r.settings.listen == new.listen
                && !settings
                    .endpoints
                    .iter()
                    .any(|e| e.name == r.settings.name && e.listen == r.settings.listen)
        })
    }

    /// Binds the listeners `settings` adds; an address that cannot be
    /// bound refuses the reload (the listeners bound so far close again).
    pub async fn prepare(&self, settings: &Settings) -> Result<Prepared, BindError> {
        if self.stopped.load(Ordering::Acquire) {
            return Ok(Prepared { bound: Vec::new() });
        }
        let wanted: Vec<Arc<EndpointSettings>> = {
            let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
            settings
                .endpoints
                .iter()
                .filter(|e| Self::reusable(&running, settings, e).is_none())
                .cloned()
                .collect()
        };
        let mut bound = Vec::new();
        for e in wanted {
            let (listener, addr) = bind(&e).await?;
            bound.push((e.name.clone(), listener, addr));
        }
        Ok(Prepared { bound })
    }

    /// Switches to the endpoints of `settings` (see the module comment);
    /// returns what changed, and the accept loops it stopped: awaiting them
    /// makes sure a removed endpoint's listener is closed (an aborted task
    /// is dropped by the runtime a moment later). Runs after
    /// [`Self::prepare`] in the same reload.
    pub fn commit(&self, settings: &Settings, mut prepared: Prepared) -> (Vec<String>, Vec<JoinHandle<()>>) {
        let mut applied = Vec::new();
        let mut stopped = Vec::new();
        let drain = self.drain.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        // Stopped after this reload's `prepare` bound its listeners: they
        // close here (`stop` set the flag before taking this lock).
        let closed = self.stopped.load(Ordering::Acquire);
        let mut next = Vec::with_capacity(settings.endpoints.len());
        for e in &settings.endpoints {
            let (listener, addr) = match prepared.bound.iter().position(|(n, _, _)| *n == e.name) {
                Some(i) => {
                    let (_, l, a) = prepared.bound.swap_remove(i);
                    (Some(l), a)
                }
                None => match Self::reusable(&running, settings, e) {
                    Some(r) => (r.listener.clone(), r.addr),
                    // Not prepared for: cannot happen within one reload.
                    None => continue,
                },
            };
            let before = running.iter().find(|r| r.settings.name == e.name);
            let slots = match before {
                Some(b) => {
                    b.slots.resize(e.max_client_connections as usize);
                    b.slots.clone()
                }
                None => Arc::new(Capacity::new(e.max_client_connections as usize)),
            };
            match before {
                None => applied.push(format!("endpoint \"{}\" added, listening on {addr}", e.name)),
                Some(b) => {
                    if b.addr != addr {
                        applied.push(format!("endpoint \"{}\" moved to {addr}", e.name));
                    }
                    for change in crate::config::endpoint_changes(&b.settings, e) {
                        tracing::info!(endpoint = %e.name, change, "endpoint changed");
                        applied.push(format!("endpoint \"{}\": {change}", e.name));
                    }
                }
            }
            next.push(Running {
                settings: e.clone(),
                listener: listener.filter(|_| !closed),
                addr,
                slots,
                task: None,
            });
        }
        // Every old accept loop stops before a new one starts on its socket.
        for r in running.iter_mut() {
            stopped.extend(r.stop_accepting());
        }
        for r in running.iter() {
            if !settings.endpoints.iter().any(|e| e.name == r.settings.name) {
                let closing = match r.settings.cluster.engine {
                    EngineKind::Postgres => self.pg.cancels.close_endpoint(&r.settings),
                    EngineKind::Mysql => self.mysql.cancels.close_endpoint(&r.settings),
                };
                tracing::info!(endpoint = %r.settings.name, closing, "endpoint removed: listener closed, its sessions end between transactions");
                applied.push(format!(
                    "endpoint \"{}\" removed: listener closed, {closing} sessions end between transactions",
                    r.settings.name
                ));
            }
        }
        if let Some(drain) = drain {
            for r in next.iter_mut() {
                r.task = self.spawn(r, drain.clone());
            }
        }
        *running = next;
        (applied, stopped)
    }
}

async fn accept_loop<E: Serve>(
    core: Arc<Core<E>>,
    endpoint: Arc<EndpointSettings>,
    listener: Arc<TcpListener>,
    slots: Arc<Capacity>,
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
                    admission: slots.semaphore().clone().try_acquire_owned().ok(),
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

impl gatehouse_admin::process::Listeners for Endpoints {
    fn load(&self) -> Vec<EndpointLoad> {
        Endpoints::load(self)
    }

    fn local_addr(&self, endpoint: &str) -> Option<SocketAddr> {
        Endpoints::local_addr(self, endpoint)
    }
}
