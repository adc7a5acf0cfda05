//! Offline compaction: the store rewritten in key order into a new file,
//! which then replaces the old one.
//!
//! Why a store needs it: redb splits a full leaf in the middle. When keys
//! arrive in ascending runs that land inside a table rather than at its end
//! (an import of `Person:1000000`, `Person:1000001`, ... into a table that
//! already holds `Person:2...`), every split leaves a half-full leaf behind
//! that the run never comes back to. After a 10M-fact import the index
//! tables were about half full: `idx_sp` took 825k pages for 1.7 GB of
//! records. Written again from an empty file in key order, each table takes
//! redb's append path (a full leaf is left full and a new one started), so
//! its pages are packed; the same table took 468k pages. Random reads that
//! miss the caches then read half as many pages from disk.
//!
//! The copy is checked before it is used: a BLAKE3 digest of every record
//! read from the old store must equal the digest of the new file read back.
//! Until the new file is renamed over the old one, the old store is
//! untouched and still locked, so a failure or a crash at any point leaves
//! the old store as it was (a leftover new file is removed by the next
//! compaction and never opened otherwise).

use super::{create_tables, definition, RedbKv, FILE_NAME, JOURNAL_SEQ};
use crate::error::StorageError;
use crate::kv::{journal, Keyspace, OrderedKv};
use redb::ReadableDatabase;
use std::fs::File;
use std::ops::Bound;
use std::path::Path;
use std::time::{Duration, Instant};

/// The new file while it is written, beside the store's.
pub const COMPACTING_FILE: &str = "tempora.redb.compacting";

/// Bytes of records per write transaction of the copy: large enough that
/// commits cost little, small enough that redb's dirty pages stay modest.
const COPY_TXN_BYTES: usize = 64 << 20;

/// Page cache of both stores during the copy: every page is read or written
/// once, in order, so a large cache would buy nothing.
const COPY_CACHE_BYTES: u64 = 64 << 20;

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactSummary {
    /// Records copied, over every keyspace.
    pub records: u64,
    /// Disk space of the store's file before and after (allocated blocks,
    /// as `du` counts them).
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub elapsed: Duration,
}

/// Rewrites the redb store in `dir` packed, in key order. No server may have
/// the store open: its lock makes this fail with [`StorageError::Locked`].
pub fn compact(dir: &Path) -> Result<CompactSummary, StorageError> {
    let started = Instant::now();
    let path = dir.join(FILE_NAME);
    let scratch = dir.join(COMPACTING_FILE);
    if !path.exists() {
        return Err(StorageError::Backend(format!("{} holds no redb store ({FILE_NAME})", dir.display())));
    }
    // Opening replays the journal into the file, so the copy has every
    // acknowledged write, and leaves both journal files empty.
    // (No warm pass: the copy reads every table once, in key order.)
    let mut source = RedbKv::open(dir, COPY_CACHE_BYTES)?.warm_cache(false);
    // The new file starts with no journal behind it: the old store's must be
    // empty (opening it replayed and emptied them), or the next open would
    // replay batches numbered for the old file.
    for name in journal::FILE_NAMES {
        let len = std::fs::metadata(dir.join(name)).map(|m| m.len()).unwrap_or(0);
        if len != 0 {
            return Err(StorageError::Backend(format!(
                "{name} holds {len} bytes after the store was opened; the store is unchanged"
            )));
        }
    }
    if scratch.exists() {
        // A compaction that stopped before its rename: never in use.
        std::fs::remove_file(&scratch)?;
    }
    let bytes_before = allocated_bytes(&path)?;
    let copied = match copy_packed(&source, &scratch).and_then(|written| {
        let read_back = digest_of(&scratch)?;
        if read_back != written {
            return Err(StorageError::Corrupt(format!(
                "the compacted copy reads back differently ({} records written, {} read back); the store is unchanged",
                written.records, read_back.records
            )));
        }
        Ok(written)
    }) {
        Ok(copied) => copied,
        Err(e) => {
            let _ = std::fs::remove_file(&scratch);
            return Err(e);
        }
    };
    // Swapped while the old store is still open and locked, so no server can
    // open the old file in between; the old handle then closes without
    // writing anything (there is nothing to checkpoint).
    std::fs::rename(&scratch, &path)?;
    File::open(dir)?.sync_all()?;
    source.skip_checkpoint_on_close = true;
    drop(source);
    Ok(CompactSummary {
        records: copied.records,
        bytes_before,
        bytes_after: allocated_bytes(&path)?,
        elapsed: started.elapsed(),
    })
}

