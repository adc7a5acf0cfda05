//! The service's errors as gRPC statuses (the table in
//! `service/error.rs`). An unknown agent network is not among them: by
//! neuro-san's convention it is `UNIMPLEMENTED` (no such service).

use crate::service::ServiceError;
use tonic::{Code, Status};

pub fn status(e: ServiceError) -> Status {
    let code = match &e {
        ServiceError::Invalid(_) => Code::InvalidArgument,
        ServiceError::Conflict(_) | ServiceError::FailedPrecondition(_) => Code::FailedPrecondition,
        ServiceError::NotFound(_) => Code::NotFound,
        ServiceError::Unauthorized => Code::Unauthenticated,
        ServiceError::TooLarge(_) | ServiceError::RateLimited(_) => Code::ResourceExhausted,
        ServiceError::Unavailable(_) | ServiceError::Upstream(_) => Code::Unavailable,
        ServiceError::UpstreamTimeout(_) => Code::DeadlineExceeded,
        ServiceError::Internal => Code::Internal,
    };
    Status::new(code, e.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_its_code_and_message() {
        let cases = [
            (ServiceError::invalid("bad"), Code::InvalidArgument),
            (ServiceError::conflict("c"), Code::FailedPrecondition),
            (ServiceError::FailedPrecondition("p".into()), Code::FailedPrecondition),
            (ServiceError::not_found(), Code::NotFound),
            (ServiceError::Unauthorized, Code::Unauthenticated),
            (ServiceError::TooLarge("t".into()), Code::ResourceExhausted),
            (ServiceError::RateLimited("r".into()), Code::ResourceExhausted),
            (ServiceError::unavailable("u"), Code::Unavailable),
            (ServiceError::Upstream("m".into()), Code::Unavailable),
            (ServiceError::UpstreamTimeout("t".into()), Code::DeadlineExceeded),
            (ServiceError::Internal, Code::Internal),
        ];
        for (e, code) in cases {
            let message = e.message();
            let s = status(e);
            assert_eq!((s.code(), s.message()), (code, message.as_str()));
        }
    }
}
