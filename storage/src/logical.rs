//! A whole store as what it holds, not how the engine lays it out: the
//! clock, the tenants with their thresholds and predicates, every fact
//! version, the change log, the idempotency replies and the service's own
//! records. This is what moves a store between the embedded engine and
//! another kind of store (PostgreSQL) with every fact id, tx, interval and
//! history unchanged; the backup file stays the engine's own (`crate::backup`).
//!
//! - [`Export`] (from [`crate::Engine::export`]) reads those items out of an
//!   engine store.
//! - [`Importer`] builds an engine store from them. What the engine derives
//!   from the facts (the `idx_sp`, `idx_spo`, `idx_closed`, `idx_valid`,
//!   `idx_ps` and `idx_os` keys, the tenant and source counts, the superseded-until
//!   bounds) is derived again here as the write path would have written it,
//!   with the engine's own encoders (`keys`, `fact_record`, `record`), so a
//!   store imported from an export of a store is the same store, record for
//!   record (the tests below hold it to that).

use crate::codec::{self, KeyReader};
use crate::config::{Backend, EngineConfig};
use crate::error::{EngineError, Result, StorageError};
use crate::fact_record;
use crate::keys::{self, TenantId};
use crate::kv::{scan_prefix, KvIter, Keyspace, OrderedKv, WriteBatch};
use crate::model::{Fact, FactId, Millis, PredicateInfo, SourceStats, Status, TenantStats, Tx};
use crate::record::{self, Clock, LogEntry, LogEvent};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

/// A tenant: its id (the engine's interned number, kept so that both stores
/// number tenants alike), its name, and its candidate threshold when one was
/// ever set (`None`: the default, never set).
#[derive(Debug, Clone, PartialEq)]
pub struct Tenant {
    pub id: TenantId,
    pub name: String,
    pub threshold: Option<f64>,
}

/// One change-log entry: a committed transaction of a tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedTx {
    pub tenant: TenantId,
    pub tx: Tx,
    pub entry: LogEntry,
}

/// The stored answer of a keyed write (`Idempotency`).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub tenant: String,
    pub key: Vec<u8>,
    pub reply: Vec<u8>,
}

// ---- reading a store out ------------------------------------------------------

/// An engine store read as logical items, at one state: it holds the
/// engine's write gate, so no commit group and no service-record write is
/// applied while it lives (reads go on). It is meant for a store nothing
/// else writes, such as a backup restored into a scratch directory.
pub struct Export<'a> {
    kv: &'a dyn OrderedKv,
    _writes_wait: parking_lot::MutexGuard<'a, ()>,
    clock: Clock,
    tenants: Vec<Tenant>,
    names: HashMap<TenantId, String>,
}

