//! Format 1: the initial layout.
//!
//! Creates nothing but the format marker: sled creates the keyspaces (trees)
//! on open, and an empty store of format 1 has no other keys. Documented key
//! by key in `docs/storage.md`.
//!
//! This file is compiled into `tempora-storage` (see `storage/src/migrate.rs`):
//! every forward step of the on-disk format lives in this directory, one file
//! a step, applied in order by `migrate::run`.

use crate::error::StorageError;
use crate::kv::{OrderedKv, WriteBatch};

pub fn apply(_kv: &dyn OrderedKv, _batch: &mut WriteBatch) -> Result<(), StorageError> {
    Ok(())
}
