//! The one error type of the service. Every operation of the service answers
//! with it, and each wire maps it exactly once, by an exhaustive `match`
//! (no `_` arm, so a new variant does not compile until every wire says
//! what it means there):
//!
//! | variant | code | HTTP | gRPC | Agent Protocol |
//! |---|---|---|---|---|
//! | `Invalid` | `SchemaInvalid` | 400 | `INVALID_ARGUMENT` | 422 |
//! | `Conflict` | `Conflict` | 400 | `FAILED_PRECONDITION` | 422 |
//! | `FailedPrecondition` | `Conflict` | 409 | `FAILED_PRECONDITION` | 409 |
//! | `NotFound` | `NotFound` | 404 | `NOT_FOUND` | 404 |
//! | `Unauthorized` | `Unauthorized` | 401 | `UNAUTHENTICATED` | 401 |
//! | `TooLarge` | `PayloadTooLarge` | 413 | `RESOURCE_EXHAUSTED` | 413 |
//! | `RateLimited` | `RateLimited` | 429 | `RESOURCE_EXHAUSTED` | 429 |
//! | `Unavailable` | `Unavailable` | 503 | `UNAVAILABLE` | 503 |
//! | `Upstream` | `UpstreamError` | 502 | `UNAVAILABLE` | 502 |
//! | `UpstreamTimeout` | `UpstreamTimeout` | 504 | `DEADLINE_EXCEEDED` | 504 |
//! | `Internal` | `Internal` | 500 | `INTERNAL` | 500 |
//!
//! MCP answers a tool's error as a tool result with `isError` and the text
//! `"{code}: {message}"`; NeuroDock sends an `ERROR` packet with the code.
//! Internal details are logged where the error is made, never sent.

use tempora_storage::{EngineError, StorageError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The request is malformed or out of bounds; the message names the
    /// field and what it accepts.
    #[error("{0}")]
    Invalid(String),
    /// The request contradicts the memory's rules: a second value of a
    /// `strict` predicate, acking an alert that is no longer open.
    #[error("{0}")]
    Conflict(String),
    /// The thing is in no state for the operation (a connector without a
    /// url cannot be pulled); changing it first makes the call valid.
    #[error("{0}")]
    FailedPrecondition(String),
    /// Also the non-disclosure answer for unauthenticated and cross-tenant
    /// requests: it never says whether the thing exists.
    #[error("{0}")]
    NotFound(String),
    /// A presented key that is wrong (where saying so discloses nothing,
    /// e.g. signing in).
    #[error("invalid key")]
    Unauthorized,
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    RateLimited(String),
    /// Refused for now, nothing changed: shutting down, a full or read-only
    /// disk, a request past its time. A retry later may succeed.
    #[error("{0}")]
    Unavailable(String),
    /// A model or connector endpoint the request names answered badly.
    #[error("{0}")]
    Upstream(String),
    #[error("{0}")]
    UpstreamTimeout(String),
    /// A bug or a broken store; the details went to the log.
    #[error("internal error")]
    Internal,
}

/// Why a request beyond `max_in_flight` is turned away, on every listener.
pub const AT_REQUEST_LIMIT: &str = "the server is at its request limit; retry shortly";

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

impl ServiceError {
    pub fn invalid(message: impl Into<String>) -> Self {
        ServiceError::Invalid(message.into())
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        ServiceError::Conflict(message.into())
    }
    /// The plain "not found", which discloses nothing.
    pub fn not_found() -> Self {
        ServiceError::NotFound("not found".into())
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        ServiceError::Unavailable(message.into())
    }
    /// An internal error, logged here with what went wrong.
    pub fn internal(what: impl std::fmt::Display) -> Self {
        tracing::error!(error = %what, "internal error");
        ServiceError::Internal
    }

    /// The error's stable name, the same on every wire that names errors
    /// (the HTTP envelope's `code`, MCP's tool error text, NeuroDock's
    /// `ERROR` packets).
    pub fn code(&self) -> &'static str {
        match self {
            ServiceError::Invalid(_) => "SchemaInvalid",
            ServiceError::Conflict(_) | ServiceError::FailedPrecondition(_) => "Conflict",
            ServiceError::NotFound(_) => "NotFound",
            ServiceError::Unauthorized => "Unauthorized",
            ServiceError::TooLarge(_) => "PayloadTooLarge",
            ServiceError::RateLimited(_) => "RateLimited",
            ServiceError::Unavailable(_) => "Unavailable",
            ServiceError::Upstream(_) => "UpstreamError",
            ServiceError::UpstreamTimeout(_) => "UpstreamTimeout",
            ServiceError::Internal => "Internal",
        }
    }

    /// The message a client is shown.
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// Whether the caller's request caused it (so the same request would
    /// fail the same way again). Such answers are kept under an idempotency
    /// key; the others are not, so the request can be retried.
    pub fn is_caused_by_request(&self) -> bool {
        match self {
            ServiceError::Invalid(_)
            | ServiceError::Conflict(_)
            | ServiceError::FailedPrecondition(_)
            | ServiceError::NotFound(_)
            | ServiceError::Unauthorized
            | ServiceError::TooLarge(_)
            | ServiceError::RateLimited(_) => true,
            ServiceError::Unavailable(_)
            | ServiceError::Upstream(_)
            | ServiceError::UpstreamTimeout(_)
            | ServiceError::Internal => false,
        }
    }
}

impl From<EngineError> for ServiceError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Invalid(m) => ServiceError::Invalid(m),
            EngineError::Conflict(m) => ServiceError::Conflict(m),
            EngineError::NotFound(_) => ServiceError::not_found(),
            EngineError::FormatTooNew(m) => {
                tracing::error!(error = %m, "engine refused its data directory");
                ServiceError::Internal
            }
            EngineError::Closed(m) => {
                tracing::warn!(error = %m, "engine closed");
                ServiceError::unavailable("the server is shutting down")
            }
            EngineError::Storage(s) => {
                tracing::error!(error = %s, "storage error");
                match s {
                    // Refusals that changed nothing: say why, and that reads go on.
                    StorageError::NoSpace { .. }
                    | StorageError::ReadOnly(_)
                    | StorageError::Failed(_)
                    | StorageError::Unreachable(_) => ServiceError::Unavailable(s.to_string()),
                    StorageError::Io(io) if io.raw_os_error() == Some(28) => ServiceError::unavailable(
                        "the data volume is full; writes are refused until space is freed",
                    ),
                    StorageError::Io(_)
                    | StorageError::Corrupt(_)
                    | StorageError::Backend(_)
                    | StorageError::Locked(_) => ServiceError::Internal,
                    // The engine crate keeps StorageError open to new kinds;
                    // one it adds is internal until mapped here.
                    _ => ServiceError::Internal,
                }
            }
        }
    }
}

impl From<&EngineError> for ServiceError {
    /// The wire form of an error the engine still holds (an idempotent
    /// write's render sees the error by reference).
    fn from(e: &EngineError) -> Self {
        match e {
            EngineError::Invalid(m) => ServiceError::Invalid(m.clone()),
            EngineError::Conflict(m) => ServiceError::Conflict(m.clone()),
            EngineError::NotFound(_) => ServiceError::not_found(),
            EngineError::FormatTooNew(_) => ServiceError::Internal,
            EngineError::Closed(_) => ServiceError::unavailable("the server is shutting down"),
            EngineError::Storage(s) => ServiceError::Unavailable(s.to_string()),
        }
    }
}
