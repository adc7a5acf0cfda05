//! The write path: one writer thread that commits requests in groups.
//!
//! Callers hand a request to the writer and block until it is durable. The
//! writer takes every request that is waiting (up to a group size), applies
//! them one after another to an overlay (so later requests see earlier ones,
//! and each gets its own tx), writes the whole group as one atomic batch, and
//! syncs once. Then it answers everyone in the group. While it syncs, new
//! requests queue up and form the next group: that is the group commit, and it
//! is why sixteen writers cost barely more syncs than one.
//!
//! One thread doing all the semantic work is also what makes the rules safe
//! under any interleaving: a request's reads and writes happen at one
//! serialization point, so no two active facts of a `one` predicate can ever
//! overlap, and the tx and record time are taken at that point.

pub(crate) mod apply;
mod catalog;
mod overlay;

pub use catalog::{Published, DEFAULT_THRESHOLD};
pub(crate) use catalog::Catalog;

use crate::error::{EngineError, Result};
use crate::keys;
use crate::kv::{Keyspace, OrderedKv};
use crate::model::{Millis, Tx, WriteOp, WriteOutcome};
use crate::record;
use crossbeam_channel::{Receiver, Sender};
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
    pub reply: Sender<JobResult>,
}

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
    /// Taken for writing while a group is applied, so that no read sees it
    /// half applied (see `Engine::snapshot`). Not held during the sync.
    pub snapshot: Arc<RwLock<()>>,
    pub durability: Durability,
    pub max_group: usize,
    pub clock: fn() -> Millis,
    /// The last group was applied but its sync failed.
    pub unsynced: bool,
    pub io: Arc<IoCounters>,
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

impl Writer {
    pub fn run(mut self, rx: Receiver<Job>) {
        while let Ok(first) = rx.recv() {
            let jobs = take_group(&rx, first, self.max_group, MAX_GROUP_OPS);
            self.commit_group(jobs);
        }
        // Every sender is gone: the engine is closing.
        if let Err(e) = self.kv.sync() {
            tracing::error!(error = %e, "final sync failed");
        }
    }

    fn commit_group(&mut self, mut jobs: Vec<Job>) {
        let kv = Arc::clone(&self.kv);
        let mut ov = Overlay::new(kv.as_ref());
        let group_mark = self.catalog.mark();
        let now = (self.clock)();
        let mut results = Vec::with_capacity(jobs.len());
        self.io.requests.fetch_add(jobs.len() as u64, std::sync::atomic::Ordering::Relaxed);
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
            // A sync that failed for an earlier group must succeed before
            // anything new is applied on top of it.
            let pending = if self.unsynced { kv.sync() } else { Ok(()) };
            let applied = pending.and_then(|()| {
                let _no_readers = self.snapshot.write();
                kv.apply(batch)
            });
            if let Err(e) = applied {
                // Nothing of the group reached the store (the batch is atomic):
                // forget it entirely, tx numbers included.
                tracing::error!(error = %e, "commit group failed; its requests are not written");
                self.catalog.rollback(group_mark);
                fail_all(jobs, &format!("write not stored: {e}"));
                return;
            }
            self.unsynced = false;
            self.io.groups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if self.durability == Durability::Durable {
                let started = std::time::Instant::now();
                let synced = kv.sync();
                self.io.syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.io
                    .sync_micros
                    .fetch_add(started.elapsed().as_micros() as u64, std::sync::atomic::Ordering::Relaxed);
                if let Err(e) = synced {
                    // The group is applied and may yet reach the disk, so its
                    // tx numbers stay taken; but it is not acknowledged. The
                    // next group syncs first.
                    tracing::error!(error = %e, "sync failed; the group's writes are not acknowledged");
                    self.unsynced = true;
                    self.catalog.commit();
                    *self.published.write() = Arc::new(self.catalog.state.clone());
                    fail_all(jobs, &format!("write not confirmed durable (sync failed: {e}); it may or may not survive a crash"));
                    return;
                }
            }
        }
        self.catalog.commit();
        *self.published.write() = Arc::new(self.catalog.state.clone());
        let committed: Vec<(String, Tx)> = jobs
            .iter()
            .zip(&results)
            .filter_map(|(j, r)| r.as_ref().ok().map(|o| (j.tenant.clone(), o.tx)))
            .collect();
        if !committed.is_empty() {
            for l in self.listeners.read().iter() {
                l(&committed);
            }
        }
        for ((job, r), replay) in jobs.into_iter().zip(results).zip(replays) {
            let answer = match replay {
                Some(bytes) => JobResult::Replayed(bytes),
                None => JobResult::Done(r),
            };
            let _ = job.reply.send(answer);
        }
    }

    /// The clock and changed stats (per tenant and per source) go into the
    /// same batch as the facts, so a restart, or a reader of the store, finds
    /// them consistent with each other.
    fn write_catalog(&self, ov: &mut Overlay<'_>) {
        let state = &self.catalog.state;
        ov.put(Keyspace::Meta, keys::meta::CLOCK.to_vec(), record::encode(&state.clock));
        for t in &self.catalog.dirty_stats {
            if let Some(s) = state.stats.get(t) {
                ov.put(Keyspace::Meta, keys::meta::stats(*t), record::encode(s));
            }
        }
        // Only the (tenant, source) pairs this group changed.
        for (t, source, s) in self.catalog.dirty_sources() {
            ov.put(Keyspace::Meta, keys::meta::source_stats(t, source), record::encode(s));
        }
    }
}

fn fail_all(jobs: Vec<Job>, msg: &str) {
    for job in jobs {
        let err = EngineError::Storage(crate::error::StorageError::Backend(msg.to_string()));
        let _ = job.reply.send(JobResult::Done(Err(err)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(ops: usize) -> (Job, Receiver<JobResult>) {
        let (reply, rx) = crossbeam_channel::bounded(1);
        let op = WriteOp::SetThreshold(0.5);
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
