//! A logged-in PostgreSQL client's first backend connection: the one a
//! session-mode client keeps for its whole session ([`run_session`], the
//! byte relay), and the one a pooled client's greeting may need
//! ([`pooled_greeting`]); both borrow it through [`prepare_backend`], which
//! brings it to the client's startup parameters, and answer the client's
//! startup with [`greet`].

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use gatehouse_proto_pg::messages;
use tokio::io::AsyncWriteExt;

use super::PgEngine;
use super::backend::PgCancelTarget;
use super::greeting::Greeting;
use super::relay::{End, Relay};
use super::tracked;
use gatehouse_core::cancel::CancelKey;
use gatehouse_core::core::Core;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::ProxyError;
use gatehouse_core::pool::{Lease, Pool, TenantCap};
use gatehouse_settings::config::EndpointSettings;

/// Session mode: one backend connection for the client's whole session;
/// `meter` counts its statements and transactions.
#[allow(clippy::too_many_arguments)] // the session's parts, handed over once
pub(super) async fn run_session(
    core: &Core<PgEngine>,
    endpoint: &EndpointSettings,
    stream: &mut ClientStream,
    mut pool: Arc<Pool<PgEngine>>,
    wanted: &[(String, String)],
    cancel: &CancelKey<PgCancelTarget>,
    cap: Option<&TenantCap>,
    meter: &mut gatehouse_core::meter::SessionMeter,
) -> Result<(), ProxyError> {
    let Some(mut lease) = Box::pin(session_backend(core, endpoint, stream, &mut pool, wanted, cap)).await? else {
        return Ok(());
    };
    cancel.slot.set(lease.conn().cancel_target());
    let conn = lease.conn();
    if greet(stream, &conn.params, cancel.id, cancel.secret, conn.status)
        .await
        .is_err()
    {
        lease.release().await;
        return Ok(());
    }
    let mut relay = {
        let proxy = &core.settings().proxy;
        Relay::new(proxy.max_message_bytes, proxy.client_message_timeout)
    };
    let end = relay
        .run(stream, lease.conn(), &cancel.slot, &core.shutdown, meter)
        .await;
    let target = cancel.slot.get();
    cancel.slot.set(None);
    if let End::BackendGone(detail) = &end {
        tracing::warn!(backend = %lease.pool().key().backend, cause = %detail, "backend connection lost under a session-mode lease");
        drop(lease);
        if relay.client_mid_output() {
            // An error cannot be framed into a half-sent message: just close.
            tracing::info!(detail, "server connection lost mid-message");
            return Ok(());
        }
        return end.into_error().map_or(Ok(()), Err);
    }
    let error = end.into_error();
    if relay.backend_idle() {
        lease.release().await;
    } else {
        if relay.busy()
            && let Some(t) = target
        {
            // The client left mid-query: stop the query rather than let it run on.
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), super::backend::cancel(t)).await;
            });
        }
        drop(lease);
    }
    match error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Session mode's connection: one opened with the client's startup
/// parameters, from the pool of connections opened with exactly that set
/// ([`gatehouse_core::pool::PoolKey::startup`]), so that `RESET`, `RESET ALL`,
/// `DISCARD ALL` and `pg_settings.reset_val` answer as on a direct
/// connection (a `SET` on a shared connection would leave the server's
/// defaults as the reset values). The first session with a set tries it
/// on a shared connection: a value the server refuses is the client's
/// FATAL error, as at a direct login, and never a failed backend connect.
/// A client without startup parameters takes a shared connection.
/// `Ok(None)`: the client has been refused (see [`prepare_backend`]).
async fn session_backend(
    core: &Core<PgEngine>,
    endpoint: &EndpointSettings,
    stream: &mut ClientStream,
    pool: &mut Arc<Pool<PgEngine>>,
    wanted: &[(String, String)],
    cap: Option<&TenantCap>,
) -> Result<Option<Lease<PgEngine>>, ProxyError> {
    if wanted.is_empty() {
        return Box::pin(prepare_backend(core, endpoint, stream, pool, wanted, cap)).await;
    }
    if !core.has_pool_with_startup(pool, wanted) {
        let Some(tried) = Box::pin(prepare_backend(core, endpoint, stream, pool, wanted, cap)).await? else {
            return Ok(None);
        };
        tried.release().await;
    }
    *pool = core.pool_with_startup(endpoint, pool, wanted.to_vec())?;
    // Its connections are opened with the set and reset (DISCARD ALL) back
    // to it: nothing to apply.
    Box::pin(core.lease(endpoint, pool, cap, gatehouse_core::topology::Intent::Write))
        .await
        .map(Some)
}

