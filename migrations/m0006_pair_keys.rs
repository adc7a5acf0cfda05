//! Format 6: one `idx_ps` key per (predicate, subject) pair.
//!
//! Up to format 5 every fact wrote `tenant | predicate | subject | fact id`
//! into `idx_ps`, so every supersession inserted a key into it, at a random
//! place in a table too large to stay cached. From format 6 the key is
//! `tenant | predicate | subject`, written by the first fact of the pair
//! only; a by-predicate read takes the pairs from `idx_ps` and their facts
//! from `idx_sp` and `idx_closed` (see `docs/storage.md`).
//!
//! This step changes nothing but the format: the keys of format 5 stay. Each
//! begins with its pair's format-6 key, so a pair's keys of either form sort
//! together, the reader takes them as one pair, and the writer, which looks
//! for the pair by that prefix, finds them and adds none. Rewriting them
//! would cost a large store a long first start for a smaller table only.
//! The format still changes: a format-5 reader would take a format-6 key
//! for a damaged one.

use crate::error::StorageError;
use crate::kv::{OrderedKv, WriteBatch};

pub fn apply(_kv: &dyn OrderedKv, _batch: &mut WriteBatch) -> Result<(), StorageError> {
    Ok(())
}
