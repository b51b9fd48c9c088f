//! Turns a [`RawConfig`] into [`Settings`]: applies defaults, resolves names,
//! parses addresses, verifiers and TLS files, and collects every problem with
//! the line it is on instead of stopping at the first.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_proto_mysql::auth::rsa_exchange::ServerKey;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use toml::Spanned;

use super::model::*;
use super::raw::*;
use super::{Problem, Problems};

pub const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(15);
pub const DEFAULT_CLIENT_MESSAGE_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// Default idleness after which a client session parks (`"0s"`: never).
pub const DEFAULT_PARK_IDLE_AFTER: Duration = Duration::from_millis(250);
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 64 * 1024 * 1024;
/// One second: a promoted replica serves the first transaction after it
/// within a second, at the cost of one small query per backend per second.
pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(1);
pub const DEFAULT_HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(1);
pub const DEFAULT_HEALTH_CHECK_FAILURES: u32 = 2;
pub const DEFAULT_HEALTH_CHECK_SUCCESSES: u32 = 2;
/// How long transactions wait for a writer: a managed proxy's and
/// PgBouncer's clients wait up to 120 s for a connection; a failover of a
/// replicated pair takes 5-30 s, so 30 s covers it without holding clients
/// for minutes when the cluster is truly down.
pub const DEFAULT_FAILOVER_HOLD: Duration = Duration::from_secs(30);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_POOL_SIZE: u32 = 20;
pub const DEFAULT_BORROW_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_MAX_CLIENT_CONNECTIONS: u32 = 10_000;
pub const DEFAULT_MAX_CONNECTIONS_PERCENT: u32 = 90;
pub const DEFAULT_MAX_IDLE_PERCENT: u32 = 50;
pub const DEFAULT_SERVER_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// `[digests] max_digests`: the default, and the most allowed.
pub const DEFAULT_MAX_DIGESTS: usize = 2000;
pub const MAX_MAX_DIGESTS: usize = 100_000;

pub(super) struct Ctx<'a> {
    text: &'a str,
    pub(super) base: &'a Path,
    pub(super) problems: Vec<Problem>,
}

impl Ctx<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].matches('\n').count() + 1
    }

    pub(super) fn at<T>(&mut self, spanned: &Spanned<T>, message: impl Into<String>) {
        self.at_offset(spanned.span().start, message);
    }

    pub(super) fn at_offset(&mut self, offset: usize, message: impl Into<String>) {
        let line = Some(self.line_of(offset));
        self.problems.push(Problem {
            line,
            message: message.into(),
        });
    }
}

pub fn validate(raw: RawConfig, text: &str, base: &Path) -> Result<Settings, Problems> {
    let mut cx = Ctx {
        text,
        base,
        problems: Vec::new(),
    };
    let proxy = super::process::proxy_settings(&mut cx, &raw.proxy);
    let mut secrets = secrets(&mut cx, &raw.secrets);
    if let Some(store) = &raw.secrets_store {
        super::credentials::secrets_store(&mut cx, store, &mut secrets);
    }
    let tokens = raw.tokens.as_ref().and_then(|t| super::credentials::tokens(&mut cx, t));
    let clusters = super::clusters::clusters(&mut cx, &raw.clusters, &secrets);
    let endpoints = endpoints(&mut cx, &raw.endpoints, &clusters);
    let mut tenants = tenants(&mut cx, &raw.tenants, &secrets, tokens.is_some());
    if let Some(dir) = &raw.proxy.tenant_directory {
        super::directory::load(&mut cx, dir, &secrets, tokens.is_some(), &mut tenants);
    }
    let admin = raw.admin.as_ref().and_then(|a| super::process::admin(&mut cx, a));
    let rules = super::rules::rules(&mut cx, &raw.rules, &raw.endpoints, &clusters);
    let digests = super::rules::digests(&mut cx, raw.digests.as_ref());
    let console = super::console::console(&mut cx, raw.console.as_ref(), &tenants);
    let stats = super::stats::stats(&mut cx, raw.stats.as_ref());
    if endpoints.is_empty() && cx.problems.is_empty() {
        cx.problems.push(Problem {
            line: None,
            message: "no [[endpoints]]: nothing to listen on".into(),
        });
    }
    if !cx.problems.is_empty() {
        return Err(Problems(cx.problems));
    }
    Ok(Settings {
        proxy,
        clusters,
        endpoints,
        tenants,
        secrets,
        tokens,
        admin,
        rules,
        digests,
        console,
        stats,
        source: None,
    })
}