impl<'a> Export<'a> {
    pub(crate) fn new(kv: &'a dyn OrderedKv, gate: parking_lot::MutexGuard<'a, ()>) -> Result<Export<'a>> {
        let clock = match kv.get(Keyspace::Meta, keys::meta::CLOCK)? {
            Some(v) => record::decode(&v)?,
            None => Clock::default(),
        };
        let mut tenants = Vec::new();
        for item in scan_prefix(kv, Keyspace::Meta, &keys::meta::tenant_by_name_prefix(), false) {
            let (k, v) = item?;
            let id: TenantId = record::decode(&v)?;
            let threshold = match kv.get(Keyspace::Meta, &keys::meta::threshold(id))? {
                Some(t) => Some(record::decode(&t)?),
                None => None,
            };
            tenants.push(Tenant { id, name: keys::meta::tenant_name_of(&k)?, threshold });
        }
        tenants.sort_by_key(|t| t.id);
        let names = tenants.iter().map(|t| (t.id, t.name.clone())).collect();
        Ok(Export { kv, _writes_wait: gate, clock, tenants, names })
    }

    /// The last committed transaction and its record time.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Every tenant that has committed a transaction, by id.
    pub fn tenants(&self) -> &[Tenant] {
        &self.tenants
    }

    /// The tenant's predicates with a cardinality set, by name.
    pub fn predicates(&self, tenant: TenantId) -> Result<Vec<PredicateInfo>> {
        scan_prefix(self.kv, Keyspace::Meta, &keys::meta::predicate_prefix(tenant), false)
            .map(|item| Ok(record::decode(&item?.1)?))
            .collect()
    }

    /// The tenant's fact counts as the engine keeps them.
    pub fn stats(&self, tenant: TenantId) -> Result<TenantStats> {
        match self.kv.get(Keyspace::Meta, &keys::meta::stats(tenant))? {
            Some(v) => Ok(record::decode(&v)?),
            None => Ok(TenantStats::default()),
        }
    }

    /// The tenant's per-source fact counts as the engine keeps them, by source.
    pub fn source_stats(&self, tenant: TenantId) -> Result<Vec<(String, SourceStats)>> {
        let prefix = source_stats_prefix(tenant);
        scan_prefix(self.kv, Keyspace::Meta, &prefix, false)
            .map(|item| {
                let (k, v) = item?;
                let source = KeyReader::new(&k[prefix.len()..]).string().map_err(|e| StorageError::Corrupt(e.to_string()))?;
                Ok((source, record::decode(&v)?))
            })
            .collect()
    }

    /// Every version of every fact, by fact id, then tx.
    pub fn versions(&self) -> impl Iterator<Item = Result<Fact>> + '_ {
        all(self.kv, Keyspace::Versions).map(|item| {
            let (k, v) = item?;
            Ok(fact_record::decode_version(&k, &v)?)
        })
    }

    /// The latest version of every fact: the live ones (active and
    /// candidate) by tenant, subject, predicate and id, then the closed ones
    /// (superseded and retracted) in the same order. The facts of one
    /// subject and predicate come together.
    pub fn latest(&self) -> impl Iterator<Item = Result<Fact>> + '_ {
        all(self.kv, Keyspace::Sp).chain(all(self.kv, Keyspace::Closed)).map(|item| {
            let (k, v) = item?;
            let tenant = self.name(keys::tenant_of_index_key(&k)?)?;
            Ok(fact_record::decode_indexed(tenant, &k, &v)?)
        })
    }

    /// The change log, by tenant, then tx. An entry written before format 7
    /// gets the subjects and value-change counts later entries carry, from
    /// its versions, as [`crate::Engine::change_log`] reads them.
    pub fn changes(&self) -> impl Iterator<Item = Result<LoggedTx>> + '_ {
        all(self.kv, Keyspace::Log).map(|item| {
            let (k, v) = item?;
            let (tenant, tx) = (keys::tenant_of_index_key(&k)?, keys::decode_log_tx(&k)?);
            self.name(tenant)?;
            let mut entry: LogEntry = record::decode(&v)?;
            for e in &mut entry.events {
                self.complete(tx, e)?;
            }
            Ok(LoggedTx { tenant, tx, entry })
        })
    }

    /// The stored answers of keyed writes, by tenant, then key.
    pub fn replies(&self) -> impl Iterator<Item = Result<Reply>> + '_ {
        all(self.kv, Keyspace::Aux).filter_map(|item| match item {
            Ok((k, reply)) => reply_key(&k).map(|(tenant, key)| Ok(Reply { tenant, key, reply })),
            Err(e) => Some(Err(e.into())),
        })
    }

    /// The service's own records (everything of the `aux` keyspace but the
    /// idempotency replies), by key.
    pub fn aux(&self) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_ {
        all(self.kv, Keyspace::Aux).filter_map(|item| match item {
            Ok((k, v)) => reply_key(&k).is_none().then_some(Ok((k, v))),
            Err(e) => Some(Err(e.into())),
        })
    }

    fn name(&self, tenant: TenantId) -> Result<&str> {
        self.names.get(&tenant).map(String::as_str).ok_or_else(|| {
            EngineError::Storage(StorageError::Corrupt(format!("an index key names tenant {tenant}, which meta lacks")))
        })
    }

    fn version(&self, id: FactId, tx: Tx) -> Result<Fact> {
        let key = keys::version(id, tx);
        match self.kv.get(Keyspace::Versions, &key)? {
            Some(v) => Ok(fact_record::decode_version(&key, &v)?),
            None => Err(StorageError::Corrupt(format!("the change log names version {id}@{tx}, which is missing")).into()),
        }
    }

    /// Fills in what a log event from before format 7 leaves out.
    fn complete(&self, tx: Tx, e: &mut LogEvent) -> Result<()> {
        match e {
            LogEvent::Assert { fact, superseded, subject, changed, .. } if subject.is_none() || changed.is_none() => {
                let new = self.version(*fact, tx)?;
                let mut n = 0u32;
                for id in superseded.iter() {
                    n += u32::from(self.version(*id, tx)?.object != new.object);
                }
                *subject = Some(new.subject);
                *changed = Some(n);
            }
            LogEvent::Retract { fact, subject: subject @ None } => *subject = Some(self.version(*fact, tx)?.subject),
            _ => {}
        }
        Ok(())
    }
}

