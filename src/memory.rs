//! The memory layer: the one place every surface (REST, SSE, MCP, the agent
//! protocols, gRPC, TCP) reads and writes memory through. It pins every call
//! to a tenant, runs blocking engine work off the async threads, and carries
//! the change feed.

use std::sync::Arc;
use crate::store::{Change, MemoryStore, EngineError, FactPage, FactQuery, Idempotency, Tx, WriteOp, WriteOutcome};
use tokio::sync::broadcast;

/// A committed transaction, announced to subscribers. The frames themselves
/// are read from the change log, so a subscriber that misses a notice (or
/// reconnects) loses nothing.
#[derive(Debug, Clone)]
pub struct Committed {
    pub tenant: Arc<str>,
    pub tx: Tx,
}

#[derive(Clone)]
pub struct Memory {
    store: Arc<dyn MemoryStore>,
    feed: broadcast::Sender<Committed>,
}

/// How many notices the feed keeps for slow subscribers; one that lags
/// further catches up from the log.
const FEED_CAPACITY: usize = 4096;

impl Memory {
    pub fn new(store: Arc<dyn MemoryStore>) -> Memory {
        let (feed, _) = broadcast::channel(FEED_CAPACITY);
        let sender = feed.clone();
        store.add_commit_listener(Box::new(move |committed| {
            for (tenant, tx) in committed {
                // No receivers is fine; send never blocks.
                let _ = sender.send(Committed { tenant: Arc::from(tenant.as_str()), tx: *tx });
            }
        }));
        Memory { store, feed }
    }

    /// The store itself, for the service's reads and for what follows
    /// its change log (search, embeddings, the monitor).
    pub fn store(&self) -> &Arc<dyn MemoryStore> {
        &self.store
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Committed> {
        self.feed.subscribe()
    }

    /// One write transaction of `tenant`, waiting for durability on the
    /// blocking pool. With `idempotency`, `Ok(Err(bytes))` is a replay.
    pub async fn write(
        &self,
        tenant: &str,
        ops: Vec<WriteOp>,
        idempotency: Option<Idempotency>,
    ) -> Result<Result<WriteOutcome, Vec<u8>>, EngineError> {
        // Queued without a blocking thread: under many concurrent writers,
        // a pool thread parked per write (and spinning before it parks) cost
        // more CPU than the HTTP work around it.
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.store.write_then(
            tenant,
            ops,
            idempotency,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        rx.await.map_err(|_| EngineError::Closed("the writer thread stopped".into()))?
    }

    /// A page of facts. Most reads name a subject and finish within a few
    /// index entries: those run right here, since handing them to the
    /// blocking pool and back (two thread wake-ups) cost more than the read
    /// itself. One that looks at more than [`INLINE_SCAN`] entries is started
    /// again on the blocking pool, so a long scan never holds an async thread
    /// (with two cores, two such scans held every request up).
    pub async fn query(&self, tenant: &str, q: FactQuery) -> Result<FactPage, EngineError> {
        if let Some(page) = self.store.query_within(tenant, &q, INLINE_SCAN)? {
            return Ok(page);
        }
        let store = Arc::clone(&self.store);
        let tenant = tenant.to_string();
        blocking(move || store.query(&tenant, &q)).await
    }

    /// The tenant's committed transactions after `after`.
    pub async fn changes(&self, tenant: &str, after: Tx, limit: usize) -> Result<Vec<Change>, EngineError> {
        let store = Arc::clone(&self.store);
        let tenant = tenant.to_string();
        blocking(move || store.changes(&tenant, after, limit)).await
    }
}

/// Index entries a fact query may look at on an async thread
/// ([`Memory::query`]): about a tenth of a millisecond of work.
pub const INLINE_SCAN: usize = 64;

/// Runs engine work on tokio's blocking pool.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, EngineError> + Send + 'static,
) -> Result<T, EngineError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(EngineError::Closed(format!("engine task failed: {e}"))),
    }
}
