//! The entity signal: a question that names someone ranks that someone's
//! own facts above facts that only mention them.
//!
//! A name in the question finds its entity three ways, case-insensitively:
//! as a ref (`Person:sam`), as the id of a subject (`sam` finds
//! `Person:sam`, `sam lee` finds `Person:sam_lee`), or as the value of a
//! name-like fact (`Person:p42 name "Sam Lee"`: "Sam Lee" and "Sam" find
//! it). Longer names are tried first, and their words are not tried again
//! alone. The entity list is the question's BM25 ranking (without the
//! name's own words, which every fact of the entity shares) restricted to
//! facts whose subject is a named entity, less their name facts.

pub use super::focus::Named;
use super::indexer::IndexState;
use super::query::{request_filters, text_query, verified_hits, POOL};
use super::rank::{RankContext, RankedList, Ranker};
use super::request::SearchRequest;
use super::schema::{entity_key, NAME_PREDICATES};
use crate::store::Fact;
use super::tokenize;
use anyhow::Context;
use std::sync::Arc;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::IndexRecordOption;
use std::collections::hash_map::{Entry, HashMap};
use tantivy::columnar::StrColumn;
use tantivy::{Searcher, Term};

/// Entities a question may name, at most.
pub const MAX_NAMED: usize = 8;
/// Longest name tried, in words.
const MAX_NAME_WORDS: usize = 3;
/// Documents read per name looked up: enough to see every entity sharing
/// a name, as each entity's documents are read once per segment at most.
const PER_NAME: usize = 64;

/// The entities `req.question` names, in the order it names them.
pub fn resolve(state: &IndexState, tenant: &str, req: &SearchRequest) -> anyhow::Result<Vec<Named>> {
    let mut out: Vec<Named> = Vec::new();
    let push = |entity: String, name: &str, out: &mut Vec<Named>| {
        if out.len() < MAX_NAMED && !out.iter().any(|n| n.entity == entity) {
            out.push(Named { entity, terms: tokenize::terms(name) });
        }
    };
    for r in tokenize::entity_refs(&req.question) {
        let key = entity_key(&r).unwrap_or_default();
        push(r, &key, &mut out);
    }
    let words = tokenize::words(&req.question);
    // One view of the index for every name looked up.
    let searcher = state.reader.searcher();
    let mut used = vec![false; words.len()];
    for n in (1..=MAX_NAME_WORDS).rev() {
        for start in 0..words.len().saturating_sub(n - 1) {
            let span = &words[start..start + n];
            if used[start..start + n].iter().any(|u| *u)
                || tokenize::is_stopword(&span[0])
                || tokenize::is_stopword(&span[n - 1])
                || span.iter().all(|w| w.bytes().all(|b| b.is_ascii_digit()))
            {
                continue;
            }
            let name = span.join(" ");
            let found = lookup(state, &searcher, tenant, req, &name)?;
            if !found.is_empty() {
                used[start..start + n].iter_mut().for_each(|u| *u = true);
            }
            for e in found {
                push(e, &name, &mut out);
            }
        }
    }
    Ok(out)
}

/// The subjects whose id or name-like fact is `name` (in name form).
fn lookup(
    state: &IndexState,
    searcher: &Searcher,
    tenant: &str,
    req: &SearchRequest,
    name: &str,
) -> anyhow::Result<Vec<String>> {
    let f = &state.fields;
    // Names are looked up among what the request may see, but not within
    // its subject/predicate filters: a name fact is how the entity is
    // found, whatever the search is restricted to.
    let unfiltered = SearchRequest { subject: None, predicate: None, ..req.clone() };
    let mut clauses = request_filters(f, tenant, &unfiltered);
    let keys: Vec<(Occur, Box<dyn Query>)> = [f.subject_key, f.name_key]
        .into_iter()
        .map(|field| {
            let q: Box<dyn Query> =
                Box::new(TermQuery::new(Term::from_field_text(field, name), IndexRecordOption::Basic));
            (Occur::Should, q)
        })
        .collect();
    clauses.push((Occur::Must, Box::new(BooleanQuery::new(keys))));
    let hits = searcher
        .search(&BooleanQuery::new(clauses), &TopDocs::with_limit(PER_NAME))
        .context("looking a name up in the recall index")?;
    let mut out: Vec<String> = Vec::new();
    let mut subject = String::new();
    // The subject column, opened once per segment the hits are in.
    let mut columns: HashMap<u32, Option<StrColumn>> = HashMap::new();
    for (_, addr) in hits {
        let column = match columns.entry(addr.segment_ord) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(searcher.segment_reader(addr.segment_ord).fast_fields().str("subject_exact")?),
        };
        let Some(column) = column else { continue };
        for ord in column.term_ords(addr.doc_id) {
            subject.clear();
            if column.ord_to_str(ord, &mut subject)? && !out.contains(&subject) {
                out.push(subject.clone());
            }
        }
    }
    Ok(out)
}

/// The facts whose subject is an entity the question names, by BM25 of
/// the question's other terms.
pub struct EntityRanker {
    pub state: Arc<IndexState>,
}

impl Ranker for EntityRanker {
    fn name(&self) -> &'static str {
        "entity"
    }

    fn rank(&self, ctx: &RankContext<'_>) -> anyhow::Result<RankedList> {
        if ctx.named.is_empty() || ctx.want == 0 {
            return Ok(RankedList::new(self.name(), Vec::new()));
        }
        let fields = &self.state.fields;
        let mut clauses = request_filters(fields, ctx.tenant, ctx.request);
        let subjects: Vec<(Occur, Box<dyn Query>)> = ctx
            .named
            .iter()
            .map(|n| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(fields.subject_exact, &n.entity),
                    IndexRecordOption::Basic,
                ));
                (Occur::Should, q)
            })
            .collect();
        clauses.push((Occur::Must, Box::new(ConstScoreQuery::new(Box::new(BooleanQuery::new(subjects)), 0.0))));
        let name_terms: Vec<&String> = ctx.named.iter().flat_map(|n| n.terms.iter()).collect();
        let rest: Vec<String> = ctx.terms.iter().filter(|t| !name_terms.contains(t)).cloned().collect();
        if !rest.is_empty() {
            clauses.push((Occur::Should, Box::new(text_query(fields, &rest))));
        }
        let query = BooleanQuery::new(clauses);
        let named = |s: &str| ctx.named.iter().any(|n| n.entity == s);
        // An entity's name facts say what the question already says (that
        // is how the entity was found): the list is about its other facts.
        // A question about a name still finds them by BM25.
        let keep = |f: &Fact| named(&f.subject) && !NAME_PREDICATES.contains(&f.predicate.as_str());
        let items = verified_hits(&self.state, ctx, &query, ctx.want.max(POOL), keep)?;
        Ok(RankedList::new(self.name(), items))
    }
}
