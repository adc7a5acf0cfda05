//! [`OrderedKv`] on redb: one redb table per [`Keyspace`] in one file,
//! `DIR/tempora.redb` (redb's copy-on-write B-trees make a commit
//! all-or-nothing across tables).
//!
//! Why a second backend: sled 0.34 keeps a record in memory of every page it
//! has ever paged out, and its leaves hold at most 16 keys, so its memory
//! grows with the store (about 100 bytes per fact version). redb keeps no
//! per-page state beyond its cache, which is bounded, so memory stays flat
//! however large the store grows.
//!
//! A batch is not written to redb when it is applied. [`OrderedKv::apply`]
//! appends it to the journal (`kv/journal.rs`) and to the active [`Pending`]
//! layer in memory, which readers see over redb's state, and
//! [`OrderedKv::sync`] is one `fdatasync` of the journal. Once the journal
//! holds [`CHECKPOINT_BYTES`], the layer is frozen and a checkpoint thread
//! writes it to redb in one transaction, in key order, committed with
//! `Durability::Immediate` (redb writes the changed pages, syncs, then writes
//! and syncs its header); batches meanwhile go to a new layer and the other
//! journal file. One transaction of tens of thousands of writes costs redb a
//! third per write of what batches of fifty do (`kv/pending.rs` says why),
//! and the writer does not wait for it. Each checkpoint also stores the last
//! batch's journal number, so a reopen replays exactly the journal records
//! the store lacks; closing the store checkpoints what is pending, so a clean
//! restart replays nothing. `writer.rs` has the writer's side.
//!
//! Reads go through a [`View`]: a read transaction with every table open,
//! opened after each checkpoint, and the layers as they were after the last
//! batch. A reader takes the current view (one `Arc` clone) and never waits
//! for the writer.
//!
//! The thread that checkpoints an idle store also warms redb's page cache
//! (`warm.rs`): a second after the store opens, and once it is idle again
//! after writes the full cache could not keep.

pub(crate) mod compact;
pub(crate) mod usage;
mod warm;
mod writer;

use super::journal::{self, Journal, SyncHandle};
use super::pending::Pending;
use super::{as_slice, CacheFill, Keyspace, KvIter, OrderedKv, WriteBatch};
use crate::error::StorageError;
use parking_lot::{Condvar, Mutex, RwLock};
use redb::{ReadableDatabase, TableDefinition};
use std::fs::File;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use writer::Writer;
pub use writer::{DEFER_UP_TO, IDLE_CHECKPOINT};

/// The store's file inside the data directory.
pub const FILE_NAME: &str = "tempora.redb";

type Table = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;
type Entry = (redb::AccessGuard<'static, &'static [u8]>, redb::AccessGuard<'static, &'static [u8]>);

/// Journal bytes after which the batches in it are checkpointed into redb,
/// unless the store is opened with another figure ([`RedbKv::checkpoint_every`];
/// `[limits] storage_checkpoint_bytes` in the server). Bigger means fewer
/// checkpoints, each cheaper per write, but more memory (the layer holds
/// about as much as the journal) and more to replay after a crash. While the
/// checkpoint before is still being written, the journal may grow to
/// [`writer::DEFER_UP_TO`] times this before writes wait for it.
///
/// Under asserts with supersession on random keys at 1M facts (W1) a larger
/// figure pays: each supersession writes a leaf of five tables at random,
/// and the more writes a checkpoint holds, the more of them share a leaf.
/// Against 8 MiB, 32 MiB took the server's CPU per assert from 141-147 to
/// 129-135 µs and its throughput from 8.8-9.0k to 9.6-9.8k asserts/s, the 1M
/// import from 57k to 58-59k facts/s, for 0.8 s more to restart after a
/// kill -9 (3.0 s against 2.2 s, a full journal replayed; 4.4 s at 64 MiB).
/// On a few hot keys (16 writers on 100 keys) it costs 79-80 µs per assert
/// against 75: it cost 96-103 until a key first written in a layer and
/// deleted there left nothing behind (`WriteBatch::new_keys`), as the next
/// assert's scan of the key walked every delete the layer held for it.
pub const CHECKPOINT_BYTES: u64 = 32 << 20;

fn definition(ks: Keyspace) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(ks.name())
}

