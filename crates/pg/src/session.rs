//! One PostgreSQL client session, from accept to close: login (bounded by the
//! login timeout), admission and TLS policy, and routing the logged-in
//! client to its pool: session mode's relay or a pooled session
//! ([`super::handover`] borrows and prepares the first backend connection).

use std::sync::Arc;

use bytes::BytesMut;
use gatehouse_proto_pg::messages;
use tokio::io::AsyncWriteExt;

use super::PgEngine;
use super::backend::PgCancelTarget;
use super::errors::fail;
use super::handover::{pooled_greeting, run_session};
use super::login::{self, Opening};
use super::parked::{Guards, Live};
use super::txn::TxSession;
use gatehouse_core::auth::Check;
use gatehouse_core::cancel::CancelKey;
use gatehouse_core::core::Core;
use gatehouse_core::engine::Engine;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_core::pool::{Pool, TenantCap};
use gatehouse_core::serve::ClientConn;
use gatehouse_settings::config::{ClientAuth, EndpointSettings, PoolMode};

/// A client that has logged in: who it is and what it holds for its life.
struct LoggedIn {
    stream: ClientStream,
    endpoint: Arc<EndpointSettings>,
    params: Vec<(String, String)>,
    admitted: Entry,
    _admission: Option<tokio::sync::OwnedSemaphorePermit>,
    _drain: gatehouse_core::drain::DrainGuard,
}

/// The client side of [`PgEngine`]: each accepted connection's session.
impl gatehouse_core::serve::Serve for PgEngine {
    fn serve(core: Arc<Core<Self>>, client: ClientConn) -> impl Future<Output = ()> + Send {
        // No async wrapper: its copy of the arguments would stay in every
        // session's task.
        serve(core, client)
    }
}

/// Serves one accepted client connection. The login, the greeting and the
/// session-mode relay run in their own boxed futures, and a pooled
/// client's state lives in one box ([`Live`]), so the task of an idle
/// transaction-pooled client is a few pointers and its idle wait (and,
/// once it parks, nothing: see [`super::parked`]).
///
/// Not an `async fn`: its arguments would stay in the task for the whole
/// session. They go into the login's box at once instead.
pub fn serve(core: Arc<Core<PgEngine>>, client: ClientConn) -> impl Future<Output = ()> + Send {
    let starting = Box::pin(login_and_start(core, client));
    async move {
        let Some((live, stream)) = starting.await else {
            return;
        };
        super::parked::drive(live, stream).await;
    }
}

/// The login and the greeting, in one box freed before the session runs
/// (a session-mode session runs to its end in here).
async fn login_and_start(core: Arc<Core<PgEngine>>, client: ClientConn) -> Option<(Box<Live>, ClientStream)> {
    let peer = client.peer;
    let session = login(&core, client).await?;
    start(&core, session, peer).await
}

/// Registers the session's cancel key and routes it ([`begin`]); `None`
/// when the session already ended (session mode, or an error sent).
async fn start(
    core: &Arc<Core<PgEngine>>,
    session: LoggedIn,
    peer: std::net::SocketAddr,
) -> Option<(Box<Live>, ClientStream)> {
    let LoggedIn {
        mut stream,
        endpoint,
        params,
        admitted,
        _admission,
        _drain,
    } = session;
    let cancel = core.cancels.register_on(Some(&endpoint));
    let admitted = match admitted {
        Entry::Pooled(a) => a,
        Entry::Console(role) => {
            console(core, stream, &endpoint, &params, peer, cancel, role).await;
            return None;
        }
    };
    let gatehouse_core::router::Admitted {
        slot: _tenant_slot,
        cap,
        pool,
    } = admitted;
    let mut inspect = {
        let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let user = param("user").unwrap_or_default();
        let database = param("database").unwrap_or(user);
        let settings = core.settings();
        let meter = core.meters.session(stream.meter().clone(), user, &settings.stats);
        Box::new(gatehouse_core::inspect::Inspector::new(
            &settings,
            user,
            database,
            &endpoint.name,
            Some(peer.ip()),
            meter,
        ))
    };
    inspect.logged_in(stream.is_tls(), &cancel, pool.route());
    inspect.meter().logged_in(stream.is_tls());
    match Box::pin(begin(core, &endpoint, &mut stream, pool, cap, params, cancel, inspect)).await {
        Ok(Some(tx)) => Some((
            Box::new(Live {
                tx,
                guards: Guards {
                    _tenant_slot,
                    _admission,
                    _drain,
                },
            }),
            stream,
        )),
        Ok(None) => None,
        Err(e) => fail(&core.stats, Some(&mut stream), &e, peer).await,
    }
}

