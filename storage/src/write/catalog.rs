//! The writer's in-memory state: clock, tenants, thresholds, cardinalities and
//! stats. It is loaded once at open and then changed only by the writer
//! thread; every change is journaled so a failed request (or a failed commit
//! group) can be undone exactly.
//!
//! The superseded-until bounds are not journaled: a bound only ever rises, and
//! one left higher by a failed group is still a true bound (it only makes
//! reads look in `idx_closed` where they need not).
//!
//! Per-source counts are the exception to "loaded once": a tenant may have
//! any number of sources, so each (tenant, source) is read from `meta` the
//! first time the writer touches it and cached from then on. Readers do not
//! see this cache: they read the committed record in `meta`, which is written
//! in the same batch as the facts it counts.

use crate::error::StorageError;
use crate::keys::{self, TenantId};
use crate::kv::{scan_prefix, Keyspace, OrderedKv};
use crate::model::{Cardinality, Millis, PredicateInfo, SourceStats, Status, TenantStats, Tx};
use crate::record::{self, Clock};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

pub const DEFAULT_THRESHOLD: f64 = 0.75;

/// The part of the catalog readers need; published after each commit.
#[derive(Debug, Clone, Default)]
pub struct Published {
    pub clock: Clock,
    pub tenants: HashMap<String, TenantId>,
    pub thresholds: HashMap<TenantId, f64>,
    pub stats: HashMap<TenantId, TenantStats>,
    /// Per tenant, a time no earlier than the `valid_until` of any fact it
    /// has had superseded (`keys::meta::superseded_until`). Shared between
    /// every published copy and raised by the writer *before* it applies the
    /// group that needs the higher value, so a reader that loads it after
    /// taking its snapshot never sees a superseded fact past it.
    pub superseded_until: HashMap<TenantId, Arc<AtomicI64>>,
}

impl Published {
    /// The tenant's bound; unknown (a store before format 5 that the
    /// migration did not reach) is `Millis::MAX`, which skips nothing.
    pub fn superseded_until(&self, t: TenantId) -> Millis {
        self.superseded_until.get(&t).map_or(Millis::MAX, |b| b.load(Ordering::Acquire))
    }
}

#[derive(Debug)]
enum Undo {
    Clock(Clock),
    NewTenant(String),
    Threshold(TenantId, Option<f64>),
    Stats(TenantId, Option<TenantStats>),
    Predicate((TenantId, String), Option<Cardinality>),
    Source(TenantId, String, SourceStats),
}

#[derive(Debug)]
pub struct Catalog {
    pub state: Published,
    next_tenant: TenantId,
    /// Cardinalities looked up or set so far (absent from the map: not loaded).
    predicates: HashMap<(TenantId, String), Cardinality>,
    /// Tenants whose stats changed since the last group was flushed.
    pub dirty_stats: BTreeSet<TenantId>,
    /// Per-source counts looked up or changed so far, by tenant then source
    /// (absent: not loaded yet).
    sources: HashMap<TenantId, HashMap<String, SourceStats>>,
    /// (tenant, source) pairs whose counts changed since the last group was
    /// flushed.
    dirty_sources: BTreeMap<TenantId, BTreeSet<String>>,
    /// Tenants whose superseded-until bound rose since the last group was
    /// flushed.
    pub dirty_bounds: BTreeSet<TenantId>,
    journal: Vec<Undo>,
}

