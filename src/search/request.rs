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
}
