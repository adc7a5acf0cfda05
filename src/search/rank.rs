//! Ranked lists and their fusion.
//!
//! Each [`Ranker`] turns a search request into one list of facts, best
//! first, already checked against the engine (only facts the request may
//! see). The lists are fused with reciprocal rank fusion: a fact at rank `r`
//! (1-based) of a list earns `1 / (k + r)` from it, and its score is the sum
//! over the lists it is in. RRF needs no calibration between the lists'
//! own scores, so a further list (an embedding similarity list) plugs in as
//! one more `Ranker` without retuning the others.

use super::request::SearchRequest;
use std::collections::{BTreeMap, HashMap};
use crate::store::{MemoryStore, Fact, FactId};

/// The `k` of reciprocal rank fusion (the value of the original paper):
/// large enough that the first few ranks of one list do not drown the rest.
pub const RRF_K: f64 = 60.0;

/// One entry of a ranked list.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub fact: Fact,
    /// The list's own score (BM25, a proximity score, a cosine): reported,
    /// not used by the fusion.
    pub score: f64,
    /// Question terms the fact contains.
    pub terms: Vec<String>,
}

/// A list produced by one ranker, best first.
#[derive(Debug, Clone)]
pub struct RankedList {
    /// The reason the list gives its facts (`bm25`, `graph`, `vector`).
    pub name: &'static str,
    pub items: Vec<Candidate>,
    /// The list could not be computed this time (its source was down: an
    /// embeddings endpoint that failed); the search answers from the other
    /// lists and says so.
    pub unavailable: bool,
    /// What a rank in this list counts for in the fusion (1 for most).
    pub weight: f64,
}

impl RankedList {
    pub fn new(name: &'static str, items: Vec<Candidate>) -> RankedList {
        RankedList { name, items, unavailable: false, weight: 1.0 }
    }

    /// The list with another weight in the fusion.
    pub fn weighted(mut self, weight: f64) -> RankedList {
        self.weight = weight;
        self
    }

    /// An empty list whose source failed.
    pub fn unavailable(name: &'static str) -> RankedList {
        RankedList { name, items: Vec::new(), unavailable: true, weight: 1.0 }
    }
}

/// What a ranker sees of a search.
pub struct RankContext<'a> {
    pub engine: &'a dyn MemoryStore,
    pub tenant: &'a str,
    pub request: &'a SearchRequest,
    /// The question's distinct index terms.
    pub terms: &'a [String],
    /// Entities to rank around: the request's seeds and the refs the
    /// question names.
    pub seeds: &'a [String],
    /// How many verified facts the list should try to hold.
    pub want: usize,
    /// The valid-time interval the search is about, if any.
    pub window: Option<&'a super::focus::Window>,
    /// The entities the question names (by ref, id or name).
    pub named: &'a [super::focus::Named],
}

/// A source of one ranked list. Implementations must return only facts of
/// `ctx.tenant` that the request may see (current and active, or active at
/// `as_of`; candidates only when asked).
pub trait Ranker: Send + Sync {
    fn name(&self) -> &'static str;
    fn rank(&self, ctx: &RankContext<'_>) -> anyhow::Result<RankedList>;
}

/// A fused result.
#[derive(Debug, Clone)]
pub struct Fused {
    pub fact: Fact,
    pub score: f64,
    /// The lists the fact is in, in list order.
    pub reasons: Vec<&'static str>,
    /// Its rank (1-based) in each of them.
    pub ranks: BTreeMap<&'static str, usize>,
    /// Question terms it contains.
    pub terms: Vec<String>,
}

/// RRF scores of lists of ids: `(id, score, best rank)`, best first. Ties
/// go to the better best rank, then to the id that appears in the earlier
/// list, then by id.
pub fn rrf_ids(lists: &[Vec<FactId>], k: f64) -> Vec<(FactId, f64)> {
    rrf_weighted(lists, &vec![1.0; lists.len()], k)
}

/// [`rrf_ids`] with a weight per list: a rank `r` of list `i` earns
/// `weights[i] / (k + r)`.
pub fn rrf_weighted(lists: &[Vec<FactId>], weights: &[f64], k: f64) -> Vec<(FactId, f64)> {
    // id -> (score, best rank, first list index)
    let mut acc: HashMap<FactId, (f64, usize, usize)> = HashMap::new();
    for (li, list) in lists.iter().enumerate() {
        let mut seen = std::collections::HashSet::new();
        for (i, id) in list.iter().enumerate() {
            if !seen.insert(*id) {
                continue;
            }
            let rank = i + 1;
            let e = acc.entry(*id).or_insert((0.0, usize::MAX, li));
            e.0 += weights[li] / (k + rank as f64);
            e.1 = e.1.min(rank);
        }
    }
    let mut out: Vec<(FactId, (f64, usize, usize))> = acc.into_iter().collect();
    out.sort_by(|a, b| {
        b.1 .0.total_cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)).then(a.1 .2.cmp(&b.1 .2)).then(a.0.cmp(&b.0))
    });
    out.into_iter().map(|(id, (s, _, _))| (id, s)).collect()
}

