//! The connection phase towards a backend, as a client: read the server's
//! HandshakeV10, answer with HandshakeResponse41, then follow the server
//! through at most one AuthSwitchRequest and the plugin's extra round trips
//! until OK or ERR. COM_CHANGE_USER ([`change_user`]), which moves an open
//! connection to another user and database, runs the same exchange after
//! its first packet, so every plugin below works inside it too.
//!
//! Supported plugins:
//! * `mysql_native_password` (MariaDB's and MySQL 5.7's default);
//! * `caching_sha2_password` (MySQL 8's default): the fast path, and the
//!   full path (the server has not cached the password hash yet, e.g. after
//!   a restart): under TLS the password itself, as the protocol has it;
//!   over plain TCP with the server's RSA key, requested from the server:
//!   the password goes RSA-OAEP encrypted, XORed with the nonce;
//! * MariaDB's `client_ed25519`: the nonce signed with the key derived from
//!   the password;
//! * `mysql_clear_password`, under TLS only: the password is never sent in
//!   clear text over plain TCP.
//!
//! TLS (the cluster's `backend_tls`): when it is asked for and the greeting
//! offers `CLIENT_SSL`, the SSL request goes first and the handshake
//! response follows under TLS; a server without TLS is refused when the
//! mode requires it.
//!
//! Reference: MySQL "Connection Phase", "Authentication Method Mismatch",
//! "Caching_sha2_password information"; MariaDB "Authentication Plugin -
//! ed25519".

use bytes::BytesMut;
use gatehouse_proto_mysql::auth::{NONCE_LEN, caching_sha2, ed25519, native_password, rsa_exchange};
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::handshake::SslRequest;
use gatehouse_proto_mysql::handshake::auth_switch::{AUTH_MORE_DATA_HEADER, AUTH_SWITCH_HEADER};
use gatehouse_proto_mysql::handshake::{
    AuthMoreData, AuthSwitchRequest, ChangeUser, HandshakeResponse41, HandshakeV10,
};
use gatehouse_proto_mysql::packets::{ERR_HEADER, ErrPacket, OK_HEADER, OkPacket};
use gatehouse_proto_mysql::{DecodeError, errors};
use tokio::net::TcpStream;

use super::super::io::{self, IoError};
use crate::caps::RELAY_CAPS;
use gatehouse_core::backend_tls::stream::host_of;
use gatehouse_core::backend_tls::{BackendStream, BackendTls, Connect, HandshakeError};
use gatehouse_core::error::{Condition, ProxyError};

/// Connection-phase packets (greeting, auth switch, auth data, OK/ERR) are
/// small; anything larger than this is not a MySQL server talking.
pub const HANDSHAKE_PACKET_LIMIT: usize = 64 * 1024;
/// `max_packet_size` announced in HandshakeResponse41: the largest command
/// packet this client sends (MySQL "Protocol::HandshakeResponse41").
pub const MAX_PACKET_SIZE: u32 = 16 * 1024 * 1024;
/// The collation backend connections are opened with (`utf8mb4_general_ci`,
/// known to MySQL 5.5+ and every MariaDB).
pub const CONNECTION_CHARSET: u8 = CHARSET_UTF8MB4_GENERAL_CI;

pub const NATIVE_PASSWORD: &str = "mysql_native_password";
pub const CACHING_SHA2_PASSWORD: &str = "caching_sha2_password";
pub const CLEAR_PASSWORD: &str = "mysql_clear_password";

