//! `/api/reports`: create, list and run reports; a run's output is kept as
//! facts. The logic is `crate::monitor::reports`.

use super::error::ApiError;
use super::extract::{Caller, JsonBody, JsonInt, Object, PathParam};
use super::idempotency::{self, IdempotencyKey};
use super::query::QueryPairs;
use super::AppState;
use crate::memory::blocking;
use crate::monitor::reports::{self, Report, MAX_NAME};
use crate::monitor::{time, REPORT_PREFIX};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

/// The longest schedule: a year.
pub const MAX_EVERY_SECS: i64 = 366 * 86_400;
pub const DEFAULT_RUNS: i64 = 20;
pub const MAX_RUNS: i64 = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    every_secs: JsonInt,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportBody {
    name: String,
    blocks: Vec<Value>,
    #[serde(default)]
    schedule: Option<Object<ScheduleBody>>,
}

pub async fn create(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    JsonBody(Object(body)): JsonBody<Object<ReportBody>>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let name = body.name;
    if !reports::name_ok(&name, MAX_NAME) {
        return Err(ApiError::schema(format!(
            "name must not be blank, hold no control characters and be at most {MAX_NAME} characters"
        )));
    }
    let blocks = reports::parse_blocks(&body.blocks).map_err(ApiError::schema)?;
    let every_secs = match body.schedule.map(|Object(s)| s.every_secs.0) {
        None => None,
        Some(n) if (1..=MAX_EVERY_SECS).contains(&n) => Some(n as u64),
        Some(n) => return Err(ApiError::schema(format!("schedule.every_secs must be within 1..={MAX_EVERY_SECS}, got {n}"))),
    };
    let report = Report { id: crate::monitor::new_id(), name, blocks, every_secs, created_at: time::now_ms(), last_run: None };
    let ops = report.create_ops();
    idempotency::write(&st, &tenant, "POST /api/reports", idem, ops, StatusCode::CREATED, move |_| report.to_json()).await
}

pub async fn list(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let engine = st.memory.engine().clone();
    let all = blocking(move || reports::list(&engine, &tenant)).await?;
    Ok(Json(all.iter().map(Report::to_json).collect::<Vec<_>>()).into_response())
}

async fn find(st: &AppState, tenant: &str, raw: &str) -> Result<Report, ApiError> {
    let id = crate::monitor::parse_id(raw, REPORT_PREFIX).ok_or_else(ApiError::not_found)?;
    let (engine, tenant) = (st.memory.engine().clone(), tenant.to_string());
    blocking(move || reports::get(&engine, &tenant, id)).await?.ok_or_else(ApiError::not_found)
}

pub async fn get(State(st): State<AppState>, caller: Caller, PathParam(raw): PathParam) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let r = find(&st, &tenant, &raw).await?;
    Ok(Json(r.to_json()).into_response())
}

const RUN: &str = "POST /api/reports/{id}/run";

pub async fn run(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    PathParam(raw): PathParam,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let report = find(&st, &tenant, &raw).await?;
    if let Some(replayed) = idempotency::stored(&st, &tenant, RUN, &idem).await? {
        return Ok(replayed);
    }
    let run = {
        let (engine, tenant, defaults) = (st.memory.engine().clone(), tenant.clone(), st.monitor.config.defaults.clone());
        blocking(move || reports::run(&engine, &tenant, &defaults, &report)).await?
    };
    let ops = run.ops();
    idempotency::write(&st, &tenant, RUN, idem, ops, StatusCode::OK, move |out| run.to_json(Some(out.tx))).await
}

pub async fn runs(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(raw): PathParam,
    q: QueryPairs,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let limit = match q.int("limit")? {
        None => DEFAULT_RUNS,
        Some(n) if (1..=MAX_RUNS).contains(&n) => n,
        Some(n) => return Err(ApiError::schema(format!("limit must be within 1..={MAX_RUNS}, got {n}"))),
    };
    let report = find(&st, &tenant, &raw).await?;
    let engine = st.memory.engine().clone();
    let all = blocking(move || reports::runs(&engine, &tenant, &report, limit as usize)).await?;
    Ok(Json(all.iter().map(|r| r.to_json(None)).collect::<Vec<_>>()).into_response())
}