/// A tenant's connection rate from `connection_rate` / `connection_burst`
/// (the burst defaults to the rate).
pub(super) fn connection_rate(rate: Option<u32>, burst: Option<u32>) -> Result<Option<ConnectionRate>, String> {
    let Some(rate) = rate else {
        return match burst {
            Some(_) => Err("connection_burst needs a connection_rate".into()),
            None => Ok(None),
        };
    };
    let per_second = NonZeroU32::new(rate).ok_or("connection_rate must be at least 1 (connections a second)")?;
    let burst = match burst {
        None => per_second,
        Some(b) => NonZeroU32::new(b).ok_or("connection_burst must be at least 1")?,
    };
    Ok(Some(ConnectionRate { per_second, burst }))
}

pub(super) fn unique<'a>(cx: &mut Ctx, seen: &mut HashMap<&'a str, ()>, name: &'a Spanned<String>, what: &str) {
    if name.get_ref().is_empty() {
        cx.at(name, format!("{what} name must not be empty"));
    } else if seen.insert(name.get_ref(), ()).is_some() {
        cx.at(name, format!("duplicate {what} name \"{}\"", name.get_ref()));
    }
}

fn secrets(cx: &mut Ctx, raw: &[RawSecret]) -> HashMap<String, Arc<Secret>> {
    let mut seen = HashMap::new();
    let mut out = HashMap::new();
    for s in raw {
        unique(cx, &mut seen, &s.name, "secret");
        let password = match (&s.password, &s.password_env) {
            (Some(p), None) => p.get_ref().clone(),
            (None, Some(var)) => match std::env::var(var.get_ref()) {
                Ok(v) => v,
                Err(_) => {
                    cx.at(var, format!("environment variable {} is not set", var.get_ref()));
                    continue;
                }
            },
            _ => {
                cx.at(&s.name, "a secret needs exactly one of `password` or `password_env`");
                continue;
            }
        };
        let secret = Secret {
            name: s.name.get_ref().clone(),
            user: s.user.clone(),
            password: password.into(),
        };
        out.insert(secret.name.clone(), Arc::new(secret));
    }
    out
}

pub(super) fn lookup_secret(
    cx: &mut Ctx,
    secrets: &HashMap<String, Arc<Secret>>,
    name: &Spanned<String>,
) -> Option<Arc<Secret>> {
    let found = secrets.get(name.get_ref()).cloned();
    if found.is_none() {
        cx.at(name, format!("unknown secret \"{}\"", name.get_ref()));
    }
    found
}