/// Fuses ranked lists with RRF.
pub fn fuse(lists: Vec<RankedList>, k: f64) -> Vec<Fused> {
    let ids: Vec<Vec<FactId>> = lists.iter().map(|l| l.items.iter().map(|c| c.fact.id).collect()).collect();
    let weights: Vec<f64> = lists.iter().map(|l| l.weight).collect();
    let order = rrf_weighted(&ids, &weights, k);
    let mut by_id: HashMap<FactId, Fused> = HashMap::new();
    for list in lists {
        for (i, c) in list.items.into_iter().enumerate() {
            let e = by_id.entry(c.fact.id).or_insert_with(|| Fused {
                fact: c.fact,
                score: 0.0,
                reasons: Vec::new(),
                ranks: BTreeMap::new(),
                terms: Vec::new(),
            });
            if e.ranks.contains_key(list.name) {
                continue;
            }
            e.reasons.push(list.name);
            e.ranks.insert(list.name, i + 1);
            for t in c.terms {
                if !e.terms.contains(&t) {
                    e.terms.push(t);
                }
            }
        }
    }
    order
        .into_iter()
        .filter_map(|(id, score)| {
            by_id.remove(&id).map(|mut f| {
                f.score = score;
                f
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> FactId {
        FactId::from_u128(n)
    }

    #[test]
    fn one_list_keeps_its_order() {
        let out = rrf_ids(&[vec![id(3), id(1), id(2)]], RRF_K);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), [id(3), id(1), id(2)]);
        assert!((out[0].1 - 1.0 / 61.0).abs() < 1e-12);
    }

    #[test]
    fn being_in_both_lists_beats_topping_one() {
        // 2 is second in both lists; 1 tops the first only, 9 tops the second only.
        let out = rrf_ids(&[vec![id(1), id(2), id(3)], vec![id(9), id(2)]], RRF_K);
        assert_eq!(out[0].0, id(2));
        assert!((out[0].1 - 2.0 / 62.0).abs() < 1e-12);
        // 1 and 9 tie on score and best rank: the earlier list wins.
        assert_eq!(out[1].0, id(1));
        assert_eq!(out[2].0, id(9));
        assert_eq!(out[3].0, id(3));
    }

    #[test]
    fn duplicates_in_a_list_count_once_and_empty_lists_are_fine() {
        let out = rrf_ids(&[vec![id(1), id(1)], vec![]], RRF_K);
        assert_eq!(out.len(), 1);
        assert!((out[0].1 - 1.0 / 61.0).abs() < 1e-12);
        assert!(rrf_ids(&[], RRF_K).is_empty());
    }

    #[test]
    fn k_flattens_or_sharpens_the_head() {
        // With a small k the top of one list outweighs two middling ranks.
        let lists = [vec![id(1), id(5), id(6), id(2)], vec![id(7), id(8), id(9), id(2)]];
        assert_eq!(rrf_ids(&lists, 0.5)[0].0, id(1));
        assert_eq!(rrf_ids(&lists, RRF_K)[0].0, id(2));
    }
}
