//! The write path: one writer thread that commits requests in groups.
//!
//! Callers hand a request to the writer and block until it is durable. The
//! writer takes every request that is waiting (up to a group size), applies
//! them one after another to an overlay (so later requests see earlier ones,
//! and each gets its own tx), and writes the whole group as one atomic batch.
//! Then it hands the group to the sync stage (a second thread) and goes on
//! with the next group: the sync stage syncs once for every group waiting
//! for it, then publishes the catalog, tells the commit listeners and answers
//! everyone, group by group in commit order. While one group syncs the next
//! is applied, and requests arriving meanwhile form the group after: that is
//! the group commit, and it is why sixteen writers cost barely more syncs
//! than one. No request is answered before the sync that covers it.
//!
//! One thread doing all the semantic work is also what makes the rules safe
//! under any interleaving: a request's reads and writes happen at one
//! serialization point, so no two active facts of a `one` predicate can ever
//! overlap, and the tx and record time are taken at that point.

pub(crate) mod apply;
pub(crate) mod catalog;
mod overlay;

pub use catalog::{Published, DEFAULT_THRESHOLD};
pub(crate) use catalog::Catalog;

use crate::error::{EngineError, Result, StorageError};
use crate::keys;
use crate::kv::{Keyspace, OrderedKv};
use crate::model::{Millis, Tx, WriteOp, WriteOutcome};
use crate::record;
use crossbeam_channel::Receiver;
use overlay::Overlay;
use parking_lot::RwLock;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Whether each commit group waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// A write returns only after it is on stable storage. The default.
    #[default]
    Durable,
    /// Writes return once applied; the store is synced on close and by
    /// [`crate::Engine::sync`]. For bulk loads that can be redone.
    Relaxed,
}

pub(crate) struct Job {
    pub tenant: String,
    pub ops: Vec<WriteOp>,
    pub idempotency: Option<Idempotency>,
    pub reply: Reply,
}

/// How a request gets its answer: called once, on the sync thread, after the
/// sync that covers it (or with the error). A blocking caller waits on a
/// channel; an async one on a future, so no thread is held while it waits.
pub type Reply = Box<dyn FnOnce(JobResult) + Send>;

/// Makes a write safe to retry: the first request under `key` is applied and
/// the bytes `render` makes of its result are stored in the same atomic batch;
/// a later request under the same key (of the same tenant) is not applied and
/// gets those bytes back.
pub struct Idempotency {
    pub key: Vec<u8>,
    /// Called in the writer with the request's result; `None` stores nothing
    /// (the request may then be retried for real).
    pub render: RenderReply,
}

pub type RenderReply = Box<dyn FnOnce(&Result<WriteOutcome>) -> Option<Vec<u8>> + Send>;

pub enum JobResult {
    Done(Result<WriteOutcome>),
    /// The stored reply of an earlier request with the same idempotency key.
    Replayed(Vec<u8>),
}

/// Called after each group is durable, with the (tenant, tx) of each
/// committed request, in tx order. Must not block.
pub type CommitListener = Box<dyn Fn(&[(String, Tx)]) + Send + Sync>;

pub(crate) struct Writer {
    pub kv: Arc<dyn OrderedKv>,
    pub catalog: Catalog,
    pub published: Arc<RwLock<Arc<Published>>>,
    pub listeners: Arc<RwLock<Vec<CommitListener>>>,
    /// Taken for writing while a group becomes visible, so that no read sees
    /// it half applied (see `Engine::snapshot`). Not held during the sync.
    pub snapshot: Arc<RwLock<()>>,
    pub durability: Durability,
    pub max_group: usize,
    pub clock: fn() -> Millis,
    /// The last group was applied but its sync failed.
    /// A sync failed: the next group syncs before it is applied.
    pub unsynced: Arc<std::sync::atomic::AtomicBool>,
    pub io: Arc<IoCounters>,
    /// Latched when the backend fails a write (it takes no more after one).
    pub health: Arc<crate::space::Health>,
    /// Held while a group is applied; a backup takes it to pause the writer.
    pub gate: Arc<parking_lot::Mutex<()>>,
}