/// A count and a digest of a store's records, keyspace by keyspace.
#[derive(Debug, PartialEq, Eq)]
struct Digest {
    records: u64,
    hash: [u8; 32],
}

/// Feeds one record to `hash`, lengths included, so that no two different
/// record streams hash the same bytes.
fn hash_record(hash: &mut blake3::Hasher, ks: Keyspace, key: &[u8], value: &[u8]) {
    hash.update(&[ks.index() as u8]);
    hash.update(&(key.len() as u64).to_be_bytes());
    hash.update(key);
    hash.update(&(value.len() as u64).to_be_bytes());
    hash.update(value);
}

/// Writes every record of `source` into a new redb file at `path`, table by
/// table in key order, and syncs it.
fn copy_packed(source: &RedbKv, path: &Path) -> Result<Digest, StorageError> {
    let db = redb::Database::builder()
        .set_cache_size(COPY_CACHE_BYTES as usize)
        .create(path)
        .map_err(redb::Error::from)?;
    create_tables(&db)?;
    let mut hash = blake3::Hasher::new();
    let mut records = 0u64;
    for ks in Keyspace::ALL {
        let mut items = source.scan(ks, Bound::Unbounded, Bound::Unbounded, false).peekable();
        while items.peek().is_some() {
            let mut txn = db.begin_write().map_err(redb::Error::from)?;
            // Durable once, at the end: a crash before that leaves a file
            // nobody opens.
            txn.set_durability(redb::Durability::None).map_err(redb::Error::from)?;
            {
                let mut table = txn.open_table(definition(ks)).map_err(redb::Error::from)?;
                let mut bytes = 0usize;
                while bytes < COPY_TXN_BYTES {
                    let Some(item) = items.next() else { break };
                    let (k, v) = item?;
                    hash_record(&mut hash, ks, &k, &v);
                    table.insert(&*k, &*v).map_err(redb::Error::from)?;
                    bytes += k.len() + v.len();
                    records += 1;
                }
            }
            txn.commit().map_err(redb::Error::from)?;
        }
    }
    // A durable commit makes every non-durable one before it durable too.
    let mut txn = db.begin_write().map_err(redb::Error::from)?;
    txn.set_durability(redb::Durability::Immediate).map_err(redb::Error::from)?;
    {
        // No journal batch is in the new file: the next open starts at 1.
        let mut seq = txn.open_table(JOURNAL_SEQ).map_err(redb::Error::from)?;
        seq.insert("seq", 0u64).map_err(redb::Error::from)?;
    }
    txn.commit().map_err(redb::Error::from)?;
    drop(db);
    File::open(path)?.sync_all()?;
    Ok(Digest { records, hash: *hash.finalize().as_bytes() })
}

/// The digest of every record in the redb file at `path`, read the way the
/// store reads it.
fn digest_of(path: &Path) -> Result<Digest, StorageError> {
    let db = redb::Database::builder()
        .set_cache_size(COPY_CACHE_BYTES as usize)
        .open(path)
        .map_err(|e| StorageError::from(redb::Error::from(e)))?;
    let txn = db.begin_read().map_err(redb::Error::from)?;
    let mut hash = blake3::Hasher::new();
    let mut records = 0u64;
    for ks in Keyspace::ALL {
        let table = txn.open_table(definition(ks)).map_err(redb::Error::from)?;
        for item in table.range::<&[u8]>(..).map_err(redb::Error::from)? {
            let (k, v) = item.map_err(redb::Error::from)?;
            hash_record(&mut hash, ks, k.value(), v.value());
            records += 1;
        }
    }
    Ok(Digest { records, hash: *hash.finalize().as_bytes() })
}

