//! [`Engine`]: the public face of the storage crate.

use crate::error::{EngineError, Result};
pub use crate::config::{Backend, EngineConfig};
use crate::kv::{CapturingKv, Keyspace, OrderedKv};
use crate::model::*;
use crate::read::Reader;
use crate::space::{DiskGuard, Health};
use crate::write::{
    self, Catalog, CommitListener, Idempotency, IoCounters, IoStats, Job, JobResult, Published, Writer,
};
use crossbeam_channel::Sender;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::ops::Deref;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Rewrites the store in `dir` packed, in key order, and checks the copy
/// before it replaces the store (`kv::compact_redb` says why a store needs
/// it). No server may have the store open.
pub fn compact(dir: &std::path::Path) -> Result<crate::kv::CompactSummary> {
    match Backend::found_in(dir) {
        Some(Backend::Redb) => Ok(crate::kv::compact_redb(dir)?),
        Some(Backend::Sled) => Err(EngineError::invalid(format!(
            "{} is a sled store, and compaction rewrites redb stores; move it to redb with `tempora backup \
             --data-dir` and `tempora restore`, which writes it packed",
            dir.display()
        ))),
        None => Err(EngineError::invalid(format!("{} holds no store", dir.display()))),
    }
}

/// Where the bytes of the store in `dir` go, table by table
/// (`kv::redb_usage`). No server may have the store open.
pub fn usage(dir: &std::path::Path) -> Result<crate::kv::StoreUsage> {
    match Backend::found_in(dir) {
        Some(Backend::Redb) => Ok(crate::kv::redb_usage(dir)?),
        Some(Backend::Sled) => Err(EngineError::invalid(format!(
            "{} is a sled store; its size is reported for redb stores only (`tempora backup --data-dir` and \
             `tempora restore` move it to redb)",
            dir.display()
        ))),
        None => Err(EngineError::invalid(format!("{} holds no store", dir.display()))),
    }
}

/// The bitemporal fact engine. Cheap to share behind an `Arc`; every method
/// takes `&self` and is safe to call from any number of threads.
pub struct Engine {
    kv: Arc<CapturingKv>,
    tx: Mutex<Option<Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    published: Arc<RwLock<Arc<Published>>>,
    listeners: Arc<RwLock<Vec<CommitListener>>>,
    /// Held for reading by every read, for writing by the writer while a
    /// commit group becomes visible: a read is a series of scans and gets on
    /// several keyspaces, and without it one read could see a group half
    /// applied (a fact both in the live and the closed index, or the old and
    /// the new active fact at once). On redb that is only the switch to the
    /// new view, after the commit; on sled the whole apply
    /// (`OrderedKv::apply_published`).
    snapshot: Arc<RwLock<()>>,
    format_found: u32,
    io: Arc<IoCounters>,
    /// The free-space and read-only check run before every write.
    disk: Option<DiskGuard>,
    /// Latched by the first write the backend failed.
    health: Arc<Health>,
    /// Held by the writer while it applies a commit group and by every
    /// service-record write; a backup holds it for the instant it takes its
    /// starting point, when no batch is half applied (see `crate::backup`).
    pub(crate) gate: Arc<Mutex<()>>,
}

/// A [`Reader`] that keeps commit groups out while it lives.
struct Snapshot<'a> {
    reader: Reader<'a>,
    _guard: RwLockReadGuard<'a, ()>,
}

impl<'a> Deref for Snapshot<'a> {
    type Target = Reader<'a>;
    fn deref(&self) -> &Reader<'a> {
        &self.reader
    }
}

impl Engine {
    pub fn open(config: EngineConfig) -> Result<Engine> {
        Self::open_with_clock(config, write::wall_clock)
    }

