//! `Idempotency-Key` on writing POSTs. The first response under a key is
//! stored by the engine in the same transaction as the write (so it survives a
//! restart, and a crash cannot keep one without the other) and replayed
//! verbatim, with `Idempotency-Replayed: true`, to every later request of the
//! same tenant and route with that key. Errors caused by the request (4xx) are
//! stored too; server errors are not, so such a request can be retried.

use super::error::ApiError;
use super::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tempora_storage::{EngineError, Idempotency, WriteOp, WriteOutcome};

pub const HEADER: &str = "idempotency-key";
pub const REPLAYED: &str = "idempotency-replayed";
pub const MAX_KEY_LEN: usize = 255;

/// The request's `Idempotency-Key`, if any: its bytes as sent (a header may
/// carry any visible Latin-1 text, not only ASCII). An empty value counts as
/// no key.
pub struct IdempotencyKey(pub Option<Vec<u8>>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(v) = parts.headers.get(HEADER) else {
            return Ok(IdempotencyKey(None));
        };
        let v = v.as_bytes();
        if v.is_empty() {
            return Ok(IdempotencyKey(None));
        }
        if v.len() > MAX_KEY_LEN {
            return Err(ApiError::schema(format!("Idempotency-Key must be at most {MAX_KEY_LEN} characters")));
        }
        Ok(IdempotencyKey(Some(v.to_vec())))
    }
}

/// Stored form: the status as two big-endian bytes, then the JSON body.
pub fn encode(status: StatusCode, body: &Value) -> Vec<u8> {
    with_status(status, &serde_json::to_vec(body).expect("JSON serializes"))
}

/// The stored form of a body already serialized.
fn with_status(status: StatusCode, json: &[u8]) -> Vec<u8> {
    let mut out = status.as_u16().to_be_bytes().to_vec();
    out.extend_from_slice(json);
    out
}

/// A success body of [`write`]: a JSON value, or JSON written straight from
/// the outcome ([`Serialized`]).
pub trait SuccessBody {
    fn into_json(self) -> Vec<u8>;
}

impl SuccessBody for Value {
    fn into_json(self) -> Vec<u8> {
        serde_json::to_vec(&self).expect("JSON serializes")
    }
}

/// JSON already serialized. The hot write routes answer with it: building a
/// `Value` of a fact first (a map of owned keys and values) and then writing
/// it cost more than writing the fact.
pub struct Serialized(pub Vec<u8>);

impl Serialized {
    pub fn of(body: &impl serde::Serialize) -> Serialized {
        Serialized(serde_json::to_vec(body).expect("JSON serializes"))
    }
}

impl SuccessBody for Serialized {
    fn into_json(self) -> Vec<u8> {
        self.0
    }
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

pub fn replay(bytes: &[u8]) -> Response {
    let (status, body) = match bytes {
        [hi, lo, body @ ..] => (StatusCode::from_u16(u16::from_be_bytes([*hi, *lo])).ok(), body),
        _ => (None, &[][..]),
    };
    let Some(status) = status else {
        tracing::error!("stored idempotent reply is malformed");
        return ApiError::internal().into_response();
    };
    let mut resp = json_response(status, body.to_vec());
    resp.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
    resp
}

/// The key as stored: route and key, so one key names one operation per route.
pub fn scoped(route: &str, key: &[u8]) -> Vec<u8> {
    let mut scoped = route.as_bytes().to_vec();
    scoped.push(0);
    scoped.extend_from_slice(key);
    scoped
}

/// The stored reply to an earlier request with this key, if there is one:
/// for routes that do expensive work (model calls) before their write, so a
/// retry is answered without redoing it. (The write itself still checks.)
pub async fn stored(
    st: &AppState,
    tenant: &str,
    route: &str,
    key: &IdempotencyKey,
) -> Result<Option<Response>, ApiError> {
    let Some(k) = &key.0 else { return Ok(None) };
    let engine = std::sync::Arc::clone(st.memory.engine());
    let (tenant, scoped) = (tenant.to_string(), scoped(route, k));
    let reply = crate::memory::blocking(move || engine.idempotent_reply(&tenant, &scoped)).await?;
    Ok(reply.map(|bytes| replay(&bytes)))
}

/// Runs a write; `ok` renders a success body (answered with `status`).
pub async fn write<B: SuccessBody>(
    st: &AppState,
    tenant: &str,
    route: &str,
    key: IdempotencyKey,
    ops: Vec<WriteOp>,
    status: StatusCode,
    ok: impl Fn(&WriteOutcome) -> B + Send + Sync + 'static,
) -> Result<Response, ApiError> {
    let Some(key) = key.0 else {
        let out = st.memory.write(tenant, ops, None).await?;
        let out = out.map_err(|_| ApiError::internal())?;
        return Ok(json_response(status, ok(&out).into_json()));
    };
    let ok = std::sync::Arc::new(ok);
    let render_ok = std::sync::Arc::clone(&ok);
    let idem = Idempotency {
        key: scoped(route, &key),
        render: Box::new(move |r: &Result<WriteOutcome, EngineError>| match r {
            Ok(out) => Some(with_status(status, &render_ok(out).into_json())),
            Err(e) => {
                let api = ApiError::from(clone_error(e));
                api.status.is_client_error().then(|| encode(api.status, &api.body()))
            }
        }),
    };
    match st.memory.write(tenant, ops, Some(idem)).await? {
        Ok(out) => Ok(json_response(status, ok(&out).into_json())),
        Err(stored) => Ok(replay(&stored)),
    }
}

/// Engine errors are not `Clone`; the render only needs their wire form.
fn clone_error(e: &EngineError) -> EngineError {
    match e {
        EngineError::Invalid(m) => EngineError::Invalid(m.clone()),
        EngineError::Conflict(m) => EngineError::Conflict(m.clone()),
        EngineError::NotFound(m) => EngineError::NotFound(m.clone()),
        EngineError::FormatTooNew(m) => EngineError::FormatTooNew(m.clone()),
        EngineError::Closed(m) => EngineError::Closed(m.clone()),
        EngineError::Storage(s) => EngineError::Closed(s.to_string()),
    }
}
