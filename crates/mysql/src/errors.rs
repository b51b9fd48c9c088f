//! The MySQL error each proxy error condition reaches a client with, as
//! an ERR packet, and the one that ends a session.

use bytes::BytesMut;
use gatehouse_proto_mysql::errors::{self, MyError};
use gatehouse_proto_mysql::packets::ErrPacket;

use crate::engine::MyEngine;
use gatehouse_core::core::Core;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};

/// The MySQL error a proxy error is shown as.
pub fn my_error(e: &ProxyError) -> MyError {
    match e.condition {
        Condition::InvalidPassword => errors::ER_ACCESS_DENIED_ERROR,
        Condition::NotAllowed => errors::ER_ACCESS_DENIED_ERROR,
        Condition::UnknownDatabase => errors::ER_DBACCESS_DENIED_ERROR,
        Condition::TooManyConnections => errors::ER_CON_COUNT_ERROR,
        Condition::ProtocolViolation | Condition::LoginTimeout => errors::ER_HANDSHAKE_ERROR,
        Condition::FeatureNotSupported => errors::ER_NOT_SUPPORTED_AUTH_MODE,
        Condition::IdleTimeout => errors::ER_NET_READ_ERROR,
        Condition::Shutdown => errors::ER_SERVER_SHUTDOWN,
        Condition::Terminated => errors::ER_CONNECTION_KILLED,
        Condition::Canceled => errors::ER_QUERY_INTERRUPTED,
        // Codes drivers take for a lost server (08S01) or a full one, so
        // their pools retry or discard; never the generic 1105.
        Condition::BackendUnavailable => errors::ER_SERVER_SHUTDOWN,
        Condition::NoBackendForRole => errors::ER_CON_COUNT_ERROR,
        Condition::Internal => errors::ER_UNKNOWN_ERROR,
    }
}

/// An ERR packet's payload for `e`.
pub fn err_payload(err: MyError, message: &str) -> BytesMut {
    let mut out = BytesMut::new();
    ErrPacket::from_error(err, message).encode(&mut out);
    out
}

/// Sends `e` as an ERR packet with sequence id `seq` and logs it.
pub async fn fail(core: &Core<MyEngine>, stream: Option<&mut ClientStream>, seq: u8, e: &ProxyError) {
    core.stats.record_error(e);
    e.log_session_end(None);
    if let Some(s) = stream {
        let _ = crate::io::write_packet(s, seq, &err_payload(my_error(e), &e.message)).await;
    }
}
