//! Where the bytes of a redb store go: each table's records and pages, the
//! file's free pages and the journal (`tempora size`, docs/storage.md "Where
//! the bytes go").
//!
//! Read from redb's own accounting of each table (`TableStats`) through a
//! read-only open: nothing is written, not even redb's header. Like
//! compaction it needs the store closed. redb refuses a read-only open of a
//! file a crash left to repair; a server started and stopped once repairs it
//! (and replays the journal into it).

use super::compact::allocated_bytes;
use super::{definition, FILE_NAME};
use crate::error::StorageError;
use crate::kv::{journal, Keyspace};
use redb::{ReadableDatabase, ReadableTableMetadata};
use std::path::Path;

/// One table's share of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableUsage {
    pub keyspace: Keyspace,
    pub entries: u64,
    /// Bytes of keys and values, without redb's per-entry and per-page overhead.
    pub stored_bytes: u64,
    /// Bytes of the table's pages, leaves and branches.
    pub page_bytes: u64,
    /// Bytes of those pages that hold nothing (half-empty leaves after splits).
    pub fragmented_bytes: u64,
}

/// The whole store file and its journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUsage {
    pub tables: Vec<TableUsage>,
    /// The file's length; redb grows it ahead of use, so part may be holes.
    pub file_bytes: u64,
    /// Blocks the file takes on the disk (as `du` counts them).
    pub file_disk_bytes: u64,
    /// The file's bytes on the disk outside the tables' pages: free pages
    /// (freed by copy-on-write commits, reused before the file grows again)
    /// and redb's own few (its table of tables, its allocator's state).
    pub outside_tables_bytes: u64,
    /// Both journal files, as allocated on the disk.
    pub journal_disk_bytes: u64,
}

impl StoreUsage {
    pub fn table(&self, ks: Keyspace) -> Option<&TableUsage> {
        self.tables.iter().find(|t| t.keyspace == ks)
    }

    /// Every table's pages.
    pub fn page_bytes(&self) -> u64 {
        self.tables.iter().map(|t| t.page_bytes).sum()
    }

    /// Fact versions stored (the entries of `versions`).
    pub fn fact_versions(&self) -> u64 {
        self.table(Keyspace::Versions).map_or(0, |t| t.entries)
    }

    /// The store on the disk: the file's blocks and the journal's.
    pub fn disk_bytes(&self) -> u64 {
        self.file_disk_bytes + self.journal_disk_bytes
    }
}

/// The usage of the redb store in `dir`, which no process may have open.
pub fn usage(dir: &Path) -> Result<StoreUsage, StorageError> {
    let path = dir.join(FILE_NAME);
    if !path.exists() {
        return Err(StorageError::Backend(format!("{} holds no redb store ({FILE_NAME})", dir.display())));
    }
    let db = redb::Database::builder()
        // Every page is read once; a cache would hold nothing read again.
        .set_cache_size(16 << 20)
        .open_read_only(&path)
        .map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StorageError::Locked(dir.display().to_string()),
            redb::DatabaseError::RepairAborted => StorageError::Backend(format!(
                "{} was left by a crash and needs repair: start the server on it and stop it once",
                path.display()
            )),
            other => StorageError::from(redb::Error::from(other)),
        })?;
    let txn = db.begin_read().map_err(redb::Error::from)?;
    let mut tables = Vec::new();
    for ks in Keyspace::ALL {
        let table = txn.open_table(definition(ks)).map_err(redb::Error::from)?;
        let stats = table.stats().map_err(redb::Error::from)?;
        tables.push(TableUsage {
            keyspace: ks,
            entries: table.len().map_err(redb::Error::from)?,
            stored_bytes: stats.stored_bytes(),
            // A page is its records, redb's offsets and branch keys, and
            // what it leaves empty; large pages count whole.
            page_bytes: stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes(),
            fragmented_bytes: stats.fragmented_bytes(),
        });
    }
    let in_tables: u64 = tables.iter().map(|t| t.page_bytes).sum();
    let file_disk_bytes = allocated_bytes(&path)?;
    Ok(StoreUsage {
        tables,
        file_bytes: std::fs::metadata(&path)?.len(),
        file_disk_bytes,
        outside_tables_bytes: file_disk_bytes.saturating_sub(in_tables),
        journal_disk_bytes: journal::FILE_NAMES.iter().map(|n| allocated_bytes(&dir.join(n)).unwrap_or(0)).sum(),
    })
}