impl Catalog {
    pub fn load(kv: &dyn OrderedKv) -> Result<Self, StorageError> {
        let mut state = Published::default();
        if let Some(v) = kv.get(Keyspace::Meta, keys::meta::CLOCK)? {
            state.clock = record::decode(&v)?;
        }
        let mut next_tenant = 1;
        for item in scan_prefix(kv, Keyspace::Meta, &keys::meta::tenant_by_name_prefix(), false) {
            let (k, v) = item?;
            let id: TenantId = record::decode(&v)?;
            next_tenant = next_tenant.max(id + 1);
            state.tenants.insert(keys::meta::tenant_name_of(&k)?, id);
        }
        for item in scan_prefix(kv, Keyspace::Meta, &keys::meta::threshold_prefix(), false) {
            let (k, v) = item?;
            state.thresholds.insert(keys::meta::tenant_of(&k)?, record::decode(&v)?);
        }
        for item in scan_prefix(kv, Keyspace::Meta, &keys::meta::stats_prefix(), false) {
            let (k, v) = item?;
            state.stats.insert(keys::meta::tenant_of(&k)?, record::decode(&v)?);
        }
        for item in scan_prefix(kv, Keyspace::Meta, &keys::meta::superseded_until_prefix(), false) {
            let (k, v) = item?;
            let bound: Millis = record::decode(&v)?;
            state.superseded_until.insert(keys::meta::tenant_of(&k)?, Arc::new(AtomicI64::new(bound)));
        }
        Ok(Catalog {
            state,
            next_tenant,
            predicates: HashMap::new(),
            dirty_stats: BTreeSet::new(),
            sources: HashMap::new(),
            dirty_sources: BTreeMap::new(),
            dirty_bounds: BTreeSet::new(),
            journal: Vec::new(),
        })
    }

    pub fn mark(&self) -> usize {
        self.journal.len()
    }

    pub fn rollback(&mut self, mark: usize) {
        while self.journal.len() > mark {
            match self.journal.pop().expect("len checked") {
                Undo::Clock(c) => self.state.clock = c,
                Undo::NewTenant(name) => {
                    if let Some(id) = self.state.tenants.remove(&name) {
                        self.state.superseded_until.remove(&id);
                        self.dirty_bounds.remove(&id);
                    }
                    self.next_tenant -= 1;
                }
                Undo::Threshold(t, old) => restore(&mut self.state.thresholds, t, old),
                Undo::Stats(t, old) => restore(&mut self.state.stats, t, old),
                Undo::Predicate(k, old) => restore(&mut self.predicates, k, old),
                Undo::Source(t, source, old) => {
                    // The entry exists: it was loaded before it was changed.
                    if let Some(s) = self.sources.get_mut(&t).and_then(|m| m.get_mut(&source)) {
                        *s = old;
                    }
                }
            }
        }
    }

    /// Forgets the journal: everything so far is committed.
    pub fn commit(&mut self) {
        self.journal.clear();
        self.dirty_stats.clear();
        self.dirty_sources.clear();
        self.dirty_bounds.clear();
    }

    /// Takes the next tx and a record time that never goes backwards, even if
    /// the wall clock does.
    pub fn next_tx(&mut self, wall_now: Millis) -> (Tx, Millis) {
        let old = self.state.clock;
        self.journal.push(Undo::Clock(old));
        self.state.clock = Clock {
            last_tx: old.last_tx + 1,
            last_recorded_at: wall_now.max(old.last_recorded_at),
        };
        (self.state.clock.last_tx, self.state.clock.last_recorded_at)
    }

    /// The tenant's id, creating it when new (`Some(id)` in the second field
    /// tells the caller to persist the new tenant).
    pub fn tenant(&mut self, name: &str) -> (TenantId, bool) {
        if let Some(id) = self.state.tenants.get(name) {
            return (*id, false);
        }
        let id = self.next_tenant;
        self.next_tenant += 1;
        self.state.tenants.insert(name.to_string(), id);
        // A new tenant has had nothing superseded. (An id freed by a rolled
        // back tenant is reused here, and its bound starts over with it.)
        self.state.superseded_until.insert(id, Arc::new(AtomicI64::new(Millis::MIN)));
        self.dirty_bounds.insert(id);
        self.journal.push(Undo::NewTenant(name.to_string()));
        (id, true)
    }

    /// Records that tenant `t` now has a superseded fact valid until `until`
    /// (`None`: open-ended). Call it before the group holding that fact is
    /// applied: readers load the bound after taking their snapshot.
    pub fn raise_superseded_until(&mut self, t: TenantId, until: Option<Millis>) {
        let until = until.unwrap_or(Millis::MAX);
        let bound = self.state.superseded_until.entry(t).or_insert_with(|| Arc::new(AtomicI64::new(Millis::MAX)));
        if bound.fetch_max(until, Ordering::AcqRel) < until {
            self.dirty_bounds.insert(t);
        }
    }

