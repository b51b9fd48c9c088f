//! The load engine's clients: a target is any PostgreSQL or MySQL/MariaDB
//! connection string (`postgres://…`, a libpq `key=value` string, or
//! `mysql://…`), driven by the drivers users run (tokio-postgres,
//! mysql_async). A failure carries the server's own code (SQLSTATE, MySQL
//! error number) or the kind of client-side failure, so failures can be
//! counted by cause. With a CA file a target's connections use TLS and
//! verify the server's certificate (rustls, on both engines).
//!
//! MySQL connections are opened as the drivers of other languages open them
//! (PyMySQL, Connector/J): no `SELECT @@socket, …` after the login and no
//! switch to a Unix socket, so a request costs what the application's
//! would.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use mysql_async::prelude::Queryable;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// `max_allowed_packet` assumed for MySQL connections instead of asking
/// the server after each login: the server's own default (64 MiB in
/// MariaDB 10.6+, 16 MiB before), the larger.
const MY_MAX_ALLOWED_PACKET: usize = 64 * 1024 * 1024;
/// `wait_timeout` assumed likewise: the server default (8 hours).
const MY_WAIT_TIMEOUT_S: usize = 28_800;

/// Where the load goes.
#[derive(Clone)]
pub enum Target {
    Postgres {
        config: Box<tokio_postgres::Config>,
        /// TLS (required, the server's certificate verified), or none.
        tls: Option<MakeRustlsConnect>,
    },
    Mysql(mysql_async::Opts),
}

/// TLS for a target's connections: the CA that signed the servers'
/// certificates, read once.
#[derive(Clone)]
pub struct Tls {
    ca_pem: Arc<Vec<u8>>,
    roots: Arc<rustls::RootCertStore>,
}

impl Tls {
    /// Reads the CA certificates (PEM) in `path`.
    pub fn from_ca_file(path: &Path) -> Result<Self> {
        let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.with_context(|| format!("a certificate in {}", path.display()))?;
            roots
                .add(cert)
                .with_context(|| format!("a CA certificate in {}", path.display()))?;
        }
        if roots.is_empty() {
            bail!("no certificate in {}", path.display());
        }
        Ok(Self {
            ca_pem: Arc::new(pem),
            roots: Arc::new(roots),
        })
    }

    fn pg_connector(&self) -> Result<MakeRustlsConnect> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_root_certificates(self.roots.clone())
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }

    fn mysql_opts(&self) -> mysql_async::SslOpts {
        let ca: Vec<u8> = self.ca_pem.as_ref().clone();
        mysql_async::SslOpts::default().with_root_certs(vec![ca.into()])
    }
}

/// Why a request failed: `code` is the server's (`42601`, `1064`) or one
/// of `connect`, `io`, `timeout`; `message` the first words of the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

impl Failure {
    pub fn new(code: impl Into<String>, message: impl std::fmt::Display) -> Self {
        let mut message = message.to_string();
        let mut at = MESSAGE_LIMIT.min(message.len());
        while !message.is_char_boundary(at) {
            at -= 1;
        }
        message.truncate(at);
        Self {
            code: code.into(),
            message,
        }
    }
}

/// The longest error message a failure keeps (the first of each code is
/// reported).
const MESSAGE_LIMIT: usize = 300;

/// A connection of one virtual user.
pub enum Conn {
    Postgres {
        client: tokio_postgres::Client,
        driver: tokio::task::JoinHandle<()>,
    },
    Mysql(mysql_async::Conn),
}

impl Target {
    /// A target from a connection string: `postgres://` / `postgresql://`
    /// URLs and libpq `key=value` strings are PostgreSQL; `mysql://` and
    /// `mariadb://` URLs are MySQL.
    pub fn parse(s: &str) -> Result<Self> {
        Self::parse_with(s, None)
    }

