//! The whole store to and from the backup file format (`tempora backup`,
//! `tempora restore`), so data moves between the embedded engine and
//! PostgreSQL with ids, tx and history unchanged.

use super::{BackupSummary, EngineError, PostgresStore, Result};

/// A consistent copy of the whole store, in the embedded engine's backup format.
pub(super) fn backup(_store: &PostgresStore, _out: &mut dyn std::io::Write) -> Result<BackupSummary> {
    Err(EngineError::Invalid(
        "a PostgreSQL store is backed up by PostgreSQL (pg_dump, or the server's own backups); see docs/scale-out.md"
            .into(),
    ))
}
