//! SQLSTATE codes the proxy itself reports (PostgreSQL docs, Appendix A
//! "PostgreSQL Error Codes").

/// `invalid_authorization_specification`: not allowed to connect.
pub const INVALID_AUTHORIZATION: &str = "28000";
/// `invalid_password`.
pub const INVALID_PASSWORD: &str = "28P01";
/// `invalid_catalog_name`: unknown database.
pub const INVALID_CATALOG_NAME: &str = "3D000";
/// `protocol_violation`.
pub const PROTOCOL_VIOLATION: &str = "08P01";
/// `too_many_connections`.
pub const TOO_MANY_CONNECTIONS: &str = "53300";
/// `connection_failure`: the backend could not be reached.
pub const CONNECTION_FAILURE: &str = "08006";
/// `sqlclient_unable_to_establish_sqlconnection`.
pub const UNABLE_TO_CONNECT: &str = "08001";
/// `feature_not_supported`.
pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
/// `admin_shutdown`: the proxy is shutting down.
pub const ADMIN_SHUTDOWN: &str = "57P01";
/// `cannot_connect_now`: no backend of the needed role is available.
pub const CANNOT_CONNECT_NOW: &str = "57P03";
/// `idle_session_timeout`.
pub const IDLE_SESSION_TIMEOUT: &str = "57P05";
/// `internal_error`.
pub const INTERNAL_ERROR: &str = "XX000";
/// `query_canceled`: a cancel request reached the statement.
pub const QUERY_CANCELED: &str = "57014";
/// `in_failed_sql_transaction`: statements in an aborted transaction block.
pub const IN_FAILED_SQL_TRANSACTION: &str = "25P02";
/// syntax_error: a statement the server (or the proxy's console) cannot read.
pub const SYNTAX_ERROR: &str = "42601";
/// insufficient_privilege: the role may not run the command.
pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
/// undefined_object: the command names something that does not exist.
pub const UNDEFINED_OBJECT: &str = "42704";
/// object_not_in_prerequisite_state: it exists, but the command cannot be
/// carried out now.
pub const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
