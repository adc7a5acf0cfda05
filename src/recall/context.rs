//! `/api/context`: the packet an agent loads at the start of a task.
//!
//! 1. Collect: the seeds' own facts (active and candidate), the facts that
//!    point at the seeds, one hop out (the current facts of the entities the
//!    seeds link to), and the facts full-text recall found for the goal.
//! 2. Rank: relevance to the goal (BM25 with the candidates as the corpus),
//!    closeness to the seeds, confidence and recency, weighted as in
//!    [`score`]; ties by fact id, so the same memory gives the same packet.
//! 3. Trim: to `max_facts`, and to `token_budget` with the estimator of
//!    [`super::tokens`] (greedy in rank order: a fact that does not fit is
//!    skipped and smaller ones after it may still go in).
//! 4. Warn: conflicts between an active fact and a candidate of a `one`
//!    predicate, unconfirmed candidates, low confidence, facts whose valid
//!    time is over, and facts not re-recorded for a year.
//!
//! 5. Pages: the digested documents (`crate::digest::pages`) that mention
//!    the packet's entities, seeds first, newest first, as snippets. A
//!    page's own facts are not candidates (unless the page is a seed): its
//!    body could fill any budget, and the snippet stands for it.
//!
//! Reference time for "over" and "a year" is `as_of` when given, else the
//! record time of the tenant's last write, never the wall clock (nor another
//! tenant's writes): a packet changes only when the tenant's memory does.

use super::text::{bm25, fact_text, terms};
use super::tokens::fact_tokens;
use super::collect;
use crate::search::time::tier;
use crate::search::Window;
use crate::digest::pages::{cut_chars, is_page, MENTIONS};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use crate::store::{
    is_entity_ref, AsOf, Cardinality, MemoryStore, EngineError, Fact, FactId, FactQuery, Millis, Status, StatusFilter,
    StatusSet,
};

pub const DEFAULT_MAX_FACTS: usize = 64;
pub const MAX_FACTS: usize = 1000;
pub const DEFAULT_MAX_PAGES: usize = 8;
pub const MAX_PAGES: usize = 100;
/// Characters of a page body a snippet keeps.
pub const SNIPPET_CHARS: usize = 500;
/// `mentions` edges read per entity when looking for its pages.
const MENTIONS_PER_ENTITY: usize = 1000;
pub const MAX_SEEDS: usize = 32;
/// Facts read per entity and direction.
const PER_ENTITY: usize = 500;
/// Entities expanded one hop out from the seeds.
const MAX_HOP_ENTITIES: usize = 32;
/// Facts kept per one-hop entity.
const PER_HOP_ENTITY: usize = 50;
const LOW_CONFIDENCE: f64 = 0.5;
const STALE_AFTER_MS: Millis = 365 * 24 * 3600 * 1000;
const RECENCY_HALF_LIFE_MS: f64 = 90.0 * 24.0 * 3600.0 * 1000.0;

#[derive(Debug, Clone, Default)]
pub struct ContextRequest {
    pub seeds: Vec<String>,
    pub goal: String,
    pub token_budget: Option<usize>,
    pub project: Option<String>,
    pub max_facts: usize,
    pub max_pages: usize,
    pub as_of: Option<Millis>,
    /// "Now" for the goal's relative time expressions.
    pub reference_time: Option<Millis>,
    /// Conversation turns to bring in around each recalled turn, each side.
    pub neighbours: usize,
}

/// What a fact's score keeps when the goal names a time: all of it for a
/// fact that began then, less for one that only held then, half for one of
/// another time.
const IN_TIME: [f64; 3] = [1.0, 0.75, 0.5];

/// Turns brought in around each recalled turn unless the request says.
pub const DEFAULT_NEIGHBOURS: usize = 1;

/// Share of its recalled turn's score a turn next to it gets: it follows
/// the turn it gives context to, and goes before the budget cuts it.
const ADJACENT_SHARE: f64 = 0.999;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A fact about a seed (or the project).
    Seed,
    /// A fact pointing at a seed.
    Inbound,
    /// A fact about an entity one hop from a seed.
    Hop,
    /// Recalled for the goal by full-text search only.
    Recall,
    /// A conversation turn next to a recalled one (see `next_to`).
    Adjacent,
}

