//! A client connection that is either plain TCP or TLS, behind one
//! `AsyncRead + AsyncWrite` type so the session code does not care which,
//! counting the bytes it reads and writes into its endpoint's meter
//! ([`crate::meter`]: the one place both engines' client bytes pass); and
//! [`TlsIo`], the socket under a TLS session with the first bytes of the
//! handshake the client may have sent before the proxy started it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::meter::EndpointMeter;

pub struct ClientStream {
    io: Io,
    /// The endpoint's counters, which the bytes each way are added to.
    meter: Arc<EndpointMeter>,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TlsIo>>),
}

/// The TCP socket a TLS session runs on. A MySQL client sends its TLS
/// ClientHello right after its SSLRequest, without waiting for an answer
/// (the protocol has none), so both can arrive in one read: what was read
/// past the SSLRequest is the start of the handshake, and the TLS layer
/// reads it first. Those bytes go to the TLS parser only, never to the
/// session as plaintext. PostgreSQL clients wait for the server's `S`, and
/// bytes before it are refused there (CVE-2021-23214), so `early` is
/// empty.
pub struct TlsIo {
    early: BytesMut,
    tcp: TcpStream,
}

impl TlsIo {
    pub fn new(tcp: TcpStream, early: BytesMut) -> Self {
        Self { early, tcp }
    }
}

impl AsyncRead for TlsIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.early.is_empty() {
            let n = this.early.len().min(buf.remaining());
            buf.put_slice(&this.early[..n]);
            this.early.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

impl ClientStream {
    /// An accepted connection of the endpoint whose counters are `meter`.
    pub fn plain(socket: TcpStream, meter: Arc<EndpointMeter>) -> Self {
        Self {
            io: Io::Plain(socket),
            meter,
        }
    }

    /// The TLS session started on a plain connection's socket.
    pub fn tls(session: TlsStream<TlsIo>, meter: Arc<EndpointMeter>) -> Self {
        Self {
            io: Io::Tls(Box::new(session)),
            meter,
        }
    }

    /// The plain connection's socket and counters (to start TLS on, or to
    /// park); the stream itself back when it is a TLS one.
    pub fn into_plain(self) -> Result<(TcpStream, Arc<EndpointMeter>), Self> {
        match self.io {
            Io::Plain(s) => Ok((s, self.meter)),
            Io::Tls(_) => Err(self),
        }
    }

    /// A parked session's socket back on the runtime (called in the
    /// runtime's context), counting into `meter` again; `None`, logged,
    /// when it cannot be registered.
    pub fn resumed(socket: std::net::TcpStream, meter: Arc<EndpointMeter>) -> Option<Self> {
        let peer = socket.peer_addr().ok();
        match TcpStream::from_std(socket) {
            Ok(s) => Some(Self::plain(s, meter)),
            Err(e) => {
                tracing::warn!(?peer, error = %e, "session ended: its socket could not be resumed");
                None
            }
        }
    }

    /// The endpoint's counters this connection counts into.
    pub fn meter(&self) -> &Arc<EndpointMeter> {
        &self.meter
    }

    pub fn is_tls(&self) -> bool {
        matches!(self.io, Io::Tls(_))
    }

    /// The client's address (unspecified if the socket no longer knows it),
    /// for logs: sessions do not keep it.
    pub fn peer(&self) -> std::net::SocketAddr {
        let socket = match &self.io {
            Io::Plain(s) => s,
            Io::Tls(s) => &s.get_ref().0.tcp,
        };
        socket
            .peer_addr()
            .unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// Waits until a read would find data (plain TCP); TLS streams keep
    /// their own buffers and are simply read.
    pub async fn readable(&self) -> io::Result<()> {
        // The registration's own reader waker, not a waiter node linked
        // (under a lock) into its list for every wait.
        std::future::poll_fn(|cx| self.poll_readable(cx)).await
    }

    /// [`Self::readable`] as a poll: the waker goes to the socket's own
    /// registration, with no waiter node in the caller's future.
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &self.io {
            Io::Plain(s) => s.poll_read_ready(cx),
            Io::Tls(_) => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = match &mut this.io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => {
                // What an earlier write left in the TLS session (the socket
                // was full) goes out before the proxy waits for the client:
                // the end of a reply the client is waiting for.
                let _ = Pin::new(s.as_mut()).poll_flush(cx);
                Pin::new(s.as_mut()).poll_read(cx, buf)
            }
        };
        let n = buf.filled().len() - before;
        if n > 0 {
            this.meter.received(n);
        }
        read
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = match &mut this.io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        };
        if let Poll::Ready(Ok(n)) = written
            && n > 0
        {
            this.meter.sent(n);
        }
        written
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
