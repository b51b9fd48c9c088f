//! Transaction pooling: the client holds a backend connection only from the
//! first message of a transaction to the ReadyForQuery ('I') that ends it.
//! On each borrow the client's tracked parameters are replayed where they
//! differ; prepared statements are renamed to proxy-owned names and
//! prepared on demand; statements that create state which cannot move pin
//! the session (reason logged once and counted). This file holds the
//! session and its relay loop; `server.rs` the backend side (borrowing,
//! the server's messages, giving back), `client.rs` the frontend messages,
//! `prepare.rs` the prepared statements, `lost.rs` a backend lost under a
//! lease, `split.rs` routing each exchange on a split endpoint, `meter.rs`
//! what the session counts for `/metrics`.

mod client;
mod inspect;
mod lost;
mod meter;
mod prepare;
mod read;
mod server;
mod split;

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::PgEngine;
use super::pending::ResponseQueue;
use super::relay::End;
use super::statements::Registry;
use super::tracked;
use gatehouse_core::cancel::CancelKey;
use gatehouse_core::core::Core;
use gatehouse_core::engine::idle::{self, Woke};
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_core::pool::{Lease, Pool};
use gatehouse_settings::config::EndpointSettings;
use read::{KEPT_READ_BUFFER_LIMIT, read_client};

/// Non-data backend messages are held whole up to this size (a
/// RowDescription of a very wide table); DataRow and CopyData stream.
const CONTROL_HOLD_LIMIT: usize = 16 * 1024 * 1024;

/// Owner of a backend's unnamed statement when nobody knows whose it is
/// (session ids are never 0).
const UNKNOWN_OWNER: (u64, u64) = (0, 0);

/// Backend read-buffer growth step.
const READ_CHUNK: usize = 32 * 1024;

/// An outgoing buffer larger than this is freed between transactions even
/// before the session parks: during a connection storm every session not
/// yet parked holds its buffers, and that peak stays in the RSS.
const KEPT_BUFFER_LIMIT: usize = 1024;

/// How [`TxSession::run`] ended.
pub enum Outcome {
    /// The session is over; the error to send the client, if any.
    Ended(Option<ProxyError>),
    /// Idle long enough to park ([`gatehouse_core::park`]): no lease, nothing
    /// buffered; the idle timeout has this much left.
    Park(Option<Duration>),
}

/// What an idle wait ended with, short of the session's end.
enum Waited {
    Message,
    Park(Option<Duration>),
}

