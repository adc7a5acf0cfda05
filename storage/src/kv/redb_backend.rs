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
//! Durability: [`OrderedKv::apply`] appends the batch to the journal
//! (`kv/journal.rs`, `DIR/tempora.journal`) and to the [`Pending`] layer in
//! memory, which readers see over redb's state; redb itself is not written.
//! [`OrderedKv::sync`] is one `fdatasync` of the journal. Once the journal
//! holds [`CHECKPOINT_BYTES`], the next batch is the checkpoint: every
//! pending write goes to redb in one transaction, in key order, committed
//! with `Durability::Immediate` (redb writes the changed pages, syncs, then
//! writes and syncs its header), and the journal and the layer start over.
//! One transaction of tens of thousands of writes costs redb a third per
//! write of what batches of fifty do (`kv/pending.rs` says why). Each
//! checkpoint also stores the last batch's journal number, so a reopen
//! replays exactly the journal records the store lacks; closing the store
//! checkpoints what is pending, so a clean restart replays nothing.
//!
//! Reads go through a [`View`]: a read transaction with every table open,
//! opened after each checkpoint, and the pending layer as it was after the
//! last batch. A reader takes the current view (one `Arc` clone) and never
//! waits for the writer.

use super::journal::{self, Journal};
use super::pending::Pending;
use super::{CacheFill, Keyspace, KvIter, OrderedKv, WriteBatch};
use crate::error::StorageError;
use parking_lot::{Mutex, RwLock};
use redb::{ReadableDatabase, TableDefinition};
use std::fs::File;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The store's file inside the data directory.
pub const FILE_NAME: &str = "tempora.redb";

type Table = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;
type Entry = (redb::AccessGuard<'static, &'static [u8]>, redb::AccessGuard<'static, &'static [u8]>);

/// Journal bytes after which a batch is committed durably in redb and the
/// journal starts over. Bigger means fewer of those commits but more pages in
/// each (a lone commit waits on it) and more to replay after a crash.
pub const CHECKPOINT_BYTES: u64 = 8 << 20;

fn definition(ks: Keyspace) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(ks.name())
}

/// The cache of a temporary store: redb's own default.
const DEFAULT_TEMPORARY_CACHE: u64 = 1 << 30;

/// The journal number of the last batch in the store, under key `seq`.
const JOURNAL_SEQ: TableDefinition<'static, &'static str, u64> = TableDefinition::new("journal");

pub struct RedbKv {
    db: redb::Database,
    view: RwLock<Arc<View>>,
    /// The page cache's ceiling, as given to redb.
    cache_bytes: u64,
    /// Locked for the whole of an apply: the journal's order is the order
    /// batches are applied and views published in. (Always this lock first,
    /// then redb's.)
    writer: Mutex<Writer>,
    /// [`CHECKPOINT_BYTES`] but in tests.
    checkpoint_bytes: u64,
    /// Set by tests that drop the store as a crash would leave it.
    skip_checkpoint_on_close: bool,
    /// `None` for a temporary store, which lives in memory and promises
    /// nothing after a crash.
    durable: Option<Durable>,
}

struct Durable {
    /// The data directory, which holds the store's file and the journal.
    dir: PathBuf,
    /// A second handle on the journal, synced without the writer's lock.
    sync_handle: File,
}

struct Writer {
    /// Every batch since the last checkpoint (`None` for a temporary store).
    journal: Option<Journal>,
    /// The same batches, merged, as readers see them.
    pending: Pending,
    /// The number of the next batch.
    next_seq: u64,
}

impl Writer {
    fn checkpoint_due(&self, limit: u64) -> bool {
        match &self.journal {
            Some(journal) => journal.bytes() >= limit,
            None => self.pending.bytes() >= limit,
        }
    }
}

/// The state readers see: redb's at the last checkpoint, and the writes
/// since.
struct View {
    tables: Arc<[Table]>,
    pending: Pending,
}

impl View {
    /// redb's state now, with nothing pending over it.
    fn open(db: &redb::Database) -> Result<View, StorageError> {
        let txn = db.begin_read().map_err(redb::Error::from)?;
        let tables = Keyspace::ALL
            .iter()
            .map(|ks| txn.open_table(definition(*ks)).map_err(|e| StorageError::from(redb::Error::from(e))))
            .collect::<Result<Arc<[_]>, _>>()?;
        Ok(View { tables, pending: Pending::default() })
    }
}

