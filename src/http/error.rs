//! The one error type of the HTTP surface and its envelope
//! `{"error":{"code","message"}}`. Internal details are logged, never sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use crate::service::ServiceError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }
    /// Also the non-disclosure answer for unauthenticated and cross-tenant
    /// requests: it never says whether the thing exists.
    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "NotFound", "not found")
    }
    pub fn schema(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "SchemaInvalid", message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "PayloadTooLarge", message)
    }
    pub fn rate_limited(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "RateLimited", message)
    }
    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "method not allowed on this route")
    }
    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", "internal error")
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", message)
    }

    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

impl From<ServiceError> for ApiError {
    /// The service's errors on the HTTP wire (the table in
    /// `service/error.rs`).
    fn from(e: ServiceError) -> Self {
        let status = match &e {
            ServiceError::Invalid(_) | ServiceError::Conflict(_) => StatusCode::BAD_REQUEST,
            ServiceError::FailedPrecondition(_) => StatusCode::CONFLICT,
            ServiceError::NotFound(_) => StatusCode::NOT_FOUND,
            ServiceError::Unauthorized => StatusCode::UNAUTHORIZED,
            ServiceError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ServiceError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ServiceError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ServiceError::Upstream(_) => StatusCode::BAD_GATEWAY,
            ServiceError::UpstreamTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ServiceError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.code(), e.message())
    }
}
