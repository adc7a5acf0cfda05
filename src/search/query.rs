//! The built-in rankers: BM25 over the recall index, and graph proximity to
//! the seed entities.

use super::indexer::IndexState;
use super::rank::{Candidate, RankContext, RankedList, Ranker};
use super::schema::{fact_texts, DocKind, Fields};
use super::request::SearchRequest;
use anyhow::Context;
use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, ConstScoreQuery, Occur, Query, RangeQuery, TermQuery};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocId, Score, SegmentReader, TantivyDocument, Term};
use crate::store::{AsOf, Fact, FactId, FactQuery, Status, StatusFilter, StatusSet};

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

/// A filter on an exact (untokenized) field value; scores nothing.
pub fn exact(field: tantivy::schema::Field, value: &str) -> Box<dyn Query> {
    filter(TermQuery::new(Term::from_field_text(field, value), IndexRecordOption::Basic))
}

/// The filters every query of a search has: the tenant and kind (always),
/// liveness or the `as_of` creation bound, and the exact filters.
pub fn request_filters(fields: &Fields, tenant: &str, req: &SearchRequest) -> Vec<(Occur, Box<dyn Query>)> {
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
    clauses
}

/// The question's terms over the text fields, each field boosted: matches
/// any of them, scored by BM25.
pub fn text_query(fields: &Fields, terms: &[String]) -> BooleanQuery {
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
    BooleanQuery::new(text)
}

/// The tantivy query of a search: [`request_filters`] and at least one of
/// the question's terms.
pub fn index_query(fields: &Fields, tenant: &str, req: &SearchRequest, terms: &[String]) -> BooleanQuery {
    let mut clauses = request_filters(fields, tenant, req);
    clauses.push((Occur::Must, Box::new(text_query(fields, terms))));
    BooleanQuery::new(clauses)
}

/// The hits of `query`, best first, each re-read from the engine as of the
/// request's record time and kept when the request may see it and `keep`
/// says so; at most `want`, examining at most [`MAX_EXAMINED`] hits.
pub fn verified_hits(
    state: &IndexState,
    ctx: &RankContext<'_>,
    query: &dyn Query,
    want: usize,
    keep: impl Fn(&Fact) -> bool,
) -> anyhow::Result<Vec<Candidate>> {
    let fields = &state.fields;
    let searcher = state.reader.searcher();
    let as_of = ctx.request.as_of.map(AsOf::Time);
    let page = (want * 2 + 16).min(500);
    let mut items = Vec::new();
    let mut offset = 0;
    let mut seen: HashSet<FactId> = HashSet::new();
    while items.len() < want && offset < MAX_EXAMINED {
        // Equal scores go to the newer fact (valid time), so the pool and
        // its order do not depend on how the index happens to be segmented.
        let collector = TopDocs::with_limit(page).and_offset(offset).tweak_score(|segment: &SegmentReader| {
            let valid_from = segment.fast_fields().i64("valid_from").ok();
            move |doc: DocId, score: Score| (score, valid_from.as_ref().and_then(|c| c.first(doc)).unwrap_or(i64::MIN))
        });
        let hits = searcher.search(query, &collector).context("searching the recall index")?;
        let n = hits.len();
        for ((score, _), addr) in hits {
            let doc: TantivyDocument = searcher.doc(addr).context("reading a search document")?;
            let Some(id) = fields.stored_id(&doc) else { continue };
            if !seen.insert(id) {
                continue;
            }
            // The index may lag the engine (or be rewound): the engine decides.
            let Some(f) = ctx.engine.get(ctx.tenant, id, as_of)? else { continue };
            if !visible(&f, ctx.request) || !filters_match(&f, ctx.request) || !keep(&f) {
                continue;
            }
            let terms = matched_terms(&f, ctx.terms);
            items.push(Candidate { fact: f, score: score as f64, terms });
            if items.len() >= want {
                break;
            }
        }
        if n < page {
            break;
        }
        offset += page;
    }
    // The same order whatever the segments: score, then newer, then id.
    items.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then(b.fact.valid_from.cmp(&a.fact.valid_from)).then(a.fact.id.cmp(&b.fact.id))
    });
    Ok(items)
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
        if ctx.terms.is_empty() || ctx.want == 0 {
            return Ok(RankedList::new(self.name(), Vec::new()));
        }
        let query = index_query(&self.state.fields, ctx.tenant, ctx.request, ctx.terms);
        // A pool larger than the list, for the rerank below.
        let items = verified_hits(&self.state, ctx, &query, ctx.want.max(POOL), |_| true)?;
        let neighbours = neighbours(ctx, &items)?;
        let mut items = rerank(items, neighbours, &ctx.request.question, ctx.terms);
        items.truncate(ctx.want);
        Ok(RankedList::new(self.name(), items))
    }
}