fn endpoints(cx: &mut Ctx, raw: &[RawEndpoint], clusters: &[Arc<ClusterSettings>]) -> Vec<Arc<EndpointSettings>> {
    let mut seen = HashMap::new();
    let mut listens: HashMap<SocketAddr, ()> = HashMap::new();
    let mut out = Vec::new();
    for e in raw {
        unique(cx, &mut seen, &e.name, "endpoint");
        let listen = match e.listen.get_ref().parse::<SocketAddr>() {
            Ok(a) => {
                if a.port() != 0 && listens.insert(a, ()).is_some() {
                    cx.at(&e.listen, format!("another endpoint already listens on {a}"));
                }
                Some(a)
            }
            Err(_) => {
                cx.at(&e.listen, format!("listen \"{}\" must be ip:port", e.listen.get_ref()));
                None
            }
        };
        let cluster = clusters.iter().find(|c| &c.name == e.cluster.get_ref()).cloned();
        if cluster.is_none() {
            cx.at(&e.cluster, format!("unknown cluster \"{}\"", e.cluster.get_ref()));
        }
        let role = match e.role.get_ref().as_str() {
            "read_write" => Some(EndpointRole::ReadWrite),
            "read_only" => Some(EndpointRole::ReadOnly),
            "split" => Some(EndpointRole::Split),
            other => {
                cx.at(
                    &e.role,
                    format!("unknown role \"{other}\" (expected \"read_write\", \"read_only\" or \"split\")"),
                );
                None
            }
        };
        let pool_mode = match e.pool_mode.as_ref().map(|m| m.get_ref().as_str()) {
            None | Some("transaction") => Some(PoolMode::Transaction),
            Some("session") => Some(PoolMode::Session),
            Some("statement") => Some(PoolMode::Statement),
            Some(other) => {
                if let Some(m) = &e.pool_mode {
                    cx.at(
                        m,
                        format!(
                            "unknown pool_mode \"{other}\" (expected \"transaction\", \"session\" or \"statement\")"
                        ),
                    );
                }
                None
            }
        };
        let reader_fallback = match e.reader_fallback.as_ref().map(|f| (f, f.get_ref().as_str())) {
            None | Some((_, "writer")) => ReaderFallback::Writer,
            Some((_, "error")) => ReaderFallback::Error,
            Some((f, other)) => {
                cx.at(
                    f,
                    format!("unknown reader_fallback \"{other}\" (expected \"writer\" or \"error\")"),
                );
                ReaderFallback::Writer
            }
        };
        if role == Some(EndpointRole::ReadWrite) && (e.max_replica_lag.is_some() || e.reader_fallback.is_some()) {
            cx.at(
                &e.role,
                "max_replica_lag and reader_fallback apply to read_only endpoints only",
            );
        }
        if role == Some(EndpointRole::ReadWrite)
            && let Some(w) = &e.writer_reads
        {
            cx.at(w, "writer_reads applies to read_only and split endpoints only (a read_write endpoint's reads are the writer's)");
        }
        if role == Some(EndpointRole::Split)
            && let Some(f) = &e.reader_fallback
        {
            cx.at(
                f,
                "reader_fallback applies to read_only endpoints only (a split endpoint's reads fall back to the writer)",
            );
        }
        if role.is_some_and(|r| r != EndpointRole::Split) {
            if let Some(r) = &e.read_your_writes {
                cx.at(r, "read_your_writes applies to split endpoints only");
            }
            if let Some(f) = &e.read_only_functions {
                cx.at(f, "read_only_functions applies to split endpoints only");
            }
        }
        let tls = e.tls.as_ref().and_then(|t| {
            let files = t.get_ref();
            match crate::tls::server_config(&cx.base.join(&files.cert), &cx.base.join(&files.key)) {
                Ok(c) => Some(c),
                Err(err) => {
                    cx.at(t, err.to_string());
                    None
                }
            }
        });
        let require_tls = e.require_tls.as_ref().is_some_and(|r| *r.get_ref());
        if let Some(r) = &e.require_tls
            && *r.get_ref()
            && e.tls.is_none()
        {
            cx.at(r, "require_tls needs an [endpoints.tls] section with cert and key");
        }
        let client_auth = match e.client_auth.as_ref().map(|a| (a, a.get_ref().as_str())) {
            None | Some((_, "scram")) => ClientAuth::Scram,
            Some((_, "password")) => ClientAuth::Password,
            Some((a, other)) => {
                cx.at(
                    a,
                    format!("unknown client_auth \"{other}\" (expected \"scram\" or \"password\")"),
                );
                ClientAuth::Scram
            }
        };
        if client_auth == ClientAuth::Password
            && e.tls.is_none()
            && !e.allow_plaintext_tokens.unwrap_or(false)
            && let Some(a) = &e.client_auth
        {
            cx.at(
                a,
                "client_auth = \"password\" sends passwords and tokens: it needs [endpoints.tls] (or allow_plaintext_tokens = true for local testing)",
            );
        }
        let (mysql_default_auth, mysql_rsa_key) = mysql_auth(cx, e, cluster.as_deref());
        if let (Some(listen), Some(cluster), Some(role), Some(pool_mode)) = (listen, cluster, role, pool_mode) {
            out.push(Arc::new(EndpointSettings {
                name: e.name.get_ref().clone(),
                listen,
                cluster,
                role,
                max_replica_lag: e.max_replica_lag,
                reader_fallback,
                read_your_writes: e.read_your_writes.as_ref().is_none_or(|r| *r.get_ref()),
                writer_reads: e.writer_reads.as_ref().is_some_and(|w| *w.get_ref()),
                read_only_functions: e
                    .read_only_functions
                    .as_ref()
                    .map(|f| f.get_ref().clone())
                    .unwrap_or_default(),
                pool_mode,
                max_client_connections: e.max_client_connections.unwrap_or(DEFAULT_MAX_CLIENT_CONNECTIONS),
                idle_client_timeout: e.idle_client_timeout,
                pinning_filter: e.pinning_filter.iter().map(|n| n.to_ascii_lowercase()).collect(),
                require_tls,
                tls,
                client_auth,
                allow_plaintext_tokens: e.allow_plaintext_tokens.unwrap_or(false),
                mysql_default_auth,
                mysql_rsa_key,
            }));
        }
    }
    out
}

