//! `/api/connectors`: register and list connectors, webhook deliveries and
//! pull syncs (`service/connectors.rs`).

use super::error::ApiError;
use super::extract::{Caller, JsonBody, Object};
use super::idempotency::{self, IdempotencyKey};
use super::AppState;
use crate::service::model::Framing;
use crate::service::connectors::{NewConnector, Records, Started};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use futures_util::StreamExt;
use serde_json::{json, Value};

pub async fn list(State(st): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let out = st.service.connectors(caller.tenant()?).await?;
    Ok(Json(json!({ "connectors": out })))
}

pub async fn register(
    State(st): State<AppState>,
    caller: Caller,
    JsonBody(Object(body)): JsonBody<Object<NewConnector>>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(st.service.register_connector(caller.tenant()?, body).await?))
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
    let tenant = caller.tenant()?;
    let ct = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json");
    let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let records = match Framing::from_content_type(ct) {
        Some(f) => Some(Records::Json(f)),
        None if matches!(essence.as_str(), "text/csv" | "application/csv") => Some(Records::Csv),
        None => None,
    };
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let Some(records) = records else {
        // Looked up first, as before: an unknown connector is not found
        // whatever the content type.
        st.service.connector_exists(tenant, &name).await?;
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("events are JSON (application/json), JSON Lines (application/x-ndjson) or CSV (text/csv), not {essence:?}"),
        ));
    };
    let mut delivery = match st.service.start_delivery(tenant, &name, records, declared, idem.key()).await? {
        Started::Open(d) => d,
        Started::Replayed(r) => {
            return Ok(idempotency::respond(crate::service::Answer::Replayed(r), StatusCode::OK, idempotency::to_json))
        }
    };
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => delivery.feed(&bytes).await?,
            Err(e) => return Err(delivery.broken(format!("reading the body failed: {e}")).into()),
        }
    }
    Ok(idempotency::respond(delivery.finish().await?, StatusCode::OK, idempotency::to_json))
}

/// `POST /api/connectors/{name}/pull`.
pub async fn pull(
    State(st): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(st.service.pull_connector(caller.tenant()?, &name).await?))
}