pub struct TxSession {
    pub core: Arc<Core<PgEngine>>,
    pub endpoint: Arc<EndpointSettings>,
    /// The endpoint's cluster as its last lease found it (not kept
    /// while parked).
    clusters: gatehouse_core::topology::ClusterCache,
    pub pool: Arc<Pool<PgEngine>>,
    pub cancel: CancelKey<super::backend::PgCancelTarget>,
    pub session_id: u64,
    pub desired: tracked::Values,
    /// The tracked values the session started with, after its startup
    /// parameters: what `RESET`, `RESET ALL`, `DISCARD ALL` and `SET … TO
    /// DEFAULT` return to, as on a direct connection that was opened with
    /// those parameters.
    baseline: tracked::Values,
    /// Tracked parameters (bits by [`tracked::TRACKED`] index) the
    /// transaction under way reset to their defaults: read back after it,
    /// they are taken back to [`Self::baseline`] before the next one.
    resets: u16,
    /// The tenant's cap on backend connections in use, if any.
    pub backend_cap: Option<gatehouse_core::pool::TenantCap>,
    lease: Option<Lease<PgEngine>>,
    cbuf: BytesMut,
    b_remaining: usize,
    to_backend: BytesMut,
    to_client: BytesMut,
    queue: ResponseQueue,
    registry: Registry,
    pinned: Option<String>,
    readback: bool,
    /// The transaction ran `ALTER ROLE|DATABASE ... SET`: at its end the
    /// backend's pooled connections are replaced, so new sessions start
    /// with the new defaults.
    defaults_changed: bool,
    /// After a synthetic error: drop client messages until Sync.
    client_skip: bool,
    /// Extended-query messages were sent since the client's last Sync: the
    /// backend's implicit transaction (and, after an error, its skipping
    /// to that Sync) belongs to this client until the Sync.
    unsynced: bool,
    status: u8,
    /// The transaction block the client is in died with its server: its
    /// messages are answered as an aborted block's until it ends it
    /// (`lost.rs`).
    lost_block: bool,
    /// In a lost block, the extended-query exchange under way ends it.
    lost_ending: bool,
    /// Split endpoints: where the lease is routed and read-your-writes.
    split: Option<Box<gatehouse_core::split::SplitState>>,
    /// Split endpoints: the client's next exchange waits for the read
    /// lease to go back (`split.rs`); the client is not read meanwhile.
    held: bool,
    /// Query rules and digest statistics ([`gatehouse_core::inspect`]).
    inspect: Box<gatehouse_core::inspect::Inspector>,
    /// The rules' verdict on the message being handled (`inspect.rs`).
    verdict: Option<gatehouse_settings::rules::Verdict>,
    /// How long the last lease took to get, for digest statistics.
    lease_wait: Duration,
    /// The statement last bound (what an Execute runs), when the core
    /// follows statements.
    bound: Option<Arc<super::statements::Statement>>,
    /// The reason the statement being sent pinned the session, if it did.
    just_pinned: Option<&'static str>,
    /// When the messages being handled were read and sent, with
    /// histograms on (`meter.rs`).
    stamp: Option<gatehouse_core::meter::Stamp>,
    /// The configuration as its transactions read it (taken again after a
    /// reload).
    view: gatehouse_core::core::SettingsView,
}

enum Event2 {
    Client(Option<std::io::Result<usize>>),
    Backend(std::io::Result<usize>),
    Shutdown,
}

/// A parked session's state ([`gatehouse_core::park`]): what outlives its
/// transactions. It parks only idle and unpinned (no lease, nothing
/// buffered or expected), so the buffers, the lease and the pinning reason
/// are not kept, and the rare tenant cap is boxed.
pub struct ParkedTx {
    core: Arc<Core<PgEngine>>,
    endpoint: Arc<EndpointSettings>,
    pool: Arc<Pool<PgEngine>>,
    cancel: CancelKey<super::backend::PgCancelTarget>,
    desired: tracked::Values,
    baseline: tracked::Values,
    backend_cap: Option<Box<gatehouse_core::pool::TenantCap>>,
    registry: Registry,
    readback: bool,
    resets: u16,
    client_skip: bool,
    status: u8,
    split: Option<Box<gatehouse_core::split::SplitState>>,
    inspect: Box<gatehouse_core::inspect::Inspector>,
}

impl ParkedTx {
    pub fn core(&self) -> &Arc<Core<PgEngine>> {
        &self.core
    }

    pub fn cancel(&self) -> &CancelKey<super::backend::PgCancelTarget> {
        &self.cancel
    }

    /// The endpoint's counters its client connection counts into.
    pub fn endpoint_meter(&self) -> Arc<gatehouse_core::meter::EndpointMeter> {
        self.inspect.meter().endpoint().clone()
    }

    /// The session again, with fresh (empty) buffers.
    pub fn resume(self) -> TxSession {
        let mut tx = TxSession::new(
            self.core,
            self.endpoint,
            self.pool,
            self.cancel,
            self.desired,
            self.inspect,
        );
        tx.backend_cap = self.backend_cap.map(|c| *c);
        tx.baseline = self.baseline;
        tx.registry = self.registry;
        tx.readback = self.readback;
        tx.resets = self.resets;
        tx.client_skip = self.client_skip;
        tx.status = self.status;
        tx.split = self.split;
        tx
    }
}