/// Counters of the write path, for metrics.
#[derive(Debug, Default)]
pub struct IoCounters {
    pub groups: std::sync::atomic::AtomicU64,
    pub requests: std::sync::atomic::AtomicU64,
    pub syncs: std::sync::atomic::AtomicU64,
    pub sync_micros: std::sync::atomic::AtomicU64,
}

/// A snapshot of [`IoCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Commit groups applied.
    pub groups: u64,
    /// Write requests handled (committed or rejected).
    pub requests: u64,
    /// Syncs to stable storage.
    pub syncs: u64,
    /// Time spent in those syncs.
    pub sync_micros: u64,
}

impl IoCounters {
    pub fn snapshot(&self) -> IoStats {
        use std::sync::atomic::Ordering::Relaxed;
        IoStats {
            groups: self.groups.load(Relaxed),
            requests: self.requests.load(Relaxed),
            syncs: self.syncs.load(Relaxed),
            sync_micros: self.sync_micros.load(Relaxed),
        }
    }
}

pub fn wall_clock() -> Millis {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as Millis).unwrap_or(0)
}

/// Operations after which a commit group takes no more requests (see
/// `Writer::run`); about 100 ms of apply on the reference machine.
const MAX_GROUP_OPS: usize = 2048;

/// The next commit group: `first` and whatever else is already waiting, up
/// to `max_jobs` requests and `max_ops` operations. Reads wait for a group's
/// apply, so many queued big batches must not merge into one huge
/// transaction. A single request is never split, whatever its size.
fn take_group(rx: &Receiver<Job>, first: Job, max_jobs: usize, max_ops: usize) -> Vec<Job> {
    let mut ops = first.ops.len();
    let mut jobs = Vec::with_capacity(max_jobs.min(64));
    jobs.push(first);
    while jobs.len() < max_jobs && ops < max_ops {
        match rx.try_recv() {
            Ok(j) => {
                ops += j.ops.len();
                jobs.push(j)
            }
            Err(_) => break,
        }
    }
    jobs
}

/// A group written to the store and waiting for its sync.
struct Applied {
    jobs: Vec<Job>,
    results: Vec<Result<WriteOutcome>>,
    /// Stored answers of repeated idempotent requests, by position.
    replays: Vec<Option<Vec<u8>>>,
    /// The catalog as of this group, published once it is durable.
    state: Published,
}

/// Groups applied ahead of the one syncing. One is enough to keep the sync
/// and the next group's work overlapping; more would only delay answers.
const SYNC_QUEUE: usize = 2;