fn all(kv: &dyn OrderedKv, ks: Keyspace) -> KvIter<'_> {
    kv.scan(ks, Bound::Unbounded, Bound::Unbounded, false)
}

/// The start every `meta` key of a tenant's per-source counts shares.
fn source_stats_prefix(tenant: TenantId) -> Vec<u8> {
    let mut key = keys::meta::source_stats(tenant, "");
    key.truncate(key.len() - codec::encode_bytes(b"").len());
    key
}

/// (tenant, key) when `key` is an idempotency reply's (`keys::idempotency`).
/// Decoded, then encoded again and compared, so a service record whose key
/// merely starts alike is never taken for one.
fn reply_key(key: &[u8]) -> Option<(String, Vec<u8>)> {
    let mut r = KeyReader::new(key.get(1..)?);
    let tenant = r.string().ok()?;
    let caller_key = r.bytes().ok()?;
    (r.is_empty() && keys::idempotency(&tenant, &caller_key) == key).then_some((tenant, caller_key))
}

// ---- building a store ---------------------------------------------------------

/// Records, and bytes, per write batch while importing: a change-log entry
/// holds every event of its transaction, and four thousand entries of a
/// bulk load make one batch of hundreds of megabytes.
const BATCH: usize = 4096;
const BATCH_BYTES: usize = 4 << 20;
/// Page cache of the store while it is built.
const IMPORT_CACHE: u64 = 64 << 20;

/// Builds a new engine store from logical items. Give it the tenants first
/// (everything else names them), then the rest in any order, then
/// [`Importer::finish`], which derives the indexes and counts and makes the
/// store durable. Nothing is validated against the bitemporal rules: the
/// items are a store's, taken as they are.
pub struct Importer {
    /// `None` only while it is closed to be opened again.
    kv: Option<Arc<dyn OrderedKv>>,
    dir: std::path::PathBuf,
    /// Bytes written since the store was last opened, and after how many it
    /// is closed and opened again ([`REOPEN_BYTES`]).
    since_open: usize,
    reopen_every: usize,
    batch: WriteBatch,
    /// Key and value bytes in `batch`.
    batch_bytes: usize,
    tenants: HashMap<String, TenantId>,
    ids: HashSet<TenantId>,
    /// Per tenant, the latest `valid_until` of any superseded version
    /// (`keys::meta::superseded_until`; `None` in a version: open-ended).
    bounds: HashMap<TenantId, Millis>,
    /// The newest tx any item carries: the clock may not be behind it.
    newest_tx: Tx,
    /// Per tenant, the predicates set to `many`, whose live facts `idx_spo` holds.
    many: HashMap<TenantId, HashSet<String>>,
}

impl Importer {
    /// A new store in `dir`, which must not exist or be empty, of the
    /// default backend.
    pub fn create(dir: &Path) -> Result<Importer> {
        if let Ok(mut entries) = std::fs::read_dir(dir) {
            if entries.next().is_some() {
                return Err(EngineError::invalid(format!("{} is not empty: a store is imported into a new directory", dir.display())));
            }
        }
        std::fs::create_dir_all(dir).map_err(StorageError::from)?;
        let kv = Backend::default().open(dir, &import_config())?;
        Ok(Importer {
            kv: Some(kv),
            dir: dir.to_path_buf(),
            since_open: 0,
            reopen_every: REOPEN_BYTES,
            batch: WriteBatch::default(),
            batch_bytes: 0,
            tenants: HashMap::new(),
            ids: HashSet::new(),
            bounds: HashMap::new(),
            newest_tx: 0,
            many: HashMap::new(),
        })
    }

