//! The diversity step: near-duplicate hits are spread out of the top, so
//! the first results cover distinct facts, sessions and times.
//!
//! Maximal marginal relevance over the fused ranking: the next result is
//! the one with the best `LAMBDA * relevance - (1 - LAMBDA) * similarity`,
//! where relevance follows the ranking's order (the RRF weight of its
//! position, scaled to the first: the order may be more than the fused
//! score, e.g. the time signal's grouping) and similarity is the largest
//! overlap with a result already chosen. Two facts are
//! similar only when they share subject and predicate (one person saying
//! much the same thing again), by the Jaccard overlap of their object's
//! terms: facts of different subjects or predicates never push each other
//! down, however alike their words.

use super::rank::{Fused, RRF_K};
use super::schema::fact_texts;
use std::collections::HashSet;

/// Relevance against novelty: near 1 keeps the fused order, lower spreads
/// more.
pub const LAMBDA: f64 = 0.7;

/// The least overlap that makes two facts near-duplicates: below it they
/// say different things (two first tries of different sports share "new"
/// and "sport") and neither is pushed down.
pub const NEAR: f64 = 0.4;

/// How much of the fused ranking is reordered, as a multiple of `top_k`.
pub const DEPTH: usize = 3;

/// Reorders the head of `fused` (best first) by maximal marginal relevance
/// and keeps `top_k`.
pub fn diversify(fused: Vec<Fused>, top_k: usize) -> Vec<Fused> {
    let depth = (top_k * DEPTH).min(fused.len());
    let mut pool: Vec<(usize, Fused, HashSet<String>)> = fused
        .into_iter()
        .take(depth)
        .enumerate()
        .map(|(i, f)| {
            let terms = fact_texts(&f.fact).object.into_iter().collect();
            (i, f, terms)
        })
        .collect();
    let relevance = |i: usize| (1.0 + RRF_K) / (1.0 + RRF_K + i as f64);
    let mut chosen: Vec<(usize, Fused, HashSet<String>)> = Vec::with_capacity(top_k.min(pool.len()));
    while chosen.len() < top_k && !pool.is_empty() {
        let mut at = 0;
        let mut at_value = f64::NEG_INFINITY;
        for (i, (position, f, terms)) in pool.iter().enumerate() {
            let similarity = chosen
                .iter()
                .filter(|(_, c, _)| c.fact.subject == f.fact.subject && c.fact.predicate == f.fact.predicate)
                .map(|(_, _, t)| jaccard(terms, t))
                .filter(|j| *j >= NEAR)
                .fold(0.0, f64::max);
            let value = LAMBDA * relevance(*position) - (1.0 - LAMBDA) * similarity;
            // Strictly better only: ties keep the fused order.
            if value > at_value {
                at = i;
                at_value = value;
            }
        }
        chosen.push(pool.remove(at));
    }
    chosen.into_iter().map(|(_, f, _)| f).collect()
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let shared = a.intersection(b).count();
    shared as f64 / (a.len() + b.len() - shared) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::FactInput;
    use std::collections::BTreeMap;

    fn fused(facts: &[(&str, &str)]) -> Vec<Fused> {
        let e = crate::store::embedded::temporary();
        e.set_cardinality("t", "said", crate::store::Cardinality::Many).unwrap();
        facts
            .iter()
            .enumerate()
            .map(|(i, (s, text))| Fused {
                fact: e.assert("t", FactInput::new(*s, "said", *text)).unwrap().fact,
                score: 1.0 - i as f64 * 0.01,
                reasons: vec!["bm25"],
                ranks: BTreeMap::new(),
                terms: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn a_repeated_mention_yields_to_a_distinct_one() {
        let f = fused(&[
            ("Person:sam", "tennis again this weekend, tennis is great"),
            ("Person:sam", "tennis again this week, tennis is great"),
            ("Person:sam", "tried climbing for the first time"),
        ]);
        let ids: Vec<_> = f.iter().map(|x| x.fact.id).collect();
        let out = diversify(f, 2);
        assert_eq!(out.iter().map(|x| x.fact.id).collect::<Vec<_>>(), [ids[0], ids[2]]);
    }

    #[test]
    fn different_speakers_never_push_each_other_down() {
        let f = fused(&[
            ("Person:sam", "tennis again this weekend"),
            ("Person:dana", "tennis again this weekend"),
            ("Person:sam", "climbing"),
        ]);
        let ids: Vec<_> = f.iter().map(|x| x.fact.id).collect();
        let out = diversify(f, 3);
        assert_eq!(out.iter().map(|x| x.fact.id).collect::<Vec<_>>(), ids);
    }
}
