//! The embedding worker: follows the change log like the search indexer and
//! gives every newly asserted fact a vector.
//!
//! Writes never wait for it: it learns of commits from the change feed
//! after they are durable and reads them back from the log. It embeds in
//! batches of `batch_size`, retries a failed call (timeout, 5xx, a malformed
//! answer, an unreachable endpoint) with exponential backoff up to
//! [`MAX_BACKOFF`], stores the vectors in the engine, and only then moves
//! its watermark (`store.rs`). After a crash it catches up from the
//! watermark; facts that already have a vector are not embedded again.

use super::config::EmbeddingsConfig;
use super::index::VectorIndex;
use super::store::{self, Header};
use crate::llm::{Client, LlmError, ModelConfig};
use crate::memory::Committed;
use crate::search::fact_text;
use anyhow::{Context, Result};
use prometheus::{IntCounter, IntCounterVec, IntGauge};
use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use crate::store::{ChangeEvent, MemoryStore, FactId, Tx};
use tokio::sync::{broadcast, watch};

/// Changes read from the log per call.
const LOG_PAGE: usize = 1000;
/// First wait after a failed call; doubled per failure up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest text sent for one fact (characters); longer ones are cut.
pub const MAX_TEXT_CHARS: usize = 8000;

/// What the worker and the searches report to the metrics.
#[derive(Clone)]
pub struct EmbedMetrics {
    /// Facts embedded and stored.
    pub embedded: IntCounter,
    /// Failed endpoint calls, by `stage` (`worker`, `query`).
    pub failures: IntCounterVec,
    /// Vectors held in memory.
    pub vectors: IntGauge,
    /// The worker's watermark, for the lag gauge.
    pub watermark: Arc<AtomicU64>,
}

/// How a pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Done,
    Stopped,
    /// `max_vectors` is reached: no more embedding until a restart.
    Full,
}

pub struct Worker {
    engine: Arc<dyn MemoryStore>,
    index: Arc<VectorIndex>,
    client: Arc<Client>,
    cfg: EmbeddingsConfig,
    model: ModelConfig,
    header: Header,
    watermark: Tx,
    metrics: Option<EmbedMetrics>,
    /// A pass failed (engine error) or the vectors were dropped: the next
    /// pass covers every tenant.
    failed: bool,
}

impl Worker {
    /// Checks the stored header against the configured model (a change drops
    /// every vector: all facts are embedded again), reads the watermark and
    /// loads the stored vectors into `index` (blocking).
    pub fn open(
        engine: Arc<dyn MemoryStore>,
        index: Arc<VectorIndex>,
        client: Arc<Client>,
        cfg: EmbeddingsConfig,
        metrics: Option<EmbedMetrics>,
    ) -> Result<Worker> {
        let wanted = Header { model: cfg.model.clone(), dimensions: cfg.dimensions, dims: None };
        let header = match store::read_header(&*engine) {
            Ok(Some(h)) if h.model == wanted.model && h.dimensions == wanted.dimensions => h,
            Ok(Some(h)) => {
                tracing::warn!(
                    from_model = %h.model,
                    to_model = %wanted.model,
                    from_dimensions = ?h.dimensions,
                    to_dimensions = ?wanted.dimensions,
                    "the embedding model changed; dropping the stored vectors and embedding every fact again"
                );
                let dropped = store::reset(&*engine, &wanted).context("dropping the stored vectors")?;
                tracing::info!(dropped, "stored vectors dropped");
                wanted
            }
            Ok(None) => {
                // Vectors without a header are of an unknown model.
                let dropped = store::reset(&*engine, &wanted).context("writing the embeddings header")?;
                if dropped > 0 {
                    tracing::warn!(dropped, "vectors without a header dropped; embedding every fact again");
                }
                wanted
            }
            Err(e) => {
                tracing::warn!(error = format!("{e:#}"), "embeddings header unreadable; embedding every fact again");
                store::reset(&*engine, &wanted).context("dropping the stored vectors")?;
                wanted
            }
        };
        let last_tx = engine.last_tx().0;
        let mut watermark = store::read_watermark(&*engine)?;
        if watermark > last_tx {
            // The store lost writes that were not yet synced: the transactions
            // after its last one will be new facts.
            tracing::warn!(watermark, last_tx, "embeddings watermark is ahead of the store; following the store");
            watermark = last_tx;
        }
        index.clear();
        let mut refused = 0usize;
        let bad = store::scan_vectors(&*engine, header.dims, |tenant, id, v| {
            if !index.insert(&tenant, id, &v) {
                refused += 1;
            }
        })?;
        if bad + refused > 0 {
            tracing::warn!(skipped = bad + refused, "unreadable stored vectors skipped");
        }
        tracing::info!(vectors = index.len(), watermark, model = %header.model, "embeddings loaded");
        if let Some(m) = &metrics {
            m.watermark.store(watermark, Ordering::Relaxed);
            m.vectors.set(index.len() as i64);
        }
        let model = cfg.model_config();
        Ok(Worker { engine, index, client, cfg, model, header, watermark, metrics, failed: false })
    }

