//! `/api/alerts`: the tenant's alerts, acking, evaluating now, the rules
//! and model-token usage (`service/monitor.rs`).

use super::error::ApiError;
use super::extract::{Caller, JsonBody, PathParam};
use super::idempotency::{self, IdempotencyKey};
use super::query::QueryPairs;
use super::AppState;
use crate::service::monitor::AlertStates;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

pub async fn list(State(st): State<AppState>, caller: Caller, q: QueryPairs) -> Result<Response, ApiError> {
    let states = match q.string("state")? {
        None => AlertStates::Unresolved,
        Some(s) => s.parse()?,
    };
    Ok(Json(st.service.alerts(caller.tenant()?, states).await?).into_response())
}

pub async fn ack(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    PathParam(raw): PathParam,
) -> Result<Response, ApiError> {
    let answer = st.service.ack_alert(caller.tenant()?, &raw, idem.key()).await?;
    Ok(idempotency::respond(answer, StatusCode::OK, idempotency::to_json))
}

pub async fn evaluate(State(st): State<AppState>, caller: Caller, idem: IdempotencyKey) -> Result<Response, ApiError> {
    let answer = st.service.evaluate_alerts(caller.tenant()?, idem.key()).await?;
    Ok(idempotency::respond(answer, StatusCode::OK, idempotency::to_json))
}

pub async fn get_rules(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    Ok(Json(st.service.alert_rules(caller.tenant()?).await?).into_response())
}

pub async fn put_rules(State(st): State<AppState>, caller: Caller, JsonBody(body): JsonBody<Value>) -> Result<Response, ApiError> {
    Ok(Json(st.service.set_alert_rules(caller.tenant()?, body).await?).into_response())
}

pub async fn get_usage(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    Ok(Json(st.service.token_usage(caller.tenant()?).await?).into_response())
}