    pub fn tenant(&mut self, t: &Tenant) -> Result<()> {
        if t.id == 0 || t.name.is_empty() {
            return Err(bad(format!("a tenant needs a name and an id above 0 (got {:?}, {})", t.name, t.id)));
        }
        if self.tenants.contains_key(&t.name) || !self.ids.insert(t.id) {
            return Err(bad(format!("tenant {:?} (id {}) is given twice", t.name, t.id)));
        }
        self.tenants.insert(t.name.clone(), t.id);
        self.put(Keyspace::Meta, keys::meta::tenant_by_name(&t.name), record::encode(&t.id))?;
        self.put(Keyspace::Meta, keys::meta::tenant_by_id(t.id), record::encode(&t.name))?;
        if let Some(threshold) = t.threshold {
            self.put(Keyspace::Meta, keys::meta::threshold(t.id), record::encode(&threshold))?;
        }
        Ok(())
    }

    /// A predicate's cardinality, set for `tenant`.
    pub fn predicate(&mut self, tenant: TenantId, info: &PredicateInfo) -> Result<()> {
        self.known_id(tenant)?;
        let many = self.many.entry(tenant).or_default();
        if info.cardinality == crate::model::Cardinality::Many {
            many.insert(info.name.clone());
        } else {
            many.remove(&info.name);
        }
        self.put(Keyspace::Meta, keys::meta::predicate(tenant, &info.name), record::encode(info))
    }

    /// One version of a fact (its tenant named in it).
    pub fn version(&mut self, f: &Fact) -> Result<()> {
        let tenant = self.known_name(&f.tenant)?;
        if f.tx == 0 || f.created_tx > f.tx {
            return Err(bad(format!("version {}@{} has created_tx {}", f.id, f.tx, f.created_tx)));
        }
        self.newest_tx = self.newest_tx.max(f.tx);
        // As the writer raises it for every superseded version it writes.
        if f.status == Status::Superseded {
            let until = f.valid_until.unwrap_or(Millis::MAX);
            let bound = self.bounds.entry(tenant).or_insert(Millis::MIN);
            *bound = (*bound).max(until);
        }
        self.put(Keyspace::Versions, keys::version(f.id, f.tx), fact_record::encode_version(f))
    }

    pub fn change(&mut self, c: &LoggedTx) -> Result<()> {
        self.known_id(c.tenant)?;
        if c.tx == 0 {
            return Err(bad("a change-log entry has tx 0".into()));
        }
        self.newest_tx = self.newest_tx.max(c.tx);
        self.put(Keyspace::Log, keys::log(c.tenant, c.tx), record::encode(&c.entry))
    }

    /// A stored answer of a keyed write. Its tenant need not be known: a
    /// refused first write leaves a reply and no tenant.
    pub fn reply(&mut self, r: &Reply) -> Result<()> {
        self.put(Keyspace::Aux, keys::idempotency(&r.tenant, &r.key), r.reply.clone())
    }

