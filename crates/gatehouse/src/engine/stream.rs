//! A client connection that is either plain TCP or TLS, behind one
//! `AsyncRead + AsyncWrite` type so the session code does not care which.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

pub enum ClientStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
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
            Self::Tls(s) => s.get_ref().0,
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
