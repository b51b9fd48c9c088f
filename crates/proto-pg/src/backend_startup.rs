//! The proxy's side of connecting to a PostgreSQL server, as a state machine:
//! fed the server's messages one at a time, it writes the answers (password,
//! md5 hash, SCRAM-SHA-256 exchange via `postgres-protocol`'s client) and
//! collects ParameterStatus and BackendKeyData until the first ReadyForQuery.

use bytes::BytesMut;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use thiserror::Error;

use crate::auth::scram::SCRAM_SHA_256;
use crate::messages::{self, AuthRequest, ErrorFields};

#[derive(Debug, Error)]
pub enum BackendAuthError {
    #[error("server refused the connection: {} {}", .0.code, .0.message)]
    Server(ErrorFields),
    #[error("server asked for a password but none is configured")]
    PasswordRequired,
    #[error("server asked for an unsupported authentication method {0}")]
    Unsupported(String),
    #[error("SCRAM exchange with the server failed: {0}")]
    Scram(String),
    #[error("protocol error during startup: {0}")]
    Protocol(String),
}

enum State {
    Authenticating,
    Scram(Box<ScramSha256>),
    AwaitingReady,
}

/// Where the startup exchange stands after a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// Keep reading server messages (anything written to `out` must be sent).
    Continue,
    /// The session is ready; the transaction status is given.
    Ready(u8),
}

pub struct BackendStartup {
    user: String,
    password: Option<String>,
    state: State,
    parameters: Vec<(String, String)>,
    key: Option<(u32, u32)>,
}

impl BackendStartup {
    pub fn new(user: &str, password: Option<&str>) -> Self {
        Self {
            user: user.to_owned(),
            password: password.map(str::to_owned),
            state: State::Authenticating,
            parameters: Vec::new(),
            key: None,
        }
    }

    /// The ParameterStatus values the server reported.
    pub fn parameters(&self) -> &[(String, String)] {
        &self.parameters
    }

    /// The server's BackendKeyData (pid, secret), if it sent one.
    pub fn key(&self) -> Option<(u32, u32)> {
        self.key
    }

    fn password(&self) -> Result<&str, BackendAuthError> {
        self.password.as_deref().ok_or(BackendAuthError::PasswordRequired)
    }

    /// Handles one whole server message; replies go to `out`.
    pub fn handle(&mut self, msg: &[u8], out: &mut BytesMut) -> Result<Progress, BackendAuthError> {
        let proto = |e: messages::DecodeError| BackendAuthError::Protocol(e.to_string());
        match msg.first() {
            Some(b'E') => {
                return Err(BackendAuthError::Server(messages::parse_error(msg).map_err(proto)?));
            }
            Some(b'N') => return Ok(Progress::Continue),
            Some(b'R') => {}
            Some(b'S') if matches!(self.state, State::AwaitingReady) => {
                self.parameters
                    .push(messages::parse_parameter_status(msg).map_err(proto)?);
                return Ok(Progress::Continue);
            }
            Some(b'K') if matches!(self.state, State::AwaitingReady) => {
                self.key = Some(messages::parse_backend_key(msg).map_err(proto)?);
                return Ok(Progress::Continue);
            }
            Some(b'Z') if matches!(self.state, State::AwaitingReady) => {
                return Ok(Progress::Ready(messages::parse_ready(msg).map_err(proto)?));
            }
            Some(&t) => {
                return Err(BackendAuthError::Protocol(format!(
                    "unexpected message '{}'",
                    t as char
                )));
            }
            None => return Err(BackendAuthError::Protocol("empty message".into())),
        }
        let req = messages::parse_auth(msg).map_err(proto)?;
        match (&mut self.state, req) {
            (State::Authenticating | State::Scram(_), AuthRequest::Ok) => {
                self.state = State::AwaitingReady;
            }
            (State::Authenticating, AuthRequest::Cleartext) => {
                let pw = self.password()?.as_bytes().to_vec();
                messages::put_password(out, &pw, true);
            }
            (State::Authenticating, AuthRequest::Md5 { salt }) => {
                let hash = md5_hash(self.user.as_bytes(), self.password()?.as_bytes(), salt);
                messages::put_password(out, hash.as_bytes(), true);
            }
            (State::Authenticating, AuthRequest::Sasl { mechanisms }) => {
                if !mechanisms.iter().any(|m| m == SCRAM_SHA_256) {
                    return Err(BackendAuthError::Unsupported(mechanisms.join(",")));
                }
                let scram = ScramSha256::new(self.password()?.as_bytes(), ChannelBinding::unsupported());
                messages::put_sasl_initial(out, SCRAM_SHA_256, scram.message());
                self.state = State::Scram(Box::new(scram));
            }
            (State::Scram(scram), AuthRequest::SaslContinue(data)) => {
                scram
                    .update(&data)
                    .map_err(|e| BackendAuthError::Scram(e.to_string()))?;
                messages::put_password(out, scram.message(), false);
            }
            (State::Scram(scram), AuthRequest::SaslFinal(data)) => {
                scram
                    .finish(&data)
                    .map_err(|e| BackendAuthError::Scram(e.to_string()))?;
            }
            (_, AuthRequest::Other(code)) => {
                return Err(BackendAuthError::Unsupported(format!("code {code}")));
            }
            (_, other) => {
                return Err(BackendAuthError::Protocol(format!("unexpected {other:?}")));
            }
        }
        Ok(Progress::Continue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(s: &mut BackendStartup, msg: &BytesMut) -> (Result<Progress, BackendAuthError>, BytesMut) {
        let mut out = BytesMut::new();
        let r = s.handle(msg, &mut out);
        (r, out)
    }

    #[test]
    fn md5_then_ready() {
        let mut s = BackendStartup::new("u", Some("pw"));
        let mut m = BytesMut::new();
        messages::put_auth_md5(&mut m, [1, 2, 3, 4]);
        let (r, out) = feed(&mut s, &m);
        assert_eq!(r.unwrap(), Progress::Continue);
        let expected = md5_hash(b"u", b"pw", [1, 2, 3, 4]);
        assert_eq!(messages::parse_password(&out).unwrap(), expected.as_bytes());
        for build in [
            messages::put_auth_ok as fn(&mut BytesMut),
            |b: &mut BytesMut| messages::put_parameter_status(b, "server_version", "15"),
            |b: &mut BytesMut| messages::put_backend_key(b, 10, 20),
        ] {
            let mut m = BytesMut::new();
            build(&mut m);
            assert_eq!(feed(&mut s, &m).0.unwrap(), Progress::Continue);
        }
        let mut m = BytesMut::new();
        messages::put_ready(&mut m, b'I');
        assert_eq!(feed(&mut s, &m).0.unwrap(), Progress::Ready(b'I'));
        assert_eq!(s.key(), Some((10, 20)));
        assert_eq!(s.parameters(), &[("server_version".to_string(), "15".to_string())]);
    }

    #[test]
    fn server_error_and_missing_password() {
        let mut s = BackendStartup::new("u", None);
        let mut m = BytesMut::new();
        messages::put_auth_md5(&mut m, [0; 4]);
        assert!(matches!(feed(&mut s, &m).0, Err(BackendAuthError::PasswordRequired)));
        let mut m = BytesMut::new();
        messages::put_error(&mut m, "FATAL", "28P01", "nope");
        assert!(matches!(feed(&mut s, &m).0, Err(BackendAuthError::Server(f)) if f.code == "28P01"));
    }
}