impl Writer {
    pub fn run(mut self, rx: Receiver<Job>) {
        let (to_sync, syncing) = crossbeam_channel::bounded::<Applied>(SYNC_QUEUE);
        let stage = SyncStage {
            kv: Arc::clone(&self.kv),
            published: Arc::clone(&self.published),
            listeners: Arc::clone(&self.listeners),
            durability: self.durability,
            unsynced: Arc::clone(&self.unsynced),
            io: Arc::clone(&self.io),
            health: Arc::clone(&self.health),
        };
        let sync_thread = std::thread::Builder::new().name("tempora-sync".into()).spawn(move || stage.run(syncing));
        let sync_thread = match sync_thread {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(error = %e, "cannot start the sync thread; writes are refused");
                while let Ok(job) = rx.recv() {
                    fail_all(vec![job], || StorageError::Backend("the store's sync thread could not start".into()));
                }
                return;
            }
        };
        while let Ok(first) = rx.recv() {
            let jobs = take_group(&rx, first, self.max_group, MAX_GROUP_OPS);
            let gate = Arc::clone(&self.gate);
            let applied = {
                // A backup takes its starting point between two groups.
                let _between_groups = gate.lock();
                self.apply_group(jobs)
            };
            if let Some(applied) = applied {
                if let Err(crossbeam_channel::SendError(a)) = to_sync.send(applied) {
                    fail_all(a.jobs, || StorageError::Backend("the store's sync thread stopped".into()));
                }
            }
        }
        drop(to_sync);
        if sync_thread.join().is_err() {
            tracing::error!("the sync thread panicked");
        }
        if let Err(e) = self.kv.sync() {
            tracing::error!(error = %e, "final sync failed");
        }
    }

    /// Applies a group and writes it as one batch; `None` when the group
    /// could not be written (its requests have been answered with the error).
    fn apply_group(&mut self, mut jobs: Vec<Job>) -> Option<Applied> {
        use std::sync::atomic::Ordering::Relaxed;
        let kv = Arc::clone(&self.kv);
        let mut ov = Overlay::new(kv.as_ref());
        let group_mark = self.catalog.mark();
        let now = (self.clock)();
        let mut results = Vec::with_capacity(jobs.len());
        self.io.requests.fetch_add(jobs.len() as u64, Relaxed);
        let mut replays: Vec<Option<Vec<u8>>> = Vec::with_capacity(jobs.len());
        for job in &mut jobs {
            let idem = job.idempotency.take();
            let idem_key = idem.as_ref().map(|i| keys::idempotency(&job.tenant, &i.key));
            if let Some(k) = &idem_key {
                match ov.get(Keyspace::Aux, k) {
                    Ok(Some(stored)) => {
                        replays.push(Some(stored));
                        results.push(Err(EngineError::Closed("replayed".into())));
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        replays.push(None);
                        results.push(Err(e.into()));
                        continue;
                    }
                }
            }
            let (om, cm) = (ov.mark(), self.catalog.mark());
            let req = apply::Request { tenant: &job.tenant, ops: &job.ops };
            let r = apply::apply(&mut ov, &mut self.catalog, req, now);
            if r.is_err() {
                ov.rollback(om);
                self.catalog.rollback(cm);
            }
            if let (Some(k), Some(i)) = (idem_key, idem) {
                if let Some(bytes) = (i.render)(&r) {
                    ov.put(Keyspace::Aux, k, bytes);
                }
            }
            replays.push(None);
            results.push(r);
        }
        if !ov.is_empty() {
            self.write_catalog(&mut ov);
            let batch = ov.into_batch();
            // A failed sync left earlier writes unconfirmed: sync them before anything builds on them.
            let pending = if self.unsynced.load(Relaxed) { kv.sync() } else { Ok(()) };
            let applied = pending.and_then(|()| kv.apply_published(batch, &self.snapshot));
            if let Err(e) = applied {
                tracing::error!(error = %e, "commit group failed; its requests are not written");
                self.catalog.rollback(group_mark);
                if matches!(e, StorageError::Io(_)) {
                    self.health.fail(&e);
                    fail_all(jobs, || StorageError::Failed(e.to_string()));
                } else {
                    let msg = format!("write not stored: {e}");
                    fail_all(jobs, || StorageError::Backend(msg.clone()));
                }
                return None;
            }
            self.unsynced.store(false, Relaxed);
            self.io.groups.fetch_add(1, Relaxed);
        }
        self.catalog.commit();
        Some(Applied { jobs, results, replays, state: self.catalog.state.clone() })
    }

    fn write_catalog(&self, ov: &mut Overlay<'_>) {
        let state = &self.catalog.state;
        ov.put(Keyspace::Meta, keys::meta::CLOCK.to_vec(), record::encode(&state.clock));
        for t in &self.catalog.dirty_stats {
            if let Some(s) = state.stats.get(t) {
                ov.put(Keyspace::Meta, keys::meta::stats(*t), record::encode(s));
            }
        }
        for t in &self.catalog.dirty_bounds {
            let bound = state.superseded_until(*t);
            ov.put(Keyspace::Meta, keys::meta::superseded_until(*t), record::encode(&bound));
        }
        // Only the (tenant, source) pairs this group changed.
        for (t, source, s) in self.catalog.dirty_sources() {
            ov.put(Keyspace::Meta, keys::meta::source_stats(t, source), record::encode(s));
        }
    }
}

/// The second half of a commit: sync, publish, notify, answer.
struct SyncStage {
    kv: Arc<dyn OrderedKv>,
    published: Arc<RwLock<Arc<Published>>>,
    listeners: Arc<RwLock<Vec<CommitListener>>>,
    durability: Durability,
    unsynced: Arc<std::sync::atomic::AtomicBool>,
    io: Arc<IoCounters>,
    health: Arc<crate::space::Health>,
}

