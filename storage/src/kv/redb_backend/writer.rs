//! The writer's side of the redb backend: the journal, the active layer, and
//! the checkpoint that writes a frozen layer to redb on its own thread while
//! batches go on into a new layer and the other journal file.
//!
//! At most one checkpoint is under way: a writer whose journal fills up
//! again first waits for it. A checkpoint that fails leaves its layer where
//! it is (readers still see it, and its journal file still holds it); the
//! next writer to need a checkpoint tries it again itself and, if that fails
//! too, gets the error, with nothing of its batch applied.

use super::warm::WarmState;
use super::{commit_in_chunks, Shared, View, CHUNK_WRITES};
use crate::error::StorageError;
use crate::kv::journal::Journal;
use crate::kv::pending::Pending;
use crate::kv::WriteBatch;
use parking_lot::MutexGuard;
use redb::ReadableDatabase;
use std::sync::Arc;
use std::sync::Weak;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a store goes without a batch before the batches in memory are
/// checkpointed, however little the journal holds. Every read merges the
/// layers in memory over redb's state: a binary search per sorted run and
/// table, about a fifth of the server's CPU under point reads at 1M facts
/// with a layer left by a burst of writes. Once the writes stop, that layer
/// is folded into redb and reads go to redb alone (and a crash has less
/// journal to replay).
pub const IDLE_CHECKPOINT: Duration = Duration::from_secs(1);

/// How far past the checkpoint size a journal may grow while the checkpoint
/// before it is still being written (see [`Writer::may_defer_checkpoint`]).
pub const DEFER_UP_TO: u64 = 4;

pub(super) struct Writer {
    /// The journal's two files, or none for a temporary store.
    journals: Vec<Journal>,
    /// The file batches are appended to; the other holds the batches of the
    /// checkpoint under way, and nothing when none is.
    current: usize,
    /// Every batch since the last checkpoint began, as readers see them.
    active: Pending,
    checkpoint: Option<Checkpoint>,
    /// The last checkpoint's thread, joined before the next starts and when
    /// the store closes.
    thread: Option<JoinHandle<()>>,
    /// The number of the next batch.
    next_seq: u64,
    /// When the last batch was appended, for the idle checkpoint.
    last_append: Instant,
    /// How long the store goes without a batch before the active layer is
    /// checkpointed anyway; `None` never.
    pub(super) idle_after: Option<Duration>,
    /// The idle-checkpoint thread of a durable store, joined at close.
    idle_thread: Option<JoinHandle<()>>,
    /// Set by the close, for the idle-checkpoint thread.
    closed: bool,
    /// When the idle thread warms the page cache next (`warm.rs`).
    pub(super) warm: WarmState,
}

/// A layer on its way to redb.
struct Checkpoint {
    frozen: Pending,
    /// The number of its last batch.
    seq: u64,
    /// The journal file that holds its batches.
    journal: Option<usize>,
    /// Whether its thread is still at it. Once not, a checkpoint still here
    /// failed.
    running: bool,
}

impl Writer {
    pub(super) fn new(journals: Vec<Journal>, next_seq: u64) -> Writer {
        Writer {
            journals,
            current: 0,
            active: Pending::default(),
            checkpoint: None,
            thread: None,
            next_seq,
            last_append: Instant::now(),
            idle_after: Some(IDLE_CHECKPOINT),
            idle_thread: None,
            closed: false,
            warm: WarmState::default(),
        }
    }

    /// Whether a due checkpoint may wait: the one before it is still
    /// writing its layer, and the journal holds less than
    /// [`DEFER_UP_TO`] times `limit`. Waiting for that checkpoint instead
    /// would stop every write until it is done: where the disk is slow for a
    /// while (a flush of another program's, a busy host), a checkpoint can
    /// take longer than the journal takes to fill again, and each such wait
    /// stalled every request for hundreds of milliseconds. The layer grows
    /// meanwhile, and its checkpoint costs less per write (the same page
    /// takes more of its writes), so a slow disk leads to fewer, larger
    /// checkpoints rather than to stalls; past the bound, writes wait as
    /// before, so memory and the journal to replay stay bounded.
    pub(super) fn may_defer_checkpoint(&self, limit: u64) -> bool {
        self.checkpoint.as_ref().is_some_and(|c| c.running) && !self.checkpoint_due(limit.saturating_mul(DEFER_UP_TO))
    }