    /// [`Target::parse`], with TLS when `tls` is given: required, and the
    /// server's certificate checked against its CA and the host name.
    pub fn parse_with(s: &str, tls: Option<&Tls>) -> Result<Self> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("mysql://").or_else(|| s.strip_prefix("mariadb://")) {
            let opts = mysql_async::Opts::from_url(&format!("mysql://{rest}"))
                .with_context(|| format!("not a MySQL URL: {s}"))?;
            let builder = mysql_async::OptsBuilder::from_opts(opts)
                .prefer_socket(false)
                .max_allowed_packet(Some(MY_MAX_ALLOWED_PACKET))
                .wait_timeout(Some(MY_WAIT_TIMEOUT_S))
                // A token travels as a clear-text password (over TLS only).
                .enable_cleartext_plugin(tls.is_some());
            let builder = match tls {
                Some(t) => builder.ssl_opts(t.mysql_opts()),
                None => builder,
            };
            return Ok(Self::Mysql(builder.into()));
        }
        if s.is_empty() {
            bail!("an empty connection string");
        }
        let mut config =
            tokio_postgres::Config::from_str(s).with_context(|| format!("not a PostgreSQL connection string: {s}"))?;
        let tls = match tls {
            Some(t) => {
                config.ssl_mode(SslMode::Require);
                Some(t.pg_connector()?)
            }
            None => None,
        };
        Ok(Self::Postgres {
            config: Box::new(config),
            tls,
        })
    }

    pub fn engine(&self) -> &'static str {
        match self {
            Self::Postgres { .. } => "postgres",
            Self::Mysql(_) => "mysql",
        }
    }

    /// The user the target logs in as, if it names one.
    pub fn user(&self) -> Option<&str> {
        match self {
            Self::Postgres { config, .. } => config.get_user(),
            Self::Mysql(opts) => opts.user(),
        }
    }

    /// The database the target opens, if it names one.
    pub fn database(&self) -> Option<&str> {
        match self {
            Self::Postgres { config, .. } => config.get_dbname(),
            Self::Mysql(opts) => opts.db_name(),
        }
    }

    /// The same target with another password (a token minted for it).
    pub fn with_password(&self, password: &str) -> Self {
        match self {
            Self::Postgres { config, tls } => {
                let mut config = config.clone();
                config.password(password);
                Self::Postgres {
                    config,
                    tls: tls.clone(),
                }
            }
            Self::Mysql(opts) => Self::Mysql(
                mysql_async::OptsBuilder::from_opts(opts.clone())
                    .pass(Some(password))
                    .into(),
            ),
        }
    }

    /// Opens a connection (its startup and authentication).
    pub async fn connect(&self) -> Result<Conn, Failure> {
        match self {
            Self::Postgres { config, tls: None } => {
                let (client, connection) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(|e| pg_failure(&e, "connect"))?;
                let driver = tokio::spawn(async move {
                    let _ = connection.await;
                });
                Ok(Conn::Postgres { client, driver })
            }
            Self::Postgres { config, tls: Some(tls) } => {
                let (client, connection) = config
                    .connect(tls.clone())
                    .await
                    .map_err(|e| pg_failure(&e, "connect"))?;
                let driver = tokio::spawn(async move {
                    let _ = connection.await;
                });
                Ok(Conn::Postgres { client, driver })
            }
            Self::Mysql(opts) => mysql_async::Conn::new(opts.clone())
                .await
                .map(Conn::Mysql)
                .map_err(|e| my_failure(&e, "connect")),
        }
    }
}

impl Conn {
    /// Runs `sql` (one statement or several, text protocol) and reads its
    /// whole answer.
    pub async fn query(&mut self, sql: &str) -> Result<(), Failure> {
        match self {
            Self::Postgres { client, .. } => client
                .simple_query(sql)
                .await
                .map(drop)
                .map_err(|e| pg_failure(&e, "io")),
            Self::Mysql(conn) => conn.query_drop(sql).await.map_err(|e| my_failure(&e, "io")),
        }
    }

    /// The number in the first column of the first row `sql` answers.
    pub async fn first_number(&mut self, sql: &str) -> Result<u64, Failure> {
        let number = match self {
            Self::Postgres { client, .. } => client
                .simple_query(sql)
                .await
                .map_err(|e| pg_failure(&e, "io"))?
                .into_iter()
                .find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
                    _ => None,
                }),
            Self::Mysql(conn) => conn
                .query_first::<u64, _>(sql)
                .await
                .map_err(|e| my_failure(&e, "io"))?,
        };
        number.ok_or_else(|| Failure::new("io", format!("no number in the answer to {sql}")))
    }

    /// Closes the connection as a client that is done with it would.
    pub async fn close(self) {
        match self {
            Self::Postgres { client, driver } => {
                drop(client);
                let _ = driver.await;
            }
            Self::Mysql(conn) => {
                let _ = conn.disconnect().await;
            }
        }
    }
}

/// A PostgreSQL error's SQLSTATE, or `otherwise` (`connect`, `io`) when the
/// server sent none.
pub fn pg_failure(e: &tokio_postgres::Error, otherwise: &str) -> Failure {
    match e.as_db_error() {
        Some(db) => Failure::new(db.code().code(), db.message()),
        None => Failure::new(otherwise, e),
    }
}

/// A MySQL error's number, or `otherwise` when the server sent none.
pub fn my_failure(e: &mysql_async::Error, otherwise: &str) -> Failure {
    match e {
        mysql_async::Error::Server(s) => Failure::new(s.code.to_string(), &s.message),
        other => Failure::new(otherwise, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings_name_their_engine() {
        let pg = [
            "postgres://u:p@127.0.0.1:5432/db",
            "postgresql://u@h/db",
            "host=127.0.0.1 user=u dbname=db",
        ];
        for s in pg {
            assert_eq!(Target::parse(s).map(|t| t.engine()).ok(), Some("postgres"), "{s}");
        }
        for s in ["mysql://u:p@127.0.0.1:3306/db", "mariadb://u@h:3307/db"] {
            assert_eq!(Target::parse(s).map(|t| t.engine()).ok(), Some("mysql"), "{s}");
        }
        assert!(Target::parse("").is_err());
        assert!(Target::parse("mysql://[bad").is_err());
    }

    #[test]
    fn failure_messages_are_bounded() {
        let f = Failure::new("42601", "x".repeat(10_000));
        assert_eq!(f.message.len(), MESSAGE_LIMIT);
        let f = Failure::new("42601", "é".repeat(10_000));
        assert!(f.message.len() <= MESSAGE_LIMIT && f.message.chars().all(|c| c == 'é'));
    }
}
