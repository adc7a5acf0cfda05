//! How to open an engine: [`EngineConfig`], and the key-value [`Backend`]
//! it puts under it.

use crate::error::Result;
use crate::kv::{OrderedKv, RedbKv, SledKv};
use crate::write::Durability;
use std::path::PathBuf;
use std::sync::Arc;

/// How to open an engine. Built by the caller; the engine never reads the
/// environment itself.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Data directory; `None` opens a temporary store that vanishes on drop.
    pub path: Option<PathBuf>,
    pub durability: Durability,
    /// The memory the backend's page cache may take (redb: pages with the
    /// allocator's overhead, `kv::redb_backend::page_capacity`; sled: bytes
    /// as stored).
    pub cache_bytes: u64,
    /// redb: journal bytes between two checkpoints into the store file
    /// (the writes since the last one are held in memory, about twice this
    /// at most, and replayed after a crash). sled ignores it.
    pub checkpoint_bytes: u64,
    /// redb: read the most-read tables into the page cache in the background
    /// at open and after writes a full cache could not keep
    /// (`kv::redb_backend::warm`). sled ignores it.
    pub warm_cache: bool,
    /// Most requests in one commit group.
    pub max_group: usize,
    /// Free bytes the data directory's filesystem must keep: writes are
    /// refused below it (see [`crate::space`]). 0 checks only for a
    /// read-only mount. Not used by a temporary store.
    pub min_free_bytes: u64,
    /// The key-value backend of a new store. A directory that already holds
    /// a store opens with the backend that wrote it, whatever this says.
    pub backend: Backend,
}

/// The key-value store under the engine (see [`crate::kv`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// redb: one file, `DIR/tempora.redb`; memory bounded by its cache.
    #[default]
    Redb,
    /// sled 0.34: the backend of stores created before redb was added.
    Sled,
}

impl Backend {
    /// The backend of the store in `dir`, if it holds one.
    pub fn found_in(dir: &std::path::Path) -> Option<Backend> {
        if dir.join(crate::kv::REDB_FILE).exists() {
            Some(Backend::Redb)
        } else if dir.join("conf").exists() || dir.join("db").exists() {
            Some(Backend::Sled)
        } else {
            None
        }
    }

    /// Opens (creating if needed) a store of this backend in `dir`, with
    /// the cache and checkpoint sizes of `config`.
    pub fn open(self, dir: &std::path::Path, config: &EngineConfig) -> Result<Arc<dyn OrderedKv>> {
        Ok(match self {
            Backend::Redb => {
                Arc::new(
                    RedbKv::open(dir, config.cache_bytes)?
                        .checkpoint_every(config.checkpoint_bytes)
                        .warm_cache(config.warm_cache),
                )
            }
            Backend::Sled => Arc::new(SledKv::open(dir, config.cache_bytes)?),
        })
    }

    pub(crate) fn temporary(self) -> Result<Arc<dyn OrderedKv>> {
        Ok(match self {
            Backend::Redb => Arc::new(RedbKv::temporary()?),
            Backend::Sled => Arc::new(SledKv::temporary()?),
        })
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            path: None,
            durability: Durability::Durable,
            cache_bytes: 256 << 20,
            checkpoint_bytes: crate::kv::CHECKPOINT_BYTES,
            warm_cache: true,
            max_group: 512,
            min_free_bytes: 0,
            backend: Backend::default(),
        }
    }
}

impl EngineConfig {
    pub fn at(path: impl Into<PathBuf>) -> Self {
        EngineConfig { path: Some(path.into()), ..Default::default() }
    }
    pub fn temporary() -> Self {
        EngineConfig::default()
    }
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    pub fn min_free_bytes(mut self, bytes: u64) -> Self {
        self.min_free_bytes = bytes;
        self
    }
    pub fn cache_bytes(mut self, bytes: u64) -> Self {
        self.cache_bytes = bytes;
        self
    }
    pub fn checkpoint_bytes(mut self, bytes: u64) -> Self {
        self.checkpoint_bytes = bytes;
        self
    }
    pub fn warm_cache(mut self, on: bool) -> Self {
        self.warm_cache = on;
        self
    }
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
}