/// Disk space a file takes: its allocated blocks (redb's file is sparse).
pub(super) fn allocated_bytes(path: &Path) -> Result<u64, StorageError> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(path)?.blocks() * 512)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::{KvPair, WriteBatch};

    /// Every record of every keyspace, in order.
    fn everything(kv: &RedbKv) -> Vec<(Keyspace, KvPair)> {
        let mut out = Vec::new();
        for ks in Keyspace::ALL {
            for item in kv.scan(ks, Bound::Unbounded, Bound::Unbounded, false) {
                out.push((ks, item.unwrap()));
            }
        }
        out
    }

    /// Records the way an import lays them down: subjects numbered in
    /// decimal arrive in numeric order, which is not key order, so each
    /// checkpoint inserts ascending runs inside the table (`Person:1000..`
    /// between `Person:1` and `Person:2`), the pattern that leaves half-full
    /// leaves behind.
    fn import(kv: &RedbKv, from: u32, to: u32) {
        for chunk in (from..to).collect::<Vec<_>>().chunks(500) {
            let mut b = WriteBatch::default();
            for i in chunk {
                let value = format!("{i:0>150}").into_bytes();
                b.put(Keyspace::Sp, format!("Person:{i}|works_at").into_bytes(), value.clone());
                b.put(Keyspace::Versions, format!("{i:0>12}").into_bytes(), value);
            }
            kv.apply(b).unwrap();
        }
        kv.sync().unwrap();
    }

    #[test]
    fn a_compacted_store_holds_every_record_in_fewer_pages_and_the_journal_is_replayed_first() {
        let dir = tempfile::tempdir().unwrap();
        let kv = RedbKv::open(dir.path(), 8 << 20).unwrap().checkpoint_every(256 << 10);
        import(&kv, 0, 60_000);
        drop(kv);
        // Written and synced but never checkpointed: only the journal holds it.
        let mut kv = RedbKv::open(dir.path(), 8 << 20).unwrap();
        let mut b = WriteBatch::default();
        b.put(Keyspace::Log, b"after".to_vec(), b"the last checkpoint".to_vec());
        b.delete(Keyspace::Sp, b"Person:7|works_at".to_vec());
        kv.apply(b).unwrap();
        kv.sync().unwrap();
        let before = everything(&kv);
        kv.skip_checkpoint_on_close = true;
        drop(kv);

        let done = compact(dir.path()).unwrap();
        assert_eq!(done.records, before.len() as u64);
        assert!(
            done.bytes_after * 10 < done.bytes_before * 8,
            "{} bytes before, {} after: not packed",
            done.bytes_before,
            done.bytes_after
        );
        assert!(!dir.path().join(COMPACTING_FILE).exists());
        let kv = RedbKv::open(dir.path(), 8 << 20).unwrap();
        let after = everything(&kv);
        assert!(after == before, "the compacted store differs ({} records, {} before)", after.len(), before.len());
        assert_eq!(kv.get(Keyspace::Log, b"after").unwrap().as_deref(), Some(&b"the last checkpoint"[..]));
        assert_eq!(kv.get(Keyspace::Sp, b"Person:7|works_at").unwrap(), None);

        // It goes on as a store: writes after it survive a crash.
        let mut later = WriteBatch::default();
        later.put(Keyspace::Log, b"later".to_vec(), b"x".to_vec());
        kv.apply(later).unwrap();
        kv.sync().unwrap();
        let mut kv = kv;
        kv.skip_checkpoint_on_close = true;
        drop(kv);
        let kv = RedbKv::open(dir.path(), 8 << 20).unwrap();
        assert_eq!(kv.get(Keyspace::Log, b"later").unwrap().as_deref(), Some(&b"x"[..]));
        assert_eq!(everything(&kv).len(), before.len() + 1);
    }

    #[test]
    fn a_store_in_use_is_refused_and_a_leftover_copy_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let kv = RedbKv::open(dir.path(), 8 << 20).unwrap();
        import(&kv, 0, 1_000);
        match compact(dir.path()) {
            Err(StorageError::Locked(_)) => {}
            other => panic!("expected the store's lock to refuse it, got {other:?}"),
        }
        let before = everything(&kv);
        drop(kv);
        // What a compaction stopped by a crash before its rename leaves.
        std::fs::write(dir.path().join(COMPACTING_FILE), b"half a copy").unwrap();
        compact(dir.path()).unwrap();
        assert!(!dir.path().join(COMPACTING_FILE).exists());
        assert!(everything(&RedbKv::open(dir.path(), 8 << 20).unwrap()) == before);

        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(compact(empty.path()), Err(StorageError::Backend(what)) if what.contains("no redb store")));
    }
}
