//! [`OrderedKv`] on sled 0.34: one sled `Tree` per [`Keyspace`], atomic batches
//! through a multi-tree sled transaction (sled seals every write of the
//! transaction into one log batch, so recovery sees all of them or none).
//!
//! [`SledKv::sync`] finishes what sled's flush leaves undone. On Linux, sled
//! 0.34's `Db::flush` writes its log buffers with `pwrite` and
//! `sync_file_range`, which starts and waits for the data's write-back but
//! never flushes the file's metadata (its size grows as the log grows) or the
//! drive's write cache, and it writes large pages as separate blob files
//! without syncing them at all. That survives the process being killed, not
//! the machine losing power. So after the flush, [`DurableFiles`] runs
//! `fdatasync` on the log file and `fsync` on every blob file it has not
//! synced yet, and on the blob directory when one was added.

use super::{KvIter, Keyspace, OrderedKv, WriteBatch};
use crate::error::StorageError;
use parking_lot::RwLock;
use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub struct SledKv {
    db: sled::Db,
    trees: Vec<sled::Tree>,
    /// `None` for a temporary store, which promises nothing after a crash.
    files: Option<Mutex<DurableFiles>>,
}

/// The files of a sled directory that [`SledKv::sync`] makes durable.
struct DurableFiles {
    /// sled's log and page store: `DIR/db`.
    log: File,
    blobs: PathBuf,
    /// Blob files already synced (sled never rewrites one; it deletes them).
    synced_blobs: HashSet<OsString>,
}

