//! The PostgreSQL store's part in dumps: what `dump.rs` needs of it, and
//! `tempora restore`'s way in. Apart from `dump.rs`, which the store's
//! module calls, so that neither refers back to the other.

use super::super::shared::Shared;
use super::super::PostgresStore;
use crate::store::{BackupSummary, Result};
use std::sync::Arc;

impl super::Store for PostgresStore {
    fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }

    fn runtime(&self) -> &tokio::runtime::Handle {
        &self.handle
    }
}

impl PostgresStore {
    /// Loads a backup (of either store) into this store's database, which
    /// must hold no tempora data yet: a database with tenants, facts,
    /// replies or service records is refused and left as it was. The whole
    /// file is checked before the database is touched, and everything is
    /// loaded in one transaction, so a damaged file or a failure part way
    /// leaves the database empty. Servers on the database go on numbering
    /// transactions after the backup's last one.
    pub fn restore(&self, input: &mut dyn std::io::Read) -> Result<BackupSummary> {
        super::load::restore(self, input)
    }
}
