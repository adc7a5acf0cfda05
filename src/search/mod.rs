//! Full-text recall: a tantivy index of every tenant's facts, derived from
//! the engine's change log, and the hybrid search over it (`/api/search`).
//!
//! - `tokenize`: the words of documents and questions.
//! - `schema`: index fields and the document of a memory item.
//! - `indexer`: follows the change log; the watermark rides in the commit.
//! - `query`: the BM25 and graph-proximity rankers.
//! - `focus`: what a search is about (its interval, the entities it names).
//! - `time`: the interval from the request or the question, and its ranker.
//! - `entities`: the entities a question names, and their ranker.
//! - `rank`: ranked lists, the [`Ranker`] interface and their fusion (RRF).
//! - `diverse`: near-duplicates spread out of the top (MMR).
//! - `neighbours`: the conversation turns around a hit.
//!
//! The engine stays the source of truth: every hit is re-read from it (as
//! of the request's record time) before it is returned, so a lagging or
//! rebuilt index can miss a fact for a moment but never shows one the
//! request may not see. See `docs/search.md`.

pub mod diverse;
pub mod entities;
pub mod focus;
pub mod indexer;
pub mod neighbours;
pub mod query;
pub mod rank;
pub mod request;
pub mod schema;
pub mod time;
pub mod tokenize;

pub use request::{SearchRequest, Signals};
pub use focus::Window;

pub use indexer::{index_dir, rebuild, IndexerMetrics, Rebuilt};
pub use rank::{Candidate, RankContext, RankedList, Ranker};
pub use schema::fact_text;

use crate::memory::Memory;
use anyhow::Result;
use indexer::{Hurry, IndexState, Indexer};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use crate::store::{is_entity_ref, MemoryStore, FactId, Tx};
use tokio::sync::watch;

pub const DEFAULT_TOP_K: usize = 8;
pub const MAX_TOP_K: usize = 100;
pub const MAX_SEEDS: usize = 16;
/// How long a search waits for the index to reach the writes before it.
pub const FRESHNESS_WAIT: Duration = Duration::from_secs(2);

/// Why one result matched.
#[derive(Debug, Clone, Serialize)]
pub struct Match {
    pub id: FactId,
    /// The fused (RRF) score.
    pub score: f64,
    /// The lists the fact was found in: `bm25`, `graph`, `vector`.
    pub reasons: Vec<&'static str>,
    /// Its 1-based rank in each list.
    pub ranks: BTreeMap<&'static str, usize>,
    /// Question terms the fact contains.
    pub terms: Vec<String>,
    /// The turns of its conversation around it (when asked for), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub neighbours: Vec<Value>,
}

/// The answer of `/api/search`.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    pub kind: &'static str,
    pub question: String,
    pub answer_facts: Vec<Value>,
    pub matches: Vec<Match>,
    pub entities: Vec<String>,
    /// The question's index terms (stopwords dropped, stemmed; the words
    /// that named a time left out).
    pub terms: Vec<String>,
    /// The valid-time interval the search ranked by, if any.
    pub time: Option<Window>,
    /// True when the index had not caught up with the writes made before
    /// the request within the wait: recent writes may be missing.
    pub stale: bool,
    /// Lists that could not be computed for this search (`vector` when the
    /// embeddings endpoint failed): the answer comes from the others.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<&'static str>,
}

/// The fused ranking of a search and what went into it.
#[derive(Debug, Clone)]
pub struct Recalled {
    /// Best first, at most `top_k`.
    pub fused: Vec<rank::Fused>,
    /// The question's terms.
    pub terms: Vec<String>,
    /// The lists whose source failed (see [`RankedList::unavailable`]).
    pub unavailable: Vec<&'static str>,
    /// The valid-time interval the search ranked by.
    pub window: Option<Window>,
    /// The turns around each fused hit (in the order of `fused`), when the
    /// request asked for neighbours.
    pub neighbours: Vec<Vec<crate::store::Fact>>,
}

