//! The SQLSTATE each proxy error condition reaches a PostgreSQL client
//! with, and the FATAL that ends a session.

use bytes::BytesMut;
use gatehouse_proto_pg::{messages, sqlstate};
use tokio::io::AsyncWriteExt;

use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};

/// The SQLSTATE PostgreSQL clients expect for each condition.
pub fn sqlstate_of(condition: Condition) -> &'static str {
    match condition {
        Condition::ProtocolViolation | Condition::LoginTimeout => sqlstate::PROTOCOL_VIOLATION,
        Condition::FeatureNotSupported => sqlstate::FEATURE_NOT_SUPPORTED,
        Condition::InvalidPassword => sqlstate::INVALID_PASSWORD,
        Condition::NotAllowed => sqlstate::INVALID_AUTHORIZATION,
        Condition::UnknownDatabase => sqlstate::INVALID_CATALOG_NAME,
        Condition::TooManyConnections => sqlstate::TOO_MANY_CONNECTIONS,
        Condition::IdleTimeout => sqlstate::IDLE_SESSION_TIMEOUT,
        Condition::BackendUnavailable => sqlstate::CONNECTION_FAILURE,
        // What PgBouncer answers when no server connection came in time.
        Condition::NoBackendForRole => sqlstate::TOO_MANY_CONNECTIONS,
        // pg_terminate_backend's "terminating connection due to administrator command".
        Condition::Shutdown | Condition::Terminated => sqlstate::ADMIN_SHUTDOWN,
        Condition::Canceled => sqlstate::QUERY_CANCELED,
        Condition::Internal => sqlstate::INTERNAL_ERROR,
    }
}

/// Sends `error` as a FATAL ErrorResponse (best effort: the client may be gone).
pub async fn send_fatal(stream: &mut ClientStream, error: &ProxyError) {
    let mut out = BytesMut::new();
    messages::put_error(&mut out, "FATAL", sqlstate_of(error.condition), &error.message);
    let _ = stream.write_all(&out).await;
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
}

/// Logs `e` and sends it to the client as FATAL; always `None` (the
/// session is over).
pub(crate) async fn fail<T>(
    stats: &gatehouse_core::stats::Stats,
    stream: Option<&mut ClientStream>,
    e: &ProxyError,
    peer: std::net::SocketAddr,
) -> Option<T> {
    stats.record_error(e);
    e.log_session_end(Some(peer));
    if let Some(s) = stream {
        send_fatal(s, e).await;
    }
    None
}
