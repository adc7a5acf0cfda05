//! Optional embeddings: an operator-configured OpenAI-compatible endpoint
//! gives every asserted fact a vector, and searches gain a `vector` list
//! (cosine similarity to the question) fused with BM25 and graph proximity.
//!
//! - `config`: `[embeddings]` and its environment overrides; off unless set.
//! - `store`: vectors, watermark and header as aux records in the engine.
//! - `index`: the in-memory flat cosine index, per tenant.
//! - `worker`: follows the change log, embeds in batches, retries, stores.
//! - `ranker`: the `vector` [`Ranker`](crate::search::Ranker).
//!
//! Writes never wait for embeddings; vectors lag them (see the lag metric),
//! and a search whose question cannot be embedded answers from the other
//! lists. See `docs/search.md` ("Embeddings").

pub mod config;
pub mod index;
pub mod ranker;
pub mod store;
pub mod worker;

pub use config::{EmbeddingsConfig, FileEmbeddings};
pub use index::VectorIndex;
pub use ranker::VectorRanker;
pub use worker::{EmbedMetrics, Worker};

use crate::llm::Client;
use crate::memory::Memory;
use anyhow::Result;
use std::sync::Arc;
use tokio::sync::watch;

/// The running worker: stop it after the HTTP server.
pub struct WorkerHandle {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl WorkerHandle {
    /// Stops the worker (an embedding call in flight is abandoned; its facts
    /// are embedded after the next start) and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "embedding worker task failed");
        }
    }
}

/// Loads the stored vectors, starts the worker on the current runtime and
/// returns the ranker to add to the search.
pub fn start(
    cfg: &EmbeddingsConfig,
    memory: &Memory,
    client: Arc<Client>,
    metrics: Option<EmbedMetrics>,
) -> Result<(Arc<VectorRanker>, WorkerHandle)> {
    let engine = Arc::clone(memory.store());
    // Subscribed before the catch-up reads the log: nothing falls between.
    let notices = memory.subscribe();
    let index = Arc::new(VectorIndex::new());
    let worker = Worker::open(engine, Arc::clone(&index), Arc::clone(&client), cfg.clone(), metrics.clone())?;
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(worker.run(notices, stop_rx));
    let ranker = Arc::new(VectorRanker::new(index, client, cfg, metrics));
    Ok((ranker, WorkerHandle { stop, task }))
}
