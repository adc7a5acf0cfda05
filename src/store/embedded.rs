//! The embedded store: the `tempora-storage` engine in this process, with
//! its data directory on local disk (`docs/storage.md`).

use super::*;
use std::path::Path;
use std::sync::Arc;
use tempora_storage::Backend;
/// The engine itself, for what opens a store (the server, tools, tests).
pub use tempora_storage::{Durability, Engine, EngineConfig};
/// Backup files of the store: writing, verifying and restoring them.
pub use tempora_storage::backup;

/// How to open the embedded store (`[storage]` settings, `docs/configuration.md`).
#[derive(Debug, Clone)]
pub struct Options {
    /// Wait for each commit group's sync before answering (`durable`), or not.
    pub durable: bool,
    pub min_free_bytes: u64,
    pub cache_bytes: u64,
    pub checkpoint_bytes: u64,
    pub warm_cache: bool,
    /// The backend of a new store (`redb` when false: `sled`).
    pub redb: bool,
}

/// Opens (or creates) the store in `dir`.
pub fn open(dir: &Path, o: &Options) -> Result<Arc<Engine>> {
    let config = EngineConfig::at(dir)
        .durability(if o.durable { Durability::Durable } else { Durability::Relaxed })
        .min_free_bytes(o.min_free_bytes)
        .cache_bytes(o.cache_bytes)
        .checkpoint_bytes(o.checkpoint_bytes)
        .warm_cache(o.warm_cache)
        .backend(if o.redb { Backend::Redb } else { Backend::Sled });
    Ok(Arc::new(Engine::open(config)?))
}

/// A store in a temporary directory, removed when dropped (tests).
pub fn temporary() -> Arc<Engine> {
    Arc::new(Engine::open(EngineConfig::temporary()).expect("a temporary store opens"))
}

/// Rewrites the store in `dir` compactly (`tempora compact`).
pub fn compact(dir: &Path) -> Result<tempora_storage::kv::CompactSummary> {
    tempora_storage::compact(dir)
}

/// Where the bytes of the store in `dir` go (no server may have it open).
pub fn usage(dir: &Path) -> Result<tempora_storage::kv::StoreUsage> {
    tempora_storage::usage(dir)
}

impl MemoryStore for Engine {
    fn write_then(
        &self,
        tenant: &str,
        ops: Vec<WriteOp>,
        idempotency: Option<Idempotency>,
        done: WriteDone,
    ) -> Result<()> {
        Engine::write_then(self, tenant, ops, idempotency, done)
    }
    fn idempotent_reply(&self, tenant: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Engine::idempotent_reply(self, tenant, key)
    }
    fn get(&self, tenant: &str, id: FactId, as_of: Option<AsOf>) -> Result<Option<Fact>> {
        Engine::get(self, tenant, id, as_of)
    }
    fn history(&self, tenant: &str, id: FactId) -> Result<FactHistory> {
        Engine::history(self, tenant, id)
    }
    fn query(&self, tenant: &str, q: &FactQuery) -> Result<FactPage> {
        Engine::query(self, tenant, q)
    }
    fn query_within(&self, tenant: &str, q: &FactQuery, budget: usize) -> Result<Option<FactPage>> {
        Engine::query_within(self, tenant, q, budget)
    }
    fn incoming(&self, tenant: &str, entity: &str, as_of: Option<AsOf>) -> Result<FactPage> {
        Engine::incoming(self, tenant, entity, as_of)
    }
    fn subject_history(&self, tenant: &str, subject: &str, as_of: Option<AsOf>) -> Result<Vec<Fact>> {
        Engine::subject_history(self, tenant, subject, as_of)
    }
    fn changes(&self, tenant: &str, after_tx: Tx, limit: usize) -> Result<Vec<Change>> {
        Engine::changes(self, tenant, after_tx, limit)
    }
    fn change_log(&self, tenant: &str, after_tx: Tx, limit: usize) -> Result<Vec<LoggedChange>> {
        Engine::change_log(self, tenant, after_tx, limit)
    }
    fn tenant_last_write(&self, tenant: &str) -> Result<Option<(Tx, Millis)>> {
        Engine::tenant_last_write(self, tenant)
    }
    fn last_tx(&self) -> (Tx, Millis) {
        Engine::last_tx(self)
    }
    fn add_commit_listener(&self, listener: CommitListener) {
        Engine::add_commit_listener(self, listener)
    }
    fn predicate(&self, tenant: &str, name: &str) -> Result<PredicateInfo> {
        Engine::predicate(self, tenant, name)
    }
    fn predicates(&self, tenant: &str) -> Result<Vec<PredicateInfo>> {
        Engine::predicates(self, tenant)
    }
    fn threshold(&self, tenant: &str) -> f64 {
        Engine::threshold(self, tenant)
    }
    fn stats(&self, tenant: &str) -> TenantStats {
        Engine::stats(self, tenant)
    }
    fn source_stats(&self, tenant: &str, source: &str) -> Result<SourceStats> {
        Engine::source_stats(self, tenant, source)
    }
    fn tenants(&self) -> Vec<String> {
        Engine::tenants(self)
    }
    fn aux_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Engine::aux_get(self, key)
    }
    fn aux_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Engine::aux_put(self, key, value)
    }
    fn aux_put_many(&self, records: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        Engine::aux_put_many(self, records)
    }
    fn aux_delete_many(&self, keys: Vec<Vec<u8>>) -> Result<()> {
        Engine::aux_delete_many(self, keys)
    }
    fn aux_scan(&self, prefix: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        Engine::aux_scan(self, prefix, f)
    }
    fn writable(&self) -> std::result::Result<(), StorageError> {
        Engine::writable(self)
    }
    fn failure(&self) -> Option<String> {
        Engine::failure(self)
    }
    fn io_stats(&self) -> IoStats {
        Engine::io_stats(self)
    }
    fn size_on_disk(&self) -> Option<u64> {
        Engine::size_on_disk(self)
    }
    fn cache_fill(&self) -> Option<CacheFill> {
        Engine::cache_fill(self)
    }
    fn format_found(&self) -> u32 {
        Engine::format_found(self)
    }
    fn backup(&self, out: &mut dyn std::io::Write) -> Result<BackupSummary> {
        Engine::backup(self, out)
    }
    fn close(&self) {
        Engine::close(self)
    }
}
