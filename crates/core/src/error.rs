//! Errors that know who they are for: each [`ProxyError`] carries a
//! [`Condition`] (what went wrong, engine-neutral, rendered by each engine as
//! its own SQLSTATE or error number), a client-safe message that never holds
//! secrets, an optional detail for the log only, and whether retrying is safe.

use std::fmt;

/// Who an error is about; metrics and logs label errors by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The client sent something wrong.
    Client,
    /// The client could not prove who it is, or may not do what it asked.
    Auth,
    /// A configured limit was hit.
    Limit,
    /// A backend failed or could not be reached.
    Backend,
    /// The proxy itself (shutdown, a bug).
    Internal,
}

/// Engine-neutral conditions; engines map them to their own codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    ProtocolViolation,
    FeatureNotSupported,
    InvalidPassword,
    NotAllowed,
    UnknownDatabase,
    TooManyConnections,
    LoginTimeout,
    IdleTimeout,
    /// Another session ended this one (MySQL `KILL [CONNECTION] <id>`).
    Terminated,
    /// A cancel reached the statement while it waited for a backend
    /// connection: it did not run (the session goes on).
    Canceled,
    BackendUnavailable,
    NoBackendForRole,
    Shutdown,
    Internal,
}

impl ErrorKind {
    /// A stable label for metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Auth => "auth",
            Self::Limit => "limit",
            Self::Backend => "backend",
            Self::Internal => "internal",
        }
    }
}

impl Condition {
    /// A stable label for metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::ProtocolViolation => "protocol_violation",
            Self::FeatureNotSupported => "feature_not_supported",
            Self::InvalidPassword => "invalid_password",
            Self::NotAllowed => "not_allowed",
            Self::UnknownDatabase => "unknown_database",
            Self::TooManyConnections => "too_many_connections",
            Self::LoginTimeout => "login_timeout",
            Self::IdleTimeout => "idle_timeout",
            Self::Terminated => "terminated",
            Self::Canceled => "canceled",
            Self::BackendUnavailable => "backend_unavailable",
            Self::NoBackendForRole => "no_backend_for_role",
            Self::Shutdown => "shutdown",
            Self::Internal => "internal",
        }
    }

    pub fn kind(self) -> ErrorKind {
        match self {
            Self::ProtocolViolation
            | Self::FeatureNotSupported
            | Self::LoginTimeout
            | Self::IdleTimeout
            | Self::Terminated
            | Self::Canceled => ErrorKind::Client,
            Self::InvalidPassword | Self::NotAllowed | Self::UnknownDatabase => ErrorKind::Auth,
            Self::TooManyConnections => ErrorKind::Limit,
            Self::BackendUnavailable | Self::NoBackendForRole => ErrorKind::Backend,
            Self::Shutdown | Self::Internal => ErrorKind::Internal,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProxyError {
    pub condition: Condition,
    /// Safe to show the client.
    pub message: String,
    /// For the proxy's log only.
    pub detail: Option<String>,
    /// Whether the client may simply retry.
    pub retry_safe: bool,
}

impl ProxyError {
    pub fn new(condition: Condition, message: impl Into<String>) -> Self {
        let retry_safe = matches!(
            condition,
            Condition::TooManyConnections | Condition::BackendUnavailable | Condition::NoBackendForRole
        );
        Self {
            condition,
            message: message.into(),
            detail: None,
            retry_safe,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.condition.kind()
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}/{:?}: {}", self.kind(), self.condition, self.message)?;
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ProxyError {}

impl ProxyError {
    /// The level at which ending a session with `self` is logged: WARN when
    /// the proxy or a backend failed (an operator should look), INFO when
    /// the client did something wrong, failed to authenticate or hit a
    /// limit (its own business, and frequent under attack or with
    /// misconfigured clients).
    pub fn session_end_level(&self) -> tracing::Level {
        if self.condition == Condition::Shutdown {
            // Asked for by the operator (a shutdown, an upgrade's drain).
            return tracing::Level::INFO;
        }
        match self.kind() {
            ErrorKind::Backend | ErrorKind::Internal => tracing::Level::WARN,
            ErrorKind::Client | ErrorKind::Auth | ErrorKind::Limit => tracing::Level::INFO,
        }
    }

    /// Logs that `self` ended a client's session (or its login), at
    /// [`Self::session_end_level`].
    pub fn log_session_end(&self, peer: Option<std::net::SocketAddr>) {
        let peer = crate::session_log::ClientAddr(peer.map(|p| p.ip()));
        let (kind, condition) = (self.kind().name(), self.condition.name());
        if self.session_end_level() == tracing::Level::WARN {
            tracing::warn!(client = %peer, kind, condition, error = %self, "client session ended with an error");
        } else {
            tracing::info!(client = %peer, kind, condition, error = %self, "client session ended with an error");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_ended_by_a_backend_or_the_proxy_is_a_warning_by_the_client_is_not() {
        let level = |c| ProxyError::new(c, "x").session_end_level();
        for c in [
            Condition::BackendUnavailable,
            Condition::NoBackendForRole,
            Condition::Internal,
        ] {
            assert_eq!(level(c), tracing::Level::WARN, "{c:?}");
        }
        for c in [
            Condition::ProtocolViolation,
            Condition::InvalidPassword,
            Condition::NotAllowed,
            Condition::TooManyConnections,
            Condition::LoginTimeout,
            Condition::IdleTimeout,
            Condition::Terminated,
            Condition::Shutdown,
        ] {
            assert_eq!(level(c), tracing::Level::INFO, "{c:?}");
        }
    }
}
