//! The data path of an established session: messages flow between the client
//! and its backend connection with as little copying as possible (whole read
//! chunks are written through; only small messages the proxy must inspect are
//! held until complete, large ones stream), while the relay keeps the count
//! it needs to know whether the backend is idle and safe to reuse, and
//! counts the session's statements and transactions ([`gatehouse_core::meter`]).

use std::time::Duration;

use bytes::{Buf, BytesMut};
use gatehouse_proto_pg::frame::{self, HOLD_WHOLE_LIMIT, Step, next_frame};
use gatehouse_proto_pg::messages;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::backend::{PgCancelTarget, PgConn};
use gatehouse_core::cancel::CancelSlot;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_core::meter::SessionMeter;

/// Read-buffer growth step for both directions.
const READ_CHUNK: usize = 32 * 1024;

/// Why a relay ended.
#[derive(Debug)]
pub enum End {
    /// The client sent Terminate.
    Terminated,
    /// The client closed its connection.
    ClientGone,
    /// The client broke the protocol; the error is for the client.
    ClientError(ProxyError),
    /// The backend connection failed or closed.
    BackendGone(String),
    /// The proxy is shutting down and the session was idle.
    Shutdown,
}

impl End {
    /// The error to send the client for this ending, if any.
    pub fn into_error(self) -> Option<ProxyError> {
        match self {
            End::Terminated | End::ClientGone => None,
            End::ClientError(e) => Some(e),
            End::Shutdown => Some(ProxyError::new(
                Condition::Shutdown,
                "terminating connection due to administrator command",
            )),
            End::BackendGone(detail) => {
                Some(ProxyError::new(Condition::BackendUnavailable, "server connection lost").with_detail(detail))
            }
        }
    }
}

enum Event {
    /// `None`: the client left a message half sent for too long.
    Client(Option<std::io::Result<usize>>),
    Backend(std::io::Result<usize>),
    Shutdown,
}

/// Reads from the client, with a deadline while a message is incomplete.
async fn read_client(
    client: &mut ClientStream,
    buf: &mut BytesMut,
    deadline: Option<Duration>,
) -> Option<std::io::Result<usize>> {
    match deadline {
        Some(d) => tokio::time::timeout(d, client.read_buf(buf)).await.ok(),
        None => Some(client.read_buf(buf).await),
    }
}

/// Relay bookkeeping for one client and its backend connection.
pub struct Relay {
    cbuf: BytesMut,
    bbuf: BytesMut,
    /// Bytes of a client message still to pass through.
    c_remaining: usize,
    /// Bytes of a backend message still to pass through.
    b_remaining: usize,
    /// ReadyForQuery messages the backend still owes.
    pending_ready: u32,
    /// Extended-query messages sent since the last Sync.
    unsynced: bool,
    max_message: usize,
    message_timeout: Duration,
}

impl Relay {
    pub fn new(max_message: usize, message_timeout: Duration) -> Self {
        Self {
            cbuf: BytesMut::with_capacity(READ_CHUNK),
            bbuf: BytesMut::with_capacity(READ_CHUNK),
            c_remaining: 0,
            b_remaining: 0,
            pending_ready: 0,
            unsynced: false,
            max_message,
            message_timeout,
        }
    }

    /// True when the backend owes nothing and no message is half-passed:
    /// the connection can be reset and reused.
    pub fn backend_idle(&self) -> bool {
        self.pending_ready == 0
            && !self.unsynced
            && self.c_remaining == 0
            && self.b_remaining == 0
            && self.bbuf.is_empty()
    }

    /// True when a query is in flight (a cancel would have something to stop).
    pub fn busy(&self) -> bool {
        self.pending_ready > 0
    }

    /// True when a backend message has been passed to the client only in part.
    pub fn client_mid_output(&self) -> bool {
        self.b_remaining > 0
    }

    fn client_mid_message(&self) -> bool {
        self.c_remaining > 0 || !self.cbuf.is_empty()
    }