impl RedbKv {
    /// Opens (creating if needed) the store in `dir`, with a page cache of
    /// `cache_bytes`, and replays what its journal holds beyond the store's
    /// last durable commit.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<Self, StorageError> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE_NAME);
        let created = !path.exists();
        let db = redb::Database::builder()
            .set_cache_size(usize::try_from(cache_bytes).unwrap_or(usize::MAX))
            .create(&path)
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => StorageError::Locked(dir.display().to_string()),
                other => StorageError::from(redb::Error::from(other)),
            })?;
        if created {
            // The new file's directory entry, so that the first synced
            // commit cannot be lost with the name that points to it.
            File::open(dir)?.sync_all()?;
        }
        create_tables(&db)?;
        let (mut journal, records) = Journal::open(dir)?;
        let next_seq = replay(&db, records)?;
        journal.start_over()?;
        let durable = Durable { dir: dir.to_path_buf(), sync_handle: journal.sync_handle()? };
        let writer = Writer { journal: Some(journal), pending: Pending::default(), next_seq };
        Ok(RedbKv {
            view: RwLock::new(Arc::new(View::open(&db)?)),
            db,
            cache_bytes,
            writer: Mutex::new(writer),
            checkpoint_bytes: CHECKPOINT_BYTES,
            skip_checkpoint_on_close: false,
            durable: Some(durable),
        })
    }

    /// A store that lives in memory, for tests.
    pub fn temporary() -> Result<Self, StorageError> {
        let cache_bytes = DEFAULT_TEMPORARY_CACHE;
        let db = redb::Database::builder()
            .set_cache_size(cache_bytes as usize)
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(redb::Error::from)?;
        create_tables(&db)?;
        Ok(RedbKv {
            view: RwLock::new(Arc::new(View::open(&db)?)),
            db,
            cache_bytes,
            writer: Mutex::new(Writer { journal: None, pending: Pending::default(), next_seq: 1 }),
            checkpoint_bytes: CHECKPOINT_BYTES,
            skip_checkpoint_on_close: false,
            durable: None,
        })
    }

    fn view(&self) -> Arc<View> {
        Arc::clone(&self.view.read())
    }
}

/// Creates the tables a new store lacks, so that every view can open all of
/// them.
fn create_tables(db: &redb::Database) -> Result<(), StorageError> {
    let txn = db.begin_write().map_err(redb::Error::from)?;
    for ks in Keyspace::ALL {
        txn.open_table(definition(ks)).map_err(redb::Error::from)?;
    }
    txn.open_table(JOURNAL_SEQ).map_err(redb::Error::from)?;
    txn.commit().map_err(redb::Error::from)?;
    Ok(())
}

/// Applies the journal records the store lacks, commits them durably in one
/// transaction, and returns the number of the next batch.
fn replay(db: &redb::Database, records: Vec<journal::Record>) -> Result<u64, StorageError> {
    let stored = {
        let txn = db.begin_read().map_err(redb::Error::from)?;
        let table = txn.open_table(JOURNAL_SEQ).map_err(redb::Error::from)?;
        table.get("seq").map_err(redb::Error::from)?.map_or(0, |v| v.value())
    };
    let mut next = stored + 1;
    let mut replayed = 0;
    let mut pending = Pending::default();
    for record in records {
        if record.seq < next {
            continue; // in the store already
        }
        if record.seq > next {
            return Err(StorageError::Corrupt(format!(
                "the journal's batch {} follows the store's batch {}: batches {next} to {} are missing",
                record.seq,
                next - 1,
                record.seq - 1
            )));
        }
        pending.apply(&record.batch);
        next += 1;
        replayed += 1;
    }
    if replayed > 0 {
        commit(db, &pending, next - 1, redb::Durability::Immediate)?;
        tracing::info!(batches = replayed, "replayed the journal");
    }
    Ok(next)
}

