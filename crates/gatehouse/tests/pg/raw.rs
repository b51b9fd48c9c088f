//! A byte-level PostgreSQL client for tests that must send what no driver
//! would (garbage, oversized or half-sent messages) or read what drivers
//! hide (BackendKeyData, ParameterStatus).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::BytesMut;
use gatehouse_proto_pg::frame::{Step, next_frame};
use gatehouse_proto_pg::messages::{self, AuthRequest, ErrorFields};
use gatehouse_proto_pg::startup;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Raw {
    pub stream: TcpStream,
    buf: BytesMut,
}

/// What a completed startup reported.
#[derive(Debug, Default)]
pub struct Greeting {
    pub params: Vec<(String, String)>,
    pub key: Option<(u32, u32)>,
}

impl Raw {
    pub async fn connect(addr: std::net::SocketAddr) -> Result<Raw> {
        Ok(Raw {
            stream: TcpStream::connect(addr).await?,
            buf: BytesMut::new(),
        })
    }

    pub async fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// Reads one byte (the answer to SSLRequest / GSSENCRequest).
    pub async fn read_byte(&mut self) -> Result<u8> {
        let b = tokio::time::timeout(Duration::from_secs(10), self.stream.read_u8()).await??;
        Ok(b)
    }

    /// The next whole message, `None` when the server closed the connection.
    pub async fn read(&mut self, within: Duration) -> Result<Option<BytesMut>> {
        loop {
            if let Step::Whole { len, .. } = next_frame(&self.buf, usize::MAX, usize::MAX)? {
                return Ok(Some(self.buf.split_to(len)));
            }
            let n = tokio::time::timeout(within, self.stream.read_buf(&mut self.buf))
                .await
                .context("timed out waiting for the server")??;
            if n == 0 {
                return Ok(None);
            }
        }
    }

    /// Reads until an ErrorResponse and returns it.
    pub async fn expect_error(&mut self, within: Duration) -> Result<ErrorFields> {
        loop {
            match self.read(within).await? {
                Some(m) if m[0] == b'E' => return Ok(messages::parse_error(&m)?),
                Some(_) => {}
                None => bail!("connection closed without an ErrorResponse"),
            }
        }
    }

    /// True when the server closes the connection within `within`
    /// (messages before the close are skipped).
    pub async fn closed_within(&mut self, within: Duration) -> bool {
        loop {
            match self.read(within).await {
                Ok(Some(_)) => {}
                Ok(None) => return true,
                Err(e) => {
                    return e
                        .downcast_ref::<std::io::Error>()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionReset);
                }
            }
        }
    }

    /// Startup plus SCRAM authentication, up to the first ReadyForQuery.
    pub async fn login(&mut self, params: &[(&str, &str)], password: &str) -> Result<Greeting> {
        let hello = startup::startup_message(params.iter().copied());
        self.send(&hello).await?;
        let mut scram: Option<ScramSha256> = None;
        let mut greeting = Greeting::default();
        let t = Duration::from_secs(10);
        loop {
            let m = self.read(t).await?.context("closed during login")?;
            let mut out = BytesMut::new();
            match m[0] {
                b'R' => match messages::parse_auth(&m)? {
                    AuthRequest::Sasl { .. } => {
                        let s = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
                        messages::put_sasl_initial(&mut out, "SCRAM-SHA-256", s.message());
                        scram = Some(s);
                    }
                    AuthRequest::SaslContinue(d) => {
                        let s = scram.as_mut().context("continue before SASL")?;
                        s.update(&d)?;
                        messages::put_password(&mut out, s.message(), false);
                    }
                    AuthRequest::SaslFinal(d) => scram.as_mut().context("final before SASL")?.finish(&d)?,
                    AuthRequest::Ok => {}
                    other => bail!("unexpected auth request {other:?}"),
                },
                b'S' => greeting.params.push(messages::parse_parameter_status(&m)?),
                b'K' => greeting.key = Some(messages::parse_backend_key(&m)?),
                b'Z' => return Ok(greeting),
                b'E' => bail!("login failed: {:?}", messages::parse_error(&m)?),
                _ => {}
            }
            if !out.is_empty() {
                self.send(&out).await?;
            }
        }
    }

    /// Runs a simple query; returns the first column of each row as text.
    pub async fn query(&mut self, sql: &str) -> Result<Vec<String>> {
        let mut out = BytesMut::new();
        messages::put_query(&mut out, sql);
        self.send(&out).await?;
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            let m = self
                .read(Duration::from_secs(30))
                .await?
                .context("closed during query")?;
            match m[0] {
                b'D' => {
                    let cols = messages::parse_data_row(&m)?;
                    let first = cols.into_iter().next().flatten().unwrap_or_default();
                    rows.push(String::from_utf8(first)?);
                }
                b'E' => error = Some(messages::parse_error(&m)?),
                b'Z' => break,
                _ => {}
            }
        }
        match error {
            Some(e) => bail!("query failed: {} {}", e.code, e.message),
            None => Ok(rows),
        }
    }
}