/// Why the connection phase failed; [`LoginError::into_proxy`] renders it.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("malformed packet in the connection phase: {0}")]
    Decode(#[from] DecodeError),
    #[error("unexpected packet 0x{0:02x} in the connection phase")]
    Unexpected(u8),
    #[error("server refused: ERROR {} ({}): {}", .0.code, .0.sqlstate_str(), .0.message)]
    Server(ErrPacket),
    #[error("the server asked for mysql_clear_password, which is never sent over plain TCP")]
    ClearText,
    #[error("caching_sha2_password full authentication with the server's RSA key: {0}")]
    Rsa(#[from] rsa_exchange::RsaError),
    #[error("unsupported authentication plugin {0:?}")]
    UnsupportedPlugin(String),
    #[error("the server switched authentication plugins twice")]
    SecondSwitch,
    #[error("backend_tls = \"{0}\": the server does not offer TLS")]
    NoTls(&'static str),
    #[error("backend_tls = \"{0}\": {1}")]
    Tls(&'static str, HandshakeError),
    #[error("the server does not offer MariaDB's extended capabilities {0:#x}, which the client asked for")]
    NoExtendedCaps(u32),
}

/// What the server told us during a successful connection phase.
pub struct Established {
    pub greeting: HandshakeV10,
    /// The capabilities both sides agreed on.
    pub caps: u32,
    /// Status flags of the final OK.
    pub status: u16,
    /// The nonce the server holds for this connection now (the greeting's,
    /// or an auth switch's): a later COM_CHANGE_USER answers it first.
    pub nonce: [u8; NONCE_LEN],
}

/// Who logs in where: the backend user, password and database, and the
/// cluster's TLS toward `addr`.
pub struct Login<'a> {
    pub addr: &'a str,
    pub tls: &'a BackendTls,
    pub user: &'a str,
    pub password: &'a [u8],
    pub database: Option<&'a str>,
    /// Of [`crate::caps::SESSION_CAPS`], those to ask for at login (a
    /// COM_CHANGE_USER keeps the connection's).
    pub session_caps: u32,
    /// Of [`crate::caps::SESSION_EXT_CAPS`], those to ask for: the login
    /// fails when the server does not offer them.
    pub session_ext_caps: u32,
}

/// Runs the connection phase on a fresh socket; gives back the socket,
/// under TLS when it was started.
pub async fn login(
    mut tcp: TcpStream,
    rbuf: &mut BytesMut,
    who: &Login<'_>,
) -> Result<(BackendStream, Established), LoginError> {
    let first = io::read_packet(&mut tcp, rbuf, HANDSHAKE_PACKET_LIMIT).await?;
    if first.payload.first() == Some(&ERR_HEADER) {
        return Err(LoginError::Server(ErrPacket::decode(&first.payload)?));
    }
    let greeting = HandshakeV10::decode(&first.payload)?;
    let mut caps = (RELAY_CAPS | who.session_caps) & greeting.capabilities;
    let ext = who.session_ext_caps;
    if ext != 0 && (greeting.capabilities & CLIENT_MYSQL != 0 || greeting.mariadb_ext_caps & ext != ext) {
        return Err(LoginError::NoExtendedCaps(ext));
    }
    if who.database.is_none() {
        caps &= !CLIENT_CONNECT_WITH_DB;
    }
    let mut seq = first.last_seq.wrapping_add(1);
    let mode = who.tls.mode;
    let mut stream = if mode.asks() && greeting.capabilities & CLIENT_SSL != 0 {
        caps |= CLIENT_SSL;
        let request = SslRequest {
            capabilities: caps,
            max_packet_size: MAX_PACKET_SIZE,
            charset: CONNECTION_CHARSET,
            mariadb_ext_caps: ext,
        };
        let mut out = BytesMut::new();
        request.encode(&mut out);
        seq = io::write_packet(&mut tcp, seq, &out).await.map_err(IoError::from)?;
        if !rbuf.is_empty() {
            // Bytes past the greeting, before the handshake: they would be
            // read as if they had come under TLS.
            return Err(LoginError::Unexpected(rbuf[0]));
        }
        who.tls
            .handshake(tcp, host_of(who.addr))
            .await
            .map_err(|e| LoginError::Tls(mode.as_str(), e))?
    } else if mode.requires() {
        return Err(LoginError::NoTls(mode.as_str()));
    } else {
        BackendStream::Plain(tcp)
    };
    let established = authenticate(&mut stream, rbuf, greeting, caps, seq, who).await?;
    Ok((stream, established))
}

/// The plugin a first answer is computed for: the server's default when the
/// proxy speaks it, else native (the server switches to the account's
/// plugin if it differs).
fn first_plugin(server_default: &str) -> &'static str {
    match server_default {
        CACHING_SHA2_PASSWORD => CACHING_SHA2_PASSWORD,
        _ => NATIVE_PASSWORD,
    }
}

/// The handshake response (with sequence id `seq`) and the exchanges after
/// it, up to the server's OK.
async fn authenticate(
    stream: &mut BackendStream,
    rbuf: &mut BytesMut,
    greeting: HandshakeV10,
    caps: u32,
    seq: u8,
    who: &Login<'_>,
) -> Result<Established, LoginError> {
    let plugin = first_plugin(&greeting.auth_plugin);
    let response = HandshakeResponse41 {
        capabilities: caps,
        max_packet_size: MAX_PACKET_SIZE,
        charset: CONNECTION_CHARSET,
        mariadb_ext_caps: who.session_ext_caps,
        username: who.user.to_owned(),
        auth_response: scramble(plugin, who.password, &greeting.scramble)?,
        database: who.database.map(str::to_owned),
        auth_plugin: Some(plugin.to_owned()),
        attributes: Vec::new(),
        zstd_level: None,
    };
    let mut out = BytesMut::new();
    response.encode(&mut out);
    io::write_packet(stream, seq, &out).await.map_err(IoError::from)?;
    let (status, nonce) = exchange(stream, rbuf, caps, plugin, greeting.scramble, who.password).await?;
    Ok(Established {
        greeting,
        caps,
        status,
        nonce,
    })
}

/// COM_CHANGE_USER on an established connection: logs it in again as
/// `who`'s user on `who`'s database (none when `None`), answering first
/// with `plugin` over `nonce` (the last nonce the server sent on this
/// connection; MariaDB and MySQL check the first answer against it), then
/// following the server through an auth switch and the plugin's round trips
/// as at login. On OK the server has reset the session: variables, user
/// variables, temporary tables, prepared statements, an open transaction.
/// Returns the OK's status flags and the nonce the server now holds.
pub async fn change_user(
    stream: &mut BackendStream,
    rbuf: &mut BytesMut,
    caps: u32,
    plugin: &str,
    nonce: [u8; NONCE_LEN],
    who: &Login<'_>,
) -> Result<(u16, [u8; NONCE_LEN]), LoginError> {
    let plugin = first_plugin(plugin);
    let request = ChangeUser {
        username: who.user.to_owned(),
        auth_response: scramble(plugin, who.password, &nonce)?,
        database: who.database.unwrap_or_default().to_owned(),
        charset: Some(u16::from(CONNECTION_CHARSET)),
        auth_plugin: Some(plugin.to_owned()),
        attributes: Vec::new(),
    };
    let mut out = BytesMut::new();
    request.encode(&mut out, caps);
    io::write_packet(stream, 0, &out).await.map_err(IoError::from)?;
    exchange(stream, rbuf, caps, plugin, nonce, who.password).await
}

/// The connection phase after the client's first answer (computed for
/// `plugin` over `nonce`): at most one auth switch and the plugin's extra
/// round trips, up to the server's OK (its status flags, and the 20-byte
/// nonce the server holds now) or ERR.
async fn exchange(
    stream: &mut BackendStream,
    rbuf: &mut BytesMut,
    caps: u32,
    mut plugin: &'static str,
    mut nonce: [u8; NONCE_LEN],
    password: &[u8],
) -> Result<(u16, [u8; NONCE_LEN]), LoginError> {
    let secure = stream.is_tls();
    let mut switched = false;
    let mut asked_for_key = false;
    let mut sent_encrypted = false;
    loop {
        let p = io::read_packet(stream, rbuf, HANDSHAKE_PACKET_LIMIT).await?;
        let next_seq = p.last_seq.wrapping_add(1);
        let &header = p.payload.first().ok_or(LoginError::Unexpected(0))?;
        match header {
            OK_HEADER => {
                let ok = OkPacket::decode(&p.payload, caps)?;
                return Ok((ok.status, nonce));
            }
            ERR_HEADER => return Err(LoginError::Server(ErrPacket::decode(&p.payload)?)),
            AUTH_SWITCH_HEADER => {
                if switched {
                    return Err(LoginError::SecondSwitch);
                }
                switched = true;
                let req = AuthSwitchRequest::decode(&p.payload)?;
                let answer = match req.plugin.as_str() {
                    ed25519::CLIENT_PLUGIN => {
                        plugin = ed25519::CLIENT_PLUGIN;
                        let n = ed25519::nonce_of(&req.data).ok_or(LoginError::Unexpected(AUTH_SWITCH_HEADER))?;
                        ed25519::client_response(password, n).to_vec()
                    }
                    NATIVE_PASSWORD | CACHING_SHA2_PASSWORD => {
                        plugin = if req.plugin == NATIVE_PASSWORD {
                            NATIVE_PASSWORD
                        } else {
                            CACHING_SHA2_PASSWORD
                        };
                        nonce = req.nonce().ok_or(LoginError::Unexpected(AUTH_SWITCH_HEADER))?;
                        scramble(plugin, password, &nonce)?
                    }
                    CLEAR_PASSWORD if secure => {
                        plugin = CLEAR_PASSWORD;
                        nul_terminated(password)
                    }
                    CLEAR_PASSWORD => return Err(LoginError::ClearText),
                    other => return Err(LoginError::UnsupportedPlugin(other.to_owned())),
                };
                io::write_packet(stream, next_seq, &answer)
                    .await
                    .map_err(IoError::from)?;
            }
            AUTH_MORE_DATA_HEADER if plugin == CACHING_SHA2_PASSWORD => {
                let more = AuthMoreData::decode(&p.payload)?;
                let answer = match more.data.as_slice() {
                    [caching_sha2::FAST_AUTH_SUCCESS] => continue,
                    // Under TLS the full path takes the password itself.
                    [caching_sha2::PERFORM_FULL_AUTH] if secure && !sent_encrypted => {
                        sent_encrypted = true;
                        nul_terminated(password)
                    }
                    [caching_sha2::PERFORM_FULL_AUTH] if !asked_for_key => {
                        asked_for_key = true;
                        vec![caching_sha2::REQUEST_PUBLIC_KEY]
                    }
                    pem if asked_for_key && !sent_encrypted && pem.starts_with(b"-----BEGIN") => {
                        sent_encrypted = true;
                        rsa_exchange::encrypt_password(password, &nonce, pem)?
                    }
                    _ => return Err(LoginError::Unexpected(AUTH_MORE_DATA_HEADER)),
                };
                io::write_packet(stream, next_seq, &answer)
                    .await
                    .map_err(IoError::from)?;
            }
            other => return Err(LoginError::Unexpected(other)),
        }
    }
}

/// The password as the clear-text exchanges send it.
fn nul_terminated(password: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(password.len() + 1);
    out.extend_from_slice(password);
    out.push(0);
    out
}

/// The auth response `plugin` computes from `password` and `nonce`.
fn scramble(plugin: &str, password: &[u8], nonce: &[u8; NONCE_LEN]) -> Result<Vec<u8>, LoginError> {
    match plugin {
        NATIVE_PASSWORD => Ok(native_password::client_response(password, nonce)),
        CACHING_SHA2_PASSWORD => Ok(caching_sha2::client_response(password, nonce)),
        other => Err(LoginError::UnsupportedPlugin(other.to_owned())),
    }
}

impl LoginError {
    /// The proxy error for a failed login of `user` at `addr`. Messages name
    /// the backend user and database, never the password.
    pub fn into_proxy(self, addr: &str, user: &str, database: Option<&str>) -> ProxyError {
        let detail = format!("{addr}: {self}");
        let db = database.unwrap_or("");
        let err = match &self {
            LoginError::Io(_) => ProxyError::new(Condition::BackendUnavailable, "could not reach the database server"),
            LoginError::Server(e) if e.code == errors::ER_CON_COUNT_ERROR.code => ProxyError::new(
                Condition::TooManyConnections,
                "the database server has no connection slots left",
            ),
            LoginError::Server(e) if e.code == errors::ER_BAD_DB_ERROR.code => {
                ProxyError::new(Condition::UnknownDatabase, format!("unknown database '{db}'"))
            }
            LoginError::Server(e) if e.code == errors::ER_DBACCESS_DENIED_ERROR.code => ProxyError::new(
                Condition::NotAllowed,
                format!("backend user '{user}' may not use database '{db}'"),
            ),
            LoginError::Server(e)
                if e.code == errors::ER_ACCESS_DENIED_ERROR.code
                    || e.code == errors::ER_ACCESS_DENIED_NO_PASSWORD_ERROR.code =>
            {
                refused(user)
            }
            LoginError::NoTls(_) | LoginError::Tls(..) | LoginError::NoExtendedCaps(_) => {
                let mut e = ProxyError::new(
                    Condition::BackendUnavailable,
                    "could not connect to the database server",
                );
                e.retry_safe = false;
                e
            }
            LoginError::ClearText
            | LoginError::Rsa(_)
            | LoginError::UnsupportedPlugin(_)
            | LoginError::SecondSwitch => refused(user),
            _ => ProxyError::new(
                Condition::BackendUnavailable,
                "could not connect to the database server",
            ),
        };
        err.with_detail(detail)
    }
}

/// The server (or the proxy's own rules) refused the login: retrying the
/// same credentials will not help.
fn refused(user: &str) -> ProxyError {
    let mut e = ProxyError::new(
        Condition::BackendUnavailable,
        format!("the proxy could not log in to the database server as backend user '{user}'"),
    );
    e.retry_safe = false;
    e
}
