//! Which engine a cluster's servers are: the one setting every layer
//! branches on (the settings' validation, the rules, the engines).

/// Which wire protocol a cluster speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    Postgres,
    Mysql,
}

impl EngineKind {
    /// The ALPN protocol offered in TLS handshakes with this engine's
    /// servers: PostgreSQL registered `postgresql` (protocol documentation,
    /// "SSL Session Encryption"; 17 and later check it when offered, and
    /// require it for direct TLS); MySQL has none.
    pub fn tls_alpn(self) -> Option<&'static [u8]> {
        match self {
            Self::Postgres => Some(b"postgresql"),
            Self::Mysql => None,
        }
    }
}
