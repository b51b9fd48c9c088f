//! Validation of the `[[clusters]]`: engine, backends, monitor secret,
//! health-check and failover settings, read-only weights, pool settings.

use std::collections::HashMap;
use std::sync::Arc;

use toml::Spanned;

use super::model::*;
use super::raw::*;
use super::validate::*;
use crate::backend_tls::{BackendTls, BackendTlsError, Negotiation, Source, TlsMode, build};

pub(super) fn clusters(
    cx: &mut Ctx,
    raw: &[RawCluster],
    secrets: &HashMap<String, Arc<Secret>>,
) -> Vec<Arc<ClusterSettings>> {
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for c in raw {
        unique(cx, &mut seen, &c.name, "cluster");
        let engine = match c.engine.get_ref().as_str() {
            "postgres" | "postgresql" => EngineKind::Postgres,
            "mysql" | "mariadb" => EngineKind::Mysql,
            other => {
                cx.at(
                    &c.engine,
                    format!("unknown engine \"{other}\" (expected \"postgres\" or \"mysql\")"),
                );
                EngineKind::Postgres
            }
        };
        if c.backends.get_ref().is_empty() {
            cx.at(&c.backends, "a cluster needs at least one backend");
        }
        for b in c.backends.get_ref() {
            let ok = b
                .get_ref()
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok {
                cx.at(b, format!("backend \"{}\" must be host:port", b.get_ref()));
            }
        }
        let monitor = c.monitor_secret.as_ref().and_then(|m| lookup_secret(cx, secrets, m));
        let pool_size = c.pool.size.as_ref().map_or(DEFAULT_POOL_SIZE, |s| *s.get_ref());
        if let Some(s) = &c.pool.size
            && *s.get_ref() == 0
        {
            cx.at(s, "pool.size must be at least 1");
        }
        for (field, value) in [
            ("max_connections_percent", &c.pool.max_connections_percent),
            ("max_idle_percent", &c.pool.max_idle_percent),
        ] {
            if let Some(v) = value
                && !(1..=100).contains(v.get_ref())
            {
                cx.at(v, format!("pool.{field} must be between 1 and 100"));
            }
        }
        out.push(Arc::new(ClusterSettings {
            name: c.name.get_ref().clone(),
            engine,
            backends: c.backends.get_ref().iter().map(|b| b.get_ref().clone()).collect(),
            monitor,
            health_check_interval: c.health_check_interval.unwrap_or(DEFAULT_HEALTH_CHECK_INTERVAL),
            health_check_timeout: c.health_check_timeout.unwrap_or(DEFAULT_HEALTH_CHECK_TIMEOUT),
            health_check_failures: at_least_one(cx, &c.health_check_failures, "health_check_failures")
                .unwrap_or(DEFAULT_HEALTH_CHECK_FAILURES),
            health_check_successes: at_least_one(cx, &c.health_check_successes, "health_check_successes")
                .unwrap_or(DEFAULT_HEALTH_CHECK_SUCCESSES),
            failover_hold: c.failover_hold.unwrap_or(DEFAULT_FAILOVER_HOLD),
            switchover_command: c.switchover_command.clone(),
            weights: weights(cx, c),
            connect_timeout: c.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            backend_tls: backend_tls(cx, c, engine),
            pool_size,
            borrow_timeout: c.pool.borrow_timeout.unwrap_or(DEFAULT_BORROW_TIMEOUT),
            max_connections_percent: c
                .pool
                .max_connections_percent
                .as_ref()
                .map_or(DEFAULT_MAX_CONNECTIONS_PERCENT, |v| *v.get_ref()),
            max_idle_percent: c
                .pool
                .max_idle_percent
                .as_ref()
                .map_or(DEFAULT_MAX_IDLE_PERCENT, |v| *v.get_ref()),
            init_query: c.pool.init_query.clone(),
            server_lifetime: c.pool.server_lifetime,
            server_idle_timeout: c.pool.server_idle_timeout.or(Some(DEFAULT_SERVER_IDLE_TIMEOUT)),
        }));
    }
    out
}

