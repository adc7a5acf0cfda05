//! The built-in rankers: BM25 over the recall index, and graph proximity to
//! the seed entities.

use super::indexer::IndexState;
use super::rank::{Candidate, RankContext, RankedList, Ranker};
use super::schema::{fact_texts, DocKind, Fields};
use super::SearchRequest;
use anyhow::Context;
use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, ConstScoreQuery, Occur, Query, RangeQuery, TermQuery};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::{TantivyDocument, Term};
use tempora_storage::{AsOf, Fact, FactId, FactQuery, Status, StatusFilter, StatusSet};

/// Field boosts: the object says most about what a fact claims; subject
/// and predicate a little more than the rest.
const BOOSTS: [(&str, f32); 5] =
    [("object", 2.0), ("subject", 1.5), ("predicate", 1.3), ("properties", 1.0), ("source", 0.5)];

/// Index hits examined per search at most (hits the engine rejects, e.g.
/// facts not yet active at `as_of`, are skipped; this bounds the work).
pub const MAX_EXAMINED: usize = 2000;

/// Whether the request may see `f` (a version read as of the request's
/// record time): active, or candidate when asked.
pub fn visible(f: &Fact, req: &SearchRequest) -> bool {
    f.status == Status::Active || (req.include_candidates && f.status == Status::Candidate)
}

/// Whether `f` passes the request's exact `subject` / `predicate` filters.
pub fn filters_match(f: &Fact, req: &SearchRequest) -> bool {
    req.subject.as_ref().is_none_or(|s| &f.subject == s) && req.predicate.as_ref().is_none_or(|p| &f.predicate == p)
}

/// The question terms `f` contains.
pub fn matched_terms(f: &Fact, terms: &[String]) -> Vec<String> {
    let texts = fact_texts(f);
    terms.iter().filter(|t| texts.contains(t)).cloned().collect()
}

fn filter(q: impl Query) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(Box::new(q), 0.0))
}

fn exact(field: tantivy::schema::Field, value: &str) -> Box<dyn Query> {
    filter(TermQuery::new(Term::from_field_text(field, value), IndexRecordOption::Basic))
}

/// The tantivy query of a search: the tenant and kind (always), liveness or
/// the `as_of` creation bound, the exact filters, and the question's terms
/// over the text fields.
pub fn index_query(fields: &Fields, tenant: &str, req: &SearchRequest, terms: &[String]) -> BooleanQuery {
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![
        (Occur::Must, exact(fields.tenant, tenant)),
        (Occur::Must, exact(fields.kind, DocKind::Fact.as_str())),
    ];
    match req.as_of {
        None => clauses.push((
            Occur::Must,
            filter(TermQuery::new(Term::from_field_bool(fields.live, true), IndexRecordOption::Basic)),
        )),
        Some(t) => clauses.push((
            Occur::Must,
            filter(RangeQuery::new(Bound::Unbounded, Bound::Included(Term::from_field_i64(fields.created_at, t)))),
        )),
    }
    if let Some(s) = &req.subject {
        clauses.push((Occur::Must, exact(fields.subject_exact, s)));
    }
    if let Some(p) = &req.predicate {
        clauses.push((Occur::Must, exact(fields.predicate_exact, p)));
    }
    let mut text: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for t in terms {
        for (name, boost) in BOOSTS {
            let field = match name {
                "object" => fields.object,
                "subject" => fields.subject,
                "predicate" => fields.predicate,
                "properties" => fields.properties,
                _ => fields.source,
            };
            let q = TermQuery::new(Term::from_field_text(field, t), IndexRecordOption::WithFreqs);
            text.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
        }
    }
    clauses.push((Occur::Must, Box::new(BooleanQuery::new(text))));
    BooleanQuery::new(clauses)
}

/// BM25 over the index, each hit checked against the engine.
pub struct Bm25Ranker {
    pub state: Arc<IndexState>,
}