    /// Like [`Engine::open`] with a custom wall clock (tests use it to step
    /// the clock backwards).
    pub fn open_with_clock(config: EngineConfig, clock: fn() -> Millis) -> Result<Engine> {
        let (backend, location): (Arc<dyn OrderedKv>, String) = match &config.path {
            Some(p) => {
                std::fs::create_dir_all(p).map_err(crate::error::StorageError::from)?;
                let backend = Backend::found_in(p).unwrap_or(config.backend);
                (backend.open(p, &config)?, p.display().to_string())
            }
            None => (config.backend.temporary()?, "temporary store".to_string()),
        };
        let kv = Arc::new(CapturingKv::new(backend));
        let format_found = crate::migrate::run(kv.as_ref(), &location)?;
        let catalog = Catalog::load(kv.as_ref())?;
        let published = Arc::new(RwLock::new(Arc::new(catalog.state.clone())));
        let listeners: Arc<RwLock<Vec<CommitListener>>> = Arc::default();
        let snapshot: Arc<RwLock<()>> = Arc::default();
        let (sender, receiver) = crossbeam_channel::unbounded();
        let io: Arc<IoCounters> = Arc::default();
        let health: Arc<Health> = Arc::default();
        let gate: Arc<Mutex<()>> = Arc::default();
        let writer = Writer {
            kv: Arc::clone(&kv) as Arc<dyn OrderedKv>,
            catalog,
            published: Arc::clone(&published),
            listeners: Arc::clone(&listeners),
            snapshot: Arc::clone(&snapshot),
            durability: config.durability,
            max_group: config.max_group.max(1),
            clock,
            unsynced: Arc::default(),
            io: Arc::clone(&io),
            health: Arc::clone(&health),
            gate: Arc::clone(&gate),
        };
        let handle = std::thread::Builder::new()
            .name("tempora-writer".into())
            .spawn(move || writer.run(receiver))
            .map_err(crate::error::StorageError::from)?;
        Ok(Engine {
            kv,
            tx: Mutex::new(Some(sender)),
            writer: Mutex::new(Some(handle)),
            published,
            listeners,
            snapshot,
            format_found,
            io,
            disk: config.path.as_deref().map(|p| DiskGuard::new(p, config.min_free_bytes)),
            health,
            gate,
        })
    }

    /// The on-disk format the data directory had when it was opened (0 for a
    /// new one). It is [`crate::CURRENT_FORMAT`] now.
    pub fn format_found(&self) -> u32 {
        self.format_found
    }

    // ---- writes ------------------------------------------------------------

    /// Runs `ops` as one transaction of `tenant`: all of it is stored, durably,
    /// or none of it. Blocks until then.
    pub fn write(&self, tenant: &str, ops: Vec<WriteOp>) -> Result<WriteOutcome> {
        match self.submit(tenant, ops, None)? {
            JobResult::Done(r) => r,
            JobResult::Replayed(_) => unreachable!("no idempotency key, no replay"),
        }
    }

    /// Like [`Engine::write`], made safe to retry under `idempotency.key` (see
    /// [`Idempotency`]): `Ok(Err(bytes))` is the stored reply of an earlier
    /// request with the same key, and nothing was applied.
    pub fn write_idempotent(
        &self,
        tenant: &str,
        ops: Vec<WriteOp>,
        idempotency: Idempotency,
    ) -> Result<std::result::Result<WriteOutcome, Vec<u8>>> {
        match self.submit(tenant, ops, Some(idempotency))? {
            JobResult::Done(r) => r.map(Ok),
            JobResult::Replayed(bytes) => Ok(Err(bytes)),
        }
    }

