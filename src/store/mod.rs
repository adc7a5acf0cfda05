//! The store seam: everything the service keeps, behind one trait.
//!
//! The service and the parts under it (search, recall, the monitor,
//! connectors, digest, embeddings) read and write through
//! [`MemoryStore`]; nothing above this module names the engine. The
//! embedded engine (`tempora-storage`, `embedded.rs`) implements it; so can
//! a store shared by several processes, since everything derived from the
//! store (the search index, embeddings, the change feed, the monitor)
//! follows its change log ([`MemoryStore::changes`]) rather than in-process
//! events: a commit listener only wakes them early.
//!
//! The vocabulary of the seam is the engine crate's model (facts, queries,
//! pages, changes), re-exported here so that the rest of the service depends
//! on it through this module only.

pub mod embedded;
pub mod postgres;

pub use tempora_storage::{
    is_entity_ref, validate_input, validate_write, AsOf, Asserted, Cardinality, Change, ChangeEvent, CommitListener, EngineError,
    Fact, FactHistory, FactId, FactInput, FactPage, FactQuery, Idempotency, IoStats, LoggedChange, LoggedEvent,
    Millis, OpOutcome, PredicateInfo, RenderReply, SourceStats, Status, StatusFilter, StatusSet, StorageError,
    TenantStats, Tx, WriteOp, WriteOutcome, DEFAULT_PAGE, DEFAULT_THRESHOLD, MAX_JSON_DEPTH, MAX_PAGE,
    MAX_PREDICATE_BYTES, MAX_SOURCE_BYTES, MAX_SUBJECT_BYTES, MAX_VALUE_BYTES,
};
pub use tempora_storage::backup::BackupSummary;
pub use tempora_storage::kv::{CacheFill, CHECKPOINT_BYTES};

/// The error of a store operation.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// What a queued write answers: its outcome, or (`Err`) the answer stored
/// under its idempotency key by an earlier write.
pub type Written = std::result::Result<WriteOutcome, Vec<u8>>;

/// Called once a queued write is durable, or has failed.
pub type WriteDone = Box<dyn FnOnce(Result<Written>) + Send>;

/// Everything the service keeps. Reads and the other calls may block (the
/// service runs long ones on the blocking pool); writes are queued and
/// answered through a callback, so no thread waits for a group commit.
pub trait MemoryStore: Send + Sync {
    // ---- writes --------------------------------------------------------

    /// Queues one write transaction of `tenant`. With `idempotency`, the
    /// answer its `render` makes is stored in the same transaction, and a
    /// later write under the same key is not applied but answered with it.
    /// `done` is called once the write is durable (or failed); `Err` means
    /// it was not queued and `done` is dropped uncalled.
    fn write_then(
        &self,
        tenant: &str,
        ops: Vec<WriteOp>,
        idempotency: Option<Idempotency>,
        done: WriteDone,
    ) -> Result<()>;

    /// The answer stored under an idempotency key, if any.
    fn idempotent_reply(&self, tenant: &str, key: &[u8]) -> Result<Option<Vec<u8>>>;

    // ---- facts ---------------------------------------------------------

    /// One fact: its latest version, or the one visible at `as_of`.
    fn get(&self, tenant: &str, id: FactId, as_of: Option<AsOf>) -> Result<Option<Fact>>;
    fn history(&self, tenant: &str, id: FactId) -> Result<FactHistory>;
    fn query(&self, tenant: &str, q: &FactQuery) -> Result<FactPage>;
    /// The page, unless finding it takes more than `budget` index entries
    /// (`None`: run [`MemoryStore::query`] where blocking is fine).
    fn query_within(&self, tenant: &str, q: &FactQuery, budget: usize) -> Result<Option<FactPage>>;
    /// Facts whose object is `entity`.
    fn incoming(&self, tenant: &str, entity: &str, as_of: Option<AsOf>) -> Result<FactPage>;
    /// Every version of every fact of `subject`.
    fn subject_history(&self, tenant: &str, subject: &str, as_of: Option<AsOf>) -> Result<Vec<Fact>>;

    // ---- the change log ------------------------------------------------

    /// The tenant's committed transactions after `after_tx`, resolved to fact versions.
    fn changes(&self, tenant: &str, after_tx: Tx, limit: usize) -> Result<Vec<Change>>;
    /// The same, as logged (ids and counts, no fact reads).
    fn change_log(&self, tenant: &str, after_tx: Tx, limit: usize) -> Result<Vec<LoggedChange>>;
    fn tenant_last_write(&self, tenant: &str) -> Result<Option<(Tx, Millis)>>;
    /// The newest transaction of the store and its record time.
    fn last_tx(&self) -> (Tx, Millis);
    /// Called after every durable commit group with its (tenant, tx) pairs.
    fn add_commit_listener(&self, listener: CommitListener);

    // ---- predicates, thresholds, tenants -------------------------------

    fn predicate(&self, tenant: &str, name: &str) -> Result<PredicateInfo>;
    fn predicates(&self, tenant: &str) -> Result<Vec<PredicateInfo>>;
    fn threshold(&self, tenant: &str) -> f64;
    fn stats(&self, tenant: &str) -> TenantStats;
    fn source_stats(&self, tenant: &str, source: &str) -> Result<SourceStats>;
    fn tenants(&self) -> Vec<String>;

    // ---- aux records: the service's own state (artifacts, tools, alerts,
    // connectors, ...), by key --------------------------------------------

    fn aux_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn aux_put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    fn aux_put_many(&self, records: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()>;
    fn aux_delete_many(&self, keys: Vec<Vec<u8>>) -> Result<()>;
    /// Calls `f` with each record whose key starts with `prefix`, in key
    /// order, while it answers true.
    fn aux_scan(&self, prefix: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()>;

    // ---- work that runs once, whichever server takes it ----------------

    /// Claims `key` for this server: true for the first caller ever to claim
    /// it, false for every later one, on any server sharing the store. A
    /// scheduled job names its run (the job and the time it is due) and runs
    /// only if its claim is taken, so it runs once however many servers see
    /// it due. One process needs no arbitration: the embedded engine, which
    /// only one process opens, grants every claim.
    fn claim(&self, key: &[u8]) -> Result<bool> {
        let _ = key;
        Ok(true)
    }

    // ---- the store itself ----------------------------------------------

    /// Whether the store answers at all (`Err` says why not): a store on a
    /// database server checks that it reaches it. The embedded engine is
    /// always there.
    fn reachable(&self) -> std::result::Result<(), StorageError> {
        Ok(())
    }
    /// Whether writes are taken now (`Err` says why not: a full or
    /// read-only disk, an earlier failed write).
    fn writable(&self) -> std::result::Result<(), StorageError>;
    /// Why the store stopped taking writes, if it did.
    fn failure(&self) -> Option<String>;
    fn io_stats(&self) -> IoStats;
    fn size_on_disk(&self) -> Option<u64>;
    /// How full the cache is, where the store has one.
    fn cache_fill(&self) -> Option<CacheFill>;
    /// The data format the store was found in when opened.
    fn format_found(&self) -> u32;
    /// A consistent copy of the whole store, written to `out`.
    fn backup(&self, out: &mut dyn std::io::Write) -> Result<BackupSummary>;
    /// Finishes queued writes and stops taking new ones.
    fn close(&self);
}