/// The search handle: cheap to clone, shared by the request handlers.
#[derive(Clone)]
pub struct Search {
    engine: Arc<dyn MemoryStore>,
    state: Arc<IndexState>,
    watermark: watch::Receiver<Tx>,
    rankers: Arc<Vec<Arc<dyn Ranker>>>,
    /// Tells the indexer what a waiting search waits for.
    hurry: Arc<Hurry>,
}

/// The running indexer: stop it after the last write.
pub struct IndexerHandle {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl IndexerHandle {
    /// Indexes what is still announced, commits, and waits for the task.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "search indexer task failed");
        }
    }
}

impl Search {
    /// Opens (or rebuilds) the index of `data_dir` and starts the indexer
    /// on the current runtime. The indexer catches up with the log in the
    /// background; searches meanwhile wait for it (bounded).
    pub fn start(data_dir: &Path, memory: &Memory, metrics: Option<IndexerMetrics>) -> Result<(Search, IndexerHandle)> {
        Search::start_paced(data_dir, memory, metrics, indexer::COMMIT_EVERY)
    }

    /// [`Search::start`] with another least time between two index commits
    /// while writes keep coming.
    pub fn start_paced(
        data_dir: &Path,
        memory: &Memory,
        metrics: Option<IndexerMetrics>,
        commit_every: Duration,
    ) -> Result<(Search, IndexerHandle)> {
        let engine = Arc::clone(memory.store());
        // Subscribed before the catch-up reads the log: nothing falls between.
        let notices = memory.subscribe();
        let (mut indexer, watermark) = Indexer::open(&index_dir(data_dir), Arc::clone(&engine), metrics)?;
        indexer.set_commit_every(commit_every);
        let state = indexer.state();
        let (stop, stop_rx) = watch::channel(false);
        let hurry = Arc::new(Hurry::default());
        let task = tokio::spawn(indexer.run(notices, stop_rx, Arc::clone(&hurry)));
        let rankers: Vec<Arc<dyn Ranker>> = vec![
            Arc::new(query::Bm25Ranker { state: Arc::clone(&state) }),
            Arc::new(query::GraphRanker),
            Arc::new(time::TimeRanker { state: Arc::clone(&state) }),
            Arc::new(entities::EntityRanker { state: Arc::clone(&state) }),
        ];
        Ok((Search { engine, state, watermark, rankers: Arc::new(rankers), hurry }, IndexerHandle { stop, task }))
    }

    /// Adds a ranked list to the fusion (an embedding similarity list).
    pub fn with_ranker(mut self, ranker: Arc<dyn Ranker>) -> Search {
        let mut v: Vec<Arc<dyn Ranker>> = self.rankers.iter().cloned().collect();
        v.push(ranker);
        self.rankers = Arc::new(v);
        self
    }

    /// Documents in the index (every tenant).
    pub fn documents(&self) -> u64 {
        self.state.reader.searcher().num_docs()
    }

    /// The highest transaction fully in the index.
    pub fn watermark(&self) -> Tx {
        *self.watermark.borrow()
    }

    /// Waits until the index holds every transaction of `tenant` committed
    /// before the call, at most `within`. False when it did not get there.
    pub async fn wait_fresh(&self, tenant: &str, within: Duration) -> bool {
        // The tenant's own last write: other tenants' writes need not be
        // waited for. (Should the log read fail, the store's last tx.)
        let target = match self.engine.tenant_last_write(tenant) {
            Ok(last) => last.map_or(0, |(tx, _)| tx),
            Err(_) => self.engine.last_tx().0,
        };
        let mut rx = self.watermark.clone();
        if *rx.borrow() < target {
            self.hurry.want(target);
        }
        let reached = matches!(tokio::time::timeout(within, rx.wait_for(|w| *w >= target)).await, Ok(Ok(_)));
        reached
    }

    /// The fused ranking of a search of `tenant`, best first, at most
    /// `top_k`, and the question's terms (blocking: engine and index reads).
    /// Every fact is checked against the engine: visible to the request.
    pub fn recall(&self, tenant: &str, req: &SearchRequest) -> Result<(Vec<rank::Fused>, Vec<String>)> {
        let r = self.recall_detailed(tenant, req)?;
        Ok((r.fused, r.terms))
    }