impl Ranker for Bm25Ranker {
    fn name(&self) -> &'static str {
        "bm25"
    }

    fn rank(&self, ctx: &RankContext<'_>) -> anyhow::Result<RankedList> {
        let mut items = Vec::new();
        if ctx.terms.is_empty() || ctx.want == 0 {
            return Ok(RankedList::new(self.name(), items));
        }
        let fields = &self.state.fields;
        let query = index_query(fields, ctx.tenant, ctx.request, ctx.terms);
        let searcher = self.state.reader.searcher();
        let as_of = ctx.request.as_of.map(AsOf::Time);
        let page = (ctx.want * 2 + 16).min(500);
        let mut offset = 0;
        let mut seen: HashSet<FactId> = HashSet::new();
        while items.len() < ctx.want && offset < MAX_EXAMINED {
            let hits = searcher
                .search(&query, &TopDocs::with_limit(page).and_offset(offset))
                .context("searching the recall index")?;
            let n = hits.len();
            for (score, addr) in hits {
                let doc: TantivyDocument = searcher.doc(addr).context("reading a search document")?;
                let Some(id) = doc.get_first(fields.id).and_then(|v| v.as_str()).and_then(|s| s.parse::<FactId>().ok())
                else {
                    continue;
                };
                if !seen.insert(id) {
                    continue;
                }
                // The index may lag the engine (or be rewound): the engine decides.
                let Some(f) = ctx.engine.get(ctx.tenant, id, as_of)? else { continue };
                if !visible(&f, ctx.request) || !filters_match(&f, ctx.request) {
                    continue;
                }
                let terms = matched_terms(&f, ctx.terms);
                items.push(Candidate { fact: f, score: score as f64, terms });
                if items.len() >= ctx.want {
                    break;
                }
            }
            if n < page {
                break;
            }
            offset += page;
        }
        Ok(RankedList::new(self.name(), items))
    }
}

/// Facts about or pointing at a seed (hop 0), then facts about or pointing
/// at the seeds' direct neighbours (hop 1).
pub struct GraphRanker;

/// Facts read per entity and direction, neighbours expanded, and facts in
/// the list, at most.
const PER_ENTITY: usize = 200;
const MAX_NEIGHBOURS: usize = 32;
const MAX_GRAPH: usize = 1000;

impl Ranker for GraphRanker {
    fn name(&self) -> &'static str {
        "graph"
    }

    fn rank(&self, ctx: &RankContext<'_>) -> anyhow::Result<RankedList> {
        let mut items: Vec<Candidate> = Vec::new();
        if ctx.seeds.is_empty() {
            return Ok(RankedList::new(self.name(), items));
        }
        let req = ctx.request;
        let status = if req.include_candidates {
            StatusFilter::Among(StatusSet::default().with(Status::Active).with(Status::Candidate))
        } else {
            StatusFilter::Current
        };
        let as_of = req.as_of.map(AsOf::Time);
        let around = |entity: &str| -> anyhow::Result<Vec<Fact>> {
            let mut out = Vec::new();
            for q in [
                FactQuery { subject: Some(entity.to_string()), ..Default::default() },
                FactQuery { object: Some(serde_json::Value::String(entity.to_string())), ..Default::default() },
            ] {
                let q = FactQuery { status, as_of, predicate: req.predicate.clone(), ..q };
                out.extend(crate::recall::collect(ctx.engine, ctx.tenant, &q, PER_ENTITY)?.0);
            }
            Ok(out)
        };
        let mut seen: HashSet<FactId> = HashSet::new();
        let seeds: HashSet<&str> = ctx.seeds.iter().map(String::as_str).collect();
        let mut neighbours: Vec<String> = Vec::new();
        let mut hop0: Vec<Fact> = Vec::new();
        for seed in ctx.seeds {
            for f in around(seed)? {
                for e in [Some(f.subject.as_str()), f.object_entity()].into_iter().flatten() {
                    if !seeds.contains(e) && tempora_storage::is_entity_ref(e) && !neighbours.iter().any(|n| n == e) {
                        neighbours.push(e.to_string());
                    }
                }
                if seen.insert(f.id) {
                    hop0.push(f);
                }
            }
        }
        let mut hop1: Vec<Fact> = Vec::new();
        for n in neighbours.iter().take(MAX_NEIGHBOURS) {
            if hop0.len() + hop1.len() >= MAX_GRAPH {
                break;
            }
            for f in around(n)? {
                if seen.insert(f.id) {
                    hop1.push(f);
                }
            }
        }
        for (hop, facts) in [(0usize, hop0), (1, hop1)] {
            let mut scored: Vec<Candidate> = facts
                .into_iter()
                .filter(|f| visible(f, req) && filters_match(f, req))
                .map(|f| {
                    let terms = matched_terms(&f, ctx.terms);
                    let score = 1.0 / (1.0 + hop as f64) + terms.len() as f64;
                    Candidate { fact: f, score, terms }
                })
                .collect();
            // Within a hop: more question terms first, then the surer, then the newer.
            scored.sort_by(|a, b| {
                b.terms
                    .len()
                    .cmp(&a.terms.len())
                    .then(b.fact.confidence.total_cmp(&a.fact.confidence))
                    .then(b.fact.recorded_at.cmp(&a.fact.recorded_at))
                    .then(a.fact.id.cmp(&b.fact.id))
            });
            items.extend(scored);
        }
        items.truncate(MAX_GRAPH);
        Ok(RankedList::new(self.name(), items))
    }
}