    /// Relays until one side ends the session; `meter` counts its
    /// statements and transactions.
    pub async fn run(
        &mut self,
        client: &mut ClientStream,
        backend: &mut PgConn,
        slot: &CancelSlot<PgCancelTarget>,
        shutdown: &watch::Receiver<bool>,
        meter: &mut SessionMeter,
    ) -> End {
        // Shutdown, or a reload that removed the endpoint.
        let mut closing = *shutdown.borrow() || slot.is_closing();
        // Bytes the backend sent before the relay started belong to the client.
        self.bbuf.extend_from_slice(&backend.buf.split());
        loop {
            if closing && self.backend_idle() && !self.client_mid_message() {
                return End::Shutdown;
            }
            if self.cbuf.capacity() - self.cbuf.len() < 1024 {
                self.cbuf.reserve(READ_CHUNK);
            }
            if self.bbuf.capacity() - self.bbuf.len() < 1024 {
                self.bbuf.reserve(READ_CHUNK);
            }
            let mid = self.client_mid_message();
            let timeout = self.message_timeout;
            let event = tokio::select! {
                r = read_client(client, &mut self.cbuf, mid.then_some(timeout)) => Event::Client(r),
                r = backend.stream.read_buf(&mut self.bbuf) => Event::Backend(r),
                () = gatehouse_core::engine::idle::shutdown_begun(slot, shutdown), if !closing => Event::Shutdown,
            };
            match event {
                Event::Client(None) => {
                    return End::ClientError(ProxyError::new(
                        Condition::ProtocolViolation,
                        format!("incomplete message from client: nothing received for {timeout:?}"),
                    ));
                }
                Event::Client(Some(Ok(0) | Err(_))) => return End::ClientGone,
                Event::Client(Some(Ok(_))) => {
                    if let Some(end) = self.client_to_backend(backend, meter).await {
                        return end;
                    }
                }
                Event::Backend(Ok(0)) => return End::BackendGone("server closed the connection".into()),
                Event::Backend(Err(e)) => return End::BackendGone(e.to_string()),
                Event::Backend(Ok(_)) => {
                    if let Err(end) = self.backend_to_client(client, backend, meter).await {
                        return end;
                    }
                }
                Event::Shutdown => closing = true,
            }
        }
    }

    /// Passes complete or streaming client messages to the backend.
    async fn client_to_backend(&mut self, backend: &mut PgConn, meter: &mut SessionMeter) -> Option<End> {
        let mut fwd = 0;
        let mut end = None;
        while fwd < self.cbuf.len() {
            let rest = &self.cbuf[fwd..];
            if self.c_remaining > 0 {
                let n = self.c_remaining.min(rest.len());
                fwd += n;
                self.c_remaining -= n;
                continue;
            }
            let (tag, len) = match next_frame(rest, 0, self.max_message) {
                Ok(Step::NeedMore) => break,
                Ok(Step::Whole { tag, len } | Step::Stream { tag, len }) => (tag, len),
                Err(e) => {
                    end = Some(End::ClientError(ProxyError::new(
                        Condition::ProtocolViolation,
                        e.to_string(),
                    )));
                    break;
                }
            };
            if tag == b'X' {
                end = Some(End::Terminated);
                break;
            }
            if !frame::is_frontend_tag(tag) {
                end = Some(End::ClientError(ProxyError::new(
                    Condition::ProtocolViolation,
                    format!("invalid frontend message type {}", char::from(tag).escape_default()),
                )));
                break;
            }
            if frame::expects_ready_for_query(tag) {
                self.pending_ready += 1;
            }
            if matches!(tag, b'Q' | b'E' | b'F') {
                meter.statement();
            }
            if frame::is_extended_query(tag) {
                self.unsynced = true;
            } else if tag == b'S' {
                self.unsynced = false;
            }
            let n = len.min(rest.len());
            fwd += n;
            self.c_remaining = len - n;
        }
        if fwd > 0 {
            if let Err(e) = backend.stream.write_all(&self.cbuf[..fwd]).await {
                return Some(End::BackendGone(e.to_string()));
            }
            self.cbuf.advance(fwd);
        }
        end
    }

    /// Passes backend messages to the client, watching ReadyForQuery and
    /// ParameterStatus on the way.
    async fn backend_to_client(
        &mut self,
        client: &mut ClientStream,
        backend: &mut PgConn,
        meter: &mut SessionMeter,
    ) -> Result<(), End> {
        let mut fwd = 0;
        while fwd < self.bbuf.len() {
            let rest = &self.bbuf[fwd..];
            if self.b_remaining > 0 {
                let n = self.b_remaining.min(rest.len());
                fwd += n;
                self.b_remaining -= n;
                continue;
            }
            match next_frame(rest, HOLD_WHOLE_LIMIT, usize::MAX) {
                Ok(Step::NeedMore) => break,
                Ok(Step::Whole { tag, len }) => {
                    let msg = &rest[..len];
                    match tag {
                        b'Z' => {
                            self.pending_ready = self.pending_ready.saturating_sub(1);
                            backend.status = messages::parse_ready(msg).map_err(|e| End::BackendGone(e.to_string()))?;
                            meter.boundary(backend.status != b'I');
                        }
                        b'S' => {
                            if let Ok((name, value)) = messages::parse_parameter_status(msg) {
                                backend.set_param(name, value);
                            }
                        }
                        _ => {}
                    }
                    fwd += len;
                }
                Ok(Step::Stream { len, .. }) => {
                    let n = len.min(rest.len());
                    fwd += n;
                    self.b_remaining = len - n;
                }
                Err(e) => return Err(End::BackendGone(format!("malformed message from server: {e}"))),
            }
        }
        if fwd > 0 {
            let write = async {
                client.write_all(&self.bbuf[..fwd]).await?;
                client.flush().await
            };
            if write.await.is_err() {
                return Err(End::ClientGone);
            }
            self.bbuf.advance(fwd);
        }
        Ok(())
    }
}
