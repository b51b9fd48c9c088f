//! The client side of connection start-up: SSL/GSSENC negotiation, the
//! startup packet, and authenticating the client as a tenant (SCRAM-SHA-256
//! or md5), ending with the database check. Unknown users go through the
//! same exchange as known ones (a mock SCRAM) and fail like a wrong password,
//! as PostgreSQL itself does, so the answer never reveals who exists.

use bytes::{Buf, BytesMut};
use gatehouse_proto_pg::auth::scram::{SCRAM_SHA_256, ScramError, ScramServer};
use gatehouse_proto_pg::auth::{md5, random_md5_salt, random_nonce};
use gatehouse_proto_pg::frame::{Step, next_frame};
use gatehouse_proto_pg::messages;
use gatehouse_proto_pg::startup::{StartupError, StartupPacket, parse_startup};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;

use gatehouse_core::auth::Check;
use gatehouse_core::engine::stream::{ClientStream, TlsIo};
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_settings::config::{ClientAuth, EndpointSettings, TenantAuth};

/// `PG_MAX_AUTH_TOKEN_LENGTH` (src/include/libpq/auth.h): the largest
/// password or SASL message accepted from a client.
pub const PG_MAX_AUTH_TOKEN_LENGTH: usize = 65_535;

/// The first packet that is not a negotiation request.
pub enum Opening {
    Startup {
        minor: u16,
        params: Vec<(String, String)>,
        unsupported_options: Vec<String>,
    },
    Cancel {
        pid: u32,
        secret: u32,
    },
}

fn protocol(message: impl Into<String>) -> ProxyError {
    ProxyError::new(Condition::ProtocolViolation, message)
}

/// Reads one startup-phase packet from `stream`.
async fn read_startup(stream: &mut ClientStream, buf: &mut BytesMut) -> Result<Option<StartupPacket>, ProxyError> {
    loop {
        match parse_startup(buf) {
            Ok(Some((packet, used))) => {
                buf.advance(used);
                return Ok(Some(packet));
            }
            Ok(None) => {}
            Err(StartupError::UnsupportedProtocol { major, minor }) => {
                return Err(ProxyError::new(
                    Condition::FeatureNotSupported,
                    format!("unsupported frontend protocol {major}.{minor}: server supports 3.0"),
                ));
            }
            Err(e) => return Err(protocol(e.to_string())),
        }
        buf.reserve(1024);
        match stream.read_buf(buf).await {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => return Err(protocol("incomplete startup packet")),
            Ok(_) => {}
            Err(e) => return Err(protocol("connection error during startup").with_detail(e.to_string())),
        }
    }
}

/// Answers SSLRequest/GSSENCRequest until the real first packet arrives,
/// upgrading to TLS when the endpoint has it. `Ok(None)`: the client left.
pub async fn negotiate(
    stream: &mut Option<ClientStream>,
    endpoint: &EndpointSettings,
) -> Result<Option<Opening>, ProxyError> {
    let mut buf = BytesMut::with_capacity(1024);
    let mut gss_refused = false;
    loop {
        let Some(s) = stream.as_mut() else { return Ok(None) };
        let Some(packet) = read_startup(s, &mut buf).await? else {
            return Ok(None);
        };
        match packet {
            StartupPacket::SslRequest if s.is_tls() => return Err(protocol("SSLRequest received over TLS")),
            StartupPacket::SslRequest => {
                // Bytes sent after SSLRequest but before the handshake would be
                // unencrypted data smuggled into the TLS session (CVE-2021-23214).
                if !buf.is_empty() {
                    return Err(protocol("received unencrypted data after SSL request"));
                }
                let Some(tls) = endpoint.tls.as_ref().map(|t| t.config.clone()) else {
                    s.write_all(b"N")
                        .await
                        .map_err(|e| protocol("write failed").with_detail(e.to_string()))?;
                    continue;
                };
                s.write_all(b"S")
                    .await
                    .map_err(|e| protocol("write failed").with_detail(e.to_string()))?;
                let Some(Ok((tcp, meter))) = stream.take().map(ClientStream::into_plain) else {
                    return Ok(None);
                };
                match TlsAcceptor::from(tls).accept(TlsIo::new(tcp, BytesMut::new())).await {
                    Ok(t) => *stream = Some(ClientStream::tls(t, meter)),
                    Err(e) => {
                        // A failed login (MySQL's is an error it counts the same way).
                        meter.login_failed(Condition::ProtocolViolation.name());
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return Ok(None);
                    }
                }
            }
            StartupPacket::GssEncRequest if !gss_refused && !s.is_tls() => {
                gss_refused = true;
                s.write_all(b"N")
                    .await
                    .map_err(|e| protocol("write failed").with_detail(e.to_string()))?;
            }
            StartupPacket::GssEncRequest => return Err(protocol("unexpected GSSENCRequest")),
            StartupPacket::Cancel { pid, secret } => return Ok(Some(Opening::Cancel { pid, secret })),
            StartupPacket::Startup {
                minor,
                params,
                unsupported_options,
            } => {
                if !buf.is_empty() {
                    return Err(protocol("unexpected data after the startup packet"));
                }
                return Ok(Some(Opening::Startup {
                    minor,
                    params,
                    unsupported_options,
                }));
            }
        }
    }
}

