//! `/api/connectors`: register and list connectors, webhook deliveries and
//! pull syncs. The work is `crate::connectors`.

use super::error::ApiError;
use super::extract::{present, Caller, JsonBody, Object};
use super::idempotency::{self, IdempotencyKey};
use super::AppState;
use crate::connectors::ingest::{Ingest, Receipt, Stop};
use crate::connectors::pull::{self, PullError};
use crate::connectors::records::Framing;
use crate::connectors::{self, schedule, Connector};
use crate::digest::mask::Masker;
use crate::memory::blocking;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

const EVENTS_ROUTE: &str = "POST /api/connectors/{name}/events";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectorBody {
    name: String,
    #[serde(default, deserialize_with = "present")]
    kind: Option<String>,
    #[serde(default, deserialize_with = "present")]
    label: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    fields: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    mask: Option<String>,
    #[serde(default)]
    confidence: Option<f64>,
    #[serde(default)]
    every_secs: Option<crate::json::JsonInt>,
}

/// The connector with its live parts: the ingested count and the last pull.
fn describe(
    engine: &tempora_storage::Engine,
    tenant: &str,
    c: &Connector,
) -> Result<Value, tempora_storage::EngineError> {
    let mut v = c.to_json();
    v["ingested"] = json!(connectors::ingested(engine, tenant, &c.name)?);
    v["last_pull"] = json!(pull::last_pull(engine, tenant, &c.name));
    Ok(v)
}

pub async fn list(State(st): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let engine = Arc::clone(st.memory.engine());
    let out = blocking(move || {
        let mut out = Vec::new();
        for c in connectors::list(&engine, &tenant)? {
            out.push(describe(&engine, &tenant, &c)?);
        }
        Ok(out)
    })
    .await?;
    Ok(Json(json!({ "connectors": out })))
}

pub async fn register(
    State(st): State<AppState>,
    caller: Caller,
    JsonBody(Object(body)): JsonBody<Object<ConnectorBody>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let rt = &st.connectors;
    let r = Connector::checked(
        body.name,
        body.kind,
        body.label,
        body.url,
        body.subject,
        body.fields.as_ref(),
        body.mask.as_deref(),
        body.confidence,
        body.every_secs.map(|s| s.0),
        rt.min_every_secs,
    )
    .map_err(ApiError::schema)?;
    // A URL that names a refused address is refused now; names are only
    // resolved when pulled (DNS may change, and may not be reachable here).
    if let Some(u) = &r.url {
        let url = pull::check_url_syntax(u).map_err(ApiError::schema)?;
        let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        if host.parse::<std::net::IpAddr>().is_ok() {
            // An address literal: checking it resolves nothing.
            rt.policy.resolve(&url).await.map_err(|e| ApiError::schema(format!("url: {e}")))?;
        }
    }
    let engine = Arc::clone(st.memory.engine());
    let ops = {
        let (engine, tenant, r) = (Arc::clone(&engine), tenant.clone(), r.clone());
        blocking(move || connectors::register_ops(&engine, &tenant, &r)).await?
    };
    if !ops.is_empty() {
        st.memory.write(&tenant, ops, None).await?.map_err(|_| ApiError::internal())?;
    }
    rt.set(&tenant, &r.name, r.every_secs.filter(|_| r.url.is_some()));
    let name = r.name.clone();
    let v = blocking(move || {
        let c = connectors::load(&engine, &tenant, &name)?
            .ok_or_else(|| tempora_storage::EngineError::NotFound(name.clone()))?;
        describe(&engine, &tenant, &c)
    })
    .await?;
    Ok(Json(v))
}

async fn find(st: &AppState, tenant: &str, name: &str) -> Result<Connector, ApiError> {
    let (engine, tenant, name) = (Arc::clone(st.memory.engine()), tenant.to_string(), name.to_string());
    blocking(move || connectors::load(&engine, &tenant, &name)).await?.ok_or_else(ApiError::not_found)
}

