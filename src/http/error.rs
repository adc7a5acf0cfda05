//! The one error type of the HTTP surface and its envelope
//! `{"error":{"code","message"}}`. Internal details are logged, never sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tempora_storage::{EngineError, StorageError};

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
    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", "invalid key")
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

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Invalid(m) => ApiError::schema(m),
            EngineError::Conflict(m) => ApiError::new(StatusCode::BAD_REQUEST, "Conflict", m),
            EngineError::NotFound(_) => ApiError::not_found(),
            EngineError::FormatTooNew(m) => {
                tracing::error!(error = %m, "engine refused its data directory");
                ApiError::internal()
            }
            EngineError::Closed(m) => {
                tracing::warn!(error = %m, "engine closed");
                ApiError::unavailable("the server is shutting down")
            }
            EngineError::Storage(s) => {
                tracing::error!(error = %s, "storage error");
                match s {
                    // Refusals that changed nothing: say why, and that reads go on.
                    StorageError::NoSpace { .. } | StorageError::ReadOnly(_) | StorageError::Failed(_) => {
                        ApiError::unavailable(s.to_string())
                    }
                    StorageError::Io(io) if io.raw_os_error() == Some(28) => {
                        ApiError::unavailable("the data volume is full; writes are refused until space is freed")
                    }
                    _ => ApiError::internal(),
                }
            }
        }
    }
}
