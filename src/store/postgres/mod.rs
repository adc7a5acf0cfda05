//! tempora on PostgreSQL: the store that several tempora processes can
//! share (docs/scale-out.md).
//!
//! - [`schema`]: the versioned schema (`migrations/postgres/`), applied at
//!   start under an advisory lock.

pub mod schema;