    /// A service record.
    pub fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put(Keyspace::Aux, key.to_vec(), value.to_vec())
    }

    /// Derives the indexes and counts from the versions given, records the
    /// clock and the store format, and syncs. The store then opens as any
    /// other.
    pub fn finish(mut self, clock: Clock) -> Result<()> {
        if clock.last_tx < self.newest_tx {
            return Err(bad(format!(
                "the clock (last tx {}) is behind tx {}, which the items hold",
                clock.last_tx, self.newest_tx
            )));
        }
        self.flush()?;
        let derived = self.derive()?;
        for (tenant, mut stats) in derived.stats {
            stats.subjects = derived.subjects.get(&tenant).map_or(0, |s| s.len() as u64);
            stats.predicates = derived.predicates.get(&tenant).map_or(0, |s| s.len() as u64);
            self.put(Keyspace::Meta, keys::meta::stats(tenant), record::encode(&stats))?;
        }
        for ((tenant, source), counts) in &derived.sources {
            self.put(Keyspace::Meta, keys::meta::source_stats(*tenant, source), record::encode(counts))?;
        }
        // Every tenant has a bound from its first write on: `Millis::MIN`
        // while it has had nothing superseded.
        let ids: Vec<TenantId> = self.ids.iter().copied().collect();
        for tenant in ids {
            let bound = self.bounds.get(&tenant).copied().unwrap_or(Millis::MIN);
            self.put(Keyspace::Meta, keys::meta::superseded_until(tenant), record::encode(&bound))?;
        }
        if clock != Clock::default() {
            self.put(Keyspace::Meta, keys::meta::CLOCK.to_vec(), record::encode(&clock))?;
        }
        self.put(Keyspace::Meta, keys::meta::FORMAT.to_vec(), record::encode(&crate::migrate::CURRENT_FORMAT))?;
        // Nothing of format 3 or older to rewrite (`migrations/m0004_fact_values.rs`).
        self.put(Keyspace::Meta, keys::meta::FACTS_REWRITTEN.to_vec(), record::encode(&0u64))?;
        self.flush()?;
        Ok(self.kv()?.sync()?)
    }

    /// One pass over `versions`, in key order (a fact's versions together,
    /// oldest first): each fact's latest version goes to the index its
    /// status belongs in, as `write::apply` leaves it.
    fn derive(&mut self) -> Result<Derived> {
        let mut derived = Derived::default();
        let mut from = Bound::Unbounded;
        let mut latest: Option<Fact> = None;
        loop {
            // A page at a time: no scan is open while the batch is applied.
            let page: Vec<(Vec<u8>, Vec<u8>)> =
                self.kv()?.scan(Keyspace::Versions, from.clone(), Bound::Unbounded, false).take(BATCH).collect::<Result<_, _>>()?;
            let Some((last, _)) = page.last() else { break };
            from = Bound::Excluded(last.clone());
            for (k, v) in page {
                let f = fact_record::decode_version(&k, &v)?;
                if let Some(done) = latest.take().filter(|l| l.id != f.id) {
                    self.index(&done, &mut derived)?;
                }
                latest = Some(f);
            }
            self.flush()?;
        }
        if let Some(done) = latest {
            self.index(&done, &mut derived)?;
        }
        Ok(derived)
    }

    /// The index entries and counts of a fact whose latest version is `f`.
    fn index(&mut self, f: &Fact, d: &mut Derived) -> Result<()> {
        let tenant = self.known_name(&f.tenant)?;
        let home = if f.status.is_live() { Keyspace::Sp } else { Keyspace::Closed };
        self.put(home, keys::sp(tenant, &f.subject, &f.predicate, f.id), fact_record::encode_indexed(f))?;
        if f.status.is_live() && self.many.get(&tenant).is_some_and(|m| m.contains(&f.predicate)) {
            self.put(Keyspace::Spo, keys::spo(tenant, &f.subject, &f.predicate, &f.object, f.id), Vec::new())?;
        }
        if let Some(k) = crate::write::apply::valid_index_key(tenant, f) {
            self.put(Keyspace::Valid, k, Vec::new())?;
        }
        // One key per pair (format 6), one per fact by object.
        self.put(Keyspace::Ps, keys::ps(tenant, &f.predicate, &f.subject), Vec::new())?;
        self.put(Keyspace::Os, keys::os(tenant, &f.object, &f.predicate, &f.subject, f.id), Vec::new())?;
        *d.stats.entry(tenant).or_default().count_mut(f.status) += 1;
        let subjects = d.subjects.entry(tenant).or_default();
        if !subjects.contains(&f.subject) {
            subjects.insert(f.subject.clone());
        }
        let predicates = d.predicates.entry(tenant).or_default();
        if !predicates.contains(&f.predicate) {
            predicates.insert(f.predicate.clone());
        }
        if let Some(source) = &f.source {
            *d.sources.entry((tenant, source.clone())).or_default().count_mut(f.status) += 1;
        }
        Ok(())
    }

    fn known_name(&self, tenant: &str) -> Result<TenantId> {
        self.tenants
            .get(tenant)
            .copied()
            .ok_or_else(|| bad(format!("an item names tenant {tenant:?}, which was not given first")))
    }

    fn known_id(&self, tenant: TenantId) -> Result<()> {
        match self.ids.contains(&tenant) {
            true => Ok(()),
            false => Err(bad(format!("an item names tenant id {tenant}, which was not given first"))),
        }
    }

    fn put(&mut self, ks: Keyspace, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        self.batch_bytes += key.len() + value.len();
        self.batch.put(ks, key, value);
        if self.batch.len() >= BATCH || self.batch_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.since_open += self.batch_bytes;
        self.batch_bytes = 0;
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            self.kv()?.apply(batch)?;
        }
        if self.since_open >= self.reopen_every {
            self.kv()?.sync()?;
            // Closed (checkpointed) before it is opened again: one handle
            // holds the directory.
            self.kv = None;
            self.kv = Some(Backend::default().open(&self.dir, &import_config())?);
            self.since_open = 0;
        }
        Ok(())
    }

    fn kv(&self) -> Result<&Arc<dyn OrderedKv>> {
        self.kv.as_ref().ok_or_else(|| EngineError::Closed("the store being imported did not open again".into()))
    }
}

