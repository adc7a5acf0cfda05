//! Operational routes: health, readiness, stats, metrics (`service/ops.rs`).

use super::error::ApiError;
use super::extract::Caller;
use super::AppState;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

pub async fn health() -> Json<serde_json::Value> {
    Json(json!({"ok": true}))
}

/// Ready when the store answers a read.
pub async fn ready(State(st): State<AppState>) -> Response {
    Json(st.service.readiness()).into_response()
}

pub async fn stats(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    Ok(Json(st.service.stats(&caller)?).into_response())
}

pub async fn metrics(State(st): State<AppState>) -> Response {
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], st.service.metrics_text()).into_response()
}