/// A cluster's `backend_tls` and its files (paths relative to the
/// configuration file), built and checked now: a CA that cannot be read
/// is an error of the configuration, not of the first connection.
fn backend_tls(cx: &mut Ctx, c: &RawCluster, engine: EngineKind) -> BackendTls {
    let mode = one_of(cx, "backend_tls", &c.backend_tls, TlsMode::parse, &TlsMode::NAMES);
    let negotiation = one_of(
        cx,
        "backend_tls_negotiation",
        &c.backend_tls_negotiation,
        Negotiation::parse,
        &Negotiation::NAMES,
    );
    let path = |p: &Option<Spanned<String>>| p.as_ref().map(|p| cx.base.join(p.get_ref()));
    let (ca, cert, key) = (
        path(&c.backend_tls_ca),
        path(&c.backend_tls_cert),
        path(&c.backend_tls_key),
    );
    let source = Source {
        mode,
        ca: ca.as_deref(),
        client: cert.as_deref().zip(key.as_deref()),
        server_name: c.backend_tls_server_name.as_ref().map(|n| n.get_ref().as_str()),
        alpn: engine.tls_alpn(),
        negotiation,
    };
    // Where an error points: the first of the keys it can be about.
    let at = [
        &c.backend_tls_ca,
        &c.backend_tls_cert,
        &c.backend_tls_key,
        &c.backend_tls_server_name,
        &c.backend_tls,
    ]
    .into_iter()
    .flatten()
    .next()
    .map_or(c.name.span().start, |s| s.span().start);
    let fail = |cx: &mut Ctx, e: String| cx.at_offset(at, e);
    if cert.is_some() != key.is_some() {
        fail(cx, BackendTlsError::HalfPair.to_string());
    }
    match build(&source) {
        Ok(tls) => tls,
        Err(e @ (BackendTlsError::DirectNeedsRequire(_) | BackendTlsError::DirectUnsupported)) => {
            match &c.backend_tls_negotiation {
                Some(n) => cx.at(n, e.to_string()),
                None => fail(cx, e.to_string()),
            }
            BackendTls::default()
        }
        Err(e) => {
            fail(cx, e.to_string());
            BackendTls::default()
        }
    }
}

/// A cluster's `weights`: each names one of its backends, at least 1.
fn weights(cx: &mut Ctx, c: &RawCluster) -> std::collections::BTreeMap<String, u32> {
    let Some(w) = &c.weights else {
        return Default::default();
    };
    let backends: Vec<&String> = c.backends.get_ref().iter().map(|b| b.get_ref()).collect();
    for (addr, weight) in w.get_ref() {
        if !backends.contains(&addr) {
            cx.at(w, format!("weights: \"{addr}\" is not one of the cluster's backends"));
        }
        if *weight == 0 {
            cx.at(w, format!("weights: \"{addr}\" must weigh at least 1"));
        }
    }
    w.get_ref().clone()
}

/// A key whose value is one of `names`: parsed, or (unknown) an error at
/// its line and the default; the default when it is absent.
fn one_of<T: Default>(
    cx: &mut Ctx,
    key: &str,
    value: &Option<Spanned<String>>,
    parse: fn(&str) -> Option<T>,
    names: &[&str],
) -> T {
    let Some(v) = value else { return T::default() };
    parse(v.get_ref()).unwrap_or_else(|| {
        let expected = names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
        cx.at(
            v,
            format!("unknown {key} \"{}\" (expected one of {expected})", v.get_ref()),
        );
        T::default()
    })
}

/// A count that must be at least 1, if given.
fn at_least_one(cx: &mut Ctx, v: &Option<Spanned<u32>>, field: &str) -> Option<u32> {
    let v = v.as_ref()?;
    if *v.get_ref() == 0 {
        cx.at(v, format!("{field} must be at least 1"));
        return None;
    }
    Some(*v.get_ref())
}
