//! Recall: full-text search, graph walks, the graph view, context packets
//! and answers from memory (`docs/search.md`, `docs/recall.md`). The work
//! is `crate::search` and `crate::recall`; this module checks requests,
//! keeps the reads off the async threads and makes searches read their
//! caller's writes.

use super::error::{Result, ServiceError};
use super::Service;
use crate::llm::ModelConfig;
use crate::memory::blocking;
use crate::recall::ask::AskResponse;
use crate::recall::context::{ContextPacket, ContextRequest};
use crate::recall::graph::{Graph, GraphRequest};
use crate::recall::walk::{WalkRequest, WalkResult};
pub use crate::recall::{ask, context, graph, walk};
use crate::search::rank::Fused;
use crate::search;
pub use crate::search::neighbours::MAX_NEIGHBOURS;
use crate::search::{SearchRequest, SearchResult, Signals, DEFAULT_TOP_K, FRESHNESS_WAIT, MAX_SEEDS, MAX_TOP_K};
use crate::store::Fact;

/// Facts recalled for a context goal on top of the seeds' neighbourhood.
const RECALL_FOR_CONTEXT: usize = 16;
/// Evidence `ask` reads by default, and at most.
const ASK_TOP_K: usize = 8;
const ASK_MAX_TOP_K: usize = 100;

/// A read of the search index, and whether the index may have missed writes
/// the caller made just before (it had not caught up within the wait).
#[derive(Debug)]
pub struct Recalled<T> {
    pub value: T,
    pub stale: bool,
}

/// A search as a surface received it, before it is checked.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    pub question: Option<String>,
    pub top_k: Option<i64>,
    pub as_of: Option<i64>,
    pub seeds: Vec<String>,
    pub subject: Option<String>,
    pub predicate: Option<String>,
    pub include_candidates: bool,
    pub valid_from: Option<i64>,
    pub valid_until: Option<i64>,
    pub reference_time: Option<i64>,
    /// The signals to use on top of BM25; all when absent.
    pub signals: Option<Vec<String>>,
    pub neighbours: Option<i64>,
}

impl SearchQuery {
    /// The checked request: a question, `top_k` within `[1, MAX_TOP_K]`,
    /// at most `MAX_SEEDS` seeds (blank ones dropped).
    pub fn checked(self) -> Result<SearchRequest> {
        let question = self.question.unwrap_or_default().trim().to_string();
        if question.is_empty() {
            return Err(ServiceError::invalid("question must not be empty"));
        }
        let top_k = match self.top_k {
            None => DEFAULT_TOP_K,
            Some(k) if (1..=MAX_TOP_K as i64).contains(&k) => k as usize,
            Some(k) => return Err(ServiceError::invalid(format!("top_k must be within [1, {MAX_TOP_K}], got {k}"))),
        };
        let seeds: Vec<String> =
            self.seeds.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
        if seeds.len() > MAX_SEEDS {
            return Err(ServiceError::invalid(format!("at most {MAX_SEEDS} seeds, got {}", seeds.len())));
        }
        if let (Some(from), Some(until)) = (self.valid_from, self.valid_until) {
            if from >= until {
                return Err(ServiceError::invalid(format!(
                    "valid_from must be before valid_until, got {from} and {until}"
                )));
            }
        }
        let signals = match &self.signals {
            None => Signals::default(),
            Some(names) => Signals::from_names(names).map_err(ServiceError::invalid)?,
        };
        let neighbours = match self.neighbours {
            None => 0,
            Some(n) if (0..=MAX_NEIGHBOURS as i64).contains(&n) => n as usize,
            Some(n) => {
                return Err(ServiceError::invalid(format!("neighbours must be within [0, {MAX_NEIGHBOURS}], got {n}")))
            }
        };
        Ok(SearchRequest {
            question,
            top_k,
            as_of: self.as_of,
            seeds,
            subject: self.subject,
            predicate: self.predicate,
            include_candidates: self.include_candidates,
            valid_from: self.valid_from,
            valid_until: self.valid_until,
            reference_time: self.reference_time,
            signals,
            neighbours,
        })
    }
}

/// A question to answer from memory.
#[derive(Debug, Clone, Default)]
pub struct AskQuery {
    pub question: String,
    pub top_k: Option<i64>,
    pub model: Option<ModelConfig>,
    pub as_of: Option<i64>,
    /// "Now" for the question's relative time expressions (unix ms).
    pub reference_time: Option<i64>,
}

impl Service {
    /// The search answer of `/api/search`: facts, entities and why each ranks.
    pub async fn search(&self, tenant: &str, req: SearchRequest) -> Result<Recalled<SearchResult>> {
        let stale = !self.search.wait_fresh(tenant, FRESHNESS_WAIT).await;
        let (search, tenant) = (self.search.clone(), tenant.to_string());
        let value = on_blocking_pool(move || search.search(&tenant, &req, stale)).await?;
        Ok(Recalled { value, stale })
    }