    pub fn watermark(&self) -> Tx {
        self.watermark
    }

    /// Catches up with the log, then follows the commit notices until `stop`
    /// flips. Stops promptly: an embedding call in flight is abandoned (its
    /// facts are embedded after the next start).
    pub async fn run(mut self, mut notices: broadcast::Receiver<Committed>, mut stop: watch::Receiver<bool>) {
        let target = self.engine.last_tx().0;
        match self.pass(None, target, &mut stop).await {
            Flow::Stopped => return,
            Flow::Full => return wait_stop(&mut stop).await,
            Flow::Done => {}
        }
        if !self.failed {
            tracing::info!(watermark = self.watermark, vectors = self.index.len(), "embeddings caught up");
        }
        loop {
            let retry = self.failed;
            let first = tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                n = notices.recv() => Some(n),
                _ = tokio::time::sleep(Duration::from_secs(1)), if retry => None,
            };
            let (tenants, target) = match first {
                None => (None, self.engine.last_tx().0),
                Some(Err(broadcast::error::RecvError::Closed)) => return,
                Some(first) => crate::search::indexer::drain(first, &mut notices, &*self.engine),
            };
            match self.pass(tenants, target, &mut stop).await {
                Flow::Done => {}
                Flow::Stopped => return,
                Flow::Full => return wait_stop(&mut stop).await,
            }
        }
    }

    /// Embeds the facts asserted by `tenants` (every tenant when `None`)
    /// after the watermark up to `target`, then stores `target` as the
    /// watermark.
    async fn pass(&mut self, tenants: Option<BTreeSet<String>>, target: Tx, stop: &mut watch::Receiver<bool>) -> Flow {
        if target <= self.watermark && !self.failed {
            return Flow::Done;
        }
        let tenants: Vec<String> = match tenants {
            Some(t) if !self.failed => t.into_iter().collect(),
            _ => self.engine.tenants(),
        };
        let from = self.watermark;
        self.failed = false;
        for tenant in &tenants {
            let mut after = from;
            loop {
                let engine = Arc::clone(&self.engine);
                let t = tenant.clone();
                let page = match tokio::task::spawn_blocking(move || engine.changes(&t, after, LOG_PAGE)).await {
                    Ok(Ok(p)) => p,
                    Ok(Err(e)) => return self.engine_failed(anyhow::Error::from(e).context("reading the change log")),
                    Err(e) => return self.engine_failed(anyhow::anyhow!("log reader task failed: {e}")),
                };
                let n = page.len();
                let mut facts: Vec<(FactId, String)> = Vec::new();
                let mut seen: HashSet<FactId> = HashSet::new();
                let mut past_target = false;
                for c in &page {
                    if c.tx > target {
                        past_target = true;
                        break;
                    }
                    after = c.tx;
                    for e in &c.events {
                        if let ChangeEvent::Assert { fact, continued, .. } = e {
                            for f in std::iter::once(fact).chain(continued) {
                                if seen.insert(f.id) && !self.index.contains(tenant, f.id) {
                                    facts.push((f.id, truncate(fact_text(f))));
                                }
                            }
                        }
                    }
                }
                for chunk in facts.chunks(self.cfg.batch_size) {
                    match self.embed_and_store(tenant, chunk, stop).await {
                        Flow::Done => {}
                        other => return other,
                    }
                    if self.failed {
                        // The vectors were dropped (the endpoint's model
                        // changed): start over from the beginning.
                        return Flow::Done;
                    }
                }
                if n < LOG_PAGE || past_target {
                    break;
                }
            }
        }
        let target = target.max(self.watermark);
        let engine = Arc::clone(&self.engine);
        match tokio::task::spawn_blocking(move || engine.aux_put_many(vec![store::watermark_record(target)])).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return self.engine_failed(anyhow::Error::from(e).context("storing the embeddings watermark")),
            Err(e) => return self.engine_failed(anyhow::anyhow!("store task failed: {e}")),
        }
        self.watermark = target;
        if let Some(m) = &self.metrics {
            m.watermark.store(target, Ordering::Relaxed);
        }
        Flow::Done
    }

    fn engine_failed(&mut self, e: anyhow::Error) -> Flow {
        tracing::error!(error = format!("{e:#}"), "embedding worker: engine error; retrying");
        self.failed = true;
        Flow::Done
    }

    /// Embeds one batch (retrying until it succeeds or `stop` flips) and
    /// stores its vectors.
    async fn embed_and_store(&mut self, tenant: &str, batch: &[(FactId, String)], stop: &mut watch::Receiver<bool>) -> Flow {
        if self.index.len() + batch.len() > self.cfg.max_vectors {
            tracing::error!(
                max_vectors = self.cfg.max_vectors,
                held = self.index.len(),
                "embeddings: max_vectors reached; no more facts are embedded until it is raised and the server restarted"
            );
            return Flow::Full;
        }
        let Some(vectors) = self.embed_retrying(batch, stop).await else { return Flow::Stopped };
        let mut records = Vec::with_capacity(batch.len() + 1);
        let mut kept: Vec<(FactId, Vec<f32>)> = Vec::with_capacity(batch.len());
        for ((id, _), v) in batch.iter().zip(vectors) {
            let Some(v) = v else { continue };
            let dims = self.index.dims().or(self.header.dims);
            if dims.is_some_and(|d| d != v.len()) {
                tracing::warn!(
                    stored = dims.unwrap_or(0),
                    now = v.len(),
                    model = %self.cfg.model,
                    "the embeddings endpoint now returns vectors of another length; dropping the stored vectors \
                     and embedding every fact again"
                );
                return self.drop_all().await;
            }
            if super::index::normalized(&v).is_none() {
                tracing::warn!(fact = %id, "the embeddings endpoint returned a zero vector; fact left without one");
                continue;
            }
            records.push((store::vector_key(tenant, *id), store::encode_vector(&v)));
            kept.push((*id, v));
        }
        if self.header.dims.is_none() {
            if let Some((_, v)) = kept.first() {
                self.header.dims = Some(v.len());
                records.push(store::header_record(&self.header));
            }
        }
        let engine = Arc::clone(&self.engine);
        match tokio::task::spawn_blocking(move || engine.aux_put_many(records)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return self.engine_failed(anyhow::Error::from(e).context("storing vectors")),
            Err(e) => return self.engine_failed(anyhow::anyhow!("store task failed: {e}")),
        }
        for (id, v) in &kept {
            self.index.insert(tenant, *id, v);
        }
        if let Some(m) = &self.metrics {
            m.embedded.inc_by(kept.len() as u64);
            m.vectors.set(self.index.len() as i64);
        }
        Flow::Done
    }

    /// Drops every vector (durably and in memory) and the watermark; the
    /// next pass embeds everything.
    async fn drop_all(&mut self) -> Flow {
        self.header.dims = None;
        let header = self.header.clone();
        let engine = Arc::clone(&self.engine);
        match tokio::task::spawn_blocking(move || store::reset(&*engine, &header)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return self.engine_failed(e.context("dropping the stored vectors")),
            Err(e) => return self.engine_failed(anyhow::anyhow!("store task failed: {e}")),
        }
        self.index.clear();
        self.watermark = 0;
        self.failed = true;
        if let Some(m) = &self.metrics {
            m.watermark.store(0, Ordering::Relaxed);
            m.vectors.set(0);
        }
        Flow::Done
    }

    /// The vectors of `batch`, in order; `None` for a fact the endpoint
    /// refuses as input (HTTP 400, 413, 422 on its own), which is then
    /// left without a vector. Retries everything else with backoff. `None`
    /// overall when `stop` flipped.
    async fn embed_retrying(
        &self,
        batch: &[(FactId, String)],
        stop: &mut watch::Receiver<bool>,
    ) -> Option<Vec<Option<Vec<f32>>>> {
        let texts: Vec<String> = batch.iter().map(|(_, t)| t.clone()).collect();
        let mut delay = FIRST_BACKOFF;
        loop {
            let result = tokio::select! {
                r = self.client.embed_with(&self.model, &texts, self.cfg.dimensions) => r,
                _ = stop.wait_for(|s| *s) => return None,
            };
            let e = match result {
                Ok(v) => return Some(v.into_iter().map(Some).collect()),
                Err(e) => e,
            };
            if let Some(m) = &self.metrics {
                m.failures.with_label_values(&["worker"]).inc();
            }
            if refuses_input(&e) {
                if batch.len() == 1 {
                    tracing::error!(fact = %batch[0].0, error = %e, "the embeddings endpoint refuses this fact's text; it gets no vector");
                    return Some(vec![None]);
                }
                tracing::warn!(error = %e, batch = batch.len(), "the embeddings endpoint refused a batch; embedding its facts one by one");
                let mut out = Vec::with_capacity(batch.len());
                for one in batch {
                    let mut v = Box::pin(self.embed_retrying(std::slice::from_ref(one), stop)).await?;
                    out.push(v.pop().flatten());
                }
                return Some(out);
            }
            tracing::warn!(
                error = %e,
                batch = batch.len(),
                retry_in_ms = delay.as_millis() as u64,
                "embedding failed; retrying"
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = stop.wait_for(|s| *s) => return None,
            }
            delay = (delay * 2).min(MAX_BACKOFF);
        }
    }
}