/// Verified BM25 hits reranked per search, at least.
pub const POOL: usize = 20;
/// Hits whose neighbours are looked up.
const EXPAND: usize = 10;
/// A subject with more facts than this gets no neighbour expansion (a
/// bounded read per hit).
const MAX_SIBLINGS: usize = 256;
/// Share of a hit's score its neighbours earn.
pub const NEIGHBOUR_SHARE: f64 = 0.35;
/// How much the newest fact of the pool gains over the oldest, for a
/// question about the current state of things.
pub const RECENCY_GAIN: f64 = 0.5;

/// Words that ask for the current state of things ("where do I live now"):
/// the newer of two matching facts is the better answer.
const NOW_WORDS: &[&str] =
    &["current", "currently", "latest", "lately", "now", "nowadays", "present", "presently", "recent", "recently", "today"];

/// Whether `question` asks about the current state ("now", "these days",
/// "currently", "latest"...).
pub fn asks_for_now(question: &str) -> bool {
    let words = super::tokenize::words(question);
    words.iter().any(|w| NOW_WORDS.contains(&w.as_str()))
        || words.windows(2).any(|p| p[0] == "these" && p[1] == "days")
}

/// For each of the first [`EXPAND`] hits, the facts next to it: the facts of
/// the same subject just before and after it in valid time (the previous and
/// next turn of a conversation, the entries around a log line). Returns
/// `(hit index, neighbour)`; neighbours are visible to the request.
fn neighbours(ctx: &RankContext<'_>, items: &[Candidate]) -> anyhow::Result<Vec<(usize, Fact)>> {
    let req = ctx.request;
    let mut by_subject: std::collections::HashMap<&str, Option<Vec<Fact>>> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, c) in items.iter().take(EXPAND).enumerate() {
        let subject = c.fact.subject.as_str();
        if !by_subject.contains_key(subject) {
            let q = FactQuery {
                subject: Some(subject.to_string()),
                as_of: req.as_of.map(AsOf::Time),
                limit: MAX_SIBLINGS + 1,
                ..Default::default()
            };
            let page = ctx.engine.query(ctx.tenant, &q)?;
            let siblings = (page.facts.len() <= MAX_SIBLINGS && page.next_cursor.is_none()).then(|| {
                let mut v: Vec<Fact> =
                    page.facts.into_iter().filter(|f| visible(f, req) && filters_match(f, req)).collect();
                v.sort_by(|a, b| a.valid_from.cmp(&b.valid_from).then(a.id.cmp(&b.id)));
                v
            });
            by_subject.insert(subject, siblings);
        }
        let Some(Some(siblings)) = by_subject.get(subject) else { continue };
        let Some(at) = siblings.iter().position(|f| f.id == c.fact.id) else { continue };
        for j in [at.wrapping_sub(1), at + 1] {
            if let Some(f) = siblings.get(j) {
                out.push((i, f.clone()));
            }
        }
    }
    Ok(out)
}