    /// The fused hits of a search, best first.
    pub async fn recall(&self, tenant: &str, req: SearchRequest) -> Result<Recalled<Vec<Fused>>> {
        let r = self.recall_detailed(tenant, req).await?;
        Ok(Recalled { value: r.value.fused, stale: r.stale })
    }

    /// The fused hits of a search with the interval it ranked by and the
    /// turns around each hit.
    pub async fn recall_detailed(&self, tenant: &str, req: SearchRequest) -> Result<Recalled<search::Recalled>> {
        // Read-your-writes: wait (bounded) until the index holds every write
        // of the tenant committed before this call.
        let stale = !self.search.wait_fresh(tenant, FRESHNESS_WAIT).await;
        let (search, tenant) = (self.search.clone(), tenant.to_string());
        let value = on_blocking_pool(move || search.recall_detailed(&tenant, &req)).await?;
        Ok(Recalled { value, stale })
    }

    /// The facts recalled for a question.
    async fn evidence(&self, tenant: &str, req: SearchRequest) -> Result<Recalled<Vec<Fact>>> {
        let r = self.recall(tenant, req).await?;
        Ok(Recalled { value: r.value.into_iter().map(|f| f.fact).collect(), stale: r.stale })
    }

    pub async fn walk(&self, tenant: &str, req: WalkRequest) -> Result<WalkResult> {
        let (store, tenant) = (self.memory.store().clone(), tenant.to_string());
        Ok(blocking(move || walk::walk(&*store, &tenant, &req)).await?)
    }

    pub async fn graph(&self, tenant: &str, req: GraphRequest) -> Result<Graph> {
        let (store, tenant) = (self.memory.store().clone(), tenant.to_string());
        Ok(blocking(move || graph::graph(&*store, &tenant, &req)).await?)
    }

    /// A context packet: the seeds' neighbourhood and what the goal recalls,
    /// ranked and cut to the token budget.
    pub async fn context(&self, tenant: &str, req: ContextRequest) -> Result<ContextPacket> {
        let (recalled, adjacent, window) = if req.goal.trim().is_empty() {
            (Vec::new(), Vec::new(), None)
        } else {
            let search = SearchRequest {
                question: req.goal.clone(),
                top_k: RECALL_FOR_CONTEXT,
                as_of: req.as_of,
                reference_time: req.reference_time,
                neighbours: req.neighbours,
                ..Default::default()
            };
            let found = self.recall_detailed(tenant, search).await?.value;
            let adjacent = found
                .fused
                .iter()
                .zip(found.neighbours)
                .flat_map(|(hit, around)| around.into_iter().map(move |f| (hit.fact.id, f)))
                .collect();
            (found.fused.into_iter().map(|f| f.fact).collect(), adjacent, found.window)
        };
        let (store, tenant) = (self.memory.store().clone(), tenant.to_string());
        Ok(blocking(move || context::build(&*store, &tenant, &req, recalled, adjacent, window.as_ref())).await?)
    }

    /// Answers a question from memory: the evidence the index recalls, and
    /// the caller's model (or, without one, the evidence itself).
    pub async fn ask(&self, tenant: &str, q: AskQuery) -> Result<Recalled<AskResponse>> {
        let question = q.question.trim().to_string();
        if question.is_empty() {
            return Err(ServiceError::invalid("question must not be empty"));
        }
        let top_k = match q.top_k {
            None => ASK_TOP_K,
            Some(k) if (1..=ASK_MAX_TOP_K as i64).contains(&k) => k as usize,
            Some(k) => {
                return Err(ServiceError::invalid(format!("top_k must be within [1, {ASK_MAX_TOP_K}], got {k}")))
            }
        };
        let req = SearchRequest {
            question: question.clone(),
            top_k,
            as_of: q.as_of,
            reference_time: q.reference_time,
            ..Default::default()
        };
        let evidence = self.evidence(tenant, req).await?;
        let answer =
            ask::ask(&self.llm, &question, evidence.value, q.model.as_ref()).await.map_err(super::digest::llm_error)?;
        let (used_in, used_out) = (answer.tokens.tokens_in, answer.tokens.tokens_out);
        crate::monitor::usage::record_async(self.memory.store().clone(), tenant.to_string(), used_in, used_out).await;
        Ok(Recalled { value: answer, stale: evidence.stale })
    }
}

/// Runs index work on the blocking pool.
async fn on_blocking_pool<T: Send + 'static>(f: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(search_error),
        Err(e) => Err(ServiceError::internal(format!("search task failed: {e}"))),
    }
}

/// A failed search: the store's errors keep their meaning, the index's are internal.
fn search_error(e: anyhow::Error) -> ServiceError {
    match e.downcast::<crate::store::EngineError>() {
        Ok(engine) => ServiceError::from(engine),
        Err(other) => ServiceError::internal(format!("search failed: {other:#}")),
    }
}
