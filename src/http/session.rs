//! `POST /api/session` and `DELETE /api/session`: the console's sign-in.
//! A key is traded once for the HttpOnly `tempora_session` cookie, which
//! carries an opaque session id, never the key (`service/sessions.rs`);
//! the session is resolved again on every request, like a bearer key.
//! Signing out ends the session on the server and expires the cookie.

use super::error::ApiError;
use super::extract::{session_cookie_in, JsonBody, Object, SESSION_COOKIE};
use super::AppState;
use axum::extract::State;
use axum::http::header::{FORWARDED, HOST, SET_COOKIE};
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
    let host = headers.get(HOST).and_then(|v| v.to_str().ok());
    let signed = st.service.sign_in(&key, host).await?;
    let body = match &signed.tenant {
        Some(t) => json!({"scope": signed.scope.as_str(), "tenant": t}),
        None => json!({"scope": signed.scope.as_str()}),
    };
    let mut resp = Json(body).into_response();
    // Open mode makes no session: nothing needs one.
    if let Some(session) = &signed.session {
        let cookie = format!(
            "{SESSION_COOKIE}={}; HttpOnly; SameSite=Lax; Path=/; Max-Age={}{}",
            session.id,
            session.lifetime.as_secs(),
            secure_attribute(&headers)
        );
        resp.headers_mut().insert(SET_COOKIE, HeaderValue::from_str(&cookie).map_err(|_| ApiError::internal())?);
    }
    Ok(resp)
}

pub async fn logout(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    if let Some(id) = session_cookie_in(&headers) {
        st.service.sign_out(id).await?;
    }
    let mut resp = Json(json!({"ok": true})).into_response();
    let cookie = format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0{}", secure_attribute(&headers));
    resp.headers_mut().insert(SET_COOKIE, HeaderValue::from_str(&cookie).map_err(|_| ApiError::internal())?);
    Ok(resp)
}

/// `; Secure` when the browser reached the server over HTTPS. The listener
/// speaks plain HTTP only, so that is a TLS-terminating proxy saying so:
/// `X-Forwarded-Proto: https` or `Forwarded: proto=https` (the first
/// proxy's entry, the one the browser talked to).
fn secure_attribute(headers: &HeaderMap) -> &'static str {
    let first = |name| {
        headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.split(',').next()).map(str::trim)
    };
    let forwarded_proto = first("x-forwarded-proto").is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let forwarded = first(FORWARDED.as_str()).is_some_and(|entry| {
        entry.split(';').filter_map(|pair| pair.split_once('=')).any(|(name, value)| {
            name.trim().eq_ignore_ascii_case("proto") && value.trim().trim_matches('"').eq_ignore_ascii_case("https")
        })
    });
    if forwarded_proto || forwarded {
        "; Secure"
    } else {
        ""
    }
}
