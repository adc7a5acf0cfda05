//! Operational routes: health, readiness, stats, metrics.

use super::error::ApiError;
use super::extract::Caller;
use super::AppState;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use crate::store::TenantStats;

pub async fn health() -> Json<serde_json::Value> {
    Json(json!({"ok": true}))
}

/// Ready when the engine answers a read.
pub async fn ready(State(st): State<AppState>) -> Response {
    let engine = st.memory.store();
    let (tx, _) = engine.last_tx();
    // Reads go on whatever happens to the disk, so the server stays ready;
    // `writes` says whether writes are taken now, and if not, why.
    let writes = match engine.writable() {
        Ok(()) => json!("ok"),
        Err(e) => json!(e.to_string()),
    };
    Json(json!({"ready": true, "last_tx": tx, "writes": writes})).into_response()
}

pub async fn stats(State(st): State<AppState>, caller: Caller) -> Result<Json<serde_json::Value>, ApiError> {
    let engine = st.memory.store();
    let (name, tenants, s) = match (&caller.tenant, caller.is_admin()) {
        (Some(t), _) => (t.clone(), 1, engine.stats(t)),
        (None, true) => {
            let names = engine.tenants();
            let total = names.iter().map(|t| engine.stats(t)).fold(TenantStats::default(), |mut acc, s| {
                acc.active += s.active;
                acc.candidate += s.candidate;
                acc.superseded += s.superseded;
                acc.retracted += s.retracted;
                acc.subjects += s.subjects;
                acc.predicates += s.predicates;
                acc
            });
            ("admin".to_string(), names.len(), total)
        }
        (None, false) => return Err(ApiError::not_found()),
    };
    let (tx, recorded_at) = engine.last_tx();
    Ok(Json(json!({
        "facts": {
            "active": s.active,
            "candidate": s.candidate,
            "superseded": s.superseded,
            "retracted": s.retracted,
            "total": s.total(),
        },
        "entities": s.subjects,
        "predicates": s.predicates,
        "tenants": tenants,
        "tenant": name,
        "version": env!("CARGO_PKG_VERSION"),
        "last_tx": tx,
        "last_recorded_at": recorded_at,
    })))
}

pub async fn metrics(State(st): State<AppState>) -> Response {
    let body = st.metrics.render(st.memory.store().as_ref());
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}
