//! # tempora-storage
//!
//! The bitemporal fact engine of tempora. Facts are `subject predicate object`
//! claims with a confidence, a source, a valid-time interval (when the claim
//! holds in the world) and a record time (when the engine learned it). Facts
//! are immutable: every change appends a new version stamped with a global,
//! strictly increasing transaction number, so any read can be rewound to an
//! earlier record time (`as_of`) and asked about any valid instant
//! (`valid_at`).
//!
//! ```
//! use tempora_storage::{Engine, EngineConfig, FactInput, FactQuery, AsOf, Status};
//!
//! let engine = Engine::open(EngineConfig::temporary()).unwrap();
//! let acme = engine
//!     .assert("default", FactInput::new("Person:sarah", "works_at", "Org:acme").valid_from(2020))
//!     .unwrap();
//! let globex = engine
//!     .assert("default", FactInput::new("Person:sarah", "works_at", "Org:globex").valid_from(2024))
//!     .unwrap();
//!
//! // Now: globex is active, acme is closed at 2024.
//! let now = engine.query("default", &FactQuery { subject: Some("Person:sarah".into()), ..Default::default() }).unwrap();
//! assert_eq!(now.facts.len(), 1);
//! assert_eq!(now.facts[0].object, "Org:globex");
//! assert_eq!(globex.superseded[0].valid_until, Some(2024));
//!
//! // Valid time 2022: acme.
//! let then = engine
//!     .query("default", &FactQuery { subject: Some("Person:sarah".into()), valid_at: Some(2022), ..Default::default() })
//!     .unwrap();
//! assert_eq!(then.facts[0].object, "Org:acme");
//!
//! // Record time before the second write: acme, active and open-ended.
//! let before = engine.get("default", acme.fact.id, Some(AsOf::Tx(acme.fact.tx))).unwrap().unwrap();
//! assert_eq!((before.status, before.valid_until), (Status::Active, None));
//! ```
//!
//! Layout: [`kv`] is the narrow ordered key-value interface (sled behind it),
//! [`codec`] the order-preserving key encoding, `keys` the key layout of every
//! keyspace, `write` the single-writer group commit and the takeover rules,
//! `read` the query paths, `migrate` the on-disk format versions.

pub mod backup;
pub mod codec;
mod config;
mod engine;
pub mod error;
// Public for the fuzz targets, like `keys`.
#[doc(hidden)]
pub mod fact_record;
// Public for the fuzz targets (fuzz/); not a stable interface.
#[doc(hidden)]
pub mod keys;
pub mod kv;
mod limits;
// Moving a store to and from another kind of store (PostgreSQL).
pub mod logical;
mod migrate;
pub mod model;
mod read;
// Public for the fuzz targets, like `keys`.
#[doc(hidden)]
pub mod record;
pub mod space;
pub mod takeover;
mod write;

pub use engine::{compact, usage, Backend, Engine, EngineConfig};
pub use error::{EngineError, StorageError};
pub use limits::*;
pub use migrate::CURRENT_FORMAT;
pub use model::*;
pub use write::{CommitListener, Durability, Idempotency, IoStats, RenderReply, DEFAULT_THRESHOLD};