/// Commits every write of `pending`, table by table in key order, and the
/// journal number `seq` of the last batch among them, in one redb
/// transaction.
fn commit(db: &redb::Database, pending: &Pending, seq: u64, durability: redb::Durability) -> Result<(), StorageError> {
    let mut txn = db.begin_write().map_err(redb::Error::from)?;
    txn.set_durability(durability).map_err(redb::Error::from)?;
    for ks in Keyspace::ALL {
        if pending.is_empty_in(ks) {
            continue;
        }
        let mut table = txn.open_table(definition(ks)).map_err(redb::Error::from)?;
        for (key, value) in pending.entries(ks) {
            match value {
                Some(v) => table.insert(key, v).map(drop),
                None => table.remove(key).map(drop),
            }
            .map_err(redb::Error::from)?;
        }
    }
    {
        let mut journal = txn.open_table(JOURNAL_SEQ).map_err(redb::Error::from)?;
        journal.insert("seq", seq).map_err(redb::Error::from)?;
    }
    txn.commit().map_err(redb::Error::from)?;
    Ok(())
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

impl RedbKv {
    /// Writes everything pending to redb, with the batch numbered `seq` the
    /// last of it, and starts the journal over. On an error nothing changes:
    /// the journal and the layer still hold every batch.
    fn checkpoint(&self, writer: &mut Writer, pending: &Pending, seq: u64) -> Result<(), StorageError> {
        let Some(journal) = &mut writer.journal else {
            commit(&self.db, pending, seq, redb::Durability::None)?;
            writer.pending = Pending::default();
            return Ok(());
        };
        let (started, journal_bytes) = (std::time::Instant::now(), journal.bytes());
        commit(&self.db, pending, seq, redb::Durability::Immediate)?;
        writer.pending = Pending::default();
        journal.start_over()?;
        tracing::debug!(journal_bytes, micros = started.elapsed().as_micros() as u64, "checkpoint");
        Ok(())
    }
}

impl OrderedKv for RedbKv {
    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let view = self.view();
        if let Some(pending) = view.pending.get(ks, key) {
            return Ok(pending.map(<[u8]>::to_vec));
        }
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
        let stored: KvIter<'_> = if reverse { Box::new(range.rev().map(map)) } else { Box::new(range.map(map)) };
        if view.pending.is_empty_in(ks) {
            return stored;
        }
        Box::new(view.pending.merge(ks, stored, lo, hi, reverse))
    }

    /// The batch goes to the journal and the pending layer, and readers get
    /// a view with it; only the switch to that view waits for them. A
    /// checkpoint's commit to redb happens outside `publish` too: readers
    /// keep the view before it, whose pending layer holds what redb gains.
    fn apply_published(&self, batch: WriteBatch, publish: &RwLock<()>) -> Result<(), StorageError> {
        if batch.is_empty() {
            return Ok(());
        }
        // The view is replaced under the writer's lock, so that views are
        // published in batch order.
        let mut writer = self.writer.lock();
        let seq = writer.next_seq;
        let view = if writer.checkpoint_due(self.checkpoint_bytes) {
            // This batch and every one before it go to redb together (and
            // are durable there), so the journal is not needed.
            let mut pending = writer.pending.clone();
            pending.apply(&batch);
            self.checkpoint(&mut writer, &pending, seq)?;
            View::open(&self.db)?
        } else {
            if let Some(journal) = &mut writer.journal {
                journal.append(seq, &batch)?;
            }
            writer.pending.apply(&batch);
            View { tables: Arc::clone(&self.view().tables), pending: writer.pending.clone() }
        };
        writer.next_seq += 1;
        let view = Arc::new(view);
        let _no_readers = publish.write();
        *self.view.write() = view;
        Ok(())
    }

    fn sync(&self) -> Result<(), StorageError> {
        // Every batch applied so far is in the journal, or durable in redb
        // if a checkpoint came after it.
        if let Some(d) = &self.durable {
            d.sync_handle.sync_data()?;
        }
        Ok(())
    }

    fn size_on_disk(&self) -> Option<u64> {
        // From the files, not the journal's lock, which an apply holds
        // through a checkpoint's durable commit.
        let dir = &self.durable.as_ref()?.dir;
        let len = |name: &str| std::fs::metadata(dir.join(name)).ok().map(|m| m.len());
        Some(len(FILE_NAME)? + len(journal::FILE_NAME).unwrap_or(0))
    }

    fn cache_fill(&self) -> Option<CacheFill> {
        Some(CacheFill { used: self.db.cache_stats().used_bytes() as u64, capacity: self.cache_bytes })
    }
}

