//! Request extractors that answer with the error envelope: who is calling
//! ([`Caller`]) and a JSON body ([`JsonBody`]).

use super::error::ApiError;
use super::AppState;
use crate::service::principal::Credentials;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, HOST};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;

pub const SESSION_COOKIE: &str = "tempora_session";
/// Header an admin uses to name the tenant a request is about.
pub const TENANT_HEADER: &str = "x-tempora-tenant";

/// The authenticated caller (`service/principal.rs`). Extracting it on a
/// gated route turns a missing or wrong key into the 404 non-disclosure
/// answer.
pub use crate::service::principal::Caller;

pub fn bearer(parts: &Parts) -> Option<&str> {
    crate::service::principal::bearer_token(parts.headers.get(AUTHORIZATION)?.to_str().ok()?)
}

/// The session cookie's value: an opaque session id (`http/session.rs`).
pub fn session_cookie(parts: &Parts) -> Option<&str> {
    session_cookie_in(&parts.headers)
}

/// [`session_cookie`], from the headers alone.
pub fn session_cookie_in(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v)
}

pub fn host(parts: &Parts) -> Option<&str> {
    parts.headers.get(HOST).and_then(|v| v.to_str().ok()).or_else(|| parts.uri.host())
}

pub fn admin_tenant(parts: &Parts) -> Option<String> {
    if let Some(v) = parts.headers.get(TENANT_HEADER).and_then(|v| v.to_str().ok()) {
        return Some(v.to_string());
    }
    let query = parts.uri.query()?;
    query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == "tenant").map(|(_, v)| {
        percent_decode(v)
    })
}

/// Decodes a `application/x-www-form-urlencoded` query value.
pub fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                match (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
                    (Some(h), Some(l)) => {
                        out.push(h * 16 + l);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Ok(state.service.authenticate_naming(&credentials(parts, None), || admin_tenant(parts))?)
    }
}

/// What an HTTP request presents (also gRPC's metadata, which arrives as
/// headers): the bearer key, the session cookie, the host, and the tenant
/// an admin names.
pub fn credentials<'a>(parts: &'a Parts, tenant: Option<&'a str>) -> Credentials<'a> {
    Credentials { bearer: bearer(parts), session: session_cookie(parts), host: host(parts), tenant }
}

/// A JSON request body. Wrong content type, malformed JSON, a wrong shape and
/// a body over the limit all answer with the envelope.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                let mime = v.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
                mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
            })
            .unwrap_or(false);
        if !is_json {
            return Err(ApiError::schema("expected a JSON body with Content-Type: application/json"));
        }
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large("request body is larger than the configured limit (max_body_bytes)")
            } else {
                ApiError::schema(format!("cannot read the request body: {e}"))
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Parses JSON, naming the path of the field that is wrong.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            ApiError::schema(format!("invalid JSON body: {inner}"))
        } else {
            ApiError::schema(format!("invalid JSON body at {path}: {inner}"))
        }
    })?;
    de.end().map_err(|e| ApiError::schema(format!("invalid JSON body: {e}")))?;
    Ok(value)
}

pub use crate::json::Object;

/// The one path parameter of a route. A segment that does not decode to
/// UTF-8 answers with the envelope (axum's own rejection is plain text).
pub struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| PathParam(v))
            .map_err(|e| ApiError::schema(format!("invalid path parameter: {}", e.body_text())))
    }
}

pub use crate::json::{present, JsonInt};
