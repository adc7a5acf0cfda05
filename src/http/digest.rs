//! `POST /api/digest`: the service's digest (`service/digest.rs`).

use super::error::ApiError;
use super::extract::{Caller, JsonBody, Object};
use super::idempotency::{self, IdempotencyKey};
use super::AppState;
use crate::service::digest::DigestRequest;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

pub async fn digest(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    JsonBody(Object(body)): JsonBody<Object<DigestRequest>>,
) -> Result<Response, ApiError> {
    let answer = st.service.digest(caller.tenant()?, body, idem.key()).await?;
    Ok(idempotency::respond(answer, StatusCode::OK, idempotency::to_json))
}