/// A console user's session, from the greeting to its end (logged as
/// any session's is).
async fn console(
    core: &Arc<Core<PgEngine>>,
    mut stream: ClientStream,
    endpoint: &EndpointSettings,
    params: &[(String, String)],
    peer: std::net::SocketAddr,
    cancel: gatehouse_core::cancel::CancelKey<super::backend::PgCancelTarget>,
    role: gatehouse_core::console::Role,
) {
    let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let user = param("user").unwrap_or_default();
    let settings = core.settings_arc();
    let meter = core.meters.session(stream.meter().clone(), user, &settings.stats);
    let mut inspect = gatehouse_core::inspect::Inspector::new(
        &settings,
        user,
        param("database").unwrap_or(user),
        &endpoint.name,
        Some(peer.ip()),
        meter,
    );
    inspect.logged_in_console(stream.is_tls(), &cancel);
    inspect.meter().logged_in(stream.is_tls());
    if let Err(e) = super::console::serve(core, &mut stream, &cancel, user, role).await {
        let _: Option<()> = fail(&core.stats, Some(&mut stream), &e, peer).await;
    }
}

/// What a login leads to: a pooled session, or the admin console.
enum Entry {
    Pooled(Admitted),
    Console(gatehouse_core::console::Role),
}

/// TLS, startup, cancel requests, admission and authentication, within the
/// login timeout. `None`: the connection is done with (answered or failed;
/// a failure is counted by its condition in the endpoint's meter).
async fn login(core: &Core<PgEngine>, client: ClientConn) -> Option<LoggedIn> {
    let ClientConn {
        socket,
        peer,
        endpoint,
        admission,
        drain,
    } = client;
    let deadline = tokio::time::Instant::now() + core.settings().proxy.login_timeout;
    let meter = core.meters.endpoint(&endpoint.name);
    let mut stream = Some(ClientStream::plain(socket, meter.clone()));
    let failed = |e: &ProxyError| meter.login_failed(e.condition.name());
    let opening = match tokio::time::timeout_at(deadline, Box::pin(login::negotiate(&mut stream, &endpoint))).await {
        Ok(Ok(Some(o))) => o,
        Ok(Ok(None)) => return None,
        Ok(Err(e)) => {
            failed(&e);
            return fail(&core.stats, stream.as_mut(), &e, peer).await;
        }
        Err(_) => {
            failed(&login_timeout());
            return fail(&core.stats, stream.as_mut(), &login_timeout(), peer).await;
        }
    };
    let mut stream = stream?;
    let (minor, params, unsupported) = match opening {
        Opening::Cancel { pid, secret } => {
            if let Some(claimed) = core.cancels.lookup(pid, secret)
                && let Err(e) = Box::pin(core.engine.cancel(claimed.target.clone())).await
            {
                tracing::warn!(error = %e, "cancel request could not be delivered");
            }
            core.cancels.wake_cancelled(pid);
            return None;
        }
        Opening::Startup {
            minor,
            params,
            unsupported_options,
        } => (minor, params, unsupported_options),
    };
    if admission.is_none() {
        let e = ProxyError::new(Condition::TooManyConnections, "sorry, too many clients already");
        failed(&e);
        return fail(&core.stats, Some(&mut stream), &e, peer).await;
    }
    let login = tokio::time::timeout_at(
        deadline,
        Box::pin(admit(
            core,
            &endpoint,
            &mut stream,
            peer.ip(),
            minor,
            &params,
            &unsupported,
        )),
    );
    let admitted = match login.await {
        Ok(Ok(Some(t))) => t,
        Ok(Ok(None)) => return None,
        Ok(Err(e)) => {
            failed(&e);
            return fail(&core.stats, Some(&mut stream), &e, peer).await;
        }
        Err(_) => {
            failed(&login_timeout());
            return fail(&core.stats, Some(&mut stream), &login_timeout(), peer).await;
        }
    };
    Some(LoggedIn {
        stream,
        endpoint,
        params,
        admitted,
        _admission: admission,
        _drain: drain,
    })
}