/// The page cache's capacity in redb's terms (bytes of pages) for a bound on
/// the memory it may take. redb keeps each cached 4,096-byte page in an
/// `Arc<[u8]>`, after two counters: 4,112 bytes, which jemalloc (the
/// server's allocator) serves from its 5,120-byte size class. Given the
/// memory bound as its capacity, redb's cache took a quarter more heap than
/// configured (650 MB for a 512 MiB bound at 1M facts); so it gets four
/// fifths of the bound. Under the system allocator the bound is then met with
/// a fifth to spare.
fn page_capacity(memory: u64) -> u64 {
    memory / 5 * 4
}

/// The memory `page_bytes` of cached pages take (see [`page_capacity`]).
fn page_memory(page_bytes: u64) -> u64 {
    page_bytes / 4 * 5
}

/// The cache of a temporary store: redb's own default.
const DEFAULT_TEMPORARY_CACHE: u64 = 1 << 30;

/// The journal number of the last batch in the store, under key `seq`.
const JOURNAL_SEQ: TableDefinition<'static, &'static str, u64> = TableDefinition::new("journal");

pub struct RedbKv {
    shared: Arc<Shared>,
    /// Journal bytes that start a checkpoint: [`CHECKPOINT_BYTES`] unless
    /// set with [`RedbKv::checkpoint_every`].
    checkpoint_bytes: u64,
    /// Set by tests that drop the store as a crash would leave it.
    skip_checkpoint_on_close: bool,
    /// `None` for a temporary store, which lives in memory and promises
    /// nothing after a crash.
    durable: Option<Durable>,
}

/// What the store and its checkpoint thread share.
struct Shared {
    db: redb::Database,
    view: RwLock<Arc<View>>,
    /// Locked for the whole of an apply: the journal's order is the order
    /// batches are applied and views published in. A checkpoint takes it to
    /// finish. (Always this lock first, then redb's.)
    writer: Mutex<Writer>,
    /// Signalled when a checkpoint finishes, for a writer waiting to start
    /// the next.
    checkpoint_done: Condvar,
    /// Wakes the idle-checkpoint thread when the store closes.
    idle_wake: Condvar,
    /// The memory the page cache may take, as configured.
    cache_memory: u64,
    /// Set first thing by the close: a warm pass under way stops.
    closing: AtomicBool,
    /// Warm passes finished (`warm.rs`).
    warm_passes: AtomicU64,
    /// Makes every checkpoint fail, as a full disk would.
    #[cfg(test)]
    fail_checkpoints: std::sync::atomic::AtomicBool,
    /// Makes a checkpoint stop with an error after its first part, as a
    /// crash or a full disk part way would.
    #[cfg(test)]
    fail_between_chunks: std::sync::atomic::AtomicBool,
    /// Keeps every checkpoint from writing until cleared, as a slow disk would.
    #[cfg(test)]
    hold_checkpoints: std::sync::atomic::AtomicBool,
}

struct Durable {
    /// The data directory, which holds the store's file and the journal.
    dir: PathBuf,
    /// Second handles on the journal's files, synced without the writer's
    /// lock.
    sync_handles: Vec<SyncHandle>,
}

/// The state readers see: redb's at the last checkpoint, the layer a
/// checkpoint is writing to redb (if one is under way), and the writes since.
struct View {
    tables: Arc<[Table]>,
    frozen: Option<Pending>,
    active: Pending,
}

impl View {
    /// redb's tables as they are now.
    fn tables(db: &redb::Database) -> Result<Arc<[Table]>, StorageError> {
        let txn = db.begin_read().map_err(redb::Error::from)?;
        Keyspace::ALL
            .iter()
            .map(|ks| txn.open_table(definition(*ks)).map_err(|e| StorageError::from(redb::Error::from(e))))
            .collect()
    }

    /// The layers over redb, newest first.
    fn layers(&self) -> impl DoubleEndedIterator<Item = &Pending> {
        std::iter::once(&self.active).chain(&self.frozen)
    }
}