impl Origin {
    fn proximity(self) -> f64 {
        match self {
            Origin::Seed => 1.0,
            Origin::Inbound => 0.8,
            Origin::Hop => 0.5,
            // Found by the goal alone: not near the seeds at all.
            Origin::Recall | Origin::Adjacent => 0.3,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ranked {
    pub id: FactId,
    pub score: f64,
    pub relevance: f64,
    pub origin: Origin,
    /// The goal's full-text recall found it (whatever its origin).
    pub recalled: bool,
    pub tokens: usize,
    /// For an adjacent turn: the recalled turn it surrounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_to: Option<FactId>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Warning {
    pub kind: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<FactId>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PageSnippet {
    pub id: String,
    pub subject: String,
    pub title: String,
    pub body: String,
    pub source: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ContextPacket {
    pub kind: &'static str,
    pub summary: String,
    pub goal: String,
    pub entities: Vec<String>,
    pub facts: Vec<Fact>,
    /// Why each selected fact is there, in the same order as `facts`.
    pub ranking: Vec<Ranked>,
    pub pages: Vec<PageSnippet>,
    pub tokens: usize,
    pub total_tokens: usize,
    pub candidates: usize,
    pub warnings: Vec<Warning>,
}

struct Candidate {
    fact: Fact,
    origin: Origin,
}

/// Builds the packet. `recalled` are facts found for the goal elsewhere (the
/// full-text index); they join the candidates, and so do the turns around
/// them (`adjacent`: the recalled turn's id and a turn next to it), ranked
/// right after the turn they surround. `window` is the valid time the goal
/// names, if any: facts of another time rank lower ([`IN_TIME`]).
pub fn build(
    engine: &dyn MemoryStore,
    tenant: &str,
    req: &ContextRequest,
    recalled: Vec<Fact>,
    adjacent: Vec<(FactId, Fact)>,
    window: Option<&Window>,
) -> Result<ContextPacket, EngineError> {
    let as_of = req.as_of.map(AsOf::Time);
    let mut seeds: Vec<String> = Vec::new();
    for s in req.seeds.iter().chain(req.project.iter()) {
        if !seeds.contains(s) {
            seeds.push(s.clone());
        }
    }
    if seeds.len() > MAX_SEEDS {
        return Err(EngineError::Invalid(format!("at most {MAX_SEEDS} seeds (with the project), got {}", seeds.len())));
    }

    // 1. Collect.
    let mut cands: Vec<Candidate> = Vec::new();
    let mut seen: HashSet<FactId> = HashSet::new();
    let mut push = |cands: &mut Vec<Candidate>, fact: Fact, origin: Origin| {
        if is_page(&fact.subject) && !seeds.contains(&fact.subject) {
            return;
        }
        if seen.insert(fact.id) {
            cands.push(Candidate { fact, origin });
        }
    };
    let live = StatusFilter::Among(StatusSet::default().with(Status::Active).with(Status::Candidate));
    let mut hop_entities: Vec<String> = Vec::new();
    for seed in &seeds {
        let q = FactQuery { subject: Some(seed.clone()), status: live, as_of, ..Default::default() };
        for f in collect(engine, tenant, &q, PER_ENTITY)?.0 {
            if let Some(e) = f.object_entity() {
                if !seeds.iter().any(|s| s == e) && !hop_entities.iter().any(|h| h == e) {
                    hop_entities.push(e.to_string());
                }
            }
            push(&mut cands, f, Origin::Seed);
        }
        if is_entity_ref(seed) {
            let q = FactQuery {
                object: Some(serde_json::Value::String(seed.clone())),
                status: live,
                as_of,
                ..Default::default()
            };
            for f in collect(engine, tenant, &q, PER_ENTITY)?.0 {
                if !seeds.contains(&f.subject)
                    && !hop_entities.contains(&f.subject)
                    && is_entity_ref(&f.subject)
                    && !is_page(&f.subject)
                {
                    hop_entities.push(f.subject.clone());
                }
                push(&mut cands, f, Origin::Inbound);
            }
        }
    }
    for e in hop_entities.iter().take(MAX_HOP_ENTITIES) {
        let q = FactQuery { subject: Some(e.clone()), as_of, ..Default::default() };
        for f in collect(engine, tenant, &q, PER_HOP_ENTITY)?.0 {
            push(&mut cands, f, Origin::Hop);
        }
    }
    // Recalled last: a fact the graph already reached keeps its place in the
    // graph (its origin) and is marked as recalled too.
    let mut recalled_ids: HashSet<FactId> = HashSet::new();
    for f in recalled {
        recalled_ids.insert(f.id);
        push(&mut cands, f, Origin::Recall);
    }
    let mut next_to: HashMap<FactId, FactId> = HashMap::new();
    for (hit, f) in adjacent {
        next_to.entry(f.id).or_insert(hit);
        push(&mut cands, f, Origin::Adjacent);
    }

    // 2. Rank.
    let goal_terms = terms(&req.goal);
    let docs: Vec<Vec<String>> = cands.iter().map(|c| terms(&fact_text(&c.fact))).collect();
    let rel = bm25(&goal_terms, &docs);
    let max_rel = rel.iter().cloned().fold(0.0, f64::max);
    let newest = cands.iter().map(|c| c.fact.recorded_at).max().unwrap_or(0);
    let mut ranked: Vec<(usize, Ranked)> = cands
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let relevance = if max_rel > 0.0 { rel[i] / max_rel } else { 0.0 };
            let age = (newest - c.fact.recorded_at).max(0) as f64;
            let recency = 0.5f64.powf(age / RECENCY_HALF_LIFE_MS);
            let s = score(relevance, c.origin.proximity(), c.fact.confidence, recency)
                * window.map_or(1.0, |w| IN_TIME[tier(w, &c.fact) as usize]);
            let recalled = recalled_ids.contains(&c.fact.id);
            let next_to = (c.origin == Origin::Adjacent).then(|| next_to.get(&c.fact.id).copied()).flatten();
            let tokens = fact_tokens(&c.fact);
            (i, Ranked { id: c.fact.id, score: s, relevance, origin: c.origin, recalled, tokens, next_to })
        })
        .collect();
    let scores: HashMap<FactId, f64> = ranked.iter().map(|(_, r)| (r.id, r.score)).collect();
    for (_, r) in ranked.iter_mut() {
        if let Some(hit) = r.next_to.and_then(|h| scores.get(&h)) {
            r.score = hit * ADJACENT_SHARE;
        }
    }
    ranked.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(a.1.id.cmp(&b.1.id)));

    // 3. Trim.
    let total_tokens: usize = ranked.iter().map(|(_, r)| r.tokens).sum();
    let max_facts = match req.max_facts {
        0 => DEFAULT_MAX_FACTS,
        n => n.min(MAX_FACTS),
    };
    let mut tokens = 0;
    let mut left_out_for_budget = 0;
    let mut chosen: Vec<(usize, Ranked)> = Vec::new();
    for (i, r) in ranked {
        if chosen.len() == max_facts {
            break;
        }
        if let Some(b) = req.token_budget {
            if tokens + r.tokens > b {
                left_out_for_budget += 1;
                continue;
            }
        }
        tokens += r.tokens;
        chosen.push((i, r));
    }

    // 4. Warn.
    let reference = match req.as_of {
        Some(t) => t,
        None => engine.tenant_last_write(tenant)?.map(|(_, at)| at).unwrap_or(0),
    };
    let mut warnings = conflicts(engine, tenant, &cands, &chosen)?;
    for (i, _) in &chosen {
        let f = &cands[*i].fact;
        if f.status == Status::Candidate {
            warnings.push(Warning {
                kind: "candidate",
                message: format!("{} {} {} is an unconfirmed candidate (confidence {:.2})", f.subject, f.predicate, f.object, f.confidence),
                facts: vec![f.id],
            });
        } else if f.confidence < LOW_CONFIDENCE {
            warnings.push(Warning {
                kind: "low_confidence",
                message: format!("{} {} {} has low confidence ({:.2})", f.subject, f.predicate, f.object, f.confidence),
                facts: vec![f.id],
            });
        }
        if f.valid_until.is_some_and(|u| u <= reference) {
            warnings.push(Warning {
                kind: "expired",
                message: format!("{} {} {} stopped being true at {}", f.subject, f.predicate, f.object, f.valid_until.unwrap_or_default()),
                facts: vec![f.id],
            });
        }
        if reference - f.recorded_at > STALE_AFTER_MS {
            warnings.push(Warning {
                kind: "stale",
                message: format!("{} {} {} was recorded over a year ago and not confirmed since", f.subject, f.predicate, f.object),
                facts: vec![f.id],
            });
        }
    }
    if left_out_for_budget > 0 {
        warnings.push(Warning {
            kind: "budget",
            message: format!("{left_out_for_budget} relevant facts did not fit the token budget"),
            facts: Vec::new(),
        });
    }

    let mut entities = seeds.clone();
    for (i, _) in &chosen {
        let f = &cands[*i].fact;
        for e in [Some(f.subject.as_str()).filter(|s| is_entity_ref(s)), f.object_entity()].into_iter().flatten() {
            if !entities.iter().any(|x| x == e) {
                entities.push(e.to_string());
            }
        }
    }
    let summary = format!(
        "{} of {} facts for {}{} ({} of {} tokens)",
        chosen.len(),
        cands.len(),
        if seeds.is_empty() { "the goal".to_string() } else { seeds.join(", ") },
        if req.goal.trim().is_empty() { String::new() } else { format!(" toward \"{}\"", req.goal.trim()) },
        tokens,
        total_tokens
    );
    let pages = page_snippets(engine, tenant, &entities, req.max_pages.min(MAX_PAGES), as_of)?;
    let ranking = chosen.iter().map(|(_, r)| r.clone()).collect();
    let facts = chosen.iter().map(|(i, _)| cands[*i].fact.clone()).collect();
    Ok(ContextPacket {
        kind: "context_packet",
        summary,
        goal: req.goal.clone(),
        entities,
        facts,
        ranking,
        pages,
        tokens,
        total_tokens,
        candidates: cands.len(),
        warnings,
    })
}

/// The pages mentioning `entities` (in that order; each entity's newest
/// first), at most `max`, each page once, as snippets.
fn page_snippets(
    engine: &dyn MemoryStore,
    tenant: &str,
    entities: &[String],
    max: usize,
    as_of: Option<AsOf>,
) -> Result<Vec<PageSnippet>, EngineError> {
    let mut out: Vec<PageSnippet> = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    for entity in entities.iter().filter(|e| !is_page(e)) {
        if out.len() >= max {
            break;
        }
        let q = FactQuery {
            predicate: Some(MENTIONS.to_string()),
            object: Some(serde_json::Value::String(entity.clone())),
            as_of,
            ..Default::default()
        };
        let mut links = collect(engine, tenant, &q, MENTIONS_PER_ENTITY)?.0;
        links.retain(|f| is_page(&f.subject));
        links.sort_by(|a, b| b.created_tx.cmp(&a.created_tx).then_with(|| a.subject.cmp(&b.subject)));
        for link in links {
            if out.len() >= max {
                break;
            }
            if !taken.insert(link.subject.clone()) {
                continue;
            }
            let field = |predicate: &str| -> Result<Option<String>, EngineError> {
                let q = FactQuery {
                    subject: Some(link.subject.clone()),
                    predicate: Some(predicate.to_string()),
                    as_of,
                    limit: 1,
                    ..Default::default()
                };
                Ok(engine.query(tenant, &q)?.facts.into_iter().next().and_then(|f| f.object.as_str().map(String::from)))
            };
            out.push(PageSnippet {
                id: link.subject.clone(),
                subject: entity.clone(),
                title: field("title")?.unwrap_or_default(),
                body: cut_chars(&field("body")?.unwrap_or_default(), SNIPPET_CHARS),
                source: field("source")?,
            });
        }
    }
    Ok(out)
}

/// The ranking score: relevance to the goal weighs most, then closeness to
/// the seeds, confidence, and recency (each in [0, 1]).
pub fn score(relevance: f64, proximity: f64, confidence: f64, recency: f64) -> f64 {
    0.40 * relevance + 0.25 * proximity + 0.20 * confidence + 0.15 * recency
}

/// An active fact and a candidate with different objects for the same
/// subject and `one`/`strict` predicate, at least one of them selected.
fn conflicts(
    engine: &dyn MemoryStore,
    tenant: &str,
    cands: &[Candidate],
    chosen: &[(usize, Ranked)],
) -> Result<Vec<Warning>, EngineError> {
    let selected: HashSet<FactId> = chosen.iter().map(|(_, r)| r.id).collect();
    let mut by_key: HashMap<(&str, &str), Vec<&Fact>> = HashMap::new();
    for c in cands {
        by_key.entry((&c.fact.subject, &c.fact.predicate)).or_default().push(&c.fact);
    }
    let mut keys: Vec<_> = by_key.keys().copied().collect();
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        let facts = &by_key[&key];
        if facts.len() < 2 {
            continue;
        }
        if engine.predicate(tenant, key.1)?.cardinality == Cardinality::Many {
            continue;
        }
        for a in facts.iter().filter(|f| f.status == Status::Active) {
            for c in facts.iter().filter(|f| f.status == Status::Candidate && f.object != a.object) {
                if selected.contains(&a.id) || selected.contains(&c.id) {
                    out.push(Warning {
                        kind: "conflict",
                        message: format!(
                            "{} {}: active {} (confidence {:.2}) is contradicted by candidate {} (confidence {:.2})",
                            key.0, key.1, a.object, a.confidence, c.object, c.confidence
                        ),
                        facts: vec![a.id, c.id],
                    });
                }
            }
        }
    }
    Ok(out)
}