fn login_timeout() -> ProxyError {
    ProxyError::new(
        Condition::LoginTimeout,
        "timeout expired before authentication completed",
    )
}

/// What admission gave the client (see [`Core::admit`]).
type Admitted = gatehouse_core::router::Admitted<PgEngine>;

/// TLS policy, protocol negotiation, the failed-login limits,
/// authentication, the database check and the tenant's connection limits.
/// `Ok(None)`: the client left during authentication.
async fn admit(
    core: &Core<PgEngine>,
    endpoint: &EndpointSettings,
    stream: &mut ClientStream,
    addr: std::net::IpAddr,
    minor: u16,
    params: &[(String, String)],
    unsupported: &[String],
) -> Result<Option<Entry>, ProxyError> {
    let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let Some(user) = param("user").filter(|u| !u.is_empty()) else {
        return Err(ProxyError::new(
            Condition::NotAllowed,
            "no PostgreSQL user name specified in startup packet",
        ));
    };
    let password_over_plaintext = endpoint.client_auth == ClientAuth::Password && !endpoint.allow_plaintext_tokens;
    if (endpoint.require_tls || password_over_plaintext) && !stream.is_tls() {
        return Err(ProxyError::new(
            Condition::NotAllowed,
            "this endpoint requires TLS (sslmode=require)",
        ));
    }
    if param("replication").is_some_and(|r| r != "false" && r != "0" && r != "off") {
        return Err(ProxyError::new(
            Condition::FeatureNotSupported,
            "replication connections are not supported",
        ));
    }
    if minor > 0 || !unsupported.is_empty() {
        let mut out = BytesMut::new();
        messages::put_negotiate_protocol(&mut out, 0, unsupported);
        stream
            .write_all(&out)
            .await
            .map_err(|e| ProxyError::new(Condition::ProtocolViolation, "write failed").with_detail(e.to_string()))?;
    }
    // Before any password is looked at, and the same answer whether or not
    // the name is a tenant's (the limit is kept per name as sent).
    if !core.limits.login_allowed(addr, user) {
        return Err(ProxyError::new(
            Condition::NotAllowed,
            gatehouse_core::limits::TOO_MANY_FAILURES,
        ));
    }
    let database = param("database").filter(|d| !d.is_empty()).unwrap_or(user).to_owned();
    let tenant = core.tenants.get(user);
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
    match login::authenticate(stream, endpoint.client_auth, &check).await {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(e) => {
            if e.condition == Condition::InvalidPassword {
                core.limits.record_failure(addr, user);
            }
            return Err(e);
        }
    }
    // `authenticate` only succeeds for a known tenant (the mock never does).
    let Some(tenant) = tenant else {
        return Err(ProxyError::new(
            Condition::InvalidPassword,
            "password authentication failed",
        ));
    };
    if database == settings.console.database
        && let Some(role) = settings.console.role_of(&tenant.name)
    {
        return Ok(Some(Entry::Console(role)));
    }
    if !tenant.may_use(&database) {
        // The same answer whether or not the database exists.
        return Err(ProxyError::new(
            Condition::NotAllowed,
            format!("no access to database \"{database}\" for user \"{user}\""),
        ));
    }
    Ok(Some(Entry::Pooled(core.admit(endpoint, &tenant, &database)?)))
}