/// An endpoint's MySQL authentication keys: only for MySQL clusters.
fn mysql_auth(
    cx: &mut Ctx,
    e: &RawEndpoint,
    cluster: Option<&ClusterSettings>,
) -> (MysqlDefaultAuth, Option<Arc<ServerKey>>) {
    let is_mysql = cluster.is_none_or(|c| c.engine == EngineKind::Mysql);
    for (key, name) in [
        (&e.mysql_default_auth, "mysql_default_auth"),
        (&e.mysql_rsa_key, "mysql_rsa_key"),
    ] {
        if let Some(k) = key
            && !is_mysql
        {
            cx.at(k, format!("{name} applies to endpoints of MySQL clusters only"));
        }
    }
    let default_auth = match e.mysql_default_auth.as_ref().map(|a| (a, a.get_ref().as_str())) {
        None | Some((_, "mysql_native_password")) => MysqlDefaultAuth::Native,
        Some((_, "caching_sha2_password")) => MysqlDefaultAuth::CachingSha2,
        Some((_, "client_ed25519" | "ed25519")) => MysqlDefaultAuth::Ed25519,
        Some((a, other)) => {
            cx.at(
                a,
                format!(
                    "unknown mysql_default_auth \"{other}\" (expected \"mysql_native_password\", \"caching_sha2_password\" or \"client_ed25519\")"
                ),
            );
            MysqlDefaultAuth::Native
        }
    };
    let rsa_key = e.mysql_rsa_key.as_ref().and_then(|k| {
        let path = cx.base.join(k.get_ref());
        let loaded = std::fs::read_to_string(&path)
            .map_err(|err| format!("cannot read mysql_rsa_key {}: {err}", path.display()))
            .and_then(|pem| {
                ServerKey::from_pem(&pem).map_err(|err| format!("mysql_rsa_key {}: {err}", path.display()))
            });
        match loaded {
            Ok(key) => Some(Arc::new(key)),
            Err(msg) => {
                cx.at(k, msg);
                None
            }
        }
    });
    (default_auth, rsa_key)
}

