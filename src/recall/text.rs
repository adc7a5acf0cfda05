//! Words of facts and questions, and how well a fact's words answer a goal.
//!
//! Used where the candidate set is already small (a context packet's facts,
//! an answer's evidence), so relevance is computed on the spot: BM25 over the
//! candidates themselves, with the candidates as the corpus.

use crate::search::tokenize::json_text;
use std::collections::HashMap;
use crate::store::Fact;

pub use crate::search::tokenize::terms;

/// Everything of a fact a question could be about: subject, predicate,
/// object, source and property values.
pub fn fact_text(f: &Fact) -> String {
    let mut t = format!("{} {} ", f.subject, f.predicate);
    json_text(&f.object, &mut t);
    if let Some(s) = &f.source {
        t.push(' ');
        t.push_str(s);
    }
    if let Some(p) = &f.properties {
        for v in p.values() {
            t.push(' ');
            json_text(v, &mut t);
        }
    }
    t
}

/// BM25 scores of `docs` (already split into terms) for `query` terms, with
/// `docs` as the corpus. Scores are >= 0; 0 means no query term occurs.
pub fn bm25(query: &[String], docs: &[Vec<String>]) -> Vec<f64> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let n = docs.len() as f64;
    if docs.is_empty() || query.is_empty() {
        return vec![0.0; docs.len()];
    }
    let avg_len = docs.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let mut df: HashMap<&str, usize> = HashMap::new();
    for d in docs {
        let mut seen: Vec<&str> = d.iter().map(String::as_str).collect();
        seen.sort_unstable();
        seen.dedup();
        for w in seen {
            *df.entry(w).or_insert(0) += 1;
        }
    }
    let mut q: Vec<&str> = query.iter().map(String::as_str).collect();
    q.sort_unstable();
    q.dedup();
    docs.iter()
        .map(|d| {
            let len = d.len() as f64;
            q.iter()
                .map(|t| {
                    let tf = d.iter().filter(|w| w == t).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let df = *df.get(t).unwrap_or(&0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len.max(1.0)))
                })
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_prefers_the_document_with_the_rare_term() {
        let docs: Vec<Vec<String>> = ["sarah works at acme", "bob works at globex", "sarah lives in paris"]
            .iter()
            .map(|d| terms(d))
            .collect();
        let s = bm25(&terms("where does sarah live"), &docs);
        assert!(s[2] > s[0] && s[0] > s[1] && s[1] == 0.0, "{s:?}");
    }
}
