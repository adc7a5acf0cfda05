//! The on-disk format version and the forward migrations.
//!
//! The data directory records its format in `meta` under key `0x01`. Opening
//! a store runs every step between that version and [`CURRENT_FORMAT`], each
//! in one atomic batch together with the new format marker, so a crash in the
//! middle of a migration leaves the store at the last completed step. Format
//! 4 also rewrites values after its step, in many batches, resumed at every
//! open until it is done (`migrations/m0004_fact_values.rs`). Format 8's
//! step builds its keyspace in many batches of its own before the marker,
//! and starts over when cut short (`migrations/m0008_live_by_value.rs`);
//! format 9's deletes part of it the same way
//! (`migrations/m0009_by_value_for_many.rs`). A
//! store written by a newer format is refused: this build cannot know what
//! it means.

use crate::error::{EngineError, StorageError};
use crate::keys;
use crate::kv::{Keyspace, OrderedKv, WriteBatch};
use crate::record;

#[path = "../../migrations/m0001_initial_layout.rs"]
mod m0001_initial_layout;
#[path = "../../migrations/m0002_valid_time_index.rs"]
mod m0002_valid_time_index;
#[path = "../../migrations/m0003_source_stats.rs"]
mod m0003_source_stats;
#[path = "../../migrations/m0004_fact_values.rs"]
mod m0004_fact_values;
#[path = "../../migrations/m0005_superseded_until.rs"]
mod m0005_superseded_until;
#[path = "../../migrations/m0006_pair_keys.rs"]
mod m0006_pair_keys;
#[path = "../../migrations/m0007_log_subjects.rs"]
mod m0007_log_subjects;
#[path = "../../migrations/m0008_live_by_value.rs"]
mod m0008_live_by_value;
#[path = "../../migrations/m0009_by_value_for_many.rs"]
mod m0009_by_value_for_many;

/// The format this build writes.
pub const CURRENT_FORMAT: u32 = 9;

type Step = fn(&dyn OrderedKv, &mut WriteBatch) -> Result<(), StorageError>;

/// `STEPS[i]` takes a store from format `i` to format `i + 1`.
const STEPS: &[(&str, Step)] = &[
    ("0001_initial_layout", m0001_initial_layout::apply),
    ("0002_valid_time_index", m0002_valid_time_index::apply),
    ("0003_source_stats", m0003_source_stats::apply),
    ("0004_fact_values", m0004_fact_values::apply),
    ("0005_superseded_until", m0005_superseded_until::apply),
    ("0006_pair_keys", m0006_pair_keys::apply),
    ("0007_log_subjects", m0007_log_subjects::apply),
    ("0008_live_by_value", m0008_live_by_value::apply),
    ("0009_by_value_for_many", m0009_by_value_for_many::apply),
];

/// The format recorded in the store; `None` for a store never initialized.
pub fn stored_format(kv: &dyn OrderedKv) -> Result<Option<u32>, StorageError> {
    match kv.get(Keyspace::Meta, keys::meta::FORMAT)? {
        Some(v) => Ok(Some(record::decode(&v)?)),
        None => Ok(None),
    }
}

/// Brings the store to [`CURRENT_FORMAT`]; returns the format it found.
pub fn run(kv: &dyn OrderedKv, location: &str) -> Result<u32, EngineError> {
    let found = match stored_format(kv)? {
        Some(v) => v,
        None => {
            // A store with data but no format marker was not written by tempora.
            let has_data = Keyspace::ALL
                .iter()
                .any(|ks| kv.scan(*ks, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, false).next().is_some());
            if has_data {
                return Err(StorageError::Corrupt(format!(
                    "{location} holds data without a tempora format marker"
                ))
                .into());
            }
            0
        }
    };
    if found > CURRENT_FORMAT {
        return Err(EngineError::FormatTooNew(format!(
            "{location} was written by on-disk format {found}, newer than format {CURRENT_FORMAT} \
             that this version of tempora reads; run a newer tempora (nothing was changed)"
        )));
    }
    for (from, (name, step)) in STEPS.iter().enumerate().skip(found as usize) {
        let to = from as u32 + 1;
        let mut batch = WriteBatch::default();
        step(kv, &mut batch)?;
        batch.put(Keyspace::Meta, keys::meta::FORMAT.to_vec(), record::encode(&to));
        kv.apply(batch)?;
        kv.sync()?;
        tracing::info!(migration = name, format = to, "migrated data directory");
    }
    // Format 4's step records the format only; the values it changes are
    // rewritten after it, in chunks (see the step's file).
    m0004_fact_values::rewrite(kv)?;
    Ok(found)
}