/// Reads one whole regular message during authentication.
pub async fn read_auth_message(stream: &mut ClientStream, buf: &mut BytesMut) -> Result<Option<BytesMut>, ProxyError> {
    loop {
        match next_frame(buf, PG_MAX_AUTH_TOKEN_LENGTH, PG_MAX_AUTH_TOKEN_LENGTH) {
            Ok(Step::Whole { tag: b'p', len }) => return Ok(Some(buf.split_to(len))),
            Ok(Step::Whole { tag, .. }) => {
                return Err(protocol(format!(
                    "expected password response, got message type {}",
                    char::from(tag).escape_default()
                )));
            }
            Ok(Step::NeedMore) => {}
            Ok(Step::Stream { .. }) | Err(_) => return Err(protocol("invalid authentication message length")),
        }
        buf.reserve(1024);
        match stream.read_buf(buf).await {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) => return Err(protocol("connection error during authentication").with_detail(e.to_string())),
        }
    }
}

async fn send(stream: &mut ClientStream, out: &mut BytesMut) -> Result<(), ProxyError> {
    stream
        .write_all(out)
        .await
        .map_err(|e| protocol("write failed").with_detail(e.to_string()))?;
    stream
        .flush()
        .await
        .map_err(|e| protocol("write failed").with_detail(e.to_string()))?;
    out.clear();
    Ok(())
}

fn auth_failed(user: &str) -> ProxyError {
    ProxyError::new(
        Condition::InvalidPassword,
        format!("password authentication failed for user \"{user}\""),
    )
}

/// Authenticates the client with the endpoint's method: a password sent as
/// such (a token or the tenant's password, see [`gatehouse_core::auth`]) or SCRAM /
/// md5 against `tenant` (a mock SCRAM exchange when `None`). `Ok(false)`:
/// the client left mid-exchange (psql does this to prompt for a password).
pub async fn authenticate(
    stream: &mut ClientStream,
    method: ClientAuth,
    check: &Check<'_>,
) -> Result<bool, ProxyError> {
    let user = check.user;
    let mut out = BytesMut::new();
    let mut buf = BytesMut::new();
    if method == ClientAuth::Password {
        messages::put_auth_cleartext(&mut out);
        send(stream, &mut out).await?;
        let Some(msg) = read_auth_message(stream, &mut buf).await? else {
            return Ok(false);
        };
        if !buf.is_empty() {
            return Err(protocol("unexpected data after authentication"));
        }
        let raw = messages::parse_password(&msg).map_err(|e| protocol(e.to_string()))?;
        let password = std::str::from_utf8(raw).map_err(|_| auth_failed(user))?;
        return match check.password(password).await {
            Ok(()) => Ok(true),
            Err(reason) => {
                tracing::info!(user, %reason, "password authentication refused");
                Err(auth_failed(user))
            }
        };
    }
    match check.tenant.and_then(|t| t.auth.as_ref()) {
        Some(TenantAuth::Md5(stored)) => {
            let salt = random_md5_salt();
            messages::put_auth_md5(&mut out, salt);
            send(stream, &mut out).await?;
            let Some(msg) = read_auth_message(stream, &mut buf).await? else {
                return Ok(false);
            };
            let response = messages::parse_password(&msg).map_err(|e| protocol(e.to_string()))?;
            if !md5::md5_verify(stored, salt, response) {
                return Err(auth_failed(user));
            }
        }
        scram => {
            let mut server = match scram {
                Some(TenantAuth::Scram(v)) => ScramServer::new(v.clone(), random_nonce()),
                _ => ScramServer::mock(user, check.mock_seed, random_nonce()),
            };
            messages::put_auth_sasl(&mut out, &[SCRAM_SHA_256]);
            send(stream, &mut out).await?;
            let Some(msg) = read_auth_message(stream, &mut buf).await? else {
                return Ok(false);
            };
            let (mechanism, data) = messages::parse_sasl_initial(&msg).map_err(|e| protocol(e.to_string()))?;
            let first = server
                .client_first(&mechanism, &data)
                .map_err(|e| scram_error(user, e))?;
            messages::put_auth_sasl_data(&mut out, false, &first);
            send(stream, &mut out).await?;
            let Some(msg) = read_auth_message(stream, &mut buf).await? else {
                return Ok(false);
            };
            let fin = server
                .client_final(messages::body(&msg))
                .map_err(|e| scram_error(user, e))?;
            messages::put_auth_sasl_data(&mut out, true, &fin);
            send(stream, &mut out).await?;
        }
    }
    if !buf.is_empty() {
        return Err(protocol("unexpected data after authentication"));
    }
    Ok(true)
}

fn scram_error(user: &str, e: ScramError) -> ProxyError {
    match e {
        ScramError::InvalidProof => auth_failed(user),
        other => protocol(format!("malformed SCRAM message: {other}")),
    }
}
