//! [`OrderedKv`] on redb: one redb table per [`Keyspace`] in one file,
//! `DIR/tempora.redb`, and each batch one redb write transaction (redb's
//! copy-on-write B-trees make a commit all-or-nothing across tables).
//!
//! Why a second backend: sled 0.34 keeps a record in memory of every page it
//! has ever paged out, and its leaves hold at most 16 keys, so its memory
//! grows with the store (about 100 bytes per fact version). redb keeps no
//! per-page state beyond its cache, which is bounded, so memory stays flat
//! however large the store grows.
//!
//! Durability: [`OrderedKv::apply`] commits with `Durability::None` (visible,
//! not yet on disk) and [`OrderedKv::sync`] commits an empty transaction with
//! `Durability::Immediate`, which writes every page of the earlier commits and
//! `fdatasync`s the file before it writes and syncs the new header. A crash
//! before that leaves the file at the last synced commit.
//!
//! Reads go through a [`View`]: a read transaction with every table open,
//! replaced after each commit. A reader takes the current view (one `Arc`
//! clone) and never waits for the writer.

use super::{Keyspace, KvIter, OrderedKv, WriteBatch};
use crate::error::StorageError;
use parking_lot::RwLock;
use redb::{ReadableDatabase, TableDefinition};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The store's file inside the data directory.
pub const FILE_NAME: &str = "tempora.redb";

type Table = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;
type Entry = (redb::AccessGuard<'static, &'static [u8]>, redb::AccessGuard<'static, &'static [u8]>);

fn definition(ks: Keyspace) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(ks.name())
}

pub struct RedbKv {
    db: redb::Database,
    view: RwLock<Arc<View>>,
    /// The store's file; `None` for a temporary store, which lives in memory
    /// and promises nothing after a crash.
    file: Option<PathBuf>,
}

/// The latest committed state, as readers see it.
struct View {
    tables: Vec<Table>,
}

impl View {
    fn open(db: &redb::Database) -> Result<View, StorageError> {
        let txn = db.begin_read().map_err(redb::Error::from)?;
        let tables = Keyspace::ALL
            .iter()
            .map(|ks| txn.open_table(definition(*ks)).map_err(|e| StorageError::from(redb::Error::from(e))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(View { tables })
    }
}

impl RedbKv {
    /// Opens (creating if needed) the store in `dir`, with a page cache of
    /// `cache_bytes`.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<Self, StorageError> {
        let path = dir.join(FILE_NAME);
        let created = !path.exists();
        let db = redb::Database::builder()
            .set_cache_size(usize::try_from(cache_bytes).unwrap_or(usize::MAX))
            .create(&path)
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => StorageError::Locked(dir.display().to_string()),
                other => StorageError::from(redb::Error::from(other)),
            })?;
        let kv = Self::init(db, Some(path))?;
        if created {
            // The new file's directory entry, so that the first synced
            // commit cannot be lost with the name that points to it.
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(kv)
    }

    /// A store that lives in memory, for tests.
    pub fn temporary() -> Result<Self, StorageError> {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(redb::Error::from)?;
        Self::init(db, None)
    }

    /// Creates the tables a new store lacks, so every view can open all of
    /// them, and takes the first view.
    fn init(db: redb::Database, file: Option<PathBuf>) -> Result<Self, StorageError> {
        let txn = db.begin_write().map_err(redb::Error::from)?;
        for ks in Keyspace::ALL {
            txn.open_table(definition(ks)).map_err(redb::Error::from)?;
        }
        txn.commit().map_err(redb::Error::from)?;
        let view = View::open(&db)?;
        Ok(RedbKv { db, view: RwLock::new(Arc::new(view)), file })
    }

    fn view(&self) -> Arc<View> {
        Arc::clone(&self.view.read())
    }
}

impl From<redb::Error> for StorageError {
    fn from(e: redb::Error) -> Self {
        match e {
            redb::Error::Io(io) => StorageError::Io(io),
            redb::Error::Corrupted(what) => StorageError::Corrupt(format!("redb reports corruption: {what}")),
            redb::Error::DatabaseAlreadyOpen => StorageError::Locked("the store's file".into()),
            other => StorageError::Backend(other.to_string()),
        }
    }
}

fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl OrderedKv for RedbKv {
    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let view = self.view();
        let found = view.tables[ks.index()].get(key).map_err(redb::Error::from)?;
        Ok(found.map(|v| v.value().to_vec()))
    }

    fn scan(&self, ks: Keyspace, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, reverse: bool) -> KvIter<'_> {
        let view = self.view();
        let range = match view.tables[ks.index()].range::<&[u8]>((as_slice(&lo), as_slice(&hi))) {
            Ok(range) => range,
            Err(e) => return Box::new(std::iter::once(Err(redb::Error::from(e).into()))),
        };
        let map = |r: Result<Entry, redb::StorageError>| {
            r.map(|(k, v)| (k.value().to_vec(), v.value().to_vec()))
                .map_err(|e| StorageError::from(redb::Error::from(e)))
        };
        if reverse {
            Box::new(range.rev().map(map))
        } else {
            Box::new(range.map(map))
        }
    }

    fn apply(&self, batch: WriteBatch) -> Result<(), StorageError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut txn = self.db.begin_write().map_err(redb::Error::from)?;
        txn.set_durability(redb::Durability::None).map_err(redb::Error::from)?;
        {
            // Only the tables the batch touches are opened.
            let mut tables: Vec<Option<redb::Table<&[u8], &[u8]>>> = Keyspace::ALL.iter().map(|_| None).collect();
            for (ks, key, value) in &batch.ops {
                let slot = &mut tables[ks.index()];
                if slot.is_none() {
                    *slot = Some(txn.open_table(definition(*ks)).map_err(redb::Error::from)?);
                }
                let table = slot.as_mut().expect("opened above");
                match value {
                    Some(v) => {
                        table.insert(key.as_slice(), v.as_slice()).map_err(redb::Error::from)?;
                    }
                    None => {
                        table.remove(key.as_slice()).map_err(redb::Error::from)?;
                    }
                }
            }
        }
        txn.commit().map_err(redb::Error::from)?;
        let view = View::open(&self.db)?;
        *self.view.write() = Arc::new(view);
        Ok(())
    }

    fn sync(&self) -> Result<(), StorageError> {
        if self.file.is_none() {
            return Ok(());
        }
        let mut txn = self.db.begin_write().map_err(redb::Error::from)?;
        txn.set_durability(redb::Durability::Immediate).map_err(redb::Error::from)?;
        txn.commit().map_err(redb::Error::from)?;
        Ok(())
    }

    fn size_on_disk(&self) -> Option<u64> {
        std::fs::metadata(self.file.as_ref()?).ok().map(|m| m.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(ks: Keyspace, k: &[u8], v: &[u8]) -> WriteBatch {
        let mut b = WriteBatch::default();
        b.put(ks, k.to_vec(), v.to_vec());
        b
    }

    fn keys(it: KvIter<'_>) -> Vec<Vec<u8>> {
        it.map(|r| r.unwrap().0).collect()
    }

    #[test]
    fn scans_in_both_directions_and_empty_ranges_yield_nothing() {
        let kv = RedbKv::temporary().unwrap();
        let mut b = WriteBatch::default();
        for k in [b"a", b"b", b"c", b"d"] {
            b.put(Keyspace::Sp, k.to_vec(), k.to_vec());
        }
        b.put(Keyspace::Ps, b"b".to_vec(), b"other keyspace".to_vec());
        kv.apply(b).unwrap();
        let range = |lo: Bound<&[u8]>, hi: Bound<&[u8]>, rev| {
            keys(kv.scan(Keyspace::Sp, lo.map(|k| k.to_vec()), hi.map(|k| k.to_vec()), rev))
        };
        assert_eq!(range(Bound::Included(b"b"), Bound::Excluded(b"d"), false), [b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(
            range(Bound::Excluded(b"a"), Bound::Included(b"d"), true),
            [b"d".to_vec(), b"c".to_vec(), b"b".to_vec()]
        );
        assert_eq!(range(Bound::Unbounded, Bound::Unbounded, false).len(), 4);
        assert!(range(Bound::Included(b"c"), Bound::Excluded(b"b"), false).is_empty());
        assert!(range(Bound::Included(b"c"), Bound::Excluded(b"c"), true).is_empty());
        assert!(range(Bound::Excluded(b"c"), Bound::Included(b"c"), false).is_empty());
        assert_eq!(kv.get(Keyspace::Ps, b"b").unwrap().as_deref(), Some(&b"other keyspace"[..]));
        assert_eq!(kv.get(Keyspace::Ps, b"a").unwrap(), None);
    }

    #[test]
    fn a_scan_keeps_the_state_it_started_on_while_writes_go_on() {
        let kv = RedbKv::temporary().unwrap();
        kv.apply(put(Keyspace::Log, b"1", b"x")).unwrap();
        let mut it = kv.scan(Keyspace::Log, Bound::Unbounded, Bound::Unbounded, false);
        let mut b = put(Keyspace::Log, b"2", b"y");
        b.delete(Keyspace::Log, b"1".to_vec());
        kv.apply(b).unwrap();
        assert_eq!(it.next().unwrap().unwrap().0, b"1");
        assert!(it.next().is_none());
        assert_eq!(keys(kv.scan(Keyspace::Log, Bound::Unbounded, Bound::Unbounded, false)), [b"2".to_vec()]);
    }

    #[test]
    fn synced_writes_survive_a_reopen_and_a_held_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
        let mut b = put(Keyspace::Versions, b"v", b"1");
        b.put(Keyspace::Meta, b"m".to_vec(), b"2".to_vec());
        kv.apply(b).unwrap();
        kv.sync().unwrap();
        assert!(kv.size_on_disk().unwrap() > 0);
        match RedbKv::open(dir.path(), 1 << 20) {
            Err(StorageError::Locked(d)) => assert!(d.contains(&dir.path().display().to_string())),
            Err(e) => panic!("expected Locked, got {e:?}"),
            Ok(_) => panic!("a held store opened twice"),
        }
        drop(kv);
        let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(kv.get(Keyspace::Versions, b"v").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(kv.get(Keyspace::Meta, b"m").unwrap().as_deref(), Some(&b"2"[..]));
    }
}
