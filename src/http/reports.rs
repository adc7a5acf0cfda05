//! `/api/reports`: create, list and run reports; a run's output is kept as
//! facts (`service/monitor.rs`).

use super::error::ApiError;
use super::extract::{Caller, JsonBody, Object, PathParam};
use super::idempotency::{self, IdempotencyKey};
use super::query::QueryPairs;
use super::AppState;
use crate::service::monitor::NewReport;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

pub use crate::service::monitor::{DEFAULT_RUNS, MAX_EVERY_SECS, MAX_RUNS};

pub async fn create(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    JsonBody(Object(body)): JsonBody<Object<NewReport>>,
) -> Result<Response, ApiError> {
    let answer = st.service.create_report(caller.tenant()?, body, idem.key()).await?;
    Ok(idempotency::respond(answer, StatusCode::CREATED, idempotency::to_json))
}

pub async fn list(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    Ok(Json(st.service.reports(caller.tenant()?).await?).into_response())
}

pub async fn get(State(st): State<AppState>, caller: Caller, PathParam(raw): PathParam) -> Result<Response, ApiError> {
    Ok(Json(st.service.report(caller.tenant()?, &raw).await?).into_response())
}

pub async fn run(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    PathParam(raw): PathParam,
) -> Result<Response, ApiError> {
    let answer = st.service.run_report(caller.tenant()?, &raw, idem.key()).await?;
    Ok(idempotency::respond(answer, StatusCode::OK, idempotency::to_json))
}

pub async fn runs(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(raw): PathParam,
    q: QueryPairs,
) -> Result<Response, ApiError> {
    Ok(Json(st.service.report_runs(caller.tenant()?, &raw, q.int("limit")?).await?).into_response())
}
