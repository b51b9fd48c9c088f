//! A backend connection's socket, plain TCP or TLS, behind one
//! `AsyncRead + AsyncWrite` type so the engines' drivers and relays do not
//! care which; and the TLS handshake that turns one into the other.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::{BackendTls, HandshakeError, Negotiation};
use crate::error::{Condition, ProxyError};

pub enum BackendStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl BackendStream {
    pub fn is_tls(&self) -> bool {
        matches!(self, Self::Tls(_))
    }

    /// What a TLS session agreed on, for the console: protocol version
    /// and cipher suite (`TLSv1.3/TLS13_AES_256_GCM_SHA384`); `None` in
    /// plain text.
    pub fn tls_summary(&self) -> Option<Arc<str>> {
        let Self::Tls(s) = self else { return None };
        let (_, session) = s.get_ref();
        let version = match session.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "TLS",
        };
        let suite = session
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .unwrap_or("unknown");
        Some(Arc::from(format!("{version}/{suite}")))
    }

    /// Without waiting: false when the server closed the connection or sent
    /// something unsolicited (a server going away sends an error first).
    /// Under TLS a record the session keeps for itself (a TLS 1.3 session
    /// ticket) is taken in and is not "something sent".
    pub fn is_usable(&mut self) -> bool {
        match self {
            Self::Plain(s) => {
                let mut probe = [0u8; 1];
                matches!(s.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
            Self::Tls(s) => {
                let mut probe = [0u8; 1];
                let mut buf = ReadBuf::new(&mut probe);
                let mut cx = Context::from_waker(Waker::noop());
                matches!(Pin::new(s.as_mut()).poll_read(&mut cx, &mut buf), Poll::Pending)
            }
        }
    }
}

/// The handshake and the failure of a cluster's backend TLS (the settings
/// crate builds it; the I/O and the errors sessions see are the core's).
pub trait Connect {
    /// Runs the TLS handshake on `tcp`, a connection to `host` whose server
    /// has agreed to TLS (after the engine's own request for it).
    fn handshake(
        &self,
        tcp: TcpStream,
        host: &str,
    ) -> impl std::future::Future<Output = Result<BackendStream, HandshakeError>> + Send;

    /// A connection that failed for TLS (a handshake refused, a server
    /// without TLS where it is required): the client hears only that the
    /// server could not be reached; the log gets the mode and the reason.
    /// Retrying does not help: the same settings meet the same server.
    fn failure(&self, addr: &str, e: impl std::fmt::Display) -> ProxyError;
}

impl Connect for BackendTls {
    async fn handshake(&self, tcp: TcpStream, host: &str) -> Result<BackendStream, HandshakeError> {
        let config = self.client_config().ok_or(HandshakeError::Disabled)?;
        let name = self.name_for(host)?;
        let tls = tokio_rustls::TlsConnector::from(config.clone())
            .connect(name, tcp)
            .await
            .map_err(HandshakeError::Tls)?;
        Ok(BackendStream::Tls(Box::new(tls)))
    }

    fn failure(&self, addr: &str, e: impl std::fmt::Display) -> ProxyError {
        let mut err = ProxyError::new(
            Condition::BackendUnavailable,
            "could not connect to the database server",
        )
        .with_detail(match self.negotiation {
            Negotiation::Postgres => format!("{addr}: backend_tls = \"{}\": {e}", self.mode.as_str()),
            // A server before PostgreSQL 17 closes the connection on a
            // ClientHello, which rustls reports as an early end of file.
            Negotiation::Direct => format!(
                "{addr}: backend_tls = \"{}\", backend_tls_negotiation = \"direct\" \
                 (PostgreSQL 17 and later): {e}",
                self.mode.as_str()
            ),
        });
        err.retry_safe = false;
        err
    }
}

/// The host part of `host:port` (an IPv6 address keeps no brackets).
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

impl AsyncRead for BackendStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => {
                // A TLS write can return with the end of its records still
                // in the session (the socket was full): the request the
                // proxy now waits for an answer to. Every read sends them
                // first, so no wait for a reply starts with part of the
                // request unsent.
                let _ = Pin::new(s.as_mut()).poll_flush(cx);
                Pin::new(s.as_mut()).poll_read(cx, buf)
            }
        }
    }
}

impl AsyncWrite for BackendStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
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