async fn masker(st: &AppState, tenant: &str, c: &Connector) -> Result<Masker, ApiError> {
    let (engine, tenant) = (Arc::clone(st.memory.engine()), tenant.to_string());
    let secret = blocking(move || crate::digest::tenant_secret(&engine, &tenant)).await?;
    Ok(Masker::new(c.mask, secret))
}

/// What landed before a delivery stopped, for the error message.
fn landed(r: &Receipt) -> String {
    format!(
        "{} records read before it: {} facts asserted, {} candidates, {} records unchanged, {} rejected (delivery {})",
        r.records, r.asserted, r.candidates, r.unchanged, r.rejected, r.delivery
    )
}

fn stop_error(stop: Stop) -> ApiError {
    match stop {
        Stop::TooLarge(why, r) => ApiError::too_large(format!("{why}; the {} are stored", landed(&r))),
        Stop::Body(why, r) => ApiError::schema(format!("{why}; the {} are stored", landed(&r))),
        Stop::Engine(e, _) => ApiError::from(e),
    }
}

/// `POST /api/connectors/{name}/events`: the body is read as it arrives.
pub async fn events(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let c = find(&st, &tenant, &name).await?;
    let ct = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json");
    let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let framing = match Framing::from_content_type(ct) {
        Some(f) => Some(f),
        None if matches!(essence.as_str(), "text/csv" | "application/csv") => None,
        None => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                format!("events are JSON (application/json), JSON Lines (application/x-ndjson) or CSV (text/csv), not {essence:?}"),
            ))
        }
    };
    let bounds = st.connectors.bounds;
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > bounds.max_bytes) {
        return Err(ApiError::too_large(format!(
            "the body is larger than the limit of {} bytes for one delivery; split it",
            bounds.max_bytes
        )));
    }
    if let Some(replayed) = idempotency::stored(&st, &tenant, EVENTS_ROUTE, &idem).await? {
        return Ok(replayed);
    }
    let masker = masker(&st, &tenant, &c).await?;
    let mut ingest = Ingest::new(st.memory.clone(), &tenant, &c, masker, framing, bounds);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => ingest.feed(&bytes).await.map_err(stop_error)?,
            Err(e) => {
                let r = ingest.receipt().clone();
                return Err(stop_error(Stop::Body(format!("reading the body failed: {e}"), r)));
            }
        }
    }
    if ingest.receipt().bytes == 0 {
        return Err(ApiError::schema("the delivery is empty: send one record or more"));
    }
    let key = idem.0.map(|k| (idempotency::scoped(EVENTS_ROUTE, &k), StatusCode::OK.as_u16()));
    match ingest.finish(key).await.map_err(stop_error)? {
        Ok(receipt) => Ok(Json(receipt.to_json()).into_response()),
        Err(stored) => Ok(idempotency::replay(&stored)),
    }
}

/// `POST /api/connectors/{name}/pull`.
pub async fn pull(
    State(st): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let c = find(&st, &tenant, &name).await?;
    if c.url.is_none() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!("connector {name} has no url to pull; register it with one"),
        ));
    }
    match schedule::pull_and_record(&st.connectors, &st.memory, &tenant, &c, "request").await {
        Ok(receipt) => Ok(Json(receipt.to_json())),
        Err(e) => Err(pull_error(e)),
    }
}

fn pull_error(e: PullError) -> ApiError {
    tracing::warn!(error = %e, "pull failed");
    match e {
        PullError::Refused(m) => ApiError::schema(m),
        PullError::Upstream(m) => ApiError::new(StatusCode::BAD_GATEWAY, "UpstreamError", m),
        PullError::Timeout(_) => ApiError::new(StatusCode::GATEWAY_TIMEOUT, "UpstreamTimeout", e.to_string()),
        PullError::Stopped(Stop::TooLarge(why, r)) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "UpstreamError", format!("{why}; the {} are stored", landed(&r)))
        }
        PullError::Stopped(Stop::Body(why, r)) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "UpstreamError", format!("{why}; the {} are stored", landed(&r)))
        }
        PullError::Stopped(Stop::Engine(e, _)) => ApiError::from(e),
    }
}
