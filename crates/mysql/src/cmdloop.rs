//! The command loop of a MySQL session ([`Session::serve`]): waiting for
//! the client's next command with a hand-written poll (the socket's
//! readiness, the cancel slot for `KILL` and shutdown, the idle timeout),
//! reading it whole (a half-sent packet within the message timeout, the
//! packet's sequence id checked), and handing it to [`Session::dispatch`]
//! in a box of its own, so an idle client's task stays small. A kill while
//! a command waits (for a connection, for the backend's reply) abandons
//! the command.

use bytes::BytesMut;
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::errors::{self, MyError};
use gatehouse_proto_mysql::frame::{self, FrameError};

use super::io::{IoError, fill};
use super::txn::{Fatal, Served, Session};
use gatehouse_core::engine::idle::{self, Woke};
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};

/// After a command: go on, or the session is over.
#[derive(PartialEq, Eq)]
enum Next {
    Continue,
    End,
}

impl Session {
    /// The command loop. Between commands the session waits with a
    /// hand-written poll (the socket's readiness, and its cancel slot for
    /// `KILL` and shutdown), a few pointers in the task; each command then
    /// runs in a box of its own, so an idle client's task stays small.
    pub(super) async fn serve(&mut self, stream: &mut ClientStream, buf: &mut BytesMut) -> Result<Served, Fatal> {
        loop {
            if buf.is_empty() {
                match self.wait_command(stream).await {
                    Woke::Readable => {}
                    Woke::Park(idle_left) if self.lease.is_none() => return Ok(Served::Park(idle_left)),
                    Woke::Park(_) => {}
                    Woke::Terminated => return Box::pin(self.killed(false)).await.map(|()| Served::Ended),
                    Woke::Shutdown => {
                        return Err((0, ProxyError::new(Condition::Shutdown, "Server shutdown in progress")));
                    }
                    Woke::IdleTimeout => {
                        return Err((
                            0,
                            ProxyError::new(Condition::IdleTimeout, "idle client timeout reached"),
                        ));
                    }
                }
            }
            if Box::pin(self.command(stream, buf)).await? == Next::End {
                return Ok(Served::Ended);
            }
        }
    }

    /// Waits, holding nothing, for the client's next command. Without a
    /// lease a plain-TCP session may be asked to park.
    async fn wait_command(&self, stream: &ClientStream) -> Woke {
        let leased = self.lease.is_some();
        let timeout = self.endpoint.idle_client_timeout.filter(|_| !leased);
        let parkable = !leased && self.core.parking.is_some() && !stream.is_tls();
        idle::next_message(
            stream,
            &self.cancel.slot,
            &self.core.shutdown,
            !leased,
            timeout,
            parkable,
        )
        .await
    }

    async fn fatal_end(&mut self, stream: &mut ClientStream, seq: u8, err: MyError, msg: &str) -> Result<Next, Fatal> {
        self.fatal(stream, seq, err, msg).await.map(|()| Next::End)
    }

