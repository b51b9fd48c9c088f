//! One MySQL client connection from accept to close: admission, the
//! connection phase ([`super::login`]), the failed-login and tenant limits
//! (the same as PostgreSQL's), the database check, then the command loop
//! ([`super::txn`]). Errors reach the client as ERR packets with the
//! engine's error numbers and end only that session.

use std::sync::Arc;

use bytes::BytesMut;
use gatehouse_proto_mysql::auth::generate_nonce;
use gatehouse_proto_mysql::consts::SERVER_STATUS_AUTOCOMMIT;
use gatehouse_proto_mysql::packets::{OK_HEADER, OkPacket};

use super::MyEngine;
use super::caps::session_caps_startup;
use super::errors::fail;
use super::login::{self, Phase};
use gatehouse_core::core::Core;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_core::serve::ClientConn;

/// A logged-in client, owned: what the session keeps after the connection
/// phase (whose futures and packets are gone by then).
struct Established {
    stream: ClientStream,
    buf: BytesMut,
    start: super::txn::Start,
}

/// The pool a session whose client asked for the capabilities `word`
/// ([`session_word`](crate::caps::session_word)) leases from, given the pool admission chose: `pool`
/// itself, or the pool beside it of backend connections opened with the
/// same ones.
pub fn pool_for_caps(
    core: &Core<MyEngine>,
    endpoint: &gatehouse_settings::config::EndpointSettings,
    pool: Arc<gatehouse_core::pool::Pool<MyEngine>>,
    word: u64,
) -> Result<Arc<gatehouse_core::pool::Pool<MyEngine>>, ProxyError> {
    let startup = session_caps_startup(word);
    if startup.is_empty() {
        return Ok(pool);
    }
    core.pool_with_startup(endpoint, &pool, startup)
}

/// The client side of [`MyEngine`]: each accepted connection's session.
impl gatehouse_core::serve::Serve for MyEngine {
    fn serve(core: Arc<Core<Self>>, client: ClientConn) -> impl Future<Output = ()> + Send {
        // No async wrapper: its copy of the arguments would stay in every
        // session's task.
        serve(core, client)
    }
}

/// Serves one client connection. Not an `async fn`: its arguments would
/// stay in the task for the whole session; they go into the boxed
/// connection phase at once, and the task keeps only [`Established`] and
/// the command loop, whose commands run in boxes of their own.
pub fn serve(core: Arc<Core<MyEngine>>, client: ClientConn) -> impl Future<Output = ()> + Send {
    let logging_in = Box::pin(establish(core.clone(), client));
    async move {
        let Some(e) = logging_in.await else { return };
        let Established { stream, buf, start } = *e;
        let mut session = super::txn::start(core, start, stream.meter().clone());
        let super::txn::Session {
            inspect, cancel, pool, ..
        } = &mut *session;
        inspect.logged_in(stream.is_tls(), cancel, pool.route());
        inspect.meter().logged_in(stream.is_tls());
        super::parked::drive(session, stream, buf).await;
    }
}

