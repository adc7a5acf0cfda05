//! What a search asks.

/// A search, validated.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    pub question: String,
    pub top_k: usize,
    /// Record time (unix ms): search what was known then.
    pub as_of: Option<i64>,
    /// Entities whose facts, and their neighbours' facts, get a proximity
    /// boost.
    pub seeds: Vec<String>,
    pub subject: Option<String>,
    pub predicate: Option<String>,
    pub include_candidates: bool,
    /// An explicit valid-time interval (unix ms, `[from, until)`; either
    /// end may be open): facts whose valid time overlaps it rank first. When
    /// neither end is given, the question's own time expressions decide.
    pub valid_from: Option<i64>,
    pub valid_until: Option<i64>,
    /// What "now" is for relative time expressions ("last week", "two
    /// years ago"), unix ms; the server's clock when absent.
    pub reference_time: Option<i64>,
    /// The ranking signals on top of BM25.
    pub signals: Signals,
    /// Turns of the same conversation to return around each hit, each side.
    pub neighbours: usize,
}

/// The ranking signals a search uses on top of BM25; all of them unless the
/// caller names a subset (an empty set is BM25 alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signals {
    /// Proximity in the graph to the seeds and the refs the question names.
    pub graph: bool,
    /// Valid-time overlap with the interval the question names.
    pub time: bool,
    /// Facts whose subject is an entity the question names.
    pub entity: bool,
    /// Near-duplicates spread out of the top (maximal marginal relevance).
    pub diverse: bool,
    /// Similarity of embeddings, when an embeddings endpoint is configured.
    pub vector: bool,
}

impl Default for Signals {
    fn default() -> Signals {
        Signals { graph: true, time: true, entity: true, diverse: true, vector: true }
    }
}

impl Signals {
    /// The names a caller may list.
    pub const NAMES: [&'static str; 5] = ["graph", "time", "entity", "diverse", "vector"];

    /// BM25 alone.
    pub fn none() -> Signals {
        Signals { graph: false, time: false, entity: false, diverse: false, vector: false }
    }

    /// The signals `names` lists; an unknown name is an error naming it.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Signals, String> {
        let mut s = Signals::none();
        for n in names {
            match n.as_ref().trim() {
                "graph" => s.graph = true,
                "time" => s.time = true,
                "entity" => s.entity = true,
                "diverse" => s.diverse = true,
                "vector" => s.vector = true,
                "bm25" | "" => {}
                other => {
                    return Err(format!("unknown signal {other:?}: signals are bm25 (always on), {}", Self::NAMES.join(", ")))
                }
            }
        }
        Ok(s)
    }

    /// Whether the list a ranker of this name produces is wanted.
    pub fn wants(&self, list: &str) -> bool {
        match list {
            "graph" => self.graph,
            "time" => self.time,
            "entity" => self.entity,
            "vector" => self.vector,
            _ => true,
        }
    }
}
