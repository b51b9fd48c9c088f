//! The MySQL connection phase towards a client: the proxy's handshake v10
//! (its own scramble, the relayed capabilities), the TLS upgrade after an
//! SSLRequest, and authentication of the tenant:
//!
//! * `mysql_native_password` against the tenant's stored SHA1(SHA1(pw));
//! * `caching_sha2_password`: the fast path from a verifier cached after
//!   the tenant's last full authentication, else the full path: the
//!   password sent as such over TLS, or RSA-encrypted over plain TCP when
//!   the endpoint has `mysql_rsa_key` (the client asks for the public key,
//!   or has it already); over plain TCP without a key the client is
//!   switched to `mysql_native_password`;
//! * `mysql_clear_password` (over TLS, or where plaintext tokens are
//!   allowed) on `client_auth = "password"` endpoints: a signed token or the
//!   tenant's password, checked like PostgreSQL's cleartext password
//!   ([`gatehouse_core::auth`]). Elsewhere a tenant without a MySQL hash fails like
//!   an unknown user.
//!
//! * MariaDB's `client_ed25519` on endpoints with `mysql_default_auth =
//!   "client_ed25519"`: every client is switched to it with a 32-byte nonce
//!   and its signature checked against the tenant's `mysql_ed25519` key.
//!
//! Every refusal of a password is the same ER_ACCESS_DENIED_ERROR.

use std::sync::Arc;