    /// Reads one command (waiting as long as the idle rules allow) and runs
    /// it; `End` when the session is over without an error to send.
    async fn command(&mut self, stream: &mut ClientStream, buf: &mut BytesMut) -> Result<Next, Fatal> {
        let proxy = &self.view.current(&self.core).settings().proxy;
        let (max, half_sent) = (proxy.max_message_bytes, proxy.client_message_timeout);
        let core = self.core.clone();
        let shutdown = &core.shutdown;
        // Raised by another session's `KILL [CONNECTION]` (see [`super::kill`]).
        let slot = self.cancel.slot.clone();
        {
            let idle = self.endpoint.idle_client_timeout.filter(|_| self.lease.is_none());
            // Between commands the client may wait (up to the idle timeout);
            // once a packet has begun, it must arrive whole in time.
            let packet = loop {
                match frame::decode_packet(buf, max) {
                    Ok(Some(p)) => break Ok(p),
                    Ok(None) => {}
                    Err(e) => break Err(IoError::Frame(e)),
                }
                let filled = if buf.is_empty() {
                    // (Nothing awaits in here: the shutdown watch's borrow is not Send.)
                    let woke = tokio::select! {
                        r = fill(stream, buf) => Some(r),
                        () = slot.terminated() => None,
                        // Shutdown wakes idle sessions through their cancel slot.
                        () = idle::shutdown_begun(&slot, shutdown), if self.lease.is_none() => {
                            return Err((0, ProxyError::new(Condition::Shutdown, "Server shutdown in progress")));
                        }
                        _ = sleep_opt(idle) => {
                            return Err((0, ProxyError::new(Condition::IdleTimeout, "idle client timeout reached")));
                        }
                    };
                    match woke {
                        Some(r) => r,
                        None => return self.killed(false).await.map(|()| Next::End),
                    }
                } else {
                    let timed = tokio::select! {
                        r = tokio::time::timeout(half_sent, fill(stream, buf)) => r,
                        () = slot.terminated() => return self.killed(false).await.map(|()| Next::End),
                    };
                    match timed {
                        Ok(r) => r,
                        Err(_) => {
                            let msg = "Got timeout reading communication packets";
                            return self.fatal_end(stream, 1, errors::ER_NET_READ_INTERRUPTED, msg).await;
                        }
                    }
                };
                if let Err(e) = filled {
                    break Err(e);
                }
            };
            let packet = match packet {
                Ok(p) => p,
                Err(IoError::Closed) => return Ok(Next::End),
                Err(IoError::Frame(FrameError::TooLarge { .. })) => {
                    return self
                        .fatal_end(
                            stream,
                            1,
                            errors::ER_NET_PACKET_TOO_LARGE,
                            "Got a packet bigger than 'max_allowed_packet' bytes",
                        )
                        .await;
                }
                Err(e) => {
                    tracing::info!(error = %e, "client connection failed");
                    return Ok(Next::End);
                }
            };
            // The command is read: a statement's time through the proxy starts.
            self.received = self.inspect.meter().clock();
            if packet.seq != 0 {
                return self
                    .fatal_end(
                        stream,
                        packet.last_seq.wrapping_add(1),
                        errors::ER_NET_PACKETS_OUT_OF_ORDER,
                        "Got packets out of order",
                    )
                    .await;
            }
            let Some(&cmd) = packet.payload.first() else {
                return self
                    .fatal_end(stream, 1, errors::ER_MALFORMED_PACKET, "Malformed communication packet")
                    .await;
            };
            if cmd == COM_QUIT {
                return Ok(Next::End);
            }
            if slot.is_terminated() {
                return self.killed(false).await.map(|()| Next::End);
            }
            // A kill while the command waits (for a connection, for the
            // backend's reply) abandons the command.
            let outcome = tokio::select! {
                biased;
                o = self.dispatch(stream, buf, cmd, &packet.payload[..]) => o,
                () = slot.terminated() => return self.killed(true).await.map(|()| Next::End),
            };
            outcome?;
            self.settle().await;
        }
        Ok(Next::Continue)
    }

    /// Runs one client command (other than COM_QUIT).
    pub(super) async fn dispatch(
        &mut self,
        stream: &mut ClientStream,
        buf: &mut BytesMut,
        cmd: u8,
        payload: &[u8],
    ) -> Result<(), Fatal> {
        if self.lost_block && self.in_lost_transaction(stream, cmd, payload).await? {
            return Ok(());
        }
        self.decide_command(cmd, payload);
        match cmd {
            COM_PING => self.local_ok(stream).await,
            COM_SET_OPTION => self.set_option(stream, payload).await,
            COM_INIT_DB => self.init_db(stream, payload).await,
            COM_QUERY => self.query(stream, payload).await,
            COM_STMT_PREPARE
            | COM_STMT_EXECUTE
            | COM_STMT_SEND_LONG_DATA
            | COM_STMT_CLOSE
            | COM_STMT_RESET
            | COM_STMT_FETCH => super::txn::stmts::command(self, stream, payload).await,
            COM_RESET_CONNECTION => self.reset_connection(stream).await,
            COM_CHANGE_USER => self.change_user(stream, buf, payload).await,
            COM_PROCESS_KILL => self.kill(stream, super::kill::process_kill_request(payload)).await,
            COM_FIELD_LIST | COM_STATISTICS => self.forward(stream, payload).await.map(|_| ()),
            _ => {
                self.error(stream, 1, errors::ER_UNKNOWN_COM_ERROR, "Unknown command")
                    .await
            }
        }
    }
}

async fn sleep_opt(d: Option<std::time::Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
