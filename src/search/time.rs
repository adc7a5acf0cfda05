//! The time signal: a search about a time ranks the facts whose valid time
//! overlaps it first.
//!
//! The interval comes from the request (`valid_from`/`valid_until`) or,
//! when it gives none, from the time expressions of the question ("in May
//! 2024", "two years ago", read by `crate::recall::when` against the
//! request's `reference_time`). The words that named it leave the question's
//! terms ("may" and "2024" say when, not what), and the time list is the
//! question's BM25 ranking restricted to the overlapping facts: first the
//! facts that began in the interval (what happened then: a turn of a
//! conversation, an event), then those that began before it and still held
//! (how things stood then). The fusion lifts them over the facts that only
//! share words with the question.

use super::indexer::IndexState;
use super::query::{request_filters, text_query, verified_hits, POOL};
use super::rank::{Candidate, RankContext, RankedList, Ranker};
use super::request::SearchRequest;
use crate::recall::when;
pub use super::focus::{Window, OPEN_END, OPEN_START};
use crate::store::Fact;
use crate::store::FactId;
use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, RangeQuery};
use tantivy::Term;

/// What a rank in the time list counts for, against 1 for the others: a
/// fact in the interval should beat one that only shares words with the
/// question, so the list weighs more than one plain list.
pub const TIME_WEIGHT: f64 = 2.0;

/// The interval of `req`: the explicit one, else the question's (with the
/// time signal on), resolved against `now` when the request names no
/// reference time.
pub fn window(req: &SearchRequest, now: i64) -> Option<Window> {
    if req.valid_from.is_some() || req.valid_until.is_some() {
        return Some(Window {
            from: req.valid_from.unwrap_or(OPEN_START),
            until: req.valid_until.unwrap_or(OPEN_END),
            text: None,
            source: "request",
            spans: Vec::new(),
        });
    }
    if !req.signals.time {
        return None;
    }
    let w = when::ground(&req.question, req.reference_time.unwrap_or(now))?;
    // The parser's open ends ("before 2020", "since May") are this
    // module's: no filter on that side.
    let from = if w.from <= when::OPEN_START { OPEN_START } else { w.from };
    let until = if w.until >= when::OPEN_END { OPEN_END } else { w.until };
    Some(Window { from, until, text: Some(w.text), source: "question", spans: w.spans })
}

/// The question without the words that named its time.
pub fn without_time(question: &str, window: Option<&Window>) -> String {
    let Some(w) = window else { return question.to_string() };
    let mut out = String::with_capacity(question.len());
    let mut at = 0;
    let mut spans = w.spans.clone();
    spans.sort_unstable();
    for (a, b) in spans {
        if a >= at && b <= question.len() && question.is_char_boundary(a) && question.is_char_boundary(b) {
            out.push_str(&question[at..a]);
            out.push(' ');
            at = b;
        }
    }
    out.push_str(&question[at..]);
    out
}

/// How `f` stands to the interval: 0 when it began in it, 1 when it began
/// before and still held, 2 when it does not overlap it.
pub fn tier(w: &Window, f: &Fact) -> u8 {
    match (w.overlaps(f), f.valid_from >= w.from) {
        (true, true) => 0,
        (true, false) => 1,
        (false, _) => 2,
    }
}

/// Puts the facts that began in the interval first, then those that held
/// during it, then the rest, each group in the fused order: a question
/// about a time is answered from that time before anything else.
pub fn in_window_first(fused: &mut [super::rank::Fused], w: &Window) {
    fused.sort_by_key(|f| tier(w, &f.fact));
}

/// The facts overlapping the search's interval, by BM25 of the question's
/// other terms (facts in the interval that match none of them follow).
pub struct TimeRanker {
    pub state: Arc<IndexState>,
}

impl Ranker for TimeRanker {
    fn name(&self) -> &'static str {
        "time"
    }

    fn rank(&self, ctx: &RankContext<'_>) -> anyhow::Result<RankedList> {
        let Some(w) = ctx.window else { return Ok(RankedList::new(self.name(), Vec::new())) };
        if ctx.want == 0 {
            return Ok(RankedList::new(self.name(), Vec::new()));
        }
        // Facts that began in the interval first (what happened then: a
        // turn, an event), then the facts that began before it and were
        // still true in it (how things stood then).
        let want = ctx.want.max(POOL);
        let mut items = self.within(ctx, w, Some(w.from).filter(|f| *f != OPEN_START), w.until, want)?;
        if items.len() < want && w.from != OPEN_START {
            let began: HashSet<FactId> = items.iter().map(|c| c.fact.id).collect();
            let earlier = self.within(ctx, w, None, w.from, want - items.len())?;
            items.extend(earlier.into_iter().filter(|c| !began.contains(&c.fact.id)));
        }
        Ok(RankedList::new(self.name(), items).weighted(TIME_WEIGHT))
    }
}