/// Closing the store checkpoints what is pending, so that the next open has
/// nothing to replay. (After a crash the journal still holds it.)
impl Drop for RedbKv {
    fn drop(&mut self) {
        if self.durable.is_none() || self.skip_checkpoint_on_close {
            return;
        }
        let mut writer = self.writer.lock();
        if writer.pending.is_empty() {
            return;
        }
        let (pending, seq) = (writer.pending.clone(), writer.next_seq - 1);
        if let Err(e) = self.checkpoint(&mut writer, &pending, seq) {
            tracing::error!(error = %e, "closing the store: the checkpoint failed; the journal will be replayed at the next open");
        }
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
    fn within_one_batch_the_later_write_to_a_key_wins_whatever_the_tables_between() {
        let kv = RedbKv::temporary().unwrap();
        let mut b = put(Keyspace::Sp, b"b", b"first");
        b.put(Keyspace::Log, b"b".to_vec(), b"log".to_vec());
        b.delete(Keyspace::Sp, b"b".to_vec());
        b.put(Keyspace::Sp, b"c".to_vec(), b"doomed".to_vec());
        b.put(Keyspace::Sp, b"a".to_vec(), b"a".to_vec());
        b.put(Keyspace::Sp, b"b".to_vec(), b"last".to_vec());
        b.delete(Keyspace::Sp, b"c".to_vec());
        kv.apply(b).unwrap();
        assert_eq!(kv.get(Keyspace::Sp, b"b").unwrap().as_deref(), Some(&b"last"[..]));
        assert_eq!(kv.get(Keyspace::Sp, b"c").unwrap(), None);
        assert_eq!(kv.get(Keyspace::Sp, b"a").unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(kv.get(Keyspace::Log, b"b").unwrap().as_deref(), Some(&b"log"[..]));
    }

    /// The journal number redb holds: the last batch of its last checkpoint
    /// (0 before the first).
    fn stored_seq(db: &redb::Database) -> u64 {
        let txn = db.begin_read().unwrap();
        let table = txn.open_table(JOURNAL_SEQ).unwrap();
        table.get("seq").unwrap().map_or(0, |v| v.value())
    }

    #[test]
    fn a_checkpoint_commits_while_a_reader_holds_the_publish_lock_and_shows_once_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let mut kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
        kv.checkpoint_bytes = 1; // every batch after the first one journaled
        let kv = Arc::new(kv);
        kv.apply(put(Keyspace::Log, b"a", b"1")).unwrap();
        assert_eq!(stored_seq(&kv.db), 0, "the first batch waits in the journal");
        let publish = Arc::new(RwLock::new(()));
        let reading = publish.read();
        let writer = {
            let (kv, publish) = (Arc::clone(&kv), Arc::clone(&publish));
            std::thread::spawn(move || kv.apply_published(put(Keyspace::Log, b"k", b"v"), &publish))
        };
        // The checkpoint does not wait for the reader: redb holds both batches...
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while stored_seq(&kv.db) != 2 {
            assert!(std::time::Instant::now() < deadline, "the checkpoint waited for the reader");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // ...while the reader's view stays where it was, until it lets go.
        assert_eq!(kv.get(Keyspace::Log, b"k").unwrap(), None);
        assert_eq!(kv.get(Keyspace::Log, b"a").unwrap().as_deref(), Some(&b"1"[..]));
        drop(reading);
        writer.join().unwrap().unwrap();
        assert_eq!(kv.get(Keyspace::Log, b"k").unwrap().as_deref(), Some(&b"v"[..]));
        assert!(kv.view().pending.is_empty());
    }

    #[test]
    fn the_cache_fills_up_to_its_ceiling_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let mut kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
        kv.checkpoint_bytes = 256 << 10; // redb is written at checkpoints only
        let value = vec![7u8; 1000];
        for i in 0..40u32 {
            let mut b = WriteBatch::default();
            for j in 0..100u32 {
                b.put(Keyspace::Versions, (i * 100 + j).to_be_bytes().to_vec(), value.clone());
            }
            kv.apply(b).unwrap();
        }
        // 4 MB written through a 1 MiB cache: full, and never over.
        let fill = kv.cache_fill().unwrap();
        assert_eq!(fill.capacity, 1 << 20);
        assert!(fill.used > fill.capacity / 2 && fill.used <= fill.capacity, "{fill:?}");
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

    #[test]
    fn a_reopen_replays_the_journal_records_the_store_lacks_and_refuses_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        drop(RedbKv::open(dir.path(), 1 << 20).unwrap());
        // What a crash leaves: the store durable up to batch 1, the journal
        // holding batches 1 to 3 (batch 1 again, as before a checkpoint).
        {
            let db = redb::Database::create(dir.path().join(FILE_NAME)).unwrap();
            let mut pending = Pending::default();
            pending.apply(&put(Keyspace::Log, b"1", b"one"));
            commit(&db, &pending, 1, redb::Durability::Immediate).unwrap();
        }
        let (mut journal, _) = Journal::open(dir.path()).unwrap();
        journal.append(1, &put(Keyspace::Log, b"1", b"one, journaled")).unwrap();
        journal.append(2, &put(Keyspace::Log, b"2", b"two")).unwrap();
        let mut three = put(Keyspace::Log, b"3", b"three");
        three.delete(Keyspace::Log, b"2".to_vec());
        journal.append(3, &three).unwrap();
        drop(journal);
        let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
        // Batch 1 was in the store already and is not applied again.
        assert_eq!(kv.get(Keyspace::Log, b"1").unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(kv.get(Keyspace::Log, b"2").unwrap(), None);
        assert_eq!(kv.get(Keyspace::Log, b"3").unwrap().as_deref(), Some(&b"three"[..]));
        assert_eq!(kv.writer.lock().next_seq, 4);
        assert_eq!(stored_seq(&kv.db), 3, "replayed and committed at the open");
        // The next batch continues the numbering, in a journal started over.
        kv.apply(put(Keyspace::Log, b"4", b"four")).unwrap();
        kv.sync().unwrap();
        let journal = std::fs::read(dir.path().join(journal::FILE_NAME)).unwrap();
        assert_eq!(u64::from_le_bytes(journal[12..20].try_into().unwrap()), 4);
        // Closed cleanly, the store checkpoints batch 4 and empties the journal.
        drop(kv);
        assert_eq!(std::fs::metadata(dir.path().join(journal::FILE_NAME)).unwrap().len(), 0);
        let db = redb::Database::create(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(stored_seq(&db), 4);
        drop(db);

        // A journal that starts past the store's next batch: batches lost.
        let gap = tempfile::tempdir().unwrap();
        drop(RedbKv::open(gap.path(), 1 << 20).unwrap());
        let (mut journal, _) = Journal::open(gap.path()).unwrap();
        journal.append(5, &put(Keyspace::Log, b"5", b"five")).unwrap();
        drop(journal);
        match RedbKv::open(gap.path(), 1 << 20) {
            Err(StorageError::Corrupt(what)) => assert!(what.contains("batches 1 to 4 are missing"), "{what}"),
            other => panic!("expected Corrupt, got {:?}", other.err()),
        }
    }

    #[test]
    fn a_full_journal_is_checkpointed_into_the_store_and_started_over() {
        let dir = tempfile::tempdir().unwrap();
        let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
        let big = vec![7u8; 1 << 20];
        let journal_bytes = || std::fs::metadata(dir.path().join(journal::FILE_NAME)).unwrap().len();
        let mut i = 0u32;
        while journal_bytes() < CHECKPOINT_BYTES {
            kv.apply(put(Keyspace::Versions, &i.to_be_bytes(), &big)).unwrap();
            i += 1;
        }
        // Until then redb was not written: the writes are pending, and read.
        assert_eq!(stored_seq(&kv.db), 0);
        assert_eq!(kv.get(Keyspace::Versions, &0u32.to_be_bytes()).unwrap().map(|v| v.len()), Some(1 << 20));
        // The next batch is the checkpoint: durable in redb, journal empty.
        kv.apply(put(Keyspace::Versions, &i.to_be_bytes(), b"last")).unwrap();
        assert_eq!(journal_bytes(), 0);
        assert_eq!(stored_seq(&kv.db), u64::from(i) + 1);
        assert!(kv.view().pending.is_empty());
        drop(kv);
        let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(kv.get(Keyspace::Versions, &i.to_be_bytes()).unwrap().as_deref(), Some(&b"last"[..]));
        assert_eq!(kv.get(Keyspace::Versions, &0u32.to_be_bytes()).unwrap().map(|v| v.len()), Some(1 << 20));
    }

    mod model {
        //! The backend against a `BTreeMap`: batches of puts and deletes,
        //! checkpoints every few bytes, clean reopens and crashes, each
        //! followed by every get and a set of scans both ways.
        use super::*;
        use crate::kv::KvPair;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        #[derive(Debug, Clone)]
        enum Step {
            /// (keyspace is `Sp`, key, value or delete)
            Batch(Vec<(bool, Vec<u8>, Option<u8>)>),
            Reopen,
            /// Dropped without the closing checkpoint, as a killed process
            /// leaves it: only the journal has what is pending.
            Crash,
        }

        fn key() -> impl Strategy<Value = Vec<u8>> {
            prop::collection::vec(0u8..3, 1..3)
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                8 => prop::collection::vec((any::<bool>(), key(), prop::option::of(any::<u8>())), 1..6).prop_map(Step::Batch),
                1 => Just(Step::Reopen),
                1 => Just(Step::Crash),
            ]
        }

        fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
            prop_oneof![
                Just(Bound::Unbounded),
                key().prop_map(Bound::Included),
                key().prop_map(Bound::Excluded),
            ]
        }

        fn within(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
            (match lo {
                Bound::Included(l) => k >= l.as_slice(),
                Bound::Excluded(l) => k > l.as_slice(),
                Bound::Unbounded => true,
            }) && (match hi {
                Bound::Included(h) => k <= h.as_slice(),
                Bound::Excluded(h) => k < h.as_slice(),
                Bound::Unbounded => true,
            })
        }

        fn open(dir: &Path, checkpoint_bytes: u64) -> RedbKv {
            let mut kv = RedbKv::open(dir, 1 << 20).unwrap();
            kv.checkpoint_bytes = checkpoint_bytes;
            kv
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]
            #[test]
            fn reads_match_a_map_through_checkpoints_reopens_and_crashes(
                steps in prop::collection::vec(step(), 1..30),
                scans in prop::collection::vec((bound(), bound(), any::<bool>()), 1..5),
                checkpoint_bytes in 1u64..60,
            ) {
                let dir = tempfile::tempdir().unwrap();
                let mut kv = open(dir.path(), checkpoint_bytes);
                let mut model: [BTreeMap<Vec<u8>, Vec<u8>>; 2] = Default::default();
                for step in steps {
                    match step {
                        Step::Batch(ops) => {
                            let mut batch = WriteBatch::default();
                            for (sp, key, value) in ops {
                                let (ks, m) = if sp { (Keyspace::Sp, 0) } else { (Keyspace::Log, 1) };
                                match value {
                                    Some(v) => {
                                        batch.put(ks, key.clone(), vec![v]);
                                        model[m].insert(key, vec![v]);
                                    }
                                    None => {
                                        batch.delete(ks, key.clone());
                                        model[m].remove(&key);
                                    }
                                }
                            }
                            kv.apply(batch).unwrap();
                        }
                        Step::Reopen => {
                            drop(kv);
                            kv = open(dir.path(), checkpoint_bytes);
                        }
                        Step::Crash => {
                            kv.skip_checkpoint_on_close = true;
                            drop(kv);
                            kv = open(dir.path(), checkpoint_bytes);
                        }
                    }
                    for (m, ks) in [Keyspace::Sp, Keyspace::Log].into_iter().enumerate() {
                        for a in 0..3u8 {
                            for key in [vec![a], vec![a, 0], vec![a, 1], vec![a, 2]] {
                                prop_assert_eq!(kv.get(ks, &key).unwrap(), model[m].get(&key).cloned(), "get {:?}", key);
                            }
                        }
                        for (lo, hi, reverse) in &scans {
                            let got: Vec<KvPair> =
                                kv.scan(ks, lo.clone(), hi.clone(), *reverse).map(Result::unwrap).collect();
                            let mut want: Vec<KvPair> = model[m]
                                .iter()
                                .filter(|(k, _)| within(k, lo, hi))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect();
                            if *reverse {
                                want.reverse();
                            }
                            prop_assert_eq!(got, want, "scan {:?}..{:?} reverse {}", lo, hi, reverse);
                        }
                    }
                }
            }
        }
    }
}
