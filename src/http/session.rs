//! `POST /api/session` and `DELETE /api/session`: trading a key for the
//! HttpOnly `tempora_session` cookie used by browsers. The cookie carries the
//! key itself and is re-validated on every request, like a bearer token.

use super::error::ApiError;
use super::extract::{JsonBody, Object, SESSION_COOKIE};
use super::AppState;
use crate::service::principal::Scope;
use axum::extract::State;
use axum::http::header::{HOST, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
pub struct SessionRequest {
    key: String,
}

pub async fn login(
    State(st): State<AppState>,
    headers: HeaderMap,
    JsonBody(Object(SessionRequest { key })): JsonBody<Object<SessionRequest>>,
) -> Result<Response, ApiError> {
    let host_header = headers.get(HOST).and_then(|v| v.to_str().ok()).map(String::from);
    let secure = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"));
    let session = st.service.sign_in(&key, host_header.as_deref())?;
    if session.scope == Scope::Open {
        return Ok(Json(json!({"scope": Scope::Open.as_str(), "tenant": session.tenant})).into_response());
    }
    let body = match &session.tenant {
        Some(t) => json!({"scope": session.scope.as_str(), "tenant": t}),
        None => json!({"scope": session.scope.as_str()}),
    };
    if key.chars().any(|c| c.is_control() || c == ';' || c == ',' || c.is_whitespace()) {
        return Err(ApiError::schema("this key cannot be carried in a cookie; send it as a bearer token"));
    }
    let cookie = format!(
        "{SESSION_COOKIE}={key}; HttpOnly; SameSite=Lax; Path=/{}",
        if secure { "; Secure" } else { "" }
    );
    let mut resp = Json(body).into_response();
    resp.headers_mut()
        .insert(SET_COOKIE, HeaderValue::from_str(&cookie).map_err(|_| ApiError::internal())?);
    Ok(resp)
}

pub async fn logout() -> Response {
    let mut resp = Json(json!({"ok": true})).into_response();
    resp.headers_mut().insert(
        SET_COOKIE,
        HeaderValue::from_static("tempora_session=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0"),
    );
    resp
}
