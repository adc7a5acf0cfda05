//! The turns around a hit: a fact stored as a turn of a conversation
//! (`properties.conversation` and `properties.turn`, see
//! `docs/conversations.md`) brings the turns just before and after it, so
//! an answer reads in its context ("Nice one!" is only an answer next to
//! what it replies to).

use super::indexer::IndexState;
use super::query::{exact, visible};
use super::request::SearchRequest;
use super::schema::turn_of;
use anyhow::Context;
use std::ops::Bound;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, RangeQuery};
use tantivy::{TantivyDocument, Term};
use crate::store::{AsOf, Fact, MemoryStore};

/// Turns a search may ask for on each side of a hit, at most.
pub const MAX_NEIGHBOURS: usize = 5;

/// The turns of `hit`'s conversation within `n` turns of it (itself left
/// out), in turn order, as the request sees them. Empty for a fact that is
/// no turn.
pub fn around(
    state: &IndexState,
    engine: &dyn MemoryStore,
    tenant: &str,
    req: &SearchRequest,
    hit: &Fact,
    n: usize,
) -> anyhow::Result<Vec<Fact>> {
    let Some((conversation, turn)) = turn_of(hit) else { return Ok(Vec::new()) };
    if n == 0 {
        return Ok(Vec::new());
    }
    let f = &state.fields;
    let n = n.min(MAX_NEIGHBOURS) as i64;
    let query = BooleanQuery::new(vec![
        (Occur::Must, exact(f.tenant, tenant)),
        (Occur::Must, exact(f.conversation, conversation)),
        (
            Occur::Must,
            Box::new(RangeQuery::new(
                Bound::Included(Term::from_field_i64(f.turn, turn - n)),
                Bound::Included(Term::from_field_i64(f.turn, turn + n)),
            )),
        ),
    ]);
    let searcher = state.reader.searcher();
    // Every version of a turn has one document; a few more than the window
    // covers turns written twice.
    let hits = searcher
        .search(&query, &TopDocs::with_limit(4 * n as usize + 4))
        .context("reading the turns around a hit")?;
    let as_of = req.as_of.map(AsOf::Time);
    let mut out: Vec<Fact> = Vec::new();
    for (_, addr) in hits {
        let doc: TantivyDocument = searcher.doc(addr).context("reading a search document")?;
        let Some(id) = f.stored_id(&doc) else { continue };
        if id == hit.id || out.iter().any(|x| x.id == id) {
            continue;
        }
        let Some(fact) = engine.get(tenant, id, as_of)? else { continue };
        if visible(&fact, req) && turn_of(&fact).is_some_and(|(c, _)| c == conversation) {
            out.push(fact);
        }
    }
    out.sort_by_key(|x| (turn_of(x).map(|(_, t)| t), x.valid_from));
    Ok(out)
}
