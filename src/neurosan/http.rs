//! neuro-san's read-only HTTP routes. Agent names may hold `/`
//! (`deep/math_guy`), so `/api/v1/{*rest}` is split at its last segment:
//! the verb.

use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::AppState;
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// `GET /api/v1/list`: the listed networks (`ConciergeResponse`).
pub async fn list(State(st): State<AppState>, _caller: Caller) -> Json<Value> {
    Json(json!({ "agents": st.agents.list() }))
}

/// `GET /api/v1/docs`: the API's OpenAPI document.
pub async fn docs() -> Response {
    ([(CONTENT_TYPE, "application/json")], super::SPEC).into_response()
}

/// `GET /api/v1/{agent}/function` and `GET /api/v1/{agent}/connectivity`.
/// Clients send these GETs with a `{}` body; it is ignored.
pub async fn agent_get(
    State(st): State<AppState>,
    _caller: Caller,
    Path(rest): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (agent, verb) = rest.rsplit_once('/').ok_or_else(ApiError::not_found)?;
    let network = st.agents.get(agent).ok_or_else(ApiError::not_found)?;
    match verb {
        "function" => Ok(Json(json!({ "function": network.function() }))),
        "connectivity" => Ok(Json(json!({
            "connectivity_info": network.connectivity(),
            "metadata": network.metadata.raw,
        }))),
        _ => Err(ApiError::not_found()),
    }
}
