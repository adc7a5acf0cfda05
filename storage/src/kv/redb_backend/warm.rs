//! Warming redb's page cache: reading the tables reads use most into it,
//! when the store opens and after writes have pushed them out.
//!
//! Why: redb's cache is the only memory tempora's reads can count on. The
//! kernel's page cache can drop the store's file at any time (docs/performance.md
//! measures a machine that does so with gigabytes free), and redb keeps the
//! pages a commit writes only while its cache has room: once it is full, a
//! checkpoint's pages, the newest and so most likely to be read, are in the
//! file alone. Without a warm pass the first reads after a restart, or after
//! a bulk import larger than the cache, wait on the disk one page at a time.
//!
//! A pass reads each table in key order, most-read first ([`ORDER`]), until
//! it has read [`BUDGET_SHARE`] of the cache in pages, cached already or not,
//! and the cache holds that much, so that the tables read first are not
//! evicted by the ones read after them. It runs on the idle-checkpoint
//! thread, never under the writer's lock, in chunks each on the view current
//! when it starts (a long pass on a cold store pins no old state), and stops
//! as soon as the store closes. The cache's own eviction stays in charge:
//! reads during and after the pass keep what they use.

use super::{Shared, Table};
use crate::error::StorageError;
use crate::kv::Keyspace;
use redb::ReadableDatabase;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// The tables in the order a pass reads them: the catalogue (every request
/// reads it), the current facts by subject (point reads, subject queries, and
/// each assertion's supersession) and by value (an assertion under `many`),
/// the closed ones and the valid-time index
/// (reads as of a past time), the versions (histories), the predicate and
/// object indexes (queries by either, and the new-subject check of a write),
/// then the rest, which reads rarely touch.
const ORDER: [Keyspace; 10] = [
    Keyspace::Meta,
    Keyspace::Sp,
    Keyspace::Spo,
    Keyspace::Closed,
    Keyspace::Valid,
    Keyspace::Versions,
    Keyspace::Ps,
    Keyspace::Os,
    Keyspace::Aux,
    Keyspace::Log,
];

/// The share of the cache a pass may fill. Not all of it: a checkpoint's
/// dirty pages take cache room too while it commits, and a pass that filled
/// the cache would then evict its own first tables.
pub(super) const BUDGET_SHARE: (u64, u64) = (3, 4);

/// After how many bytes of checkpointed batches another pass is due (as a
/// share of the cache), once the cache is full. A pass reads a cacheful, so
/// a trickle of writes must not start one at every pause.
const REWARM_SHARE: u64 = 16;

/// Entries read on one view before the pass takes the current one.
const CHUNK: usize = 4096;

/// Entries between two looks at the budget and the close: a few pages'
/// worth, so that a pass overshoots its budget by little.
const STOP_EVERY: u64 = 32;

/// redb's page size: a miss brings in at least one such page.
const PAGE_BYTES: u64 = 4096;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Warmed {
    /// Bytes of the pages the pass read (a page size each).
    pub read_bytes: u64,
    /// Of those, the ones fetched from the file (not cached before).
    pub fetched_bytes: u64,
    /// Entries read.
    pub entries: u64,
    /// Whether it read every table to the end (else the budget or the close
    /// stopped it).
    pub complete: bool,
}

/// The byte budget of a pass in a cache of `cache_bytes`.
pub(super) fn budget(cache_bytes: u64) -> u64 {
    let (num, den) = BUDGET_SHARE;
    cache_bytes / den * num
}

/// When a pass is due: the writer's side keeps the count.
#[derive(Debug, Clone, Copy)]
pub(super) struct WarmState {
    /// Whether warming is on at all.
    pub on: bool,
    /// Bytes of batches checkpointed since the last pass; `u64::MAX` until
    /// the first pass, which the open makes due.
    pub checkpointed: u64,
}

impl Default for WarmState {
    /// On, with the first pass due.
    fn default() -> WarmState {
        WarmState { on: true, checkpointed: u64::MAX }
    }
}