impl TimeRanker {
    /// Facts overlapping `w` whose valid time began in `[start, end)` (an
    /// open start when None), best BM25 first.
    fn within(
        &self,
        ctx: &RankContext<'_>,
        w: &Window,
        start: Option<i64>,
        end: i64,
        want: usize,
    ) -> anyhow::Result<Vec<Candidate>> {
        let fields = &self.state.fields;
        let mut clauses = request_filters(fields, ctx.tenant, ctx.request);
        let lo = start.map_or(Bound::Unbounded, Bound::Included);
        let hi = if end == OPEN_END { Bound::Unbounded } else { Bound::Excluded(end) };
        // (tantivy has no range without a bound: an interval open at both
        // ends filters nothing.)
        if !matches!((lo, hi), (Bound::Unbounded, Bound::Unbounded)) {
            clauses.push((Occur::Must, range(fields.valid_from, lo, hi)));
        }
        // Still true after the interval's start (open ends are i64::MAX).
        if w.from != OPEN_START {
            clauses.push((Occur::Must, range(fields.valid_until, Bound::Excluded(w.from), Bound::Unbounded)));
        }
        if !ctx.terms.is_empty() {
            clauses.push((Occur::Should, Box::new(text_query(fields, ctx.terms))));
        }
        let began = |f: &Fact| start.is_none_or(|s| f.valid_from >= s) && f.valid_from < end;
        verified_hits(&self.state, ctx, &BooleanQuery::new(clauses), want, |f| w.overlaps(f) && began(f))
    }
}

fn range(field: tantivy::schema::Field, lo: Bound<i64>, hi: Bound<i64>) -> Box<dyn Query> {
    let term = |b: Bound<i64>| match b {
        Bound::Included(v) => Bound::Included(Term::from_field_i64(field, v)),
        Bound::Excluded(v) => Bound::Excluded(Term::from_field_i64(field, v)),
        Bound::Unbounded => Bound::Unbounded,
    };
    Box::new(ConstScoreQuery::new(Box::new(RangeQuery::new(term(lo), term(hi))), 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(spans: Vec<(usize, usize)>) -> Window {
        Window { from: 0, until: 1, text: None, source: "question", spans }
    }

    #[test]
    fn the_words_that_named_the_time_leave_the_question() {
        let q = "What did Dana do in May 2024?";
        assert_eq!(without_time(q, Some(&w(vec![(17, 28)]))), "What did Dana do  ?");
        assert_eq!(without_time(q, None), q);
        // Overlapping or out-of-range spans are skipped, not a panic.
        assert_eq!(without_time(q, Some(&w(vec![(17, 20), (18, 22), (40, 50)]))), "What did Dana do  May 2024?");
    }

    #[test]
    fn the_question_or_the_request_sets_the_interval() {
        let at = 1_765_108_800_000; // 2025-12-07T12:00Z
        let req = |q: &str| SearchRequest { question: q.into(), reference_time: Some(at), ..Default::default() };
        let w = window(&req("what did I do before 2020?"), 0).unwrap();
        assert_eq!((w.from, w.until, w.source), (OPEN_START, 1_577_836_800_000, "question"));
        let w = window(&req("what happened since 2025?"), 0).unwrap();
        assert_eq!((w.from, w.until), (1_735_689_600_000, at));
        assert!(window(&req("what did I do?"), 0).is_none());
        // The time signal off: the question is not read; a range given is used.
        let off = SearchRequest { signals: super::super::request::Signals::none(), ..req("in 2020") };
        assert!(window(&off, 0).is_none());
        let given = SearchRequest { valid_until: Some(5), ..off };
        let w = window(&given, 0).unwrap();
        assert_eq!((w.from, w.until, w.source), (OPEN_START, 5, "request"));
    }

    #[test]
    fn overlap_is_half_open() {
        let e = crate::store::embedded::temporary();
        let f = e.assert("t", crate::store::FactInput::new("A:a", "p", "x").valid_from(100)).unwrap().fact;
        let win = |from, until| Window { from, until, text: None, source: "request", spans: vec![] };
        assert!(win(100, 101).overlaps(&f));
        assert!(win(0, 101).overlaps(&f));
        assert!(!win(0, 100).overlaps(&f));
        assert!(win(5_000, OPEN_END).overlaps(&f));
    }
}
