//! Operational routes: health, readiness, stats, metrics (`service/ops.rs`).

use super::error::ApiError;
use super::extract::Caller;
use super::AppState;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

pub async fn health() -> Json<serde_json::Value> {
    Json(json!({"ok": true}))
}

/// Ready (200) when the store answers; 503 when it does not (a database
/// the server cannot reach), so a load balancer sends its traffic elsewhere.
pub async fn ready(State(st): State<AppState>) -> Response {
    let service = st.service.clone();
    let readiness = match tokio::task::spawn_blocking(move || service.readiness()).await {
        Ok(r) => r,
        Err(_) => return ApiError::internal().into_response(),
    };
    let status = if readiness.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(readiness)).into_response()
}

pub async fn stats(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    Ok(Json(st.service.stats(&caller)?).into_response())
}

pub async fn metrics(State(st): State<AppState>) -> Response {
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], st.service.metrics_text()).into_response()
}
