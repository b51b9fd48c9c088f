//! A client connection that is either plain TCP or TLS, behind one
//! `AsyncRead + AsyncWrite` type so the session code does not care which;
//! and [`TlsIo`], the socket under a TLS session with the first bytes of
//! the handshake the client may have sent before the proxy started it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

pub enum ClientStream {
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
    /// A parked session's socket back on the runtime (called in the
    /// runtime's context); `None`, logged, when it cannot be registered.
    pub fn resumed(socket: std::net::TcpStream) -> Option<Self> {
        let peer = socket.peer_addr().ok();
        match TcpStream::from_std(socket) {
            Ok(s) => Some(Self::Plain(s)),
            Err(e) => {
                tracing::warn!(?peer, error = %e, "session ended: its socket could not be resumed");
                None
            }
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Self::Tls(_))
    }

    /// The client's address (unspecified if the socket no longer knows it),
    /// for logs: sessions do not keep it.
    pub fn peer(&self) -> std::net::SocketAddr {
        let socket = match self {
            Self::Plain(s) => s,
            Self::Tls(s) => &s.get_ref().0.tcp,
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
        match self {
            Self::Plain(s) => s.poll_read_ready(cx),
            Self::Tls(_) => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
