//! `POST /api/conversations`: a transcript stored as facts, the speaker as
//! subject (`service/conversations.rs`, `docs/conversations.md`).

use super::error::ApiError;
use super::extract::{Caller, JsonBody, Object};
use super::idempotency::{self, IdempotencyKey};
use super::AppState;
use crate::service::conversations::ConversationRequest;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

pub async fn record(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    JsonBody(Object(body)): JsonBody<Object<ConversationRequest>>,
) -> Result<Response, ApiError> {
    let answer = st.service.record_conversation(caller.tenant()?, body, idem.key()).await?;
    Ok(idempotency::respond(answer, StatusCode::CREATED, idempotency::to_json))
}
