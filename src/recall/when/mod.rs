//! Time in questions: the valid-time interval a question names ("What did
//! Dana do in May?", "the first week of March 2024", "two years ago"),
//! read without a model, in English, in UTC, weeks starting on Monday.
//! docs/search.md ("Time in questions") lists what is read and what is not.
//!
//! The calendar arithmetic (month lengths, adding months and years,
//! weekdays, civil dates to unix ms) is jiff's: it is well kept, has no
//! dependencies of its own without its time-zone features (everything here
//! is UTC, so no tz database is built in) and its checked operations return
//! errors rather than panic at the edges of its range, which a parser fed
//! arbitrary text needs. The reading of the words is ours: `words` splits
//! the question into words, numbers and marks with their byte offsets,
//! `patterns` holds one small recogniser per kind of expression, and the
//! scan below keeps the longest expression starting at each word.

mod calendar;
mod names;
mod patterns;
mod relative;
mod words;

#[cfg(test)]
mod tests;

pub use calendar::{OPEN_END, OPEN_START};

/// A valid-time interval a question names: [from, until), unix ms, UTC.
///
/// `from < until` always; an open end is [`OPEN_START`] or [`OPEN_END`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct When {
    pub from: i64,
    pub until: i64,
    /// The words of the question that named it, as written (e.g. "in May 2024");
    /// several expressions are joined with "; ".
    pub text: String,
    /// Byte ranges of the question that are time expressions (so the caller
    /// can drop those words from the full-text query), in order.
    pub spans: Vec<(usize, usize)>,
}

/// The time the question names, resolved against `reference` (unix ms: "now"
/// for relative expressions), or None.
/// Several expressions in one question give the hull of their intervals.
///
/// A reference that is not a date jiff can hold (years -9999..=9999) gives None.
pub fn ground(question: &str, reference: i64) -> Option<When> {
    let now = calendar::Clock::new(reference)?;
    let words = words::Words::new(question);
    let mut hull: Option<calendar::Interval> = None;
    let mut spans = Vec::new();
    let mut i = 0;
    while i < words.len() {
        match patterns::longest_at(&words, i, &now) {
            Some(found) if found.end > i && found.end <= words.len() && found.iv.from < found.iv.until => {
                hull = Some(hull.map_or(found.iv, |h| h.hull(found.iv)));
                spans.push((words.toks[i].start, words.toks[found.end - 1].end));
                i = found.end;
            }
            _ => i += 1,
        }
    }
    let iv = hull?;
    let text = spans.iter().map(|&(a, b)| &question[a..b]).collect::<Vec<_>>().join("; ");
    Some(When { from: iv.from.max(OPEN_START), until: iv.until.min(OPEN_END), text, spans })
}