    pub fn threshold(&self, t: TenantId) -> f64 {
        self.state.thresholds.get(&t).copied().unwrap_or(DEFAULT_THRESHOLD)
    }

    pub fn set_threshold(&mut self, t: TenantId, v: f64) {
        let old = self.state.thresholds.insert(t, v);
        self.journal.push(Undo::Threshold(t, old));
    }

    pub fn cardinality(
        &mut self,
        kv_get: impl FnOnce(&[u8]) -> Result<Option<Vec<u8>>, StorageError>,
        t: TenantId,
        predicate: &str,
    ) -> Result<Cardinality, StorageError> {
        let key = (t, predicate.to_string());
        if let Some(c) = self.predicates.get(&key) {
            return Ok(*c);
        }
        let c = match kv_get(&keys::meta::predicate(t, predicate))? {
            Some(v) => record::decode::<PredicateInfo>(&v)?.cardinality,
            None => Cardinality::default(),
        };
        // A cache fill is not a change: no journal entry needed, the value is
        // what the store holds.
        self.predicates.insert(key, c);
        Ok(c)
    }

    pub fn set_cardinality(&mut self, t: TenantId, predicate: &str, c: Cardinality) {
        let key = (t, predicate.to_string());
        let old = self.predicates.insert(key.clone(), c);
        self.journal.push(Undo::Predicate(key, old));
    }

    /// Changes a tenant's stats through `f`, journaled.
    pub fn stats(&mut self, t: TenantId, f: impl FnOnce(&mut TenantStats)) {
        let entry = self.state.stats.entry(t).or_default();
        let before = entry.clone();
        f(entry);
        self.journal.push(Undo::Stats(t, Some(before)));
        self.dirty_stats.insert(t);
    }

    /// Moves one fact of `source` from status `from` (`None`: a new fact) to
    /// `to`, journaled. The counts of a (tenant, source) are read through
    /// `kv_get` the first time it is touched, then served from the cache.
    pub fn count_source(
        &mut self,
        kv_get: impl FnOnce(&[u8]) -> Result<Option<Vec<u8>>, StorageError>,
        t: TenantId,
        source: &str,
        from: Option<Status>,
        to: Status,
    ) -> Result<(), StorageError> {
        let of_tenant = self.sources.entry(t).or_default();
        let entry = match of_tenant.get_mut(source) {
            Some(e) => e,
            None => {
                // A cache fill is not a change: the value is what the store holds.
                let loaded = match kv_get(&keys::meta::source_stats(t, source))? {
                    Some(v) => record::decode(&v)?,
                    None => SourceStats::default(),
                };
                of_tenant.entry(source.to_string()).or_insert(loaded)
            }
        };
        let before = *entry;
        if let Some(from) = from {
            let n = entry.count_mut(from);
            if *n == 0 {
                // Only a damaged counter gets here; it must not block writes.
                tracing::warn!(tenant = t, source, status = %from, "source count already zero");
            }
            *n = n.saturating_sub(1);
        }
        *entry.count_mut(to) += 1;
        self.journal.push(Undo::Source(t, source.to_string(), before));
        let dirty = self.dirty_sources.entry(t).or_default();
        if !dirty.contains(source) {
            dirty.insert(source.to_string());
        }
        Ok(())
    }

    /// The changed per-source counts, for the commit batch: (tenant, source,
    /// counts). Counts that a rollback took back to nothing are skipped (the
    /// store has no record of them either).
    pub fn dirty_sources(&self) -> impl Iterator<Item = (TenantId, &str, &SourceStats)> + '_ {
        self.dirty_sources.iter().flat_map(move |(t, names)| {
            names.iter().filter_map(move |name| {
                let s = self.sources.get(t)?.get(name.as_str())?;
                (s.total() > 0).then_some((*t, name.as_str(), s))
            })
        })
    }
}

fn restore<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>, k: K, old: Option<V>) {
    match old {
        Some(v) => map.insert(k, v),
        None => map.remove(&k),
    };
}