    pub(super) fn checkpoint_due(&self, limit: u64) -> bool {
        match self.journals.get(self.current) {
            Some(journal) => journal.bytes() >= limit,
            None => self.active.bytes() >= limit,
        }
    }

    /// Journals `batch` and applies it to the active layer.
    pub(super) fn append(&mut self, batch: &WriteBatch) -> Result<(), StorageError> {
        if let Some(journal) = self.journals.get_mut(self.current) {
            journal.append(self.next_seq, batch)?;
        }
        self.active.apply(batch);
        self.next_seq += 1;
        self.last_append = Instant::now();
        Ok(())
    }

    /// What readers see: `tables` (redb's state at the last checkpoint)
    /// with the layer of the checkpoint under way, if any, and the active
    /// layer over them.
    pub(super) fn view(&self, tables: Arc<[super::Table]>) -> View {
        View { tables, frozen: self.checkpoint.as_ref().map(|c| c.frozen.clone()), active: self.active.clone() }
    }

    /// Whether a checkpoint is under way (`Some(true)`), failed
    /// (`Some(false)`), or there is none.
    #[cfg(test)]
    pub(super) fn checkpoint_running(&self) -> Option<bool> {
        self.checkpoint.as_ref().map(|c| c.running)
    }

    /// Bytes since each journal file last started over.
    #[cfg(test)]
    pub(super) fn journals_bytes(&self) -> Vec<u64> {
        self.journals.iter().map(Journal::bytes).collect()
    }

    /// Bytes in the journal file batches go to now.
    #[cfg(test)]
    pub(super) fn journal_bytes(&self) -> u64 {
        self.journals[self.current].bytes()
    }

    #[cfg(test)]
    pub(super) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn durability(&self) -> redb::Durability {
        // A temporary store lives in memory: there is nothing to sync.
        if self.journals.is_empty() {
            redb::Durability::None
        } else {
            redb::Durability::Immediate
        }
    }
}

impl Shared {
    /// The page cache's ceiling in bytes of pages, as redb was given it.
    fn cache_pages(&self) -> u64 {
        super::page_capacity(self.cache_memory)
    }

    /// Freezes the active layer and starts writing it to redb on a thread,
    /// once the checkpoint before it is done.
    pub(super) fn start_checkpoint(this: &Arc<Shared>, w: &mut MutexGuard<'_, Writer>) -> Result<(), StorageError> {
        this.finish_checkpoint(w)?;
        if w.active.is_empty() {
            return Ok(());
        }
        if let Some(done) = w.thread.take() {
            // Finished its work (the checkpoint is gone); at most exiting.
            let _ = done.join();
        }
        let frozen = std::mem::take(&mut w.active);
        // Batches from now on go to the other journal file.
        let journal = (!w.journals.is_empty()).then(|| {
            let full = w.current;
            w.current = 1 - full;
            full
        });
        let (seq, durability) = (w.next_seq - 1, w.durability());
        w.checkpoint = Some(Checkpoint { frozen: frozen.clone(), seq, journal, running: true });
        let shared = Arc::clone(this);
        let spawned = std::thread::Builder::new()
            .name("tempora-checkpoint".into())
            .spawn(move || shared.run_checkpoint(&frozen, seq, durability));
        match spawned {
            Ok(thread) => w.thread = Some(thread),
            Err(e) => {
                // Left as a failed checkpoint, for the next writer to retry.
                tracing::error!(error = %e, "could not start the checkpoint thread");
                w.checkpoint.as_mut().expect("set above").running = false;
            }
        }
        Ok(())
    }