/// Startup parameters the client asked for, as (name, value) to SET on the
/// backend: everything but the connection's identity, with `options`
/// (`-c name=value` / `--name=value`) unpacked.
pub fn session_parameters(params: Vec<(String, String)>) -> Result<Vec<(String, String)>, ProxyError> {
    let mut out = Vec::with_capacity(params.len());
    for (k, v) in params {
        match k.as_str() {
            "user" | "database" | "replication" => {}
            "options" => {
                let mut words = v.split_whitespace();
                while let Some(w) = words.next() {
                    let setting = match w {
                        "-c" => words.next().unwrap_or_default(),
                        w if w.starts_with("--") => &w[2..],
                        w if w.starts_with("-c") => &w[2..],
                        other => {
                            return Err(ProxyError::new(
                                Condition::FeatureNotSupported,
                                format!("unsupported startup option \"{other}\""),
                            ));
                        }
                    };
                    let Some((name, value)) = setting.split_once('=') else {
                        return Err(ProxyError::new(
                            Condition::ProtocolViolation,
                            format!("invalid option \"{setting}\""),
                        ));
                    };
                    out.push((name.replace('-', "_"), value.to_owned()));
                }
            }
            _ => out.push((k, v)),
        }
    }
    for (name, _) in &out {
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !valid {
            return Err(ProxyError::new(
                Condition::ProtocolViolation,
                format!("invalid parameter name \"{name}\""),
            ));
        }
    }
    Ok(out)
}

/// Routes the logged-in client to its pool. Session mode is served here
/// to the end (`None`); a pooled session is greeted and returned, to be
/// run by the caller with nothing of this function's state kept.
#[allow(clippy::too_many_arguments)] // the session's parts, handed over once
async fn begin(
    core: &Arc<Core<PgEngine>>,
    endpoint: &Arc<EndpointSettings>,
    stream: &mut ClientStream,
    // The session's routing context: its endpoint and the pool it used
    // last; every lease is routed anew (gatehouse_core::router).
    mut pool: Arc<Pool<PgEngine>>,
    cap: Option<TenantCap>,
    params: Vec<(String, String)>,
    cancel: CancelKey<PgCancelTarget>,
    mut inspect: Box<gatehouse_core::inspect::Inspector>,
) -> Result<Option<TxSession>, ProxyError> {
    // Startup parameters matter only until the greeting: not kept.
    let wanted = session_parameters(params)?;
    // A session-mode client whose statements the core must see (query
    // rules, digest statistics) is served by the transaction path, pinned
    // from its first statement; otherwise by the plain relay.
    let inspected = core.digests.load().is_some() || inspect.has_rules(&core.settings());
    if endpoint.pool_mode == PoolMode::Session && !inspected {
        // One lease for the whole session (its end line says so).
        inspect.leased();
        inspect.pinned("session_mode");
        Box::pin(run_session(
            core,
            endpoint,
            stream,
            pool,
            &wanted,
            &cancel,
            cap.as_ref(),
            inspect.meter_mut(),
        ))
        .await?;
        return Ok(None);
    }
    let greeted = pooled_greeting(core, endpoint, stream, &mut pool, &wanted, &cancel, cap.as_ref()).await?;
    let Some(start) = greeted else {
        return Ok(None);
    };
    let mut pinned = start.pinned;
    if endpoint.pool_mode == PoolMode::Session && !wanted.is_empty() {
        // As in the relay ([`run_session`]): the session's connections are
        // opened with its startup parameters (the greeting, on a shared
        // connection or cached, had the server take them).
        if let Some((lease, _)) = pinned.take() {
            lease.release().await;
        }
        pool = core.pool_with_startup(endpoint, &pool, wanted)?;
    }
    let mut tx = TxSession::new(core.clone(), endpoint.clone(), pool, cancel, start.desired, inspect);
    tx.backend_cap = cap;
    if let Some((lease, detail)) = pinned {
        tx.start_pinned(lease, "startup_untracked", detail);
    } else if endpoint.pool_mode == PoolMode::Session {
        tx.pin_session_mode();
    }
    Ok(Some(tx))
}

#[cfg(test)]
mod tests {
    /// Size of the future an async fn of two arguments returns.
    fn future_size<A, B, F: std::future::Future>(_: impl Fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// What an idle transaction-pooled client costs until it parks is its
    /// task (`serve`'s future), its [`super::Live`] box and the runtime's
    /// registration of its socket. Login, greeting and the active relay are
    /// boxed and freed, and the idle wait is a hand-written poll, so the
    /// task stays small; the bounds catch a change that inlines them again
    /// (they measured 288 and 168 bytes in a debug build).
    #[test]
    fn session_task_stays_small() {
        let serve = future_size(super::serve);
        assert!(serve <= 320, "serve's future grew to {serve} bytes");
        let run = future_size(super::TxSession::run);
        assert!(run <= 192, "TxSession::run's future grew to {run} bytes");
    }
}
