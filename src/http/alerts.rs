//! `/api/alerts`: the tenant's alerts, acking, evaluating now, the rules
//! and model-token usage. The logic is `crate::monitor`.

use super::error::ApiError;
use super::extract::{Caller, JsonBody, PathParam};
use super::idempotency::{self, IdempotencyKey};
use super::query::QueryPairs;
use super::AppState;
use crate::memory::blocking;
use crate::monitor::{alerts, rules, time, usage, ALERT_PREFIX};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// Days of usage history `GET /api/alerts/usage` answers with.
const USAGE_DAYS: usize = 30;

pub async fn list(State(st): State<AppState>, caller: Caller, q: QueryPairs) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let wanted: &[&str] = match q.string("state")?.as_deref() {
        None => &[alerts::OPEN, alerts::ACKED],
        Some("open") => &[alerts::OPEN],
        Some("acked") => &[alerts::ACKED],
        Some("resolved") => &[alerts::RESOLVED],
        Some("all") => &[alerts::OPEN, alerts::ACKED, alerts::RESOLVED],
        Some(other) => {
            return Err(ApiError::schema(format!("state must be open, acked, resolved or all, got {other:?}")));
        }
    };
    let engine = st.memory.engine().clone();
    // Open and acked alerts are looked up by state, however many alerts the
    // tenant has had; a listing with resolved ones holds the newest 10,000.
    let unresolved_only = !wanted.contains(&alerts::RESOLVED);
    let all = blocking(move || {
        if unresolved_only { alerts::unresolved(&engine, &tenant) } else { alerts::list(&engine, &tenant) }
    })
    .await?;
    let out: Vec<Value> = all.iter().filter(|a| wanted.contains(&a.state.as_str())).map(|a| a.to_json()).collect();
    Ok(Json(out).into_response())
}

pub async fn ack(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    PathParam(raw): PathParam,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let id = crate::monitor::parse_id(&raw, ALERT_PREFIX).ok_or_else(ApiError::not_found)?;
    let lock = st.monitor.lock(&tenant);
    let _held = lock.lock().await;
    let alert = {
        let (engine, tenant) = (st.memory.engine().clone(), tenant.clone());
        blocking(move || alerts::get(&engine, &tenant, id)).await?.ok_or_else(ApiError::not_found)?
    };
    match alert.state.as_str() {
        alerts::OPEN => {}
        alerts::ACKED => return Ok(Json(alert.to_json()).into_response()),
        other => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "Conflict",
                format!("alert {} is {other}: only an open alert can be acked", alert.subject()),
            ))
        }
    }
    let now = time::now_ms();
    let ops = alerts::ack_ops(&alert, now);
    idempotency::write(&st, &tenant, "POST /api/alerts/{id}/ack", idem, ops, StatusCode::OK, move |out| {
        alerts::acked(&alert, now, out)
    })
    .await
}

const EVALUATE: &str = "POST /api/alerts/evaluate";

pub async fn evaluate(State(st): State<AppState>, caller: Caller, idem: IdempotencyKey) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    if let Some(replayed) = idempotency::stored(&st, &tenant, EVALUATE, &idem).await? {
        return Ok(replayed);
    }
    let lock = st.monitor.lock(&tenant);
    let _held = lock.lock().await;
    let plan = {
        let (engine, tenant, defaults) = (st.memory.engine().clone(), tenant.clone(), st.monitor.config.defaults.clone());
        blocking(move || alerts::plan(&engine, &tenant, &defaults)).await?
    };
    if plan.ops.is_empty() {
        return Ok(Json(plan.render(None)).into_response());
    }
    let ops = plan.ops.clone();
    idempotency::write(&st, &tenant, EVALUATE, idem, ops, StatusCode::OK, move |out| plan.render(Some(out))).await
}

pub async fn get_rules(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let (engine, defaults) = (st.memory.engine().clone(), st.monitor.config.defaults.clone());
    let r = blocking(move || rules::load(&engine, &tenant, &defaults)).await?;
    Ok(Json(r).into_response())
}

pub async fn put_rules(State(st): State<AppState>, caller: Caller, JsonBody(body): JsonBody<Value>) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    if !body.is_object() {
        return Err(ApiError::schema("the rules must be a JSON object"));
    }
    let effective = rules::Rules::with_overrides(&st.monitor.config.defaults, &body).map_err(ApiError::schema)?;
    let out = st.memory.write(&tenant, vec![rules::store_op(body)], None).await?;
    out.map_err(|_| ApiError::internal())?;
    Ok(Json(effective).into_response())
}

pub async fn get_usage(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let (engine, defaults) = (st.memory.engine().clone(), st.monitor.config.defaults.clone());
    let (rules, days) = blocking(move || Ok((rules::load(&engine, &tenant, &defaults)?, usage::days(&engine, &tenant, USAGE_DAYS)?))).await?;
    let today = time::day(time::now_ms());
    let u = days.iter().find(|(d, _)| *d == today).map(|(_, u)| *u).unwrap_or_default();
    let day_json = |d: &str, u: &usage::DayUsage| {
        json!({"day": d, "tokens_in": u.tokens_in, "tokens_out": u.tokens_out, "tokens": u.total(), "calls": u.calls})
    };
    Ok(Json(json!({
        "today": day_json(&today, &u),
        "daily_token_budget": if rules.cost.enabled { rules.cost.daily_token_budget } else { None },
        "days": days.iter().rev().map(|(d, u)| day_json(d, u)).collect::<Vec<_>>(),
    }))
    .into_response())
}