use bytes::BytesMut;
use gatehouse_proto_mysql::auth::{
    NONCE_LEN, caching_sha2, clear_password, ct_eq, ed25519, generate_nonce, native_password,
};
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::handshake::{
    AuthMoreData, AuthSwitchRequest, HandshakeResponse41, HandshakeV10, SslRequest,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;

use super::MyEngine;
use super::io::{read_packet, write_packet};
use gatehouse_core::auth::Check;
use gatehouse_core::core::Core;
use gatehouse_core::engine::stream::{ClientStream, TlsIo};
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_settings::config::{ClientAuth, EndpointSettings, MysqlDefaultAuth, Tenant};

pub const NATIVE: &str = "mysql_native_password";
pub const CACHING_SHA2: &str = "caching_sha2_password";
pub const CLEAR: &str = "mysql_clear_password";

/// Largest packet accepted during the connection phase (a handshake
/// response with attributes is far smaller).
pub const MAX_LOGIN_PACKET: usize = 64 * 1024;

/// utf8mb4_general_ci, announced in the greeting.
pub const DEFAULT_COLLATION: u8 = 45;

/// A client connection in an authentication exchange (the connection
/// phase, or COM_CHANGE_USER): the stream, its read buffer, the sequence id
/// the proxy's next packet must carry, and whether the stream is TLS.
pub struct Phase<S = ClientStream> {
    pub stream: S,
    pub buf: BytesMut,
    pub seq: u8,
    pub tls: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Phase<S> {
    async fn read(&mut self) -> Result<Vec<u8>, ProxyError> {
        let p = read_packet(&mut self.stream, &mut self.buf, MAX_LOGIN_PACKET)
            .await
            .map_err(|e| ProxyError::new(Condition::ProtocolViolation, "Bad handshake").with_detail(e.to_string()))?;
        if p.seq != self.seq {
            return Err(ProxyError::new(
                Condition::ProtocolViolation,
                "Got packets out of order",
            ));
        }
        self.seq = p.last_seq.wrapping_add(1);
        Ok(p.payload.to_vec())
    }

    pub async fn write(&mut self, payload: &[u8]) -> Result<(), ProxyError> {
        self.seq = write_packet(&mut self.stream, self.seq, payload)
            .await
            .map_err(|e| ProxyError::new(Condition::ProtocolViolation, "write failed").with_detail(e.to_string()))?;
        Ok(())
    }
}

/// What the connection phase established.
pub struct Authenticated {
    pub tenant: Arc<Tenant>,
    /// The database named in the handshake response, if any (checked).
    pub database: Option<String>,
    /// Capabilities in force: the client's, within [`crate::caps::RELAY_CAPS`]
    /// and [`crate::caps::SESSION_CAPS`].
    pub caps: u32,
    pub charset: u8,
    pub attributes: Vec<(String, String)>,
}

fn access_denied(user: &str) -> ProxyError {
    ProxyError::new(
        Condition::InvalidPassword,
        format!("Access denied for user '{user}' (using password: YES)"),
    )
}

/// Sends the greeting, takes the TLS upgrade, reads the handshake response.
pub async fn greet(
    core: &Core<MyEngine>,
    endpoint: &EndpointSettings,
    phase: &mut Option<Phase>,
    connection_id: u32,
    nonce: &[u8; NONCE_LEN],
) -> Result<HandshakeResponse41, ProxyError> {
    let p = phase.as_mut().ok_or_else(internal)?;
    let mut caps = crate::caps::RELAY_CAPS | crate::caps::SESSION_CAPS | CLIENT_CONNECT_ATTRS;
    if endpoint.tls.is_some() {
        caps |= CLIENT_SSL;
    }
    // MariaDB's extended capabilities are read from a greeting whose
    // CLIENT_MYSQL bit is clear, as MariaDB's own greetings have it.
    let ext_caps = core.engine.offered_ext_caps();
    if ext_caps != 0 {
        caps &= !CLIENT_MYSQL;
    }
    let greeting = HandshakeV10 {
        server_version: core.engine.server_version(),
        connection_id,
        scramble: *nonce,
        capabilities: caps,
        mariadb_ext_caps: ext_caps,
        charset: DEFAULT_COLLATION,
        status: SERVER_STATUS_AUTOCOMMIT,
        auth_plugin: match endpoint.mysql_default_auth {
            // ed25519 needs a 32-byte nonce: clients are switched to it, as
            // MariaDB does.
            MysqlDefaultAuth::Native | MysqlDefaultAuth::Ed25519 => NATIVE.into(),
            MysqlDefaultAuth::CachingSha2 => CACHING_SHA2.into(),
        },
    };
    let mut out = BytesMut::new();
    greeting.encode(&mut out);
    p.write(&out).await?;
    let first = p.read().await?;
    if !SslRequest::is_ssl_request(&first) {
        return decode_response(&first);
    }
    let tls = endpoint.tls.as_ref().map(|t| t.config.clone()).ok_or_else(|| {
        ProxyError::new(
            Condition::ProtocolViolation,
            "SSL connection error: SSL is not enabled on this endpoint",
        )
    })?;
    let Some(Phase {
        stream, mut buf, seq, ..
    }) = phase.take()
    else {
        return Err(internal());
    };
    let Ok((tcp, meter)) = stream.into_plain() else {
        return Err(ProxyError::new(
            Condition::ProtocolViolation,
            "SSLRequest received over TLS",
        ));
    };
    // What came after the SSLRequest is the start of the TLS handshake
    // (clients send it at once): the TLS layer reads it first, and nothing
    // of it reaches the session as plaintext.
    let early = buf.split();
    let tls_stream = TlsAcceptor::from(tls)
        .accept(TlsIo::new(tcp, early))
        .await
        .map_err(|e| {
            ProxyError::new(Condition::ProtocolViolation, "SSL connection error").with_detail(e.to_string())
        })?;
    *phase = Some(Phase {
        stream: ClientStream::tls(tls_stream, meter),
        buf,
        seq,
        tls: true,
    });
    let p = phase.as_mut().ok_or_else(internal)?;
    let response = p.read().await?;
    decode_response(&response)
}

fn internal() -> ProxyError {
    ProxyError::new(Condition::Internal, "internal error during the handshake")
}

fn decode_response(payload: &[u8]) -> Result<HandshakeResponse41, ProxyError> {
    HandshakeResponse41::decode(payload)
        .map_err(|e| ProxyError::new(Condition::ProtocolViolation, "Bad handshake").with_detail(e.to_string()))
}

/// Authenticates `response`'s user as a tenant. `Ok(None)`: unknown user
/// or wrong password has already been turned into an error; `Err` carries
/// what to tell the client.
pub async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    core: &Core<MyEngine>,
    endpoint: &EndpointSettings,
    phase: &mut Phase<S>,
    response: &HandshakeResponse41,
    nonce: &[u8; NONCE_LEN],
) -> Result<Arc<Tenant>, ProxyError> {
    let user = response.username.as_str();
    let tls = phase.tls;
    let tenant = core.tenants.get(user);
    let database = response.database.clone().unwrap_or_default();
    let settings = core.settings_arc();
    let check = Check {
        settings: &settings,
        hashing: &core.hashing,
        mock_seed: &core.auth_mock_seed,
        tenant: tenant.as_ref(),
        user,
        database: &database,
        audience: &endpoint.name,
    };
    let plaintext_ok = tls || endpoint.allow_plaintext_tokens;
    let native_hash = tenant.as_ref().and_then(|t| t.mysql_native);
    // The method is the endpoint's, whoever logs in: a tenant without a
    // MySQL hash (SCRAM verifier, tokens only) is checked from the password
    // itself on `client_auth = "password"` endpoints; elsewhere it fails the
    // hash exchange like an unknown user, so the exchange never tells which
    // tenants exist.
    let wants_password = endpoint.client_auth == ClientAuth::Password;
    if !wants_password
        && native_hash.is_none()
        && tenant.is_some()
        && endpoint.mysql_default_auth != MysqlDefaultAuth::Ed25519
    {
        tracing::info!(
            user,
            "tenant has no mysql_native_password hash: it can log in only on client_auth = \"password\" endpoints"
        );
    }
    let plugin = response.auth_plugin.as_deref().unwrap_or(NATIVE);
    let ok = if wants_password {
        if !plaintext_ok {
            return Err(ProxyError::new(
                Condition::NotAllowed,
                "Connections using insecure transport are prohibited: this endpoint needs TLS (--ssl)",
            ));
        }
        let password = if plugin == CLEAR {
            clear_password::decode(&response.auth_response).to_vec()
        } else {
            switch(phase, CLEAR, nonce).await?;
            let answer = phase.read().await?;
            clear_password::decode(&answer).to_vec()
        };
        let password = zeroize::Zeroizing::new(String::from_utf8_lossy(&password).into_owned());
        match check.password(&password).await {
            Ok(()) => true,
            Err(reason) => {
                tracing::info!(user, %reason, "password authentication refused");
                false
            }
        }
    } else if endpoint.mysql_default_auth == MysqlDefaultAuth::Ed25519 {
        ed25519_exchange(phase, tenant.as_ref().and_then(|t| t.mysql_ed25519)).await?
    } else if plugin == CACHING_SHA2 && !response.auth_response.is_empty() {
        let cached = tenant.as_ref().and_then(|t| core.engine.sha2_verifier(t));
        match cached {
            Some(stored) if caching_sha2::verify_fast(&stored, nonce, &response.auth_response) => {
                more_data(phase, caching_sha2::FAST_AUTH_SUCCESS).await?;
                true
            }
            _ if tls => {
                more_data(phase, caching_sha2::PERFORM_FULL_AUTH).await?;
                let answer = phase.read().await?;
                let password = zeroize::Zeroizing::new(clear_password::decode(&answer).to_vec());
                full_auth_check(core, tenant.as_deref(), native_hash, &password)
            }
            _ => match &endpoint.mysql_rsa_key {
                Some(key) => {
                    more_data(phase, caching_sha2::PERFORM_FULL_AUTH).await?;
                    let mut answer = phase.read().await?;
                    if answer == [caching_sha2::REQUEST_PUBLIC_KEY] {
                        let mut out = BytesMut::new();
                        AuthMoreData {
                            data: key.public_pem().as_bytes().to_vec(),
                        }
                        .encode(&mut out);
                        phase.write(&out).await?;
                        answer = phase.read().await?;
                    }
                    let (key, nonce) = (Arc::clone(key), *nonce);
                    let decrypted = check
                        .hash(move || key.decrypt_password(&answer, &nonce))
                        .await
                        .map_err(|e| {
                            ProxyError::new(Condition::Internal, "authentication interrupted")
                                .with_detail(e.to_string())
                        })?;
                    match decrypted {
                        Ok(password) => full_auth_check(core, tenant.as_deref(), native_hash, &password),
                        Err(reason) => {
                            tracing::info!(user, %reason, "caching_sha2_password RSA exchange refused");
                            false
                        }
                    }
                }
                None => native_exchange(phase, nonce, native_hash, None).await?,
            },
        }
    } else {
        let first = (plugin == NATIVE).then_some(response.auth_response.as_slice());
        native_exchange(phase, nonce, native_hash, first).await?
    };
    match tenant {
        Some(t) if ok => Ok(t),
        _ => Err(access_denied(user)),
    }
}

/// The full path of `caching_sha2_password`: `password` against the
/// tenant's stored native hash; a match caches the fast-path verifier.
fn full_auth_check(
    core: &Core<MyEngine>,
    tenant: Option<&Tenant>,
    native_hash: Option<[u8; 20]>,
    password: &[u8],
) -> bool {
    let good = native_hash.is_some_and(|h| ct_eq(&native_password::stored_hash(password), &h));
    if good && let Some(t) = tenant {
        core.engine
            .remember_sha2_verifier(t, caching_sha2::stored_hash(password));
    }
    good
}

/// MariaDB's `client_ed25519`: switches the client to it with a fresh
/// 32-byte nonce and checks the signature against the tenant's key. Every
/// user name gets the same exchange; one without a key is checked against a
/// key nobody has, at the same cost.
async fn ed25519_exchange<S: AsyncRead + AsyncWrite + Unpin>(
    phase: &mut Phase<S>,
    stored: Option<[u8; ed25519::PUBLIC_KEY_LEN]>,
) -> Result<bool, ProxyError> {
    let mut nonce = [0u8; ed25519::NONCE_LEN];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut nonce);
    let mut out = BytesMut::new();
    AuthSwitchRequest {
        plugin: ed25519::CLIENT_PLUGIN.into(),
        data: nonce.to_vec(),
    }
    .encode(&mut out);
    phase.write(&out).await?;
    let answer = phase.read().await?;
    let key = stored.unwrap_or_else(|| ed25519::public_key(&generate_nonce()));
    Ok(ed25519::verify(&key, &nonce, &answer))
}

