//! The control API: state, live faults and metrics, on its own loopback listener.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use super::fault::Fault;
use super::{Mode, Shared, check_fault};
use crate::ProxyError;

/// Adds `fault`, its start counted from now.
pub(super) fn add(shared: &Shared, fault: Fault) -> Result<(), ProxyError> {
    check_fault(shared.mode, &fault)?;
    let now = shared.now();
    if shared.faults.add(fault.shifted(now), now) {
        Ok(())
    } else {
        Err(ProxyError::bad_input(
            "fault",
            format!("the proxy holds {} faults already", super::schedule::MAX_FAULTS),
        ))
    }
}

/// Serves until aborted.
pub(super) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let app = Router::new()
        .route("/", get(state))
        .route("/state", get(state))
        .route("/faults", get(state).post(post_fault).delete(clear))
        .route("/metrics", get(metrics))
        .with_state(shared);
    let _ = axum::serve(listener, app).await;
}

/// The state as JSON: time, faults (with whether each acts now) and the per-second series.
fn state_json(shared: &Shared) -> serde_json::Value {
    let now = shared.now();
    let faults: Vec<_> = shared
        .faults
        .snapshot()
        .iter()
        .map(|f| {
            serde_json::json!({
                "spec": f.to_string(), "kind": f.kind.name(), "start_s": f.start.as_secs_f64(),
                "end_s": f.end().as_secs_f64(), "active": f.active_at(now),
            })
        })
        .collect();
    serde_json::json!({
        "elapsed_s": now.as_secs_f64(),
        "mode": match shared.mode { Mode::Tcp => "tcp", Mode::Http => "http" },
        "upstream": shared.upstream.to_string(),
        "faults": faults,
        "series": shared.stats.series(),
    })
}

fn json(v: serde_json::Value) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string())
}

async fn state(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    json(state_json(&shared))
}

/// `401` unless `headers` carry the control API's bearer token (the admin endpoints' scheme,
/// [`seawall_tower::admin::AdminAuth`]).
fn refused(shared: &Shared, headers: HeaderMap) -> Option<axum::response::Response> {
    let mut req = Request::new(());
    *req.headers_mut() = headers;
    if shared.control_auth.allows(&req) {
        return None;
    }
    let challenge = HeaderValue::from_static(r#"Bearer realm="seawall-proxy""#);
    let body = "unauthorized: send Authorization: Bearer <token> (--admin-token-file)\n";
    Some((StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, challenge)], body).into_response())
}

async fn post_fault(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: String,
) -> axum::response::Response {
    if let Some(r) = refused(&shared, headers) {
        return r;
    }
    let added = body.trim().parse::<Fault>().and_then(|f| add(&shared, f));
    match added {
        Ok(()) => (StatusCode::CREATED, json(state_json(&shared))).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

async fn clear(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> axum::response::Response {
    if let Some(r) = refused(&shared, headers) {
        return r;
    }
    let n = shared.faults.clear();
    json(serde_json::json!({ "cleared": n })).into_response()
}

async fn metrics(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], shared.stats.prometheus())
}