/// Borrows a backend connection and makes it the client's: tracked
/// parameters back to the server's defaults (whatever a previous client
/// left), then the client's startup parameters. `Ok(None)`: the server
/// refused a startup parameter; the client has been told (FATAL) and the
/// connection went back to the pool.
async fn prepare_backend(
    core: &Core<PgEngine>,
    endpoint: &EndpointSettings,
    stream: &mut ClientStream,
    pool: &mut Arc<Pool<PgEngine>>,
    wanted: &[(String, String)],
    cap: Option<&TenantCap>,
) -> Result<Option<Lease<PgEngine>>, ProxyError> {
    // A session that holds its connection throughout (session mode, or
    // state set up at login) runs everything there: on a split endpoint,
    // the writer.
    let mut lease = Box::pin(core.lease(endpoint, pool, cap, gatehouse_core::topology::Intent::Write)).await?;
    let initial = lease.conn().initial.clone();
    if let Err(e) = Box::pin(tracked::apply(lease.conn(), &initial)).await {
        drop(lease);
        return Err(e);
    }
    let conn = lease.conn();
    let sets: Vec<String> = wanted
        .iter()
        .filter(|(k, v)| !conn.params.iter().any(|(n, cur)| n.eq_ignore_ascii_case(k) && cur == v))
        .map(|(k, v)| format!("SET {k} = {}", quote_literal(v)))
        .collect();
    if !sets.is_empty()
        && let Err(f) = Box::pin(conn.simple_query(&sets.join("; "))).await?
    {
        let mut out = BytesMut::new();
        messages::put_error(&mut out, "FATAL", &f.code, &f.message);
        let _ = stream.write_all(&out).await;
        lease.release().await;
        return Ok(None);
    }
    Ok(Some(lease))
}

/// AuthenticationOk, the ParameterStatus list, BackendKeyData and
/// ReadyForQuery: the end of a successful login.
async fn greet(
    stream: &mut ClientStream,
    params: &[(String, String)],
    cancel_id: u32,
    cancel_secret: u32,
    status: u8,
) -> std::io::Result<()> {
    // One allocation: AuthenticationOk, BackendKeyData and ReadyForQuery
    // take 9 + 13 + 6 bytes, each ParameterStatus 7 with its two strings.
    let size = 28 + params.iter().map(|(n, v)| 7 + n.len() + v.len()).sum::<usize>();
    let mut out = BytesMut::with_capacity(size);
    messages::put_auth_ok(&mut out);
    for (name, value) in params {
        messages::put_parameter_status(&mut out, name, value);
    }
    messages::put_backend_key(&mut out, cancel_id, cancel_secret);
    messages::put_ready(&mut out, status);
    stream.write_all(&out).await?;
    stream.flush().await
}

/// How a pooled session starts: its tracked values, and the lease it is
/// pinned to from the start (with the reason), if any.
pub(super) struct PooledStart {
    pub(super) desired: tracked::Values,
    pub(super) pinned: Option<(Lease<PgEngine>, String)>,
}

/// Greets a pooled client. With a cached greeting for these startup
/// parameters this borrows nothing; otherwise one backend connection is
/// borrowed to apply and read them back (and the greeting is cached). A
/// startup parameter the proxy does not track cannot move between
/// connections: the session is then pinned from the start, like a `SET` of
/// it would pin it. `Ok(None)`: the client is gone or was refused.
pub(super) async fn pooled_greeting(
    core: &Core<PgEngine>,
    endpoint: &EndpointSettings,
    stream: &mut ClientStream,
    pool: &mut Arc<Pool<PgEngine>>,
    wanted: &[(String, String)],
    cancel: &CancelKey<PgCancelTarget>,
    cap: Option<&TenantCap>,
) -> Result<Option<PooledStart>, ProxyError> {
    let untracked = wanted.iter().find(|(k, _)| {
        let name = k.to_ascii_lowercase();
        !tracked::is_tracked(&name) && !endpoint.pinning_filter.iter().any(|f| f.eq_ignore_ascii_case(&name))
    });
    let now = std::time::Instant::now();
    if untracked.is_none()
        && let Some(g) = core.engine.greetings.get(pool.key(), wanted, now)
    {
        if greet(stream, &g.params, cancel.id, cancel.secret, b'I').await.is_err() {
            return Ok(None);
        }
        return Ok(Some(PooledStart {
            desired: g.desired.clone(),
            pinned: None,
        }));
    }
    let Some(mut lease) = Box::pin(prepare_backend(core, endpoint, stream, pool, wanted, cap)).await? else {
        return Ok(None);
    };
    let desired = match Box::pin(tracked::read(lease.conn())).await {
        Ok(v) => v,
        Err(e) => {
            drop(lease);
            return Err(e);
        }
    };
    lease.conn().tracked = Some(desired.clone());
    let conn = lease.conn();
    if greet(stream, &conn.params, cancel.id, cancel.secret, conn.status)
        .await
        .is_err()
    {
        lease.release().await;
        return Ok(None);
    }
    if let Some((name, _)) = untracked {
        let detail = format!("startup parameter \"{name}\" is not tracked");
        return Ok(Some(PooledStart {
            desired,
            pinned: Some((lease, detail)),
        }));
    }
    let greeting = Greeting {
        params: conn.params.clone(),
        desired: desired.clone(),
    };
    core.engine.greetings.put(pool.key(), wanted, greeting, now);
    lease.recycle();
    Ok(Some(PooledStart { desired, pinned: None }))
}

/// A SQL string literal (standard_conforming_strings is on for pooled
/// connections: they start from server defaults and are reset to them).
fn quote_literal(v: &str) -> String {
    format!("'{}'", v.replace('\'', "''"))
}
