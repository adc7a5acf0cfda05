//! The `vector` list of a search: the facts most similar to the question
//! under the configured embedding model, each checked against the engine
//! exactly like the BM25 list's hits.
//!
//! The question is embedded with one call to the endpoint per search. If
//! that call fails, the search answers from its other lists and names
//! `vector` in `unavailable`; for [`COOL_DOWN`] after a failure the call is
//! not tried again (so an endpoint that hangs costs one search its timeout,
//! not every search).

use super::index::VectorIndex;
use super::worker::EmbedMetrics;
use crate::llm::{Client, ModelConfig};
use crate::search::query::{filters_match, matched_terms, visible, MAX_EXAMINED};
use crate::search::{Candidate, RankContext, RankedList, Ranker};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use crate::store::AsOf;

/// How long the list is skipped after the question could not be embedded.
pub const COOL_DOWN: Duration = Duration::from_secs(5);

pub struct VectorRanker {
    index: Arc<VectorIndex>,
    client: Arc<Client>,
    model: ModelConfig,
    dimensions: Option<u32>,
    timeout: Duration,
    /// The runtime the endpoint calls run on (searches rank on the blocking
    /// pool).
    runtime: tokio::runtime::Handle,
    metrics: Option<EmbedMetrics>,
    cool_until: Mutex<Option<Instant>>,
}

impl VectorRanker {
    /// Call inside the runtime.
    pub fn new(
        index: Arc<VectorIndex>,
        client: Arc<Client>,
        cfg: &super::EmbeddingsConfig,
        metrics: Option<EmbedMetrics>,
    ) -> VectorRanker {
        VectorRanker {
            index,
            client,
            model: cfg.model_config(),
            dimensions: cfg.dimensions,
            timeout: Duration::from_millis(cfg.timeout_ms),
            runtime: tokio::runtime::Handle::current(),
            metrics,
            cool_until: Mutex::new(None),
        }
    }

    /// The question's vector, waiting at most the configured timeout (plus
    /// connection set-up). Blocks the calling thread.
    fn embed_question(&self, question: &str) -> Result<Vec<f32>, String> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let client = Arc::clone(&self.client);
        let model = self.model.clone();
        let dimensions = self.dimensions;
        let input = vec![question.to_string()];
        self.runtime.spawn(async move {
            let _ = tx.send(client.embed_with(&model, &input, dimensions).await);
        });
        match rx.recv_timeout(self.timeout + Duration::from_secs(6)) {
            Ok(Ok(mut v)) => v.pop().ok_or_else(|| "no embedding".to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the embeddings endpoint did not answer in time".to_string()),
        }
    }

    fn cooling(&self) -> bool {
        let mut g = self.cool_until.lock().unwrap_or_else(|e| e.into_inner());
        match *g {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                *g = None;
                false
            }
            None => false,
        }
    }

    fn failed(&self, error: &str) {
        tracing::warn!(error, "embedding the question failed; answering without the vector list");
        if let Some(m) = &self.metrics {
            m.failures.with_label_values(&["query"]).inc();
        }
        *self.cool_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + COOL_DOWN);
    }
}

impl Ranker for VectorRanker {
    fn name(&self) -> &'static str {
        "vector"
    }

    fn rank(&self, ctx: &RankContext<'_>) -> anyhow::Result<RankedList> {
        // Nothing to compare with: no call.
        if ctx.want == 0 || self.index.tenant_len(ctx.tenant) == 0 {
            return Ok(RankedList::new(self.name(), Vec::new()));
        }
        if self.cooling() {
            return Ok(RankedList::unavailable(self.name()));
        }
        let query = match self.embed_question(&ctx.request.question) {
            Ok(q) => q,
            Err(e) => {
                self.failed(&e);
                return Ok(RankedList::unavailable(self.name()));
            }
        };
        let as_of = ctx.request.as_of.map(AsOf::Time);
        let mut items = Vec::new();
        for (id, similarity) in self.index.nearest(ctx.tenant, &query, MAX_EXAMINED) {
            // The vectors outlive versions: the engine decides what is visible.
            let Some(f) = ctx.engine.get(ctx.tenant, id, as_of)? else { continue };
            if !visible(&f, ctx.request) || !filters_match(&f, ctx.request) {
                continue;
            }
            let terms = matched_terms(&f, ctx.terms);
            items.push(Candidate { fact: f, score: similarity as f64, terms });
            if items.len() >= ctx.want {
                break;
            }
        }
        Ok(RankedList::new(self.name(), items))
    }
}