impl WarmState {
    /// No pass ever.
    #[cfg(test)]
    pub(super) fn off() -> WarmState {
        WarmState { on: false, ..WarmState::default() }
    }

    /// Whether a pass is due in a cache of `cache_bytes` holding
    /// `cache_used`: the first one always; later ones once enough was
    /// checkpointed into a cache too full to have kept it.
    pub(super) fn due(&self, cache_used: u64, cache_bytes: u64) -> bool {
        self.on
            && (self.checkpointed == u64::MAX
                || (self.checkpointed >= cache_bytes / REWARM_SHARE && cache_used >= budget(cache_bytes)))
    }

    pub(super) fn checkpointed(&mut self, bytes: u64) {
        self.checkpointed = self.checkpointed.saturating_add(bytes);
    }
}

impl Shared {
    /// One pass: reads the tables in [`ORDER`] until it has read `budget`
    /// bytes of pages and the cache holds that much, or the store closes.
    pub(super) fn warm(&self, budget: u64) -> Result<Warmed, StorageError> {
        let started = Instant::now();
        // Every page read since the pass began counts against the budget,
        // whether the pass found it cached or fetched it: both must stay. But
        // redb's counts include the requests' reads, which under a read load
        // would stop the pass early; so it also waits for the cache to hold
        // the budget, which those reads fill as much as the pass does.
        let before = self.db.cache_stats();
        // Pages read since the pass began, of them fetched from the file,
        // and the cache's fill now.
        let progress = || {
            let now = self.db.cache_stats();
            let fetched = now.read_misses().saturating_sub(before.read_misses());
            let read = now.read_hits().saturating_sub(before.read_hits()) + fetched;
            (read * PAGE_BYTES, fetched * PAGE_BYTES, now.used_bytes() as u64)
        };
        let stop = || {
            let (read, _, used) = progress();
            self.closing.load(Ordering::Acquire) || (read >= budget && used >= budget)
        };
        let mut warmed = Warmed { complete: true, ..Warmed::default() };
        'tables: for ks in ORDER {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let tables: Arc<[Table]> = Arc::clone(&self.view.read().tables);
                let chunk = read_chunk(&tables[ks.index()], after.as_deref(), &stop)?;
                warmed.entries += chunk.read;
                if chunk.stopped {
                    warmed.complete = false;
                    break 'tables;
                }
                match chunk.last {
                    Some(last) => after = Some(last),
                    None => break,
                }
            }
        }
        (warmed.read_bytes, warmed.fetched_bytes, _) = progress();
        self.warm_passes.fetch_add(1, Ordering::AcqRel);
        tracing::info!(
            read_mb = warmed.read_bytes >> 20,
            fetched_mb = warmed.fetched_bytes >> 20,
            entries = warmed.entries,
            complete = warmed.complete,
            ms = started.elapsed().as_millis() as u64,
            "warmed the page cache"
        );
        Ok(warmed)
    }
}

/// What [`read_chunk`] read.
struct Chunk {
    read: u64,
    /// The last key, if the chunk was full (the table may go on).
    last: Option<Vec<u8>>,
    /// Whether `stop` said so before the chunk's end.
    stopped: bool,
}

/// Reads up to [`CHUNK`] entries of `table` after the key `after`, asking
/// `stop` every [`STOP_EVERY`] entries.
fn read_chunk(table: &Table, after: Option<&[u8]>, stop: &dyn Fn() -> bool) -> Result<Chunk, StorageError> {
    let lo = after.map_or(Bound::Unbounded, Bound::Excluded);
    let range = table.range::<&[u8]>((lo, Bound::Unbounded)).map_err(redb::Error::from)?;
    let mut chunk = Chunk { read: 0, last: None, stopped: false };
    for entry in range.take(CHUNK) {
        if chunk.read.is_multiple_of(STOP_EVERY) && stop() {
            chunk.stopped = true;
            return Ok(chunk);
        }
        let (key, _value) = entry.map_err(redb::Error::from)?;
        chunk.read += 1;
        if chunk.read == CHUNK as u64 {
            chunk.last = Some(key.value().to_vec());
        }
    }
    Ok(chunk)
}