impl SyncStage {
    fn run(self, syncing: Receiver<Applied>) {
        while let Ok(first) = syncing.recv() {
            // Every group already written is covered by the one sync.
            let mut groups = vec![first];
            groups.extend(syncing.try_iter());
            let synced = if self.durability == Durability::Durable { self.sync() } else { Ok(()) };
            for g in groups {
                self.finish(g, &synced);
            }
        }
    }

    fn sync(&self) -> std::result::Result<(), String> {
        use std::sync::atomic::Ordering::Relaxed;
        let started = std::time::Instant::now();
        let synced = self.kv.sync();
        self.io.syncs.fetch_add(1, Relaxed);
        self.io.sync_micros.fetch_add(started.elapsed().as_micros() as u64, Relaxed);
        synced.map_err(|e| {
            tracing::error!(error = %e, "sync failed; the group's writes are not acknowledged");
            self.unsynced.store(true, Relaxed);
            if matches!(e, StorageError::Io(_)) {
                self.health.fail(&e);
            }
            e.to_string()
        })
    }

    fn finish(&self, g: Applied, synced: &std::result::Result<(), String>) {
        *self.published.write() = Arc::new(g.state);
        if let Err(e) = synced {
            let msg = format!("write not confirmed durable (sync failed: {e}); it may or may not survive a crash");
            // An I/O failure stopped the store (see `crate::space`): say so.
            let stopped = self.health.failure().is_some();
            fail_all(g.jobs, || if stopped { StorageError::Failed(msg.clone()) } else { StorageError::Backend(msg.clone()) });
            return;
        }
        let committed: Vec<(String, Tx)> = g
            .jobs
            .iter()
            .zip(&g.results)
            .filter_map(|(j, r)| r.as_ref().ok().map(|o| (j.tenant.clone(), o.tx)))
            .collect();
        if !committed.is_empty() {
            for l in self.listeners.read().iter() {
                l(&committed);
            }
        }
        for ((job, r), replay) in g.jobs.into_iter().zip(g.results).zip(g.replays) {
            let answer = match replay {
                Some(bytes) => JobResult::Replayed(bytes),
                None => JobResult::Done(r),
            };
            (job.reply)(answer);
        }
    }
}

fn fail_all(jobs: Vec<Job>, err: impl Fn() -> StorageError) {
    for job in jobs {
        (job.reply)(JobResult::Done(Err(EngineError::Storage(err()))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(ops: usize) -> (Job, Receiver<JobResult>) {
        let (reply, rx) = crossbeam_channel::bounded(1);
        let op = WriteOp::SetThreshold(0.5);
        let reply: Reply = Box::new(move |r| {
            let _ = reply.send(r);
        });
        (Job { tenant: "t".into(), ops: vec![op; ops], idempotency: None, reply }, rx)
    }

    #[test]
    fn groups_stop_at_the_operation_bound() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut replies = Vec::new();
        for _ in 0..8 {
            let (j, r) = job(1500);
            replies.push(r);
            tx.send(j).unwrap();
        }
        let first = rx.recv().unwrap();
        // 1500 + 1500 reaches the bound of 2048: the group takes two.
        assert_eq!(take_group(&rx, first, 512, 2048).len(), 2);
        let first = rx.recv().unwrap();
        assert_eq!(take_group(&rx, first, 512, 2048).len(), 2);
    }

    #[test]
    fn small_requests_group_up_to_the_request_bound() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut replies = Vec::new();
        for _ in 0..20 {
            let (j, r) = job(1);
            replies.push(r);
            tx.send(j).unwrap();
        }
        let first = rx.recv().unwrap();
        assert_eq!(take_group(&rx, first, 16, 2048).len(), 16);
        let first = rx.recv().unwrap();
        assert_eq!(take_group(&rx, first, 16, 2048).len(), 4);
        // One request bigger than the bound is taken whole, alone.
        let (j, _r) = job(5000);
        tx.send(j).unwrap();
        let (j2, _r2) = job(1);
        tx.send(j2).unwrap();
        let first = rx.recv().unwrap();
        let g = take_group(&rx, first, 16, 2048);
        assert_eq!((g.len(), g[0].ops.len()), (1, 5000));
    }
}