impl TxSession {
    /// The state a parked session keeps (see [`Outcome::Park`]).
    pub fn park(self) -> ParkedTx {
        let TxSession {
            core,
            endpoint,
            pool,
            cancel,
            desired,
            baseline,
            backend_cap,
            registry,
            readback,
            resets,
            client_skip,
            status,
            split,
            inspect,
            ..
        } = self;
        ParkedTx {
            core,
            endpoint,
            pool,
            cancel,
            desired,
            baseline,
            backend_cap: backend_cap.map(Box::new),
            registry,
            readback,
            resets,
            client_skip,
            status,
            split,
            inspect,
        }
    }

    pub fn new(
        core: Arc<Core<PgEngine>>,
        endpoint: Arc<EndpointSettings>,
        pool: Arc<Pool<PgEngine>>,
        cancel: CancelKey<super::backend::PgCancelTarget>,
        desired: tracked::Values,
        inspect: Box<gatehouse_core::inspect::Inspector>,
    ) -> Self {
        let split = (endpoint.role == gatehouse_settings::config::EndpointRole::Split).then(Box::default);
        Self {
            view: core.settings_view(),
            clusters: gatehouse_core::topology::ClusterCache::default(),
            split,
            held: false,
            inspect,
            verdict: None,
            lease_wait: Duration::ZERO,
            bound: None,
            just_pinned: None,
            stamp: None,
            core,
            endpoint,
            pool,
            session_id: u64::from(cancel.id),
            cancel,
            baseline: desired.clone(),
            resets: 0,
            desired,
            backend_cap: None,
            lease: None,
            cbuf: BytesMut::new(),
            b_remaining: 0,
            to_backend: BytesMut::new(),
            to_client: BytesMut::new(),
            queue: ResponseQueue::default(),
            registry: Registry::default(),
            pinned: None,
            readback: false,
            defaults_changed: false,
            client_skip: false,
            unsynced: false,
            status: b'I',
            lost_block: false,
            lost_ending: false,
        }
    }

    /// Serves the client until it leaves; gives back or discards the lease.
    /// Between transactions the session waits with a small future and holds
    /// no buffers; the relay's larger state exists only while it is active,
    /// so thousands of idle clients cost little memory.
    pub async fn run(&mut self, client: &mut ClientStream) -> Outcome {
        let end = loop {
            if self.is_idle() {
                match self.wait_idle(client).await {
                    Ok(Waited::Message) => {}
                    Ok(Waited::Park(left)) => return Outcome::Park(left),
                    Err(end) => break end,
                }
            }
            if let Err(end) = Box::pin(self.relay_or_recover(client)).await {
                break end;
            }
        };
        tracing::debug!(session = self.session_id, ?end, pinned = ?self.pinned, "transaction-mode session ended");
        if let End::BackendGone(cause) = &end {
            let key = self.pool.key();
            tracing::warn!(
                session = self.session_id,
                backend = %key.backend,
                user = %key.user,
                database = %key.database,
                leased = self.lease.is_some(),
                in_transaction = %char::from(self.status),
                cause = %cause,
                "backend connection lost under a lease"
            );
        }
        self.cancel.slot.set(None);
        let idle = self.queue.is_empty() && self.b_remaining == 0 && !self.unsynced;
        if let Some(lease) = self.lease.take() {
            if idle {
                // Rare and large futures are boxed so an idle session stays small.
                Box::pin(lease.release()).await;
            } else {
                drop(lease);
            }
        }
        if matches!(end, End::BackendGone(_)) && self.b_remaining > 0 {
            // An error cannot be framed into a half-sent message: just close.
            tracing::info!(session = self.session_id, "server connection lost mid-message");
            return Outcome::Ended(None);
        }
        Outcome::Ended(end.into_error())
    }

    /// Outside a transaction with nothing buffered.
    fn is_idle(&self) -> bool {
        self.lease.is_none() && self.cbuf.is_empty()
    }

