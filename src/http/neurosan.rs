//! neuro-san's read-only HTTP routes. Agent names may hold `/`
//! (`deep/math_guy`), so `/api/v1/{*rest}` is split at its last segment:
//! the verb. `streaming_chat` runs a [`turn`].

/// neuro-san's OpenAPI document, served at `/api/v1/docs`.
pub const SPEC: &str = include_str!("../../api/neuro-san.openapi.json");

use crate::service::chat::turn::{self, StartError};
use crate::service::chat::wire::{ChatRequest, ChatResponse};
use crate::http::error::ApiError;
use crate::http::extract::{Caller, JsonBody, Object};
use crate::http::AppState;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use serde_json::{json, Value};

/// `GET /api/v1/list`: the listed networks (`ConciergeResponse`).
pub async fn list(State(st): State<AppState>, _caller: Caller) -> Json<Value> {
    Json(json!({ "agents": st.service.networks() }))
}

/// `GET /api/v1/docs`: the API's OpenAPI document.
pub async fn docs() -> Response {
    ([(CONTENT_TYPE, "application/json")], SPEC).into_response()
}

/// `GET /api/v1/{agent}/function` and `GET /api/v1/{agent}/connectivity`.
/// Clients send these GETs with a `{}` body; it is ignored.
pub async fn agent_get(
    State(st): State<AppState>,
    _caller: Caller,
    Path(rest): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (agent, verb) = rest.rsplit_once('/').ok_or_else(ApiError::not_found)?;
    let network = st.service.network(agent).ok_or_else(ApiError::not_found)?;
    match verb {
        "function" => Ok(Json(json!({ "function": network.function() }))),
        "connectivity" => Ok(Json(json!({
            "connectivity_info": network.connectivity(),
            "metadata": network.metadata.raw,
        }))),
        _ => Err(ApiError::not_found()),
    }
}

/// `POST /api/v1/{agent}/streaming_chat`: one turn, streamed as JSON lines
/// (`application/json-lines`), one `ChatResponse` per line. The status is
/// 200 once the turn started; what goes wrong later is the last line. A
/// client that disconnects cancels the turn; a server shutting down ends
/// the stream with an error line.
pub async fn agent_post(
    State(st): State<AppState>,
    caller: Caller,
    Path(rest): Path<String>,
    JsonBody(Object(req)): JsonBody<Object<ChatRequest>>,
) -> Result<Response, ApiError> {
    let (agent, verb) = rest.rsplit_once('/').ok_or_else(ApiError::not_found)?;
    if verb != "streaming_chat" {
        return Err(ApiError::not_found());
    }
    let tenant = caller.tenant()?.to_string();
    let turn = turn::start(&st, tenant, agent, req).map_err(|e| match e {
        StartError::UnknownAgent(_) => ApiError::not_found(),
        StartError::BadRequest(m) => ApiError::schema(m),
    })?;
    let lines = turn.until(st.service.stopping()).map(|r| line(&r));
    Ok(([(CONTENT_TYPE, "application/json-lines")], Body::from_stream(lines)).into_response())
}

fn line(r: &ChatResponse) -> Result<Bytes, std::convert::Infallible> {
    let mut v = serde_json::to_vec(r).expect("responses serialize");
    v.push(b'\n');
    Ok(Bytes::from(v))
}