/// The connection phase, admission and routing; `None` when the session
/// already ended (an error was sent).
async fn establish(core: Arc<Core<MyEngine>>, client: ClientConn) -> Option<Box<Established>> {
    let ClientConn {
        socket,
        peer,
        endpoint,
        admission,
        drain,
    } = client;
    let meter = core.meters.endpoint(&endpoint.name);
    let mut phase = Some(Phase {
        stream: ClientStream::plain(socket, meter.clone()),
        buf: BytesMut::new(),
        seq: 0,
        tls: false,
    });
    let deadline = tokio::time::Instant::now() + core.settings().proxy.login_timeout;
    let nonce = generate_nonce();
    // The handshake's connection id is the session's cancel key: a `KILL
    // [QUERY | CONNECTION] <id>` from the same tenant reaches it (and only
    // it; see [`super::kill`]).
    let cancel = core.cancels.register_on(Some(&endpoint));
    let connection_id = cancel.id;
    let greeted = tokio::time::timeout_at(
        deadline,
        Box::pin(login::greet(&core, &endpoint, &mut phase, connection_id, &nonce)),
    )
    .await
    .unwrap_or_else(|_| Err(login_timeout()));
    let response = match greeted {
        Ok(r) => r,
        Err(e) => {
            let seq = phase.as_ref().map_or(0, |p| p.seq);
            return fail_none(&core, &meter, phase.as_mut().map(|p| &mut p.stream), seq, &e).await;
        }
    };
    let mut phase = phase?;
    if admission.is_none() {
        let e = ProxyError::new(Condition::TooManyConnections, "Too many connections");
        return fail_none(&core, &meter, Some(&mut phase.stream), phase.seq, &e).await;
    }
    let user = response.username.clone();
    if endpoint.require_tls && !phase.stream.is_tls() {
        let e = ProxyError::new(
            Condition::NotAllowed,
            "Connections using insecure transport are prohibited: this endpoint requires TLS (--ssl)",
        );
        return fail_none(&core, &meter, Some(&mut phase.stream), phase.seq, &e).await;
    }
    if !core.limits.login_allowed(peer.ip(), &user) {
        let e = ProxyError::new(Condition::NotAllowed, gatehouse_core::limits::TOO_MANY_FAILURES);
        return fail_none(&core, &meter, Some(&mut phase.stream), phase.seq, &e).await;
    }
    let authenticated = tokio::time::timeout_at(
        deadline,
        Box::pin(login::authenticate(&core, &endpoint, &mut phase, &response, &nonce)),
    )
    .await
    .unwrap_or_else(|_| Err(login_timeout()));
    let tenant = match authenticated {
        Ok(t) => t,
        Err(e) => {
            if e.condition == Condition::InvalidPassword {
                core.limits.record_failure(peer.ip(), &user);
            }
            return fail_none(&core, &meter, Some(&mut phase.stream), phase.seq, &e).await;
        }
    };
    let database = response.database.clone().filter(|d| !d.is_empty());
    let console = core.settings().console.clone();
    if database.as_deref() == Some(console.database.as_str())
        && let Some(role) = console.role_of(&tenant.name)
    {
        let settings = core.settings_arc();
        let meter = core
            .meters
            .session(phase.stream.meter().clone(), &tenant.name, &settings.stats);
        let mut inspect = gatehouse_core::inspect::Inspector::new(
            &settings,
            &tenant.name,
            &console.database,
            &endpoint.name,
            Some(peer.ip()),
            meter,
        );
        inspect.logged_in_console(phase.stream.is_tls(), &cancel);
        inspect.meter().logged_in(phase.stream.is_tls());
        let Phase {
            mut stream, buf, seq, ..
        } = phase;
        let served = Box::pin(super::console::serve(
            &core,
            &mut stream,
            buf,
            seq,
            &cancel,
            super::console::ConsoleLogin {
                tenant: &tenant.name,
                role,
                extended: response.mariadb_ext_caps & gatehouse_proto_mysql::consts::MARIADB_CLIENT_EXTENDED_TYPE_INFO
                    != 0,
            },
        ));
        if let Err((seq, e)) = served.await {
            fail(&core, Some(&mut stream), seq, &e).await;
        }
        return None;
    }
    if let Some(db) = &database
        && !tenant.may_use(db)
    {
        // The same answer whether or not the database exists.
        let e = ProxyError::new(
            Condition::UnknownDatabase,
            format!("Access denied for user '{user}' to database '{db}'"),
        );
        return fail_none(&core, &meter, Some(&mut phase.stream), phase.seq, &e).await;
    }
    let caps = response.capabilities & (crate::caps::RELAY_CAPS | crate::caps::SESSION_CAPS);
    let session_caps = super::session_word(caps, response.mariadb_ext_caps);
    let admitted = match core
        .admit(&endpoint, &tenant, database.as_deref().unwrap_or(""))
        .and_then(|mut a| {
            a.pool = super::pool_for_caps(&core, &endpoint, a.pool, session_caps)?;
            Ok(a)
        }) {
        Ok(a) => a,
        Err(e) => return fail_none(&core, &meter, Some(&mut phase.stream), phase.seq, &e).await,
    };
    cancel.claim(&tenant.name);
    let mut ok = BytesMut::new();
    OkPacket {
        status: SERVER_STATUS_AUTOCOMMIT,
        ..OkPacket::default()
    }
    .encode(&mut ok, caps, OK_HEADER);
    if phase.write(&ok).await.is_err() {
        return None;
    }
    let Phase { stream, buf, .. } = phase;
    Some(Box::new(Established {
        stream,
        buf,
        start: super::txn::Start {
            endpoint,
            tenant,
            database,
            caps,
            session_caps,
            collation: response.charset,
            cancel,
            admitted,
            peer: peer.ip(),
            guards: (admission, drain),
        },
    }))
}

/// [`fail`] for a login, which then has nothing to return; counted by its
/// condition in the endpoint's meter.
async fn fail_none<T>(
    core: &Core<MyEngine>,
    meter: &gatehouse_core::meter::EndpointMeter,
    stream: Option<&mut ClientStream>,
    seq: u8,
    e: &ProxyError,
) -> Option<T> {
    meter.login_failed(e.condition.name());
    fail(core, stream, seq, e).await;
    None
}

fn login_timeout() -> ProxyError {
    ProxyError::new(
        Condition::LoginTimeout,
        "Bad handshake: timeout expired before authentication completed",
    )
}
#[cfg(test)]
mod tests {
    fn future_size2<A, B, F: std::future::Future>(_: impl Fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    fn future_size3<A, B, C, F: std::future::Future>(_: impl Fn(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// An idle MySQL client's task (until it parks) is `serve`'s future:
    /// the connection phase, each command and the final reset run in boxes
    /// of their own, and the session itself is boxed. The bounds catch a
    /// change that inlines one again (they measured 528 and 280 bytes in a
    /// debug build; 800 and 560 with the session inline).
    #[test]
    fn session_task_stays_small() {
        let serve = future_size2(super::serve);
        assert!(serve <= 576, "serve's future grew to {serve} bytes");
        let run = future_size3(super::super::txn::Session::run);
        assert!(run <= 320, "Session::run's future grew to {run} bytes");
    }
}