    /// The stored reply under an idempotency key, if any.
    pub fn idempotent_reply(&self, tenant: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.kv.get(Keyspace::Aux, &crate::keys::idempotency(tenant, key))?)
    }

    /// [`Engine::write_idempotent`] without waiting: `done` is called with
    /// the result once the write is durable (or has failed), on the engine's
    /// sync thread, so it must be quick (hand the result to a channel or a
    /// future). `Err` means the write was not queued and `done` is dropped
    /// uncalled.
    pub fn write_then(
        &self,
        tenant: &str,
        ops: Vec<WriteOp>,
        idempotency: Option<Idempotency>,
        done: impl FnOnce(Result<std::result::Result<WriteOutcome, Vec<u8>>>) + Send + 'static,
    ) -> Result<()> {
        self.enqueue(
            tenant,
            ops,
            idempotency,
            Box::new(move |r| {
                done(match r {
                    JobResult::Done(r) => r.map(Ok),
                    JobResult::Replayed(bytes) => Ok(Err(bytes)),
                })
            }),
        )
    }

    fn submit(&self, tenant: &str, ops: Vec<WriteOp>, idempotency: Option<Idempotency>) -> Result<JobResult> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        let reply: crate::write::Reply = Box::new(move |r| {
            let _ = reply.send(r);
        });
        self.enqueue(tenant, ops, idempotency, reply)?;
        answer.recv().map_err(|_| EngineError::Closed("the writer thread stopped".into()))
    }

    fn enqueue(
        &self,
        tenant: &str,
        ops: Vec<WriteOp>,
        idempotency: Option<Idempotency>,
        reply: crate::write::Reply,
    ) -> Result<()> {
        self.writable()?;
        let guard = self.tx.lock();
        let sender = guard.as_ref().ok_or_else(|| EngineError::Closed("closed by the caller".into()))?;
        sender
            .send(Job { tenant: tenant.to_string(), ops, idempotency, reply })
            .map_err(|_| EngineError::Closed("the writer thread stopped".into()))
    }

    pub fn assert(&self, tenant: &str, input: FactInput) -> Result<Asserted> {
        let out = self.write(tenant, vec![WriteOp::Assert(input)])?;
        match out.outcomes.into_iter().next() {
            Some(OpOutcome::Asserted(a)) => Ok(a),
            _ => unreachable!("an assert write yields an assert outcome"),
        }
    }

    /// Asserts every input in one transaction (one tx); later inputs see
    /// earlier ones.
    pub fn assert_batch(&self, tenant: &str, inputs: Vec<FactInput>) -> Result<(Tx, Vec<Asserted>)> {
        let out = self.write(tenant, inputs.into_iter().map(WriteOp::Assert).collect())?;
        let facts = out
            .outcomes
            .into_iter()
            .map(|o| match o {
                OpOutcome::Asserted(a) => a,
                _ => unreachable!("assert ops yield assert outcomes"),
            })
            .collect();
        Ok((out.tx, facts))
    }

    /// Retracts a fact; returns its retracted version. Retracting an already
    /// retracted fact changes nothing and returns it as it is.
    pub fn retract(&self, tenant: &str, id: FactId) -> Result<Fact> {
        let out = self.write(tenant, vec![WriteOp::Retract(id)])?;
        match out.outcomes.into_iter().next() {
            Some(OpOutcome::Retracted { fact, .. }) => Ok(fact),
            _ => unreachable!("a retract write yields a retract outcome"),
        }
    }

    pub fn set_cardinality(&self, tenant: &str, predicate: &str, cardinality: Cardinality) -> Result<PredicateInfo> {
        self.write(tenant, vec![WriteOp::SetCardinality { predicate: predicate.to_string(), cardinality }])?;
        Ok(PredicateInfo { name: predicate.to_string(), cardinality })
    }

    pub fn set_threshold(&self, tenant: &str, threshold: f64) -> Result<()> {
        self.write(tenant, vec![WriteOp::SetThreshold(threshold)]).map(|_| ())
    }

    /// Called after every durable commit group; see [`CommitListener`].
    pub fn add_commit_listener(&self, listener: CommitListener) {
        self.listeners.write().push(listener);
    }

    // ---- reads ---------------------------------------------------------------

    /// A reader of `tenant` that sees whole commit groups only. Take one per
    /// read, never two at once in one thread (the lock is fair: a second read
    /// lock behind a waiting writer would deadlock).
    fn reader(&self, tenant: &str) -> Option<Snapshot<'_>> {
        // The snapshot first: the writer raises a tenant's superseded-until
        // bound before it applies the group that needs it, so a bound loaded
        // after the snapshot covers everything the snapshot shows.
        let guard = self.snapshot.read();
        let (tid, superseded_until) = {
            let p = self.published.read();
            let tid = *p.tenants.get(tenant)?;
            (tid, p.superseded_until(tid))
        };
        let reader = Reader { kv: self.kv.as_ref(), tid, tenant: tenant.to_string(), superseded_until };
        Some(Snapshot { reader, _guard: guard })
    }

    /// One fact: its latest version, or the version visible at `as_of`.
    /// A fact of another tenant is not found.
    pub fn get(&self, tenant: &str, id: FactId, as_of: Option<AsOf>) -> Result<Option<Fact>> {
        let Some(r) = self.reader(tenant) else { return Ok(None) };
        Ok(r.fact(id, as_of)?.filter(|f| f.tenant == tenant))
    }

    pub fn history(&self, tenant: &str, id: FactId) -> Result<FactHistory> {
        match self.reader(tenant) {
            Some(r) => r.history(tenant, id),
            None => Err(EngineError::NotFound(format!("no fact with id {id}"))),
        }
    }

    pub fn query(&self, tenant: &str, q: &FactQuery) -> Result<FactPage> {
        Ok(self.query_within(tenant, q, usize::MAX)?.expect("an unbounded query always finishes"))
    }

    /// [`Engine::query`], or `None` once it has looked at more than `budget`
    /// index entries without finishing (`Reader::query_within`).
    pub fn query_within(&self, tenant: &str, q: &FactQuery, budget: usize) -> Result<Option<FactPage>> {
        match self.reader(tenant) {
            Some(r) => r.query_within(q, budget),
            // Cursors carry the tenant's id; a tenant without data has none.
            None if q.cursor.is_some() => Err(EngineError::invalid("cursor does not belong to this query")),
            None => Ok(Some(FactPage { facts: Vec::new(), next_cursor: None })),
        }
    }

    /// Facts whose object is the entity `entity` (`Type:id`): who points at it.
    pub fn incoming(&self, tenant: &str, entity: &str, as_of: Option<AsOf>) -> Result<FactPage> {
        self.query(
            tenant,
            &FactQuery { object: Some(serde_json::Value::String(entity.to_string())), as_of, ..Default::default() },
        )
    }

    pub fn subject_history(&self, tenant: &str, subject: &str, as_of: Option<AsOf>) -> Result<Vec<Fact>> {
        match self.reader(tenant) {
            Some(r) => r.subject_history(subject, as_of),
            None => Ok(Vec::new()),
        }
    }

    /// The tenant's committed transactions after `after_tx`, at most `limit`.
    pub fn changes(&self, tenant: &str, after_tx: Tx, limit: usize) -> Result<Vec<Change>> {
        match self.reader(tenant) {
            Some(r) => r.changes(tenant, after_tx, limit),
            None => Ok(Vec::new()),
        }
    }

    /// The tenant's committed transactions after `after_tx`, at most `limit`,
    /// by fact id: an entry written from format 7 on is read without its
    /// versions; an older one reads them for its subjects and value changes.
    pub fn change_log(&self, tenant: &str, after_tx: Tx, limit: usize) -> Result<Vec<LoggedChange>> {
        match self.reader(tenant) {
            Some(r) => r.change_log(after_tx, limit),
            None => Ok(Vec::new()),
        }
    }

    /// The tenant's last committed tx and its record time (`None` before its
    /// first write): a clock that moves only when this tenant writes.
    pub fn tenant_last_write(&self, tenant: &str) -> Result<Option<(Tx, Millis)>> {
        match self.reader(tenant) {
            Some(r) => r.last_change(),
            None => Ok(None),
        }
    }

    pub fn predicate(&self, tenant: &str, name: &str) -> Result<PredicateInfo> {
        match self.reader(tenant) {
            Some(r) => r.predicate(name),
            None => Ok(PredicateInfo { name: name.to_string(), cardinality: Cardinality::default() }),
        }
    }

    pub fn predicates(&self, tenant: &str) -> Result<Vec<PredicateInfo>> {
        match self.reader(tenant) {
            Some(r) => r.predicates(),
            None => Ok(Vec::new()),
        }
    }

    pub fn threshold(&self, tenant: &str) -> f64 {
        let p = self.published.read();
        p.tenants
            .get(tenant)
            .and_then(|t| p.thresholds.get(t).copied())
            .unwrap_or(write::DEFAULT_THRESHOLD)
    }

    pub fn stats(&self, tenant: &str) -> TenantStats {
        let p = self.published.read();
        p.tenants.get(tenant).and_then(|t| p.stats.get(t).cloned()).unwrap_or_default()
    }

    /// Counts, by latest status, of the tenant's facts whose `source` is
    /// exactly `source` (facts without a source are counted nowhere). One
    /// point read of a counter kept by the writer, whatever the number of
    /// facts; it reflects every committed write. An unknown tenant or source
    /// has all counts zero.
    pub fn source_stats(&self, tenant: &str, source: &str) -> Result<SourceStats> {
        match self.reader(tenant) {
            Some(r) => r.source_stats(source),
            None => Ok(SourceStats::default()),
        }
    }

    /// Names of every tenant that has written.
    pub fn tenants(&self) -> Vec<String> {
        let mut v: Vec<String> = self.published.read().tenants.keys().cloned().collect();
        v.sort();
        v
    }

    /// The last committed tx and its record time.
    pub fn last_tx(&self) -> (Tx, Millis) {
        let c = self.published.read().clock;
        (c.last_tx, c.last_recorded_at)
    }

    /// Counters of the write path: commit groups, requests, syncs.
    pub fn io_stats(&self) -> IoStats {
        self.io.snapshot()
    }

    pub fn size_on_disk(&self) -> Option<u64> {
        self.kv.size_on_disk()
    }

    /// The storage backend's page cache: bytes held and its ceiling (redb;
    /// `None` on sled, which does not tell).
    pub fn cache_fill(&self) -> Option<crate::kv::CacheFill> {
        self.kv.cache_fill()
    }

    /// Makes everything written so far durable (useful with
    /// [`Durability::Relaxed`]).
    pub fn sync(&self) -> Result<()> {
        Ok(self.kv.sync()?)
    }

    /// `Ok` when a write may be tried now: the store has not failed one and
    /// the disk has room (see [`crate::space`]). Refusing here changes nothing.
    pub fn writable(&self) -> std::result::Result<(), crate::error::StorageError> {
        self.health.check()?;
        match &self.disk {
            Some(d) => d.check(),
            None => Ok(()),
        }
    }

    /// Why the store refuses writes until restart, if it does.
    pub fn failure(&self) -> Option<String> {
        self.health.failure()
    }

    /// Writes a backup of the whole store (every tenant), as it stands when
    /// the call begins, to `out`; see [`crate::backup`]. Writes wait only for
    /// the instant the backup takes its starting point; reads and writes go
    /// on while it is written. One backup runs at a time: another started
    /// meanwhile is refused.
    pub fn backup(&self, out: &mut dyn std::io::Write) -> Result<crate::backup::BackupSummary> {
        crate::backup::write(&self.kv, &self.gate, crate::migrate::CURRENT_FORMAT, out)
    }

    /// The whole store as logical items (tenants, fact versions, the change
    /// log, replies and service records; see [`crate::logical`]), to move it
    /// to another kind of store. It is one state: writes wait while the
    /// export lives (reads go on), so export a store nothing else writes,
    /// such as a backup restored into a scratch directory.
    pub fn export(&self) -> Result<crate::logical::Export<'_>> {
        crate::logical::Export::new(self.kv.as_ref(), self.gate.lock())
    }

    /// Applies and syncs a batch of service records, under the write gate.
    fn aux_apply(&self, b: crate::kv::WriteBatch) -> Result<()> {
        self.writable()?;
        let _gate = self.gate.lock();
        let done = self.kv.apply(b).and_then(|()| self.kv.sync());
        if let Err(e @ crate::error::StorageError::Io(_)) = &done {
            self.health.fail(e);
        }
        Ok(done?)
    }

    // ---- opaque records for the service layer --------------------------------

    pub fn aux_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.kv.get(Keyspace::Aux, key)?)
    }

    /// Stores an opaque record durably (outside the fact model; used for
    /// idempotency replies and similar service state).
    pub fn aux_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = crate::kv::WriteBatch::default();
        b.put(Keyspace::Aux, key.to_vec(), value.to_vec());
        self.aux_apply(b)
    }

    /// Stores several opaque records in one atomic batch and one sync.
    pub fn aux_put_many(&self, records: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut b = crate::kv::WriteBatch::default();
        for (k, v) in records {
            b.put(Keyspace::Aux, k, v);
        }
        self.aux_apply(b)
    }

    /// Removes opaque records (durably, in one batch).
    pub fn aux_delete_many(&self, keys: Vec<Vec<u8>>) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let mut b = crate::kv::WriteBatch::default();
        for k in keys {
            b.delete(Keyspace::Aux, k);
        }
        self.aux_apply(b)
    }

    /// Every opaque record whose key starts with `prefix`, in key order,
    /// handed to `f` one at a time (so a large prefix is never held in
    /// memory twice). `f` returning `false` stops the scan.
    pub fn aux_scan(&self, prefix: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        for item in crate::kv::scan_prefix(self.kv.as_ref(), Keyspace::Aux, prefix, false) {
            let (k, v) = item?;
            if !f(&k, &v) {
                break;
            }
        }
        Ok(())
    }

    /// Stops the writer after the requests already queued, syncs, and waits.
    pub fn close(&self) {
        self.tx.lock().take();
        if let Some(h) = self.writer.lock().take() {
            let _ = h.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.close();
    }
}
