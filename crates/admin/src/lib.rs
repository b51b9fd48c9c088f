//! The admin HTTP API: `GET /metrics` (OpenMetrics text), `GET /api/pools`,
//! `GET /api/backends`, `GET /api/clusters`, `GET /api/stats`,
//! `GET /api/health` (liveness) and `GET /api/ready` (readiness: every
//! endpoint has a usable backend; both without the token), `POST /api/reload`, `GET /api/digests[?limit=N]` and
//! `POST /api/digests/reset` (per-digest statistics), `GET /api/rules` and
//! `POST /api/rules/reset` (query rules and their hits), `GET /api/rules/log`
//! (the statements `log = true` rules matched lately), and the operator commands
//! (`POST /api/clusters/{c}/pause|resume`, `/api/endpoints/{e}/pause|resume`,
//! `/api/clusters/{c}/backends/{b}/drain|undrain`,
//! `/api/clusters/{c}/switchover/{b}`), and the live dashboard page
//! (`GET /dashboard`, `GET /` redirecting to it). It shows names, counts and states, never a password,
//! token, verifier or secret value. With `[admin] token_file`, every request
//! but the two probes and the dashboard page (which carries no data: its
//! script sends the token) must carry `Authorization: Bearer <token>`.
//!
//! Also the console's engine-neutral command tables ([`console`]). It
//! reads the cores through the view types of [`view`], and the process
//! above it through the traits of [`process`]. It builds on the core and
//! the settings, and must never import an engine (`gatehouse-pg`,
//! `gatehouse-mysql`) or the binary (`gatehouse`: the app, its endpoints,
//! reload and upgrade).
#![forbid(unsafe_code)]

pub mod console;
mod dashboard;
mod metrics;
pub mod process;
mod state;
pub mod view;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::process::ReloadError;
pub use crate::state::AdminState;
use view::{CoreSnapshot, Operation};

/// Serves the admin API on `listener` until `shutdown` turns true.
pub async fn serve(listener: TcpListener, state: Arc<AdminState>, mut shutdown: watch::Receiver<bool>) {
    let app = router(state);
    let stop = async move {
        let _ = shutdown.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stop).await {
        tracing::warn!(error = %e, "admin API stopped");
    }
}

fn router(state: Arc<AdminState>) -> Router {
    // Liveness and readiness answer without the token: probes (a
    // kubelet's, a load balancer's) carry none, and they show no names of
    // tenants or credentials. Nor does the dashboard page, whose script
    // asks for everything it shows with the token.
    let probes = Router::new()
        .route("/api/health", get(|| async { "ok\n" }))
        .route("/api/ready", get(ready))
        .merge(dashboard::routes());
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/api/pools", get(pools))
        .route("/api/backends", get(backends))
        .route("/api/clusters", get(clusters))
        .route("/api/stats", get(stats))
        .route("/api/reload", post(reload))
        .route("/api/digests", get(digests))
        .route("/api/digests/reset", post(reset_digests))
        .route("/api/rules", get(rules))
        .route("/api/rules/reset", post(reset_rules))
        .route("/api/rules/log", get(rules_log))
        .route("/api/clusters/{cluster}/pause", post(pause_cluster))
        .route("/api/clusters/{cluster}/resume", post(resume_cluster))
        .route("/api/endpoints/{endpoint}/pause", post(pause_endpoint))
        .route("/api/endpoints/{endpoint}/resume", post(resume_endpoint))
        .route("/api/clusters/{cluster}/backends/{backend}/drain", post(drain))
        .route("/api/clusters/{cluster}/backends/{backend}/undrain", post(undrain))
        .route("/api/clusters/{cluster}/switchover/{backend}", post(switchover))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .merge(probes)
        .with_state(state)
}

/// Readiness: 200 when every endpoint could serve a transaction now (a
/// usable backend for its role, not paused), else 503; both list each
/// endpoint with the backend it would get or why none.
async fn ready(State(state): State<Arc<AdminState>>) -> Response {
    let endpoints: Vec<view::Readiness> = state.cores.iter().flat_map(|c| c.readiness()).collect();
    let ready = endpoints.iter().all(|e| e.ready);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        axum::Json(serde_json::json!({ "ready": ready, "endpoints": endpoints })),
    )
        .into_response()
}

async fn require_token(State(state): State<Arc<AdminState>>, request: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !bool::from(presented.as_bytes().ct_eq(token.as_bytes())) {
            return (StatusCode::UNAUTHORIZED, "a valid admin bearer token is required\n").into_response();
        }
    }
    next.run(request).await
}

async fn metrics_text(State(state): State<Arc<AdminState>>) -> Response {
    match metrics::render(&state) {
        Ok(text) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "metrics could not be encoded\n").into_response(),
    }
}

/// One list per engine, taken from each core's snapshot by `pick`.
fn per_engine(state: &AdminState, key: &str, pick: impl Fn(CoreSnapshot) -> serde_json::Value) -> Response {
    let out: Vec<_> = state
        .cores
        .iter()
        .map(|c| {
            let s = c.snapshot();
            let engine = s.engine;
            serde_json::json!({ "engine": engine, key: pick(s) })
        })
        .collect();
    axum::Json(out).into_response()
}

async fn pools(State(state): State<Arc<AdminState>>) -> Response {
    per_engine(&state, "pools", |s| serde_json::json!(s.pools))
}

async fn backends(State(state): State<Arc<AdminState>>) -> Response {
    per_engine(&state, "backends", |s| serde_json::json!(s.backends))
}

async fn clusters(State(state): State<Arc<AdminState>>) -> Response {
    per_engine(&state, "clusters", |s| serde_json::json!(s.clusters))
}

