//! `Idempotency-Key` on writing POSTs. The first response under a key is
//! stored by the engine in the same transaction as the write (so it survives a
//! restart, and a crash cannot keep one without the other) and replayed
//! verbatim, with `Idempotency-Replayed: true`, to every later request of the
//! same tenant and route with that key. Errors caused by the request (4xx) are
//! stored too; server errors are not, so such a request can be retried.

use super::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use crate::service::{self, Answer};

pub const HEADER: &str = "idempotency-key";
pub const REPLAYED: &str = "idempotency-replayed";

/// The request's `Idempotency-Key`, if any (an empty value counts as
/// none; the rules are the service's, `service/idempotency.rs`).
pub struct IdempotencyKey(pub Option<service::IdempotencyKey>);

impl IdempotencyKey {
    pub fn key(&self) -> Option<&service::IdempotencyKey> {
        self.0.as_ref()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.headers.get(HEADER) {
            None => Ok(IdempotencyKey(None)),
            Some(v) => Ok(IdempotencyKey(service::IdempotencyKey::parse(v.as_bytes())?)),
        }
    }
}

/// The reply to a call that may carry a key: `status` with the JSON that
/// `render` writes of the result. A replayed answer, success or error,
/// carries `Idempotency-Replayed: true`.
pub fn respond<T>(answer: Answer<T>, status: StatusCode, render: impl FnOnce(&T) -> Vec<u8>) -> Response {
    match answer {
        Answer::Fresh(v) => json_response(status, render(&v)),
        Answer::Replayed(r) => {
            let mut resp = match r {
                Ok(v) => json_response(status, render(&v)),
                Err(e) => ApiError::from(e).into_response(),
            };
            resp.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
            resp
        }
    }
}

/// JSON written straight from a value (no `Value` built first).
pub fn to_json(body: &impl serde::Serialize) -> Vec<u8> {
    match serde_json::to_vec(body) {
        Ok(v) => v,
        // Only a map with non-string keys fails; none of the replies has one.
        Err(e) => {
            tracing::error!(error = %e, "a reply does not serialize");
            b"{}".to_vec()
        }
    }
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}