/// Reranks a BM25 pool (best first): a neighbour of a hit earns
/// [`NEIGHBOUR_SHARE`] of the hit's score for the question terms the hit has
/// and the neighbour lacks (in proportion; the best such share; a neighbour
/// that matches some question term but is not in the pool joins it), so a turn is lifted by the reply that names
/// what it leaves unsaid, and two turns saying the same words do not lift
/// each other; and when the question asks about
/// the current state, newer facts gain up to [`RECENCY_GAIN`] of their
/// score (linear in valid time across the pool). Ties go to the newer fact,
/// then the smaller id.
pub fn rerank(mut items: Vec<Candidate>, neighbours: Vec<(usize, Fact)>, question: &str, terms: &[String]) -> Vec<Candidate> {
    let base: Vec<(f64, Vec<String>)> = items.iter().map(|c| (c.score, c.terms.clone())).collect();
    let mut bonus: std::collections::HashMap<FactId, f64> = std::collections::HashMap::new();
    for (i, f) in neighbours {
        let own = matched_terms(&f, terms);
        let (score, hit_terms) = &base[i];
        let lacking = hit_terms.iter().filter(|t| !own.contains(t)).count();
        // Only facts that match the question themselves are lifted: a
        // search answers with facts that contain its words.
        if lacking > 0 && !own.is_empty() {
            let b = bonus.entry(f.id).or_insert(0.0);
            *b = b.max(NEIGHBOUR_SHARE * score * lacking as f64 / hit_terms.len() as f64);
            if !items.iter().any(|c| c.fact.id == f.id) {
                items.push(Candidate { fact: f, score: 0.0, terms: own });
            }
        }
    }
    for c in items.iter_mut() {
        c.score += bonus.get(&c.fact.id).copied().unwrap_or(0.0);
    }
    if asks_for_now(question) && !items.is_empty() {
        let lo = items.iter().map(|c| c.fact.valid_from).min().unwrap_or(0);
        let hi = items.iter().map(|c| c.fact.valid_from).max().unwrap_or(0);
        if hi > lo {
            for c in items.iter_mut() {
                let r = (c.fact.valid_from - lo) as f64 / (hi - lo) as f64;
                c.score *= 1.0 + RECENCY_GAIN * r;
            }
        }
    }
    items.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then(b.fact.valid_from.cmp(&a.fact.valid_from)).then(a.fact.id.cmp(&b.fact.id))
    });
    items
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
                    if !seeds.contains(e) && crate::store::is_entity_ref(e) && !neighbours.iter().any(|n| n == e) {
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

#[cfg(test)]
mod rerank_tests {
    use super::*;
    use crate::store::FactInput;

    fn facts(texts: &[(&str, i64)]) -> Vec<Fact> {
        let e = crate::store::embedded::temporary();
        texts
            .iter()
            .enumerate()
            .map(|(i, (t, at))| e.assert("t", FactInput::new(format!("Note:n{i}"), "says", *t).valid_from(*at)).unwrap().fact)
            .collect()
    }

    fn cand(f: &Fact, score: f64, terms: &[String]) -> Candidate {
        Candidate { fact: f.clone(), score, terms: matched_terms(f, terms) }
    }

    #[test]
    fn a_neighbour_is_lifted_by_the_terms_it_lacks_not_by_the_ones_it_shares() {
        let terms = super::super::tokenize::query_terms("instrument lessons");
        let f = facts(&[("banjo lessons on thursday", 1), ("a rewarding instrument", 2), ("more lessons", 3)]);
        // Pool: [1] matches "instrument" (best), [0] and [2] match "lessons".
        let items = vec![cand(&f[1], 3.0, &terms), cand(&f[2], 1.0, &terms), cand(&f[0], 0.9, &terms)];
        // [0] is next to hit [1] and lacks its "instrument": it is lifted above [2].
        let out = rerank(items, vec![(0, f[0].clone())], "instrument lessons", &terms);
        let order: Vec<FactId> = out.iter().map(|c| c.fact.id).collect();
        assert_eq!(order, [f[1].id, f[0].id, f[2].id]);
        assert!((out[1].score - (0.9 + NEIGHBOUR_SHARE * 3.0)).abs() < 1e-9);

        // A neighbour with the same terms as the hit gains nothing.
        let items = vec![cand(&f[0], 2.0, &terms), cand(&f[2], 1.0, &terms)];
        let out = rerank(items, vec![(0, f[2].clone())], "lessons", &terms);
        assert_eq!(out[1].score, 1.0);

        // A neighbour that matches no question term is not added.
        let other = facts(&[("unrelated words", 4)]);
        let out = rerank(vec![cand(&f[1], 3.0, &terms)], vec![(0, other[0].clone())], "x", &terms);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn questions_about_now_prefer_the_newer_fact() {
        assert!(asks_for_now("Which city do I live in now?"));
        assert!(asks_for_now("What do I do for work these days?"));
        assert!(asks_for_now("What is my current job?"));
        assert!(!asks_for_now("Which city did I live in first?"));
        let terms = super::super::tokenize::query_terms("live city");
        let f = facts(&[("I live in Denver", 1_000), ("we live in Portland", 9_000)]);
        let items = vec![cand(&f[0], 1.2, &terms), cand(&f[1], 1.0, &terms)];
        let out = rerank(items.clone(), vec![], "where do I live now", &terms);
        assert_eq!(out[0].fact.id, f[1].id);
        assert!((out[0].score - 1.0 * (1.0 + RECENCY_GAIN)).abs() < 1e-9);
        // Without a cue the order is BM25's; equal scores go to the newer fact.
        let out = rerank(items, vec![], "where do I live", &terms);
        assert_eq!(out[0].fact.id, f[0].id);
        let tie = vec![cand(&f[0], 1.0, &terms), cand(&f[1], 1.0, &terms)];
        assert_eq!(rerank(tie, vec![], "live", &terms)[0].fact.id, f[1].id);
    }
}