/// An answer that retrying the same input will not change.
fn refuses_input(e: &LlmError) -> bool {
    matches!(e, LlmError::Status { status: 400 | 413 | 422, .. })
}

fn truncate(mut s: String) -> String {
    if let Some((i, _)) = s.char_indices().nth(MAX_TEXT_CHARS) {
        s.truncate(i);
    }
    s
}

async fn wait_stop(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_cut_on_a_char_boundary() {
        assert_eq!(truncate("abc".into()), "abc");
        let long: String = "é".repeat(MAX_TEXT_CHARS + 5);
        let cut = truncate(long);
        assert_eq!(cut.chars().count(), MAX_TEXT_CHARS);
    }

    #[test]
    fn only_input_refusals_are_not_retried() {
        assert!(refuses_input(&LlmError::Status { status: 400, body: String::new() }));
        assert!(refuses_input(&LlmError::Status { status: 413, body: String::new() }));
        for e in [
            LlmError::Status { status: 500, body: String::new() },
            LlmError::Status { status: 429, body: String::new() },
            LlmError::Status { status: 401, body: String::new() },
            LlmError::Timeout(100),
            LlmError::Malformed("x".into()),
            LlmError::Unreachable("x".into()),
        ] {
            assert!(!refuses_input(&e), "{e}");
        }
    }
}