/// Runs `op` on the engine whose cluster or endpoint it names.
fn operate(state: &AdminState, op: Operation) -> Response {
    for core in &state.cores {
        match core.operate(&op) {
            Some(Ok(())) => return axum::Json(serde_json::json!({ "done": format!("{op:?}") })).into_response(),
            Some(Err(e)) => return (StatusCode::NOT_FOUND, format!("{e}\n")).into_response(),
            None => {}
        }
    }
    (StatusCode::NOT_FOUND, "no such cluster or endpoint\n").into_response()
}

async fn pause_cluster(State(state): State<Arc<AdminState>>, Path(cluster): Path<String>) -> Response {
    operate(&state, Operation::PauseCluster { cluster, paused: true })
}

async fn resume_cluster(State(state): State<Arc<AdminState>>, Path(cluster): Path<String>) -> Response {
    operate(&state, Operation::PauseCluster { cluster, paused: false })
}

async fn pause_endpoint(State(state): State<Arc<AdminState>>, Path(endpoint): Path<String>) -> Response {
    operate(&state, Operation::PauseEndpoint { endpoint, paused: true })
}

async fn resume_endpoint(State(state): State<Arc<AdminState>>, Path(endpoint): Path<String>) -> Response {
    operate(
        &state,
        Operation::PauseEndpoint {
            endpoint,
            paused: false,
        },
    )
}

async fn drain(State(state): State<Arc<AdminState>>, Path((cluster, backend)): Path<(String, String)>) -> Response {
    operate(
        &state,
        Operation::Drain {
            cluster,
            backend,
            draining: true,
        },
    )
}

async fn undrain(State(state): State<Arc<AdminState>>, Path((cluster, backend)): Path<(String, String)>) -> Response {
    operate(
        &state,
        Operation::Drain {
            cluster,
            backend,
            draining: false,
        },
    )
}

async fn switchover(
    State(state): State<Arc<AdminState>>,
    Path((cluster, backend)): Path<(String, String)>,
) -> Response {
    for core in &state.cores {
        if let Some(run) = core.switchover(&cluster, &backend) {
            return match run.await {
                Ok(writer) => axum::Json(serde_json::json!({ "writer": writer })).into_response(),
                Err(e) => (StatusCode::CONFLICT, format!("{e}\n")).into_response(),
            };
        }
    }
    (StatusCode::NOT_FOUND, "no such cluster\n").into_response()
}

async fn stats(State(state): State<Arc<AdminState>>) -> Response {
    let clients: Vec<_> = state
        .endpoints
        .load()
        .into_iter()
        .map(|e| serde_json::json!({ "endpoint": e.name, "connected": e.connected, "max": e.max }))
        .collect();
    let engines: Vec<_> = state
        .cores
        .iter()
        .map(|c| {
            let s = c.snapshot();
            serde_json::json!({
                "engine": s.engine,
                "tenants": s.tenants,
                "pools": s.pools.len(),
                "accepted_connections": s.accepted_connections,
                "pinned_sessions": s.pinned_sessions,
                "errors": s.errors,
            })
        })
        .collect();
    let (applied, refused) = state.reloader.counts();
    axum::Json(serde_json::json!({
        "endpoints": clients,
        "engines": engines,
        "reloads": { "applied": applied, "refused": refused },
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
struct DigestQuery {
    limit: Option<usize>,
}

/// Per engine: whether digest statistics are on, and the heaviest digests.
async fn digests(State(state): State<Arc<AdminState>>, Query(q): Query<DigestQuery>) -> Response {
    let out: Vec<_> = state
        .cores
        .iter()
        .map(|c| {
            let rows = c.digests(q.limit);
            serde_json::json!({
                "engine": c.snapshot().engine,
                "enabled": rows.is_some(),
                "digests": rows.unwrap_or_default(),
            })
        })
        .collect();
    axum::Json(out).into_response()
}

async fn reset_digests(State(state): State<Arc<AdminState>>) -> Response {
    for c in &state.cores {
        c.reset_digests();
    }
    axum::Json(serde_json::json!({ "done": "digests reset" })).into_response()
}

/// The rules in order, with their hits (the rules are the configuration's,
/// shared by both engines).
async fn rules(State(state): State<Arc<AdminState>>) -> Response {
    let rules = state
        .cores
        .first()
        .map(|c| c.settings_now().rules.counters())
        .unwrap_or_default();
    axum::Json(serde_json::json!({ "rules": rules })).into_response()
}

/// The statements `log = true` rules matched lately, oldest first (at
/// most [`gatehouse_settings::rules::LOGGED_HITS_KEPT`]).
async fn rules_log(State(state): State<Arc<AdminState>>) -> Response {
    let hits = state
        .cores
        .first()
        .map(|c| c.settings_now().rules.logged().recent())
        .unwrap_or_default();
    axum::Json(serde_json::json!({ "logged": hits })).into_response()
}

async fn reset_rules(State(state): State<Arc<AdminState>>) -> Response {
    if let Some(c) = state.cores.first() {
        c.settings_now().rules.reset_counters();
    }
    axum::Json(serde_json::json!({ "done": "rule hits and logged hits reset" })).into_response()
}

async fn reload(State(state): State<Arc<AdminState>>) -> Response {
    match state.reloader.reload().await {
        Ok(outcome) => axum::Json(outcome).into_response(),
        Err(e @ ReloadError::NoSource) => (StatusCode::CONFLICT, format!("{e}\n")).into_response(),
        Err(e @ ReloadError::Invalid(_)) => (StatusCode::UNPROCESSABLE_ENTITY, format!("{e}\n")).into_response(),
        Err(e @ ReloadError::Failed(_)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}
