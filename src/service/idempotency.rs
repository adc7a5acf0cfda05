//! Idempotency keys, for every surface alike (REST's `Idempotency-Key`
//! header, the same header on MCP's `tools/call`, connector deliveries).
//!
//! A write under a key stores its answer in the same transaction as the
//! write, so a crash keeps both or neither, and every later call of the
//! same tenant and operation with that key gets that answer back without
//! writing again, whichever surface it comes from. The answer is stored as
//! the operation's typed result, not as one wire's rendering of it:
//! `{"ok": result}` or `{"error": {"kind", "message"}}` in JSON. Answers
//! caused by the request (bad input, a conflict) are stored too; failures
//! of the server are not, so such a call can be retried.

use super::error::{Result, ServiceError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 255;

/// A caller's idempotency key: 1 to [`MAX_KEY_LEN`] bytes, as sent (a
/// header may carry any visible Latin-1 text, not only ASCII).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(Vec<u8>);

impl IdempotencyKey {
    /// The key of a request; an empty value counts as no key.
    pub fn parse(bytes: &[u8]) -> Result<Option<IdempotencyKey>> {
        if bytes.is_empty() {
            return Ok(None);
        }
        if bytes.len() > MAX_KEY_LEN {
            return Err(ServiceError::invalid(format!("Idempotency-Key must be at most {MAX_KEY_LEN} characters")));
        }
        Ok(Some(IdempotencyKey(bytes.to_vec())))
    }

    /// The key as stored: the operation and the key, so one key names one
    /// call per operation.
    pub fn scoped(&self, op: Op) -> Vec<u8> {
        let mut scoped = op.as_str().as_bytes().to_vec();
        scoped.push(0);
        scoped.extend_from_slice(&self.0);
        scoped
    }
}

/// The operations that take an idempotency key. Their names are part of
/// the stored format: renaming one forgets the answers stored under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Assert,
    AssertBatch,
    Digest,
    ConnectorEvents,
    AlertAck,
    AlertsEvaluate,
    ReportCreate,
    ReportRun,
    Conversation,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Assert => "assert",
            Op::AssertBatch => "assert_batch",
            Op::Digest => "digest",
            Op::ConnectorEvents => "connector_events",
            Op::AlertAck => "alert_ack",
            Op::AlertsEvaluate => "alerts_evaluate",
            Op::ReportCreate => "report_create",
            Op::ReportRun => "report_run",
            Op::Conversation => "conversation",
        }
    }
}

/// The answer of a call that may carry a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer<T> {
    /// This call did the work.
    Fresh(T),
    /// An earlier call with the same key did; this is its answer, success
    /// or error.
    Replayed(Result<T>),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Stored<T> {
    Ok(T),
    Error(StoredError),
}

#[derive(Serialize, Deserialize)]
struct StoredError {
    kind: String,
    message: String,
}

/// The stored form of a result, or `None` when it must not be stored (a
/// failure of the server, which a retry may get past).
pub fn encode<T: Serialize>(result: std::result::Result<&T, &ServiceError>) -> Option<Vec<u8>> {
    let stored = match result {
        Ok(v) => serde_json::to_vec(&Stored::Ok(v)),
        Err(e) if e.is_caused_by_request() => {
            serde_json::to_vec(&Stored::<()>::Error(StoredError { kind: kind(e).into(), message: e.message() }))
        }
        Err(_) => return None,
    };
    match stored {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            // Not stored: a retry does the work again rather than failing.
            tracing::error!(error = %e, "an idempotent answer does not serialize");
            None
        }
    }
}

/// A stored answer, read back.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    match serde_json::from_slice::<Stored<T>>(bytes) {
        Ok(Stored::Ok(v)) => Ok(v),
        Ok(Stored::Error(e)) => Err(from_kind(&e.kind, e.message)),
        Err(e) => Err(ServiceError::internal(format!("a stored idempotent answer does not decode: {e}"))),
    }
}

/// The variant's name: what is stored of an error besides its message.
fn kind(e: &ServiceError) -> &'static str {
    match e {
        ServiceError::Invalid(_) => "Invalid",
        ServiceError::Conflict(_) => "Conflict",
        ServiceError::FailedPrecondition(_) => "FailedPrecondition",
        ServiceError::NotFound(_) => "NotFound",
        ServiceError::Unauthorized => "Unauthorized",
        ServiceError::TooLarge(_) => "TooLarge",
        ServiceError::RateLimited(_) => "RateLimited",
        ServiceError::Unavailable(_) => "Unavailable",
        ServiceError::Upstream(_) => "Upstream",
        ServiceError::UpstreamTimeout(_) => "UpstreamTimeout",
        ServiceError::Internal => "Internal",
    }
}

fn from_kind(kind: &str, message: String) -> ServiceError {
    match kind {
        "Invalid" => ServiceError::Invalid(message),
        "Conflict" => ServiceError::Conflict(message),
        "FailedPrecondition" => ServiceError::FailedPrecondition(message),
        "NotFound" => ServiceError::NotFound(message),
        "Unauthorized" => ServiceError::Unauthorized,
        "TooLarge" => ServiceError::TooLarge(message),
        "RateLimited" => ServiceError::RateLimited(message),
        "Unavailable" => ServiceError::Unavailable(message),
        "Upstream" => ServiceError::Upstream(message),
        "UpstreamTimeout" => ServiceError::UpstreamTimeout(message),
        other => ServiceError::internal(format!("a stored idempotent answer has an unknown error kind {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stored_error_reads_back_as_itself() {
        let all = [
            ServiceError::Invalid("a".into()),
            ServiceError::Conflict("b".into()),
            ServiceError::FailedPrecondition("c".into()),
            ServiceError::NotFound("d".into()),
            ServiceError::Unauthorized,
            ServiceError::TooLarge("e".into()),
            ServiceError::RateLimited("f".into()),
        ];
        for e in all {
            let bytes = encode::<u8>(Err(&e)).expect("caused by the request: stored");
            assert_eq!(decode::<u8>(&bytes), Err(e));
        }
    }

    #[test]
    fn server_failures_are_not_stored() {
        for e in [
            ServiceError::Unavailable("x".into()),
            ServiceError::Upstream("y".into()),
            ServiceError::UpstreamTimeout("z".into()),
            ServiceError::Internal,
        ] {
            assert_eq!(encode::<u8>(Err(&e)), None, "{e:?}");
        }
    }

    #[test]
    fn a_result_reads_back_and_keys_are_scoped_by_operation() {
        let bytes = encode(Ok(&vec![1, 2, 3])).unwrap();
        assert_eq!(decode::<Vec<i32>>(&bytes), Ok(vec![1, 2, 3]));
        let key = IdempotencyKey::parse(b"k1").unwrap().unwrap();
        assert_ne!(key.scoped(Op::Assert), key.scoped(Op::AssertBatch));
        assert_eq!(IdempotencyKey::parse(b"").unwrap(), None);
        assert!(IdempotencyKey::parse(&[b'x'; MAX_KEY_LEN + 1]).is_err());
    }
}
