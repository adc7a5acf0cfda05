//! The narrow ordered key-value interface the engine stands on.
//!
//! The bitemporal semantics (`write`, `read`) only ever call these methods, so
//! a second backend (for instance on a distributed ordered KV) can be added by
//! implementing [`OrderedKv`] without touching them. The interface is the
//! smallest that the engine needs: point get, ordered range scan in either
//! direction, an atomic multi-keyspace write batch, and a durability barrier.

mod capture;
mod journal;
mod pending;
mod redb_backend;
mod sled_backend;

pub use capture::CapturingKv;
pub use redb_backend::{RedbKv, CHECKPOINT_BYTES, DEFER_UP_TO, FILE_NAME as REDB_FILE, IDLE_CHECKPOINT};
pub use redb_backend::compact::{compact as compact_redb, CompactSummary, COMPACTING_FILE};
pub use redb_backend::usage::{usage as redb_usage, StoreUsage, TableUsage};
pub use sled_backend::SledKv;

use crate::error::StorageError;
use parking_lot::RwLock;
use std::ops::Bound;

/// The engine's keyspaces. Each is a separate ordered map (one sled `Tree`).
/// `docs/storage.md` documents the key layout of every one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Keyspace {
    /// Engine metadata: format version, tx counter, tenants, settings, stats.
    Meta,
    /// Every version of every fact: `fact_id | tx`.
    Versions,
    /// Latest version of every live (active or candidate) fact, by tenant,
    /// subject, predicate.
    Sp,
    /// Latest version of every closed (superseded or retracted) fact, same
    /// layout as `Sp`. Kept apart so live reads and the write path never
    /// wade through history.
    Closed,
    /// Superseded facts that still cover some valid time, by tenant, subject,
    /// predicate and `valid_until`: what a new assertion may still have to
    /// take over, found without reading a key's whole history.
    Valid,
    /// Fact references by tenant, predicate, subject.
    Ps,
    /// Fact references by tenant, object, predicate, subject (reverse edges).
    Os,
    /// The change log: `tenant | tx`.
    Log,
    /// Opaque records owned by the service layer (idempotency replies, ...).
    Aux,
    /// The live facts (those of `Sp`) by tenant, subject, predicate, object:
    /// what an assert under `many` takes over, found by its value (format 8).
    /// Last in `ALL`: a keyspace's place there is its tag in the journal and
    /// in backups.
    Spo,
}

impl Keyspace {
    pub const ALL: [Keyspace; 10] = [
        Keyspace::Meta,
        Keyspace::Versions,
        Keyspace::Sp,
        Keyspace::Closed,
        Keyspace::Valid,
        Keyspace::Ps,
        Keyspace::Os,
        Keyspace::Log,
        Keyspace::Aux,
        Keyspace::Spo,
    ];

    /// The on-disk name of the keyspace. Never change one: it is the format.
    pub fn name(self) -> &'static str {
        match self {
            Keyspace::Meta => "meta",
            Keyspace::Versions => "versions",
            Keyspace::Sp => "idx_sp",
            Keyspace::Closed => "idx_closed",
            Keyspace::Valid => "idx_valid",
            Keyspace::Ps => "idx_ps",
            Keyspace::Os => "idx_os",
            Keyspace::Log => "log",
            Keyspace::Aux => "aux",
            Keyspace::Spo => "idx_spo",
        }
    }

    pub fn index(self) -> usize {
        Keyspace::ALL.iter().position(|k| *k == self).expect("listed")
    }
}

/// One put (`Some`) or delete (`None`).
pub type Mutation = (Keyspace, Vec<u8>, Option<Vec<u8>>);

/// A set of mutations applied all-or-nothing.
#[derive(Debug, Default)]
pub struct WriteBatch {
    pub ops: Vec<Mutation>,
    /// The indexes in `ops`, ascending, of puts whose key no earlier write
    /// ever stored (a key made from a new fact id). Not journaled: it only
    /// lets the redb backend's layer in memory drop such a key outright when
    /// a later batch of the same layer deletes it, where it would otherwise
    /// keep the delete, which every scan over the key walks, until the
    /// checkpoint. A batch read back from the journal has none, and keeps
    /// its deletes.
    pub new_keys: Vec<usize>,
}

impl WriteBatch {
    pub fn put(&mut self, ks: Keyspace, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push((ks, key, Some(value)));
    }
    /// A put of a key no write has ever stored before (see `new_keys`).
    pub fn put_new(&mut self, ks: Keyspace, key: Vec<u8>, value: Vec<u8>) {
        self.new_keys.push(self.ops.len());
        self.put(ks, key, value);
    }
    pub fn delete(&mut self, ks: Keyspace, key: Vec<u8>) {
        self.ops.push((ks, key, None));
    }
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

pub type KvPair = (Vec<u8>, Vec<u8>);
pub type KvIter<'a> = Box<dyn Iterator<Item = Result<KvPair, StorageError>> + 'a>;

/// An ordered, durable key-value store with atomic multi-keyspace batches.
pub trait OrderedKv: Send + Sync + 'static {
    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;

    /// Keys in `[lo, hi)`-style bounds, ascending, or descending when `reverse`.
    fn scan(
        &self,
        ks: Keyspace,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        reverse: bool,
    ) -> KvIter<'_>;

    /// Applies every mutation of `batch` atomically: after a crash either all of
    /// them are visible or none is. Not durable until [`OrderedKv::sync`].
    ///
    /// `publish` is held for writing while the batch becomes visible. A read
    /// is several gets and scans, and holds `publish` for reading across them,
    /// so that none sees a batch half applied. A backend whose commit is
    /// visible as it happens holds it over the whole apply; one whose readers
    /// see nothing of a batch until one atomic switch holds it over the switch
    /// alone, and reads go on during the commit.
    fn apply_published(&self, batch: WriteBatch, publish: &RwLock<()>) -> Result<(), StorageError>;

    /// [`OrderedKv::apply_published`] with no readers to keep out.
    fn apply(&self, batch: WriteBatch) -> Result<(), StorageError> {
        self.apply_published(batch, &RwLock::new(()))
    }

    /// Durability barrier: returns once everything applied before the call is
    /// on stable storage.
    fn sync(&self) -> Result<(), StorageError>;

    /// Bytes the store occupies on disk, if known.
    fn size_on_disk(&self) -> Option<u64>;

    /// How full the backend's own page cache is, where it can tell.
    fn cache_fill(&self) -> Option<CacheFill> {
        None
    }
}

/// The page cache of a backend: the memory it holds now and its ceiling.
/// Memory grows while `used` climbs towards `capacity` and levels off once it
/// is there, which is what tells a warm-up from a leak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheFill {
    pub used: u64,
    pub capacity: u64,
    /// Passes that read the most-read tables into the cache since the store
    /// opened (redb: `redb_backend/warm.rs`).
    pub warm_passes: u64,
}

/// A bound on an owned key as a bound on its bytes.
fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// Keys of `ks` that start with `prefix`, ascending or descending.
pub fn scan_prefix<'a>(kv: &'a dyn OrderedKv, ks: Keyspace, prefix: &[u8], reverse: bool) -> KvIter<'a> {
    kv.scan(ks, Bound::Included(prefix.to_vec()), crate::codec::prefix_end(prefix), reverse)
}

/// Whether `k` lies within `lo..hi`: the tests' reference for every scan.
#[cfg(test)]
pub(crate) fn within(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
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