fn tenants(
    cx: &mut Ctx,
    raw: &[RawTenant],
    secrets: &HashMap<String, Arc<Secret>>,
    tokens_configured: bool,
) -> HashMap<String, Arc<Tenant>> {
    let mut seen = HashMap::new();
    let mut out = HashMap::new();
    for t in raw {
        unique(cx, &mut seen, &t.name, "tenant");
        if t.databases.get_ref().is_empty() {
            cx.at(&t.databases, "a tenant needs at least one database");
        }
        let secret = lookup_secret(cx, secrets, &t.secret);
        let token = t.token.unwrap_or(false);
        if token && !tokens_configured {
            cx.at(&t.name, "token = true needs a [tokens] section (issuer and keys)");
        }
        let mysql_native = match &t.mysql_native_password {
            None => Ok(None),
            Some(h) => mysql_native_hash(h.get_ref()).map(Some).map_err(|e| cx.at(h, e)),
        };
        let mysql_ed25519 = match &t.mysql_ed25519 {
            None => Ok(None),
            Some(k) => mysql_ed25519_key(k.get_ref()).map(Some).map_err(|e| cx.at(k, e)),
        };
        let auth = tenant_auth(
            t.scram_verifier.as_ref().map(|v| v.get_ref().as_str()),
            t.md5_hash.as_ref().map(|h| h.get_ref().as_str()),
            token || t.mysql_native_password.is_some() || t.mysql_ed25519.is_some(),
        );
        let (auth, auth_ok) = match auth {
            Ok(a) => (a, true),
            Err(e) => {
                match (&t.scram_verifier, &t.md5_hash) {
                    (Some(v), None) => cx.at(v, e),
                    (None, Some(h)) => cx.at(h, e),
                    _ => cx.at(&t.name, e),
                }
                (None, false)
            }
        };
        let rate = connection_rate(
            t.connection_rate.as_ref().map(|r| *r.get_ref()),
            t.connection_burst.as_ref().map(|b| *b.get_ref()),
        );
        let rate = rate.map_err(|e| match (&t.connection_rate, &t.connection_burst) {
            (_, Some(b)) if e.contains("burst") => cx.at(b, e),
            (Some(r), _) => cx.at(r, e),
            _ => cx.at(&t.name, e),
        });
        if let Some(m) = &t.max_backend_connections
            && *m.get_ref() == 0
        {
            cx.at(m, "max_backend_connections must be at least 1");
        }
        if let (Some(secret), true, Ok(connection_rate), Ok(mysql_native), Ok(mysql_ed25519)) =
            (secret, auth_ok, rate, mysql_native, mysql_ed25519)
        {
            let tenant = Tenant {
                name: t.name.get_ref().clone(),
                databases: t.databases.get_ref().clone(),
                max_client_connections: t.max_client_connections,
                max_backend_connections: t.max_backend_connections.as_ref().map(|m| *m.get_ref()),
                secret,
                auth,
                mysql_native,
                mysql_ed25519,
                token,
                connection_rate,
            };
            out.insert(tenant.name.clone(), Arc::new(tenant));
        }
    }
    out
}

/// SHA1(SHA1(password)) from MySQL's stored form `*` + 40 hex digits.
pub(super) fn mysql_native_hash(text: &str) -> Result<[u8; 20], String> {
    const WRONG: &str =
        "mysql_native_password must be \"*\" followed by 40 hex digits (see `gatehouse hash-password --mysql`)";
    let hex = text.strip_prefix('*').filter(|h| h.len() == 40).ok_or(WRONG)?;
    let mut out = [0u8; 20];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2).ok_or(WRONG)?, 16).map_err(|_| WRONG)?;
    }
    Ok(out)
}

/// MariaDB's stored ed25519 key: 32 bytes in base64, padded or not.
pub(super) fn mysql_ed25519_key(text: &str) -> Result<[u8; 32], String> {
    use base64::Engine as _;
    const WRONG: &str = "mysql_ed25519 must be a base64 Ed25519 public key, as MariaDB stores it (see `gatehouse hash-password --mysql-ed25519`)";
    let trimmed = text.trim_end_matches('=');
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(trimmed)
        .map_err(|_| WRONG)?;
    bytes.try_into().map_err(|_| WRONG.to_owned())
}

/// A tenant's password method from its `scram_verifier` / `md5_hash`; a
/// tenant with `token = true` or a MySQL password hash (`other`) may have none.
pub(super) fn tenant_auth(scram: Option<&str>, md5: Option<&str>, token: bool) -> Result<Option<TenantAuth>, String> {
    match (scram, md5) {
        (Some(v), None) => v
            .parse::<ScramVerifier>()
            .map(|v| Some(TenantAuth::Scram(v)))
            .map_err(|e| format!("scram_verifier is not a SCRAM-SHA-256 verifier: {e}")),
        (None, Some(h)) => {
            if h.len() == 35 && h.starts_with("md5") && h[3..].bytes().all(|b| b.is_ascii_hexdigit()) {
                Ok(Some(TenantAuth::Md5(h.to_owned())))
            } else {
                Err("md5_hash must be \"md5\" followed by 32 hex digits".into())
            }
        }
        (None, None) if token => Ok(None),
        _ => Err(
            "a tenant needs exactly one of `scram_verifier` or `md5_hash` (see `gatehouse hash-password`), or `token = true` or `mysql_native_password`"
                .into(),
        ),
    }
}