impl RedbKv {
    /// Opens (creating if needed) the store in `dir`, with a page cache that
    /// takes at most `cache_memory` bytes of memory, and replays what its
    /// journal holds beyond the store's last durable commit.
    pub fn open(dir: &Path, cache_memory: u64) -> Result<Self, StorageError> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE_NAME);
        let created = !path.exists();
        let db = redb::Database::builder()
            .set_cache_size(usize::try_from(page_capacity(cache_memory)).unwrap_or(usize::MAX))
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
        let (mut journals, mut records) = (Vec::new(), Vec::new());
        for name in journal::FILE_NAMES {
            let (journal, found) = Journal::open(dir, name)?;
            journals.push(journal);
            records.extend(found);
        }
        records.sort_by_key(|r| r.seq);
        let next_seq = replay(&db, records)?;
        for journal in &mut journals {
            journal.truncate()?;
        }
        let sync_handles = journals.iter().map(Journal::sync_handle).collect::<Result<_, _>>()?;
        let durable = Durable { dir: dir.to_path_buf(), sync_handles };
        Self::with(db, cache_memory, Writer::new(journals, next_seq), Some(durable))
    }

    /// Checkpoints every `bytes` of journal instead of [`CHECKPOINT_BYTES`]
    /// (at least one batch per checkpoint, however small `bytes` is).
    pub fn checkpoint_every(mut self, bytes: u64) -> Self {
        self.checkpoint_bytes = bytes.max(1);
        self
    }

    /// Checkpoints the batches in memory once the store has had none for
    /// `after` ([`IDLE_CHECKPOINT`] unless set here); `None` only when the
    /// journal fills.
    pub fn idle_checkpoint_after(self, after: Option<Duration>) -> Self {
        self.shared.writer.lock().idle_after = after;
        self
    }

    /// Whether the idle thread warms the page cache (`warm.rs`): at open,
    /// and after writes the full cache could not keep. On unless set here.
    pub fn warm_cache(self, on: bool) -> Self {
        self.shared.writer.lock().warm.on = on;
        self
    }

    /// Warm passes finished since the store opened.
    pub fn warm_passes(&self) -> u64 {
        self.shared.warm_passes.load(Ordering::Acquire)
    }

    /// A store that lives in memory, for tests.
    pub fn temporary() -> Result<Self, StorageError> {
        let db = redb::Database::builder()
            .set_cache_size(page_capacity(DEFAULT_TEMPORARY_CACHE) as usize)
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(redb::Error::from)?;
        create_tables(&db)?;
        Self::with(db, DEFAULT_TEMPORARY_CACHE, Writer::new(Vec::new(), 1), None)
    }

    /// `cache_memory`: the bound redb's cache was opened with
    /// ([`page_capacity`] of it).
    fn with(db: redb::Database, cache_memory: u64, writer: Writer, durable: Option<Durable>) -> Result<Self, StorageError> {
        let view = writer.view(View::tables(&db)?);
        let shared = Shared {
            db,
            view: RwLock::new(Arc::new(view)),
            writer: Mutex::new(writer),
            checkpoint_done: Condvar::new(),
            idle_wake: Condvar::new(),
            cache_memory,
            closing: AtomicBool::new(false),
            warm_passes: AtomicU64::new(0),
            #[cfg(test)]
            fail_checkpoints: Default::default(),
            #[cfg(test)]
            fail_between_chunks: Default::default(),
            #[cfg(test)]
            hold_checkpoints: Default::default(),
        };
        let shared = Arc::new(shared);
        if durable.is_some() {
            Shared::start_idle_checkpoints(&shared)?;
        }
        Ok(RedbKv {
            shared,
            checkpoint_bytes: CHECKPOINT_BYTES,
            skip_checkpoint_on_close: false,
            durable,
        })
    }

    fn view(&self) -> Arc<View> {
        Arc::clone(&self.shared.view.read())
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

/// Writes a checkpoint commits to redb per transaction.
///
/// Each redb commit copies the pages it changes and frees the old copies,
/// which a later transaction may reuse once no reader can still see them.
/// A checkpoint written in one transaction on random keys (supersessions at
/// 1M facts: 45,000 in 32 MiB of journal) rewrites most of the leaves of
/// five tables at once, and its old copies are reusable only by the next
/// checkpoint: the file grew to hold the live pages and two such copies,
/// 607 MB of free pages beside 986 MB of tables. In transactions of this
/// many writes, each published to readers as it commits, the copies of one
/// are reused by the next ones. In key order per table, so a leaf is
/// rarely written by two of them; each commit costs two syncs.
const CHUNK_WRITES: usize = if cfg!(test) { 64 } else { 16_384 };

/// Commits every write of `pending`, table by table in key order, and the
/// journal number `seq` of the last batch among them, in one redb
/// transaction.
fn commit(db: &redb::Database, pending: &Pending, seq: u64, durability: redb::Durability) -> Result<(), StorageError> {
    commit_in_chunks(db, pending, seq, durability, usize::MAX, &mut || Ok(()))
}

/// [`commit`] in transactions of at most `chunk` writes, calling `between`
/// after each but the last. Only the last stores `seq`: after a crash part
/// way, the store holds some of `pending` and the journal number of the
/// checkpoint before, so the journal replays every batch of `pending` again,
/// in order, over what was written (a put or delete applied twice leaves
/// what it left once).
fn commit_in_chunks(
    db: &redb::Database,
    pending: &Pending,
    seq: u64,
    durability: redb::Durability,
    chunk: usize,
    between: &mut dyn FnMut() -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let begin = || -> Result<redb::WriteTransaction, StorageError> {
        let mut txn = db.begin_write().map_err(redb::Error::from)?;
        txn.set_durability(durability).map_err(redb::Error::from)?;
        Ok(txn)
    };
    let mut txn = begin()?;
    let mut written = 0;
    for ks in Keyspace::ALL {
        if pending.is_empty_in(ks) {
            continue;
        }
        let mut entries = pending.entries(ks).peekable();
        while entries.peek().is_some() {
            {
                let mut table = txn.open_table(definition(ks)).map_err(redb::Error::from)?;
                for (key, value) in entries.by_ref() {
                    match value {
                        Some(v) => table.insert(&*key, &*v).map(drop),
                        None => table.remove(&*key).map(drop),
                    }
                    .map_err(redb::Error::from)?;
                    written += 1;
                    if written == chunk {
                        break;
                    }
                }
            }
            if written == chunk {
                txn.commit().map_err(redb::Error::from)?;
                between()?;
                txn = begin()?;
                written = 0;
            }
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

impl OrderedKv for RedbKv {
    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let view = self.view();
        if let Some(pending) = view.layers().find_map(|layer| layer.get(ks, key)) {
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
        let mut merged: KvIter<'_> = if reverse { Box::new(range.rev().map(map)) } else { Box::new(range.map(map)) };
        // Oldest layer first, so that each newer one goes over it.
        for layer in view.layers().rev() {
            if !layer.is_empty_in(ks) {
                merged = Box::new(layer.merge(ks, merged, &lo, &hi, reverse));
            }
        }
        merged
    }

    /// The batch goes to the journal and the active layer, and readers get a
    /// view with it; only the switch to that view waits for them. A
    /// checkpoint writes to redb on its own thread, outside `publish`.
    fn apply_published(&self, batch: WriteBatch, publish: &RwLock<()>) -> Result<(), StorageError> {
        if batch.is_empty() {
            return Ok(());
        }
        // The view is replaced under the writer's lock, so that views are
        // published in batch order.
        let mut writer = self.shared.writer.lock();
        if writer.checkpoint_due(self.checkpoint_bytes) && !writer.may_defer_checkpoint(self.checkpoint_bytes) {
            Shared::start_checkpoint(&self.shared, &mut writer)?;
        }
        writer.append(&batch)?;
        let view = Arc::new(writer.view(Arc::clone(&self.view().tables)));
        let _no_readers = publish.write();
        *self.shared.view.write() = view;
        Ok(())
    }

    fn sync(&self) -> Result<(), StorageError> {
        // Every batch applied so far is in a journal file, or durable in
        // redb if a checkpoint came after it. Both files: the batches of a
        // checkpoint under way are in the one not appended to now (each is
        // synced only if appended to since its last sync).
        for handle in self.durable.iter().flat_map(|d| &d.sync_handles) {
            handle.sync()?;
        }
        Ok(())
    }

    fn size_on_disk(&self) -> Option<u64> {
        // From the files, not the writer's lock.
        let dir = &self.durable.as_ref()?.dir;
        let len = |name: &str| std::fs::metadata(dir.join(name)).ok().map(|m| m.len());
        Some(len(FILE_NAME)? + journal::FILE_NAMES.iter().filter_map(|name| len(name)).sum::<u64>())
    }

    fn cache_fill(&self) -> Option<CacheFill> {
        Some(CacheFill {
            used: page_memory(self.shared.db.cache_stats().used_bytes() as u64).min(self.shared.cache_memory),
            capacity: self.shared.cache_memory,
            warm_passes: self.warm_passes(),
        })
    }
}

/// Closing the store waits for a checkpoint under way and checkpoints what
/// is pending, so that the next open has nothing to replay. (After a crash
/// the journal still holds it.)
impl Drop for RedbKv {
    fn drop(&mut self) {
        let checkpoint = self.durable.is_some() && !self.skip_checkpoint_on_close;
        if let Err(e) = Shared::close(&self.shared, checkpoint) {
            tracing::error!(error = %e, "closing the store: the checkpoint failed; the journal will be replayed at the next open");
        }
    }
}

#[cfg(test)]
mod tests;
