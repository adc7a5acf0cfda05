//! Errors. `StorageError` is what the key-value layer can fail with;
//! `EngineError` is what an engine operation reports to its caller. The service
//! maps `EngineError` to wire errors with an exhaustive match, so adding a
//! variant here forces every transport to decide how to show it.

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StorageError {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("data is corrupt: {0}")]
    Corrupt(String),
    #[error("storage backend error: {0}")]
    Backend(String),
    #[error("the data directory {0} is in use by another process")]
    Locked(String),
    /// Refused before writing: free space is below the configured reserve.
    #[error(
        "the data directory's disk has {free} bytes free, below the {reserve} bytes kept in reserve; \
         writes are refused until space is freed (reads go on)"
    )]
    NoSpace { free: u64, reserve: u64 },
    /// Refused before writing: the filesystem is mounted read-only.
    #[error(
        "the data directory {0} is on a read-only filesystem; writes are refused until it is writable again \
         (reads go on)"
    )]
    ReadOnly(String),
    /// An earlier write failed in the backend, which then takes no more.
    #[error(
        "the store stopped taking writes after a failed write ({0}); reads go on; restart the server once the \
         cause is fixed"
    )]
    Failed(String),
    /// A store on a database server could not reach it, or lost it during
    /// the request; the request was not applied (or, for a write whose
    /// commit was cut off, its outcome is unknown: a retry under an
    /// idempotency key is safe). Reachable again, the store goes on.
    #[error("the database is unreachable: {0}")]
    Unreachable(String),
}

/// Not `#[non_exhaustive]` on purpose: the service matches it exhaustively, so
/// a new variant cannot compile until every transport decides how to show it.
#[derive(Debug, Error)]
pub enum EngineError {
    /// The request is malformed: the message says which field and why.
    #[error("{0}")]
    Invalid(String),
    /// A `strict` predicate already has a different active value over an
    /// overlapping valid interval. Nothing was written.
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    NotFound(String),
    /// The data directory was written by a newer format than this build reads.
    #[error("{0}")]
    FormatTooNew(String),
    /// The engine has shut down, or its writer stopped after a storage failure.
    #[error("the engine is closed: {0}")]
    Closed(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl EngineError {
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        EngineError::Invalid(msg.into())
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