    /// [`Search::recall`], also saying which lists could not be computed.
    pub fn recall_detailed(&self, tenant: &str, req: &SearchRequest) -> Result<Recalled> {
        let window = time::window(req, crate::monitor::time::now_ms());
        let terms = tokenize::query_terms(&time::without_time(&req.question, window.as_ref()));
        let mut seeds: Vec<String> = req.seeds.clone();
        for e in tokenize::entity_refs(&req.question) {
            if !seeds.contains(&e) {
                seeds.push(e);
            }
        }
        seeds.truncate(MAX_SEEDS);
        let named = if req.signals.entity { entities::resolve(&self.state, tenant, req)? } else { Vec::new() };
        let mut want = if seeds.is_empty() { req.top_k } else { (req.top_k * 3).max(24) };
        if req.signals.diverse {
            // Room below the top for the distinct facts to come up from.
            want = want.max(req.top_k * diverse::DEPTH);
        }
        let ctx = RankContext {
            engine: &*self.engine,
            tenant,
            request: req,
            terms: &terms,
            seeds: &seeds,
            want,
            window: window.as_ref(),
            named: &named,
        };
        let mut lists = Vec::with_capacity(self.rankers.len());
        let mut unavailable = Vec::new();
        // An interval the request gives is used whatever the signals say
        // (without one, the time signal off means no interval at all).
        let wanted = |name: &str| req.signals.wants(name) || (name == "time" && window.is_some());
        for r in self.rankers.iter().filter(|r| wanted(r.name())) {
            let list = r.rank(&ctx)?;
            if list.unavailable {
                unavailable.push(list.name);
            }
            lists.push(list);
        }
        let mut fused = rank::fuse(lists, rank::RRF_K);
        if let Some(w) = &window {
            time::in_window_first(&mut fused, w);
        }
        if req.signals.diverse {
            fused = diverse::diversify(fused, req.top_k);
            if let Some(w) = &window {
                time::in_window_first(&mut fused, w);
            }
        }
        fused.truncate(req.top_k);
        let neighbours = if req.neighbours == 0 {
            Vec::new()
        } else {
            fused
                .iter()
                .map(|f| neighbours::around(&self.state, &*self.engine, tenant, req, &f.fact, req.neighbours))
                .collect::<Result<_>>()?
        };
        Ok(Recalled { fused, terms, unavailable, window, neighbours })
    }

    /// Runs a search of `tenant` (blocking: engine and index reads).
    pub fn search(&self, tenant: &str, req: &SearchRequest, stale: bool) -> Result<SearchResult> {
        let Recalled { fused, terms, unavailable, window, neighbours } = self.recall_detailed(tenant, req)?;
        let mut entities: Vec<String> = Vec::new();
        for f in &fused {
            for e in [Some(f.fact.subject.as_str()), f.fact.object_entity()].into_iter().flatten() {
                if is_entity_ref(e) && !entities.iter().any(|x| x == e) {
                    entities.push(e.to_string());
                }
            }
        }
        let as_json = |f: &crate::store::Fact| serde_json::to_value(f).expect("facts serialize");
        let matches = fused
            .iter()
            .enumerate()
            .map(|(i, f)| Match {
                id: f.fact.id,
                score: f.score,
                reasons: f.reasons.clone(),
                ranks: f.ranks.clone(),
                terms: f.terms.clone(),
                neighbours: neighbours.get(i).map(|n| n.iter().map(as_json).collect()).unwrap_or_default(),
            })
            .collect();
        let answer_facts = fused.iter().map(|f| as_json(&f.fact)).collect();
        Ok(SearchResult {
            kind: "search_result",
            question: req.question.clone(),
            answer_facts,
            matches,
            entities,
            terms,
            time: window,
            stale,
            unavailable,
        })
    }
}

#[cfg(test)]
mod tests;
