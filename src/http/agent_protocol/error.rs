//! The Agent Protocol's error answers, which differ from the memory API's
//! envelope: `404 {"message": "..."}` for unknown ids and `422` with a JSON
//! body (`{"message": "..."}` too) for input that cannot be processed.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use crate::service::ServiceError;
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApError {
    pub status: StatusCode,
    pub message: String,
}

impl ApError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApError {
        ApError { status, message: message.into() }
    }
    pub fn not_found(what: &str, id: &str) -> ApError {
        ApError::new(StatusCode::NOT_FOUND, format!("Unable to find {what} with the provided id: {id}"))
    }
    /// Also the answer to callers without a valid key: it never says whether
    /// the thing exists.
    pub fn hidden() -> ApError {
        ApError::new(StatusCode::NOT_FOUND, "Unable to find entity with the provided id")
    }
    pub fn unprocessable(message: impl Into<String>) -> ApError {
        ApError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }
    pub fn too_large(message: impl Into<String>) -> ApError {
        ApError::new(StatusCode::PAYLOAD_TOO_LARGE, message)
    }
    pub fn internal() -> ApError {
        ApError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }
}

impl IntoResponse for ApError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(json!({ "message": self.message }))).into_response()
    }
}

impl From<ServiceError> for ApError {
    /// The service's errors on the Agent Protocol (the table in
    /// `service/error.rs`): input that cannot be processed is 422, anything
    /// not found (or not the caller's) the protocol's 404.
    fn from(e: ServiceError) -> ApError {
        let status = match &e {
            // The plain "not found" of a wrong key or another tenant's id
            // discloses nothing; a named miss keeps its message.
            ServiceError::NotFound(m) if m == "not found" => return ApError::hidden(),
            ServiceError::NotFound(_) => StatusCode::NOT_FOUND,
            ServiceError::Invalid(_) | ServiceError::Conflict(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ServiceError::FailedPrecondition(_) => StatusCode::CONFLICT,
            ServiceError::Unauthorized => StatusCode::UNAUTHORIZED,
            ServiceError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ServiceError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ServiceError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ServiceError::Upstream(_) => StatusCode::BAD_GATEWAY,
            ServiceError::UpstreamTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ServiceError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApError::new(status, e.message())
    }
}