/// `mysql_native_password`: checks `first` (the handshake's answer), or
/// switches the client to the plugin and checks its answer.
async fn native_exchange<S: AsyncRead + AsyncWrite + Unpin>(
    phase: &mut Phase<S>,
    nonce: &[u8; NONCE_LEN],
    stored: Option<[u8; 20]>,
    first: Option<&[u8]>,
) -> Result<bool, ProxyError> {
    let answer = match first {
        Some(a) => a.to_vec(),
        None => {
            switch(phase, NATIVE, nonce).await?;
            phase.read().await?
        }
    };
    // Unknown tenants are checked against a hash nobody has, at the same cost.
    let stored = stored.unwrap_or_else(|| native_password::stored_hash(&generate_nonce()));
    Ok(native_password::verify(&stored, nonce, &answer))
}

async fn switch<S: AsyncRead + AsyncWrite + Unpin>(
    phase: &mut Phase<S>,
    plugin: &str,
    nonce: &[u8; NONCE_LEN],
) -> Result<(), ProxyError> {
    let mut out = BytesMut::new();
    AuthSwitchRequest::with_nonce(plugin, nonce).encode(&mut out);
    phase.write(&out).await
}

async fn more_data<S: AsyncRead + AsyncWrite + Unpin>(phase: &mut Phase<S>, byte: u8) -> Result<(), ProxyError> {
    let mut out = BytesMut::new();
    AuthMoreData { data: vec![byte] }.encode(&mut out);
    phase.write(&out).await
}
