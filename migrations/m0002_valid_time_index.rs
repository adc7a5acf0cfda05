//! Format 2: the `idx_valid` keyspace.
//!
//! Format 1 closed only *active* facts when a new assertion took over a valid
//! interval, so a superseded fact that still covered part of the new interval
//! kept answering `valid_at` reads there. Format 2 takes over those too, and
//! finds them through `idx_valid`: superseded facts with valid time left,
//! keyed by tenant, subject, predicate, `valid_until`, fact id.
//!
//! This step builds `idx_valid` from `idx_closed`. It does not rewrite
//! history: overlaps that format 1 already stored stay as they were recorded
//! (a later assertion over them resolves them).

use crate::error::StorageError;
use crate::keys;
use crate::kv::{Keyspace, OrderedKv, WriteBatch};
use crate::model::Fact;
use crate::record;
use crate::write::apply::valid_index_key;
use std::ops::Bound;

pub fn apply(kv: &dyn OrderedKv, batch: &mut WriteBatch) -> Result<(), StorageError> {
    for item in kv.scan(Keyspace::Closed, Bound::Unbounded, Bound::Unbounded, false) {
        let (k, v) = item?;
        let tenant = keys::tenant_of_index_key(&k)?;
        let fact: Fact = record::decode(&v)?;
        if let Some(key) = valid_index_key(tenant, &fact) {
            batch.put(Keyspace::Valid, key, Vec::new());
        }
    }
    Ok(())
}