    /// Waits until the client sends something; ends the session on shutdown
    /// or after the endpoint's idle timeout, or parks it.
    ///
    /// The wait is a hand-written poll: the socket's readiness keeps the
    /// task's waker, the cancel slot keeps it for shutdown (which wakes idle
    /// sessions through the registry), and the future itself is a few
    /// pointers, so an idle client's task stays small. A session that will
    /// park keeps its small read buffer (1 KiB, unless a larger message grew
    /// it) and its small outgoing buffers for its next transaction until
    /// then, rather than allocating them again for each; parking drops
    /// them. Others free them.
    async fn wait_idle(&mut self, client: &mut ClientStream) -> Result<Waited, End> {
        // Plain sockets park; a TLS session keeps its task (its state is
        // the TLS connection's, far larger than a task anyway).
        let parkable = self.core.parking.is_some() && !client.is_tls();
        // A session that will park keeps a read buffer of the usual size
        // for its next transaction too (parking frees it), rather than
        // allocating it again for each.
        if !parkable || self.cbuf.capacity() > KEPT_READ_BUFFER_LIMIT {
            self.cbuf = BytesMut::new();
        }
        for buf in [&mut self.to_backend, &mut self.to_client] {
            if !parkable || buf.capacity() > KEPT_BUFFER_LIMIT {
                *buf = BytesMut::new();
            }
        }
        let timeout = self.endpoint.idle_client_timeout;
        let woke = idle::next_message(client, &self.cancel.slot, &self.core.shutdown, true, timeout, parkable).await;
        match woke {
            Woke::Readable => Ok(Waited::Message),
            Woke::Park(idle_left)
                if self.queue.is_empty() && self.b_remaining == 0 && self.pinned.is_none() && !self.lost_block =>
            {
                Ok(Waited::Park(idle_left))
            }
            // Something still expected from a server, or pinned: stay
            // (relay waits for the client).
            Woke::Park(_) => Ok(Waited::Message),
            Woke::Shutdown => Err(End::Shutdown),
            Woke::Terminated => Err(End::ClientError(ProxyError::new(
                Condition::Terminated,
                "terminating connection due to administrator command",
            ))),
            Woke::IdleTimeout => Err(End::ClientError(ProxyError::new(
                Condition::IdleTimeout,
                "terminating connection due to idle-session timeout",
            ))),
        }
    }

    /// [`Self::relay`], going on after a backend lost between transaction
    /// boundaries (see `lost.rs`).
    async fn relay_or_recover(&mut self, client: &mut ClientStream) -> Result<(), End> {
        match self.relay(client).await {
            Ok(()) => Ok(()),
            Err(end) => match self.recover(end) {
                Some(end) => Err(end),
                None => self.flush(client).await,
            },
        }
    }