impl DurableFiles {
    /// Opens the files of the sled directory `dir`, and syncs everything sled
    /// wrote while opening (a new store's files and their directory entries).
    fn open(dir: &Path) -> std::io::Result<Self> {
        let log = File::options().read(true).write(true).open(dir.join("db"))?;
        let mut files = DurableFiles { log, blobs: dir.join("blobs"), synced_blobs: HashSet::new() };
        files.sync()?;
        match File::open(dir.join("conf")) {
            Ok(conf) => conf.sync_all()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        File::open(dir)?.sync_all()?;
        Ok(files)
    }

    /// Runs after sled's flush: everything that flush wrote is then durable.
    fn sync(&mut self) -> std::io::Result<()> {
        self.log.sync_data()?;
        let mut present = HashSet::new();
        let mut added = false;
        // sled does not say which blobs a flush wrote, so list them: one
        // directory read per sync, almost always of a handful of names.
        let listing = match std::fs::read_dir(&self.blobs) {
            Ok(listing) => listing,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in listing {
            let name = entry?.file_name();
            if !self.synced_blobs.contains(&name) {
                match File::open(self.blobs.join(&name)) {
                    Ok(f) => f.sync_all()?,
                    // sled deletes blobs it no longer needs, at any time.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                }
                added = true;
            }
            present.insert(name);
        }
        if added {
            File::open(&self.blobs)?.sync_all()?;
        }
        self.synced_blobs = present;
        Ok(())
    }
}

impl SledKv {
    /// Opens (creating if needed) the store in `dir`.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<Self, StorageError> {
        // A handle of this process that was just dropped can hold the
        // directory's lock for a few milliseconds more (sled's I/O threads
        // finish their last writes): wait that out. A directory held by a
        // live store, in this process or another, is still refused, after
        // `LOCK_WAIT`.
        const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
        let started = std::time::Instant::now();
        loop {
            let opened = sled::Config::new()
                .path(dir)
                .cache_capacity(cache_bytes)
                // The engine decides when to sync (group commit); sled's own
                // background flusher only adds extra fsyncs.
                .flush_every_ms(None)
                .mode(sled::Mode::HighThroughput)
                .open();
            match opened {
                Ok(db) => return Self::from_db(db, Some(DurableFiles::open(dir)?)),
                Err(sled::Error::Io(io)) if is_lock_held(&io) => {
                    if started.elapsed() >= LOCK_WAIT {
                        return Err(StorageError::Locked(dir.display().to_string()));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(other) => return Err(StorageError::from(other)),
            }
        }
    }

    /// A store that lives in memory and a temporary directory, for tests.
    pub fn temporary() -> Result<Self, StorageError> {
        let db = sled::Config::new().temporary(true).flush_every_ms(None).open()?;
        Self::from_db(db, None)
    }

    fn from_db(db: sled::Db, files: Option<DurableFiles>) -> Result<Self, StorageError> {
        let trees = Keyspace::ALL
            .iter()
            .map(|ks| db.open_tree(ks.name()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SledKv { db, trees, files: files.map(Mutex::new) })
    }

    fn tree(&self, ks: Keyspace) -> &sled::Tree {
        &self.trees[ks.index()]
    }
}

impl From<sled::Error> for StorageError {
    fn from(e: sled::Error) -> Self {
        match e {
            sled::Error::Io(io) => StorageError::Io(io),
            sled::Error::Corruption { at, .. } => {
                StorageError::Corrupt(format!("sled reports corruption at {at:?}"))
            }
            other => StorageError::Backend(other.to_string()),
        }
    }
}

fn to_sled_bound(b: Bound<Vec<u8>>) -> Bound<sled::IVec> {
    match b {
        Bound::Included(k) => Bound::Included(k.into()),
        Bound::Excluded(k) => Bound::Excluded(k.into()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl OrderedKv for SledKv {
    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.tree(ks).get(key)?.map(|v| v.to_vec()))
    }

    fn scan(&self, ks: Keyspace, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, reverse: bool) -> KvIter<'_> {
        let range = (to_sled_bound(lo), to_sled_bound(hi));
        let iter = self.tree(ks).range::<sled::IVec, _>(range);
        let map = |r: sled::Result<(sled::IVec, sled::IVec)>| {
            r.map(|(k, v)| (k.to_vec(), v.to_vec())).map_err(StorageError::from)
        };
        if reverse {
            Box::new(iter.rev().map(map))
        } else {
            Box::new(iter.map(map))
        }
    }

    /// A sled commit is visible as it happens, so `publish` covers all of it.
    fn apply_published(&self, batch: WriteBatch, publish: &RwLock<()>) -> Result<(), StorageError> {
        if batch.is_empty() {
            return Ok(());
        }
        let _no_readers = publish.write();
        // Group the mutations per tree; only trees that are touched join the
        // transaction, which keeps its lock set small.
        let mut per_tree: Vec<Option<sled::Batch>> = (0..Keyspace::ALL.len()).map(|_| None).collect();
        for (ks, key, value) in batch.ops {
            let b = per_tree[ks.index()].get_or_insert_with(sled::Batch::default);
            match value {
                Some(v) => b.insert(key, v),
                None => b.remove(key),
            }
        }
        let (trees, batches): (Vec<sled::Tree>, Vec<sled::Batch>) = per_tree
            .into_iter()
            .enumerate()
            .filter_map(|(i, b)| b.map(|b| (self.trees[i].clone(), b)))
            .unzip();
        if trees.len() == 1 {
            return Ok(trees[0].apply_batch(batches.into_iter().next().expect("one batch"))?);
        }
        use sled::transaction::{TransactionError, Transactional};
        trees
            .as_slice()
            .transaction(|views| {
                for (view, b) in views.iter().zip(&batches) {
                    view.apply_batch(b)?;
                }
                Ok::<(), sled::transaction::ConflictableTransactionError<()>>(())
            })
            .map_err(|e| match e {
                TransactionError::Storage(s) => StorageError::from(s),
                TransactionError::Abort(()) => StorageError::Backend("transaction aborted".into()),
            })
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.db.flush()?;
        if let Some(files) = &self.files {
            files.lock().unwrap_or_else(|e| e.into_inner()).sync()?;
        }
        Ok(())
    }

    fn size_on_disk(&self) -> Option<u64> {
        self.db.size_on_disk().ok()
    }
}

/// Whether sled failed to open because the directory's lock is held. sled
/// 0.34 reports it as an `Other` error whose message carries the OS's
/// `WouldBlock`.
fn is_lock_held(io: &std::io::Error) -> bool {
    io.kind() == std::io::ErrorKind::WouldBlock || io.to_string().contains("could not acquire lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_released_moments_later_opens_and_a_held_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = SledKv::open(dir.path(), 1 << 20).unwrap();
        // Held for the whole wait: refused, with the error that names it.
        let started = std::time::Instant::now();
        match SledKv::open(dir.path(), 1 << 20) {
            Err(StorageError::Locked(d)) => assert!(d.contains(&dir.path().display().to_string())),
            Err(e) => panic!("expected Locked, got {e:?}"),
            Ok(_) => panic!("a held directory opened twice"),
        }
        assert!(started.elapsed() >= std::time::Duration::from_millis(900));
        // Released while the second open waits: it opens.
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(first);
        });
        let second = SledKv::open(dir.path(), 1 << 20);
        release.join().unwrap();
        assert!(second.is_ok(), "{:?}", second.err());
    }

    #[test]
    fn each_blob_file_is_synced_once_and_forgotten_once_sled_deletes_it() {
        let dir = tempfile::tempdir().unwrap();
        let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
        let blobs = dir.path().join("blobs");
        let synced = || -> Vec<String> {
            let files = kv.files.as_ref().expect("a store on disk syncs its files").lock().unwrap();
            let mut names: Vec<String> = files.synced_blobs.iter().map(|n| n.to_string_lossy().into_owned()).collect();
            names.sort();
            names
        };
        std::fs::write(blobs.join("100"), b"a large page").unwrap();
        std::fs::write(blobs.join("200"), b"another").unwrap();
        kv.sync().unwrap();
        assert_eq!(synced(), ["100", "200"]);
        std::fs::remove_file(blobs.join("100")).unwrap();
        std::fs::write(blobs.join("300"), b"a third").unwrap();
        kv.sync().unwrap();
        assert_eq!(synced(), ["200", "300"]);
        assert!(SledKv::temporary().unwrap().files.is_none());
    }
}