    fn run_checkpoint(&self, frozen: &Pending, seq: u64, durability: redb::Durability) {
        let started = Instant::now();
        // A panic must not leave the checkpoint marked as running: writers
        // and the close wait for that mark to go.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.commit_checkpoint(frozen, seq, durability, true)
        }))
        .unwrap_or_else(|_| Err(StorageError::Backend("the checkpoint panicked".into())));
        let mut w = self.writer.lock();
        match result.and_then(|()| self.checkpoint_written(&mut w)) {
            Ok(()) => {
                let micros = started.elapsed().as_micros() as u64;
                tracing::debug!(layer_bytes = frozen.bytes(), micros, "checkpoint");
            }
            Err(e) => tracing::error!(error = %e, "checkpoint failed; the next one tries again"),
        }
        if let Some(checkpoint) = &mut w.checkpoint {
            checkpoint.running = false;
        }
        self.checkpoint_done.notify_all();
    }

    /// Writes `frozen` into redb. `in_parts` on the checkpoint's own thread,
    /// which publishes a view after each part ([`CHUNK_WRITES`]); a retry
    /// under the writer's lock writes it in one transaction.
    fn commit_checkpoint(
        &self,
        frozen: &Pending,
        seq: u64,
        durability: redb::Durability,
        in_parts: bool,
    ) -> Result<(), StorageError> {
        #[cfg(test)]
        while self.hold_checkpoints.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        #[cfg(test)]
        if self.fail_checkpoints.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StorageError::Backend("checkpoints fail in this test".into()));
        }
        let chunk = if in_parts { CHUNK_WRITES } else { usize::MAX };
        commit_in_chunks(&self.db, frozen, seq, durability, chunk, &mut || self.checkpoint_progressed())
    }

    /// After a part of the checkpoint is committed: readers get a view on
    /// redb as it is now, so that no reader holds the state before it and
    /// redb may reuse the pages it freed. They see the same data: the frozen
    /// layer still covers every key the part wrote, with the same values.
    fn checkpoint_progressed(&self) -> Result<(), StorageError> {
        #[cfg(test)]
        if self.fail_between_chunks.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StorageError::Backend("checkpoints stop after a part in this test".into()));
        }
        let tables = View::tables(&self.db)?;
        let w = self.writer.lock();
        *self.view.write() = Arc::new(w.view(tables));
        Ok(())
    }

    /// Once the checkpoint's layer is in redb: starts its journal file over,
    /// drops the layer, and gives readers a view of redb without it. The
    /// view holds the same state as the one before, so unlike a batch's it
    /// needs no reader kept out.
    fn checkpoint_written(&self, w: &mut Writer) -> Result<(), StorageError> {
        let checkpoint = w.checkpoint.as_ref().expect("a checkpoint under way");
        if let Some(journal) = checkpoint.journal {
            w.journals[journal].start_over();
        }
        let tables = View::tables(&self.db)?;
        w.warm.checkpointed(checkpoint.frozen.bytes());
        w.checkpoint = None;
        *self.view.write() = Arc::new(w.view(tables));
        Ok(())
    }

    /// Waits for the checkpoint under way, if there is one. One that failed
    /// is tried again here, and its error returned if it fails again.
    pub(super) fn finish_checkpoint(&self, w: &mut MutexGuard<'_, Writer>) -> Result<(), StorageError> {
        while let Some(checkpoint) = &w.checkpoint {
            if checkpoint.running {
                self.checkpoint_done.wait(w);
                continue;
            }
            let (frozen, seq) = (checkpoint.frozen.clone(), checkpoint.seq);
            self.commit_checkpoint(&frozen, seq, w.durability(), false)?;
            self.checkpoint_written(w)?;
            tracing::info!(seq, "a failed checkpoint succeeded when tried again");
        }
        Ok(())
    }

    /// Starts the thread that checkpoints the active layer once no batch
    /// has come for `idle_after` ([`IDLE_CHECKPOINT`]). It looks every
    /// quarter of that period at most, under the writer's lock; the close
    /// wakes it, and it ends and is joined.
    pub(super) fn start_idle_checkpoints(this: &Arc<Shared>) -> Result<(), StorageError> {
        let weak = Arc::downgrade(this);
        let thread = std::thread::Builder::new()
            .name("tempora-idle-checkpoint".into())
            .spawn(move || Shared::idle_checkpoints(weak))?;
        this.writer.lock().idle_thread = Some(thread);
        Ok(())
    }

    fn idle_checkpoints(weak: Weak<Shared>) {
        loop {
            let Some(this) = weak.upgrade() else { return };
            let mut w = this.writer.lock();
            if w.closed {
                return;
            }
            let wait = match w.idle_after {
                // Looked at again later: the setting can change.
                None => IDLE_CHECKPOINT,
                Some(after) => {
                    let idle = w.last_append.elapsed();
                    // Not while a checkpoint is under way or failed: the
                    // next writer waits for or retries that one.
                    if idle >= after && !w.active.is_empty() && w.checkpoint.is_none() {
                        match Shared::start_checkpoint(&this, &mut w) {
                            Ok(()) => tracing::debug!(idle_ms = idle.as_millis() as u64, "idle checkpoint"),
                            Err(e) => tracing::warn!(error = %e, "idle checkpoint failed to start"),
                        }
                    } else if idle >= after && w.active.is_empty() && w.checkpoint.is_none() {
                        this.empty_journals(&mut w);
                        this.warm_if_due(&mut w);
                    }
                    after.saturating_sub(idle).max(after / 4)
                }
            };
            this.idle_wake.wait_for(&mut w, wait);
        }
    }

    /// Empties the journal files of an idle store, whose every batch redb
    /// holds durably (no batch since the last checkpoint, and none under
    /// way). Checkpoints start a file over in place, so under writes each
    /// keeps the size it grew to (at least `storage_checkpoint_bytes`, 32
    /// MiB): two files of old records, on the disk of a store that may stay
    /// idle for days. The first appends after it grow the file again, and
    /// their syncs commit the file system's journal too, until the next
    /// checkpoint starts it over. Not synced: a crash may leave the old
    /// records, which a reopen skips (redb already has them).
    fn empty_journals(&self, w: &mut MutexGuard<'_, Writer>) {
        for journal in w.journals.iter_mut().filter(|j| j.nonempty()) {
            if let Err(e) = journal.truncate() {
                tracing::warn!(error = %e, "emptying an idle store's journal file failed");
            }
        }
    }

    /// Runs a warm pass if one is due (`warm.rs`), without the writer's
    /// lock: batches go on meanwhile.
    fn warm_if_due(&self, w: &mut MutexGuard<'_, Writer>) {
        if !w.warm.due(self.db.cache_stats().used_bytes() as u64, self.cache_pages()) {
            return;
        }
        w.warm.checkpointed = 0;
        if let Err(e) = MutexGuard::unlocked(w, || self.warm(super::warm::budget(self.cache_pages()))) {
            tracing::warn!(error = %e, "warming the page cache failed");
        }
    }

    /// Closing the store: stops the idle checkpoints, waits for the
    /// checkpoint under way, then, when `checkpoint`, writes what is pending
    /// to redb too, and waits for the threads to be gone (they hold the
    /// database open).
    pub(super) fn close(this: &Arc<Shared>, checkpoint: bool) -> Result<(), StorageError> {
        this.closing.store(true, std::sync::atomic::Ordering::Release);
        let idle = {
            let mut w = this.writer.lock();
            w.closed = true;
            this.idle_wake.notify_all();
            w.idle_thread.take()
        };
        if let Some(idle) = idle {
            let _ = idle.join();
        }
        let mut w = this.writer.lock();
        let mut result = this.finish_checkpoint(&mut w);
        if result.is_ok() && checkpoint {
            // Once everything is in redb, a cleanly closed store leaves empty
            // journal files (checkpoints only start them over in place).
            result = Shared::start_checkpoint(this, &mut w)
                .and_then(|()| this.finish_checkpoint(&mut w))
                .and_then(|()| Ok(w.journals.iter_mut().try_for_each(Journal::truncate)?));
        }
        let thread = w.thread.take();
        drop(w);
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        result
    }
}