    /// Relays until the session is idle again (`Ok`) or ends (`Err`).
    async fn relay(&mut self, client: &mut ClientStream) -> Result<(), End> {
        let core = self.core.clone();
        let shutdown = &core.shutdown;
        let mut closing = *shutdown.borrow();
        let message_timeout = self.view.current(&core).settings().proxy.client_message_timeout;
        let mut first = true;
        loop {
            let idle = self.is_idle();
            if idle && !first {
                return Ok(());
            }
            first = false;
            // Half a message may not hang longer than the message timeout;
            // a client outside a transaction not longer than the idle
            // timeout; a client idle inside its transaction is the server's
            // business (idle_in_transaction_session_timeout).
            let deadline = if !self.cbuf.is_empty() && !self.held {
                Some(message_timeout)
            } else if idle {
                self.endpoint.idle_client_timeout
            } else {
                None
            };
            let event = {
                let cbuf = &mut self.cbuf;
                let lease = &mut self.lease;
                let slot = &self.cancel.slot;
                // The backend's read buffer travels with its connection, so
                // it is not allocated again for every transaction.
                let backend_read = async {
                    match lease.as_mut() {
                        Some(l) => {
                            let conn = l.conn();
                            if conn.buf.capacity() - conn.buf.len() < 4096 {
                                conn.buf.reserve(READ_CHUNK);
                            }
                            conn.stream.read_buf(&mut conn.buf).await
                        }
                        None => std::future::pending().await,
                    }
                };
                // Shutdown wakes the task through its cancel slot (no
                // waiter of the watch channel to link and unlink each time).
                let shutting_down = idle::shutdown_begun(slot, shutdown);
                let held = self.held;
                tokio::select! {
                    r = read_client(client, cbuf, deadline), if !held => Event2::Client(r),
                    r = backend_read => Event2::Backend(r),
                    () = shutting_down, if !closing => Event2::Shutdown,
                }
            };
            match event {
                Event2::Client(None) if idle => {
                    return Err(End::ClientError(ProxyError::new(
                        Condition::IdleTimeout,
                        "terminating connection due to idle-session timeout",
                    )));
                }
                Event2::Client(None) => {
                    return Err(End::ClientError(ProxyError::new(
                        Condition::ProtocolViolation,
                        format!("incomplete message from client: nothing received for {message_timeout:?}"),
                    )));
                }
                Event2::Client(Some(Ok(0))) => return Err(End::ClientGone),
                Event2::Client(Some(Err(e))) => {
                    tracing::debug!(error = %e, "client read failed");
                    return Err(End::ClientGone);
                }
                Event2::Client(Some(Ok(_))) => {
                    self.stamp_read();
                    self.client_messages().await?;
                    self.flush(client).await?;
                }
                Event2::Backend(Ok(0)) => return Err(End::BackendGone("server closed the connection".into())),
                Event2::Backend(Err(e)) => return Err(End::BackendGone(e.to_string())),
                Event2::Backend(Ok(_)) => {
                    self.backend_messages()?;
                    let answered = self.answered_at();
                    self.flush(client).await?;
                    self.record_answered(answered);
                    self.maybe_release().await?;
                    if !self.to_client.is_empty() {
                        // ParameterStatus for values a reset took back to the startup ones.
                        self.flush(client).await?;
                    }
                    if self.held && self.queue.is_empty() {
                        // The read's answers are in: the waiting exchange goes on.
                        self.held = false;
                        self.stamp_resumed();
                        self.client_messages().await?;
                        self.flush(client).await?;
                    }
                }
                Event2::Shutdown => closing = true,
            }
            if closing && self.is_idle() {
                return Err(End::Shutdown);
            }
        }
    }

    async fn flush(&mut self, client: &mut ClientStream) -> Result<(), End> {
        if !self.to_backend.is_empty() {
            let Some(lease) = self.lease.as_mut() else {
                self.to_backend.clear();
                return Ok(());
            };
            let conn = lease.conn();
            if let Err(e) = conn.stream.write_all(&self.to_backend).await {
                return Err(End::BackendGone(e.to_string()));
            }
            self.to_backend.clear();
        }
        if !self.to_client.is_empty() {
            let w = async {
                client.write_all(&self.to_client).await?;
                client.flush().await
            };
            if let Err(e) = w.await {
                tracing::debug!(error = %e, "client write failed");
                return Err(End::ClientGone);
            }
            self.to_client.clear();
        }
        Ok(())
    }

    /// Starts the session on `lease`, pinned for `code` (state set up at
    /// login that cannot move).
    pub fn start_pinned(&mut self, lease: Lease<PgEngine>, code: &'static str, detail: String) {
        self.lease = Some(lease);
        if let Some(l) = self.lease.as_mut() {
            self.cancel.slot.set(l.conn().cancel_target());
        }
        self.pin(code, detail);
    }

    /// A session-mode session served by this path (its statements are
    /// inspected): pinned before its first statement, so the connection
    /// its first statement borrows is its own to the end.
    pub fn pin_session_mode(&mut self) {
        self.pin("session_mode", "session pool mode".to_owned());
        // The endpoint's doing, not a statement's (digest statistics).
        self.just_pinned = None;
    }

    fn pin(&mut self, code: &'static str, detail: String) {
        if self.pinned.is_none() {
            tracing::info!(
                session = self.session_id,
                reason = code,
                detail,
                "session pinned to its backend connection"
            );
            self.core.stats.record_pin(code);
            self.inspect.pinned(code);
            self.pinned = Some(detail);
            self.just_pinned = Some(code);
        }
    }

    /// Pinned reason, if any (for tests and reports).
    pub fn pinned(&self) -> Option<&str> {
        self.pinned.as_deref()
    }
}
