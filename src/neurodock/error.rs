//! The service's errors as the codes of NeuroDock's `ERROR` packets
//! (`docs/neurodock.md`, "ERROR"); the protocol's own failures (a bad
//! packet, a slow one, an unknown call) have codes of their own.

use crate::service::ServiceError;

pub fn code(e: &ServiceError) -> &'static str {
    match e {
        ServiceError::Invalid(_) => "BadRequest",
        ServiceError::Conflict(_) | ServiceError::FailedPrecondition(_) => "Conflict",
        ServiceError::NotFound(_) => "NotFound",
        ServiceError::Unauthorized => "Unauthenticated",
        ServiceError::TooLarge(_) => "TooLarge",
        ServiceError::RateLimited(_) => "Busy",
        ServiceError::Unavailable(_) => "Unavailable",
        ServiceError::Upstream(_) => "UpstreamError",
        ServiceError::UpstreamTimeout(_) => "UpstreamTimeout",
        ServiceError::Internal => "Internal",
    }
}

/// An `ERROR` packet's code and message for a service error.
pub fn packet_error(e: ServiceError) -> (&'static str, String) {
    (code(&e), e.message())
}