/// Bytes imported before the store is closed and opened again. Keys come
/// in no order (versions as the source lists them, index keys by fact id),
/// and what redb has not checkpointed yet, and each checkpoint of keys
/// scattered over its tables, is held in memory; a store closed every so
/// often gives it all back. A million facts were imported in 260 MB
/// instead of 480 (and in 40 s instead of 30).
const REOPEN_BYTES: usize = 16 << 20;

fn import_config() -> EngineConfig {
    EngineConfig::default().cache_bytes(IMPORT_CACHE).warm_cache(false)
}

/// What the versions give the counts.
#[derive(Default)]
struct Derived {
    stats: BTreeMap<TenantId, TenantStats>,
    subjects: HashMap<TenantId, HashSet<String>>,
    predicates: HashMap<TenantId, HashSet<String>>,
    sources: BTreeMap<(TenantId, String), SourceStats>,
}

fn bad(msg: String) -> EngineError {
    EngineError::Invalid(format!("cannot import the store: {msg}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Cardinality, FactInput, WriteOp};
    use crate::{Engine, Idempotency};
    use serde_json::json;

    const YEAR: Millis = 365 * 86_400_000;

    fn input(subject: &str, predicate: &str, object: serde_json::Value, from: Millis, until: Option<Millis>) -> FactInput {
        let mut i = FactInput::new(subject, predicate, object);
        i.valid_from = Some(from);
        i.valid_until = until;
        i
    }

    /// A store with every kind of thing a store holds: takeovers and
    /// tails, a retraction of a superseded fact, candidates, cardinalities
    /// changed both ways, a threshold, sources, two writes of one fact in
    /// one transaction, replies (one of a tenant that never wrote) and
    /// service records, one whose key starts like a reply's.
    fn fill(e: &Engine) {
        let acme = e.assert("a", input("Person:sarah", "works_at", json!("Org:acme"), 50 * YEAR, None)).unwrap();
        e.assert("a", input("Person:sarah", "works_at", json!("Org:globex"), 54 * YEAR, None)).unwrap();
        let stint = e
            .assert("a", input("Person:sarah", "works_at", json!("Org:initech"), 55 * YEAR, Some(56 * YEAR)))
            .unwrap();
        e.retract("a", stint.fact.id).unwrap();
        e.retract("a", acme.fact.id).unwrap();
        e.assert("a", input("Person:sarah", "likes", json!({"food": "tea", "n": 1.5}), 0, None).confidence(0.3)).unwrap();
        e.set_cardinality("a", "speaks", Cardinality::Many).unwrap();
        for lang in ["en", "fr"] {
            e.assert("a", input("Person:ana", "speaks", json!(lang), 30 * YEAR, None).source("crm")).unwrap();
        }
        e.set_cardinality("a", "speaks", Cardinality::One).unwrap();
        e.assert("a", input("Person:ana", "speaks", json!("fr"), 40 * YEAR, Some(42 * YEAR)).source("crm")).unwrap();
        e.set_cardinality("a", "owns", Cardinality::Strict).unwrap();
        e.assert("a", input("Person:ana", "owns", json!("Car:1"), 40 * YEAR, None)).unwrap();
        assert!(e.assert("a", input("Person:ana", "owns", json!("Car:2"), 41 * YEAR, None)).is_err());
        e.set_threshold("a", 0.5).unwrap();
        e.assert("a", input("Person:bo", "mood", json!("calm"), 0, None).confidence(0.6).source("chat")).unwrap();
        e.assert_batch(
            "b",
            vec![
                input("Doc:1", "title", json!("draft"), 10 * YEAR, None),
                input("Doc:1", "title", json!("final"), 11 * YEAR, None),
            ],
        )
        .unwrap();
        // A tenant that has had nothing superseded.
        e.assert("d", input("Doc:9", "title", json!("only"), 0, None)).unwrap();
        let reply = |bytes: &'static [u8]| Idempotency {
            key: b"k1".to_vec(),
            render: Box::new(move |_| Some(bytes.to_vec())),
        };
        let op = WriteOp::Assert(input("Doc:2", "title", json!("kept"), 0, None));
        e.write_idempotent("b", vec![op.clone()], reply(b"first")).unwrap().unwrap();
        // Refused before anything is written: a reply, no tenant.
        let empty = WriteOp::Assert(input("", "title", json!("x"), 0, None));
        assert!(e.write_idempotent("c", vec![empty], reply(b"refused")).is_err());
        e.aux_put_many(vec![(b"Info/x".to_vec(), b"1".to_vec()), (b"ap/context/b\0t1".to_vec(), b"ctx".to_vec())])
            .unwrap();
    }

    fn records(dir: &Path) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
        let kv = Backend::found_in(dir).unwrap().open(dir, &EngineConfig::default()).unwrap();
        Keyspace::ALL.iter().map(|ks| all(kv.as_ref(), *ks).collect::<std::result::Result<_, _>>().unwrap()).collect()
    }

    /// Every item of `from` into a new store in `dir`, closed and opened
    /// again after every batch.
    fn copy(from: &Export<'_>, dir: &Path) -> Result<()> {
        let mut to = Importer::create(dir)?;
        to.reopen_every = 1;
        for t in from.tenants() {
            to.tenant(t)?;
            for p in from.predicates(t.id)? {
                to.predicate(t.id, &p)?;
            }
        }
        for f in from.versions() {
            to.version(&f?)?;
        }
        for c in from.changes() {
            to.change(&c?)?;
        }
        for r in from.replies() {
            to.reply(&r?)?;
        }
        for a in from.aux() {
            let (k, v) = a?;
            to.aux(&k, &v)?;
        }
        to.finish(from.clock())
    }

    #[test]
    fn an_imported_export_is_the_same_store_record_for_record() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        let engine = Engine::open(EngineConfig::at(&a)).unwrap();
        fill(&engine);
        {
            let export = engine.export().unwrap();
            let names: Vec<&str> = export.tenants().iter().map(|t| t.name.as_str()).collect();
            assert_eq!(names, ["a", "b", "d"], "a tenant is one that committed a transaction");
            assert_eq!(export.tenants()[0].threshold, Some(0.5));
            assert_eq!(export.tenants()[1].threshold, None);
            let replies: Vec<Reply> = export.replies().collect::<Result<_>>().unwrap();
            let said: Vec<(&str, &[u8])> = replies.iter().map(|r| (r.tenant.as_str(), r.reply.as_slice())).collect();
            assert_eq!(said, [("b", &b"first"[..]), ("c", &b"refused"[..])]);
            let aux: Vec<Vec<u8>> = export.aux().map(|r| r.unwrap().0).collect();
            assert_eq!(aux, [b"Info/x".to_vec(), b"ap/context/b\0t1".to_vec()]);
            let sources = export.source_stats(1).unwrap();
            assert_eq!(sources.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["chat", "crm"]);
            copy(&export, &b).unwrap();
        }
        engine.close();
        drop(engine);
        let (want, got) = (records(&a), records(&b));
        for (ks, (w, g)) in Keyspace::ALL.iter().zip(want.iter().zip(&got)) {
            assert_eq!(w.len(), g.len(), "{} holds {} records, its import {}", ks.name(), w.len(), g.len());
            for (x, y) in w.iter().zip(g) {
                assert_eq!(x, y, "{} differs", ks.name());
            }
        }
        // And it opens and answers as a store.
        let imported = Engine::open(EngineConfig::at(&b)).unwrap();
        assert_eq!(imported.stats("a").superseded, 3);
        let next = imported.assert("b", input("Doc:3", "title", json!("new"), 0, None)).unwrap();
        assert_eq!(next.fact.tx, imported.last_tx().0);
    }

    /// A store from before format 7 logs fact ids only; its export carries
    /// the subjects and value-change counts `Engine::change_log` reads.
    #[test]
    fn an_export_completes_a_change_log_from_before_format_7() {
        fn copy_dir(from: &Path, to: &Path) {
            std::fs::create_dir_all(to).unwrap();
            for e in std::fs::read_dir(from).unwrap() {
                let e = e.unwrap();
                match e.file_type().unwrap().is_dir() {
                    true => copy_dir(&e.path(), &to.join(e.file_name())),
                    false => drop(std::fs::copy(e.path(), to.join(e.file_name())).unwrap()),
                }
            }
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/format1"), &dir);
        let engine = Engine::open(EngineConfig::at(&dir)).unwrap();
        assert_eq!(engine.format_found(), 1);
        let export = engine.export().unwrap();
        let names: HashMap<TenantId, String> = export.tenants().iter().map(|t| (t.id, t.name.clone())).collect();
        // In the export's order: by tenant id, then tx.
        let mut logged = Vec::new();
        for t in export.tenants() {
            logged.extend(engine.change_log(&t.name, 0, usize::MAX).unwrap().into_iter().map(|c| (t.name.clone(), c)));
        }
        let exported: Vec<LoggedTx> = export.changes().collect::<Result<_>>().unwrap();
        assert_eq!(exported.len(), logged.len());
        let mut asserts = 0;
        for (c, (tenant, l)) in exported.iter().zip(&logged) {
            assert_eq!((&names[&c.tenant], c.tx, c.entry.recorded_at), (tenant, l.tx, l.recorded_at));
            for (e, want) in c.entry.events.iter().zip(&l.events) {
                match (e, want) {
                    (
                        LogEvent::Assert { fact, subject, changed, .. },
                        crate::model::LoggedEvent::Assert { fact: f, subject: s, changed: n, .. },
                    ) => {
                        assert_eq!((fact, subject.as_deref(), changed.map(|c| c as usize)), (f, Some(s.as_str()), Some(*n)));
                        asserts += 1;
                    }
                    (LogEvent::Retract { fact, subject }, crate::model::LoggedEvent::Retract { fact: f, subject: s }) => {
                        assert_eq!((fact, subject.as_deref()), (f, Some(s.as_str())));
                    }
                    _ => {}
                }
            }
        }
        assert!(asserts >= 4, "{exported:?}");
    }

    #[test]
    fn an_import_refuses_a_used_directory_and_a_clock_behind_its_items() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("x"), b"x").unwrap();
        assert!(matches!(Importer::create(tmp.path()), Err(EngineError::Invalid(m)) if m.contains("not empty")));

        let src = Engine::open(EngineConfig::at(tmp.path().join("src"))).unwrap();
        src.assert("a", input("S:1", "p", json!(1), 0, None)).unwrap();
        let export = src.export().unwrap();
        let mut to = Importer::create(&tmp.path().join("dst")).unwrap();
        // A version of a tenant not given first.
        let f = export.versions().next().unwrap().unwrap();
        assert!(to.version(&f).is_err());
        to.tenant(&export.tenants()[0]).unwrap();
        assert!(to.tenant(&export.tenants()[0]).is_err(), "a tenant twice");
        to.version(&f).unwrap();
        let err = to.finish(Clock::default()).unwrap_err().to_string();
        assert!(err.contains("behind"), "{err}");
    }
}
