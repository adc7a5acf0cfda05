//! Format 7: change-log events that name their subject.
//!
//! Up to format 6 a change-log entry held fact ids only, so a reader that
//! wanted to know which subjects a transaction touched, or whether an assert
//! changed a value or confirmed it, read every version it named. The
//! monitor's pass over the log did that for every write: most of its cost,
//! and enough that a pass could not keep up with a sustained write load.
//! From format 7 an assert also records its subject and how many of the facts
//! it closed held another object, a retract its subject
//! (`record::LogEvent`).
//!
//! This step changes nothing but the format: entries written before it keep
//! their shape, and `Reader::change_log` reads their versions instead, so an
//! upgrade costs no rewrite of the log. The format still changes: a format-6
//! reader does not know the new fields.

use crate::error::StorageError;
use crate::kv::{OrderedKv, WriteBatch};

pub fn apply(_kv: &dyn OrderedKv, _batch: &mut WriteBatch) -> Result<(), StorageError> {
    Ok(())
}
