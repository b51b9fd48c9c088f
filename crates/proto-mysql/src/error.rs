//! The decoding error shared by every message parser in this crate (framing and the
//! reply tracker have their own enums that wrap or complement it).

/// A payload that does not match the message layout it was decoded as.
///
/// `what` names the message or field being decoded so errors are diagnosable
/// without the bytes. None of these ever contain payload data (no secrets leak).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{what}: truncated (needed {needed} more bytes)")]
    Truncated { what: &'static str, needed: usize },
    #[error("{what}: missing NUL terminator")]
    MissingNul { what: &'static str },
    #[error("{what}: invalid length-encoded integer prefix 0x{prefix:02x}")]
    BadLenencPrefix { what: &'static str, prefix: u8 },
    #[error("{what}: unexpected NULL (0xFB)")]
    UnexpectedNull { what: &'static str },
    #[error("{what}: not valid UTF-8")]
    InvalidUtf8 { what: &'static str },
    #[error("{what}: unexpected header byte 0x{header:02x}")]
    UnexpectedHeader { what: &'static str, header: u8 },
    #[error("{what}: {count} unexpected trailing bytes")]
    TrailingBytes { what: &'static str, count: usize },
    #[error("empty payload")]
    Empty,
    #[error("client does not support CLIENT_PROTOCOL_41")]
    NotProtocol41,
    #[error("unsupported handshake protocol version {0}")]
    ProtocolVersion(u8),
    #[error("{what}: {detail}")]
    Invalid { what: &'static str, detail: &'static str },
}
