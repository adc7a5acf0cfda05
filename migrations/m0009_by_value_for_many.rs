//! Format 9: `idx_spo` holds the live facts of `many` predicates only.
//!
//! Format 8 kept an `idx_spo` key for every live fact, but only an assert
//! under `many` reads it (one prefix scan of its value); under `one` and
//! `strict` the assert reads the pair's live facts from `idx_sp`. With the
//! default cardinality `one` the table was a sixth of a store's pages (88
//! bytes per fact version at 1M facts) and one more leaf written at random
//! by every supersession. From format 9 the write path keeps the keys of
//! `many` predicates only, and a change of cardinality to or from `many`
//! puts or deletes the predicate's keys in the same batch
//! (`write/apply.rs`, `index_by_value`).
//!
//! This step deletes the keys of every other predicate, in batches of
//! [`CHUNK`] keys applied as it goes (a store of millions of live facts
//! never becomes one batch held in memory); the format is recorded after the
//! last one, so a crash part way leaves format 8, whose store is the same
//! but for keys format 8 never reads (those of predicates that are not
//! `many`), and the next open goes on deleting.

use crate::error::StorageError;
use crate::keys::{self, TenantId};
use crate::kv::{Keyspace, OrderedKv, WriteBatch};
use crate::model::{Cardinality, PredicateInfo};
use crate::record;
use std::collections::HashMap;
use std::ops::Bound;

/// Keys read per batch.
pub const CHUNK: usize = 4096;

pub fn apply(kv: &dyn OrderedKv, _batch: &mut WriteBatch) -> Result<(), StorageError> {
    let started = std::time::Instant::now();
    let mut many: HashMap<(TenantId, String), bool> = HashMap::new();
    let (mut from, mut deleted, mut kept) = (Bound::Unbounded, 0u64, 0u64);
    loop {
        // A chunk at a time: no scan is open while its batch is applied.
        let page: Vec<Vec<u8>> = kv
            .scan(Keyspace::Spo, from.clone(), Bound::Unbounded, false)
            .take(CHUNK)
            .map(|item| item.map(|(k, _)| k))
            .collect::<Result<_, _>>()?;
        let Some(last) = page.last() else { break };
        from = Bound::Excluded(last.clone());
        let mut batch = WriteBatch::default();
        for k in page {
            let (tenant, _, predicate, _) = keys::decode_spo(&k)?;
            let is_many = match many.get(&(tenant, predicate.clone())) {
                Some(m) => *m,
                None => {
                    let m = match kv.get(Keyspace::Meta, &keys::meta::predicate(tenant, &predicate))? {
                        Some(v) => record::decode::<PredicateInfo>(&v)?.cardinality == Cardinality::Many,
                        None => false,
                    };
                    many.insert((tenant, predicate), m);
                    m
                }
            };
            if is_many {
                kept += 1;
            } else {
                batch.delete(Keyspace::Spo, k);
            }
        }
        deleted += batch.len() as u64;
        kv.apply(batch)?;
    }
    tracing::info!(deleted, kept, ms = started.elapsed().as_millis() as u64, "idx_spo keeps the facts of many predicates");
    Ok(())
}
