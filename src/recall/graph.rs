//! `/api/graph`: the tenant's entity graph as nodes and edges, for a picture
//! of memory rather than an answer.
//!
//! Edges are current facts whose object is an entity ref; nodes are the
//! entities at their ends. The whole-tenant view reads the live index from
//! the start and stops after [`MAX_SCAN`] facts (the answer then says
//! `truncated`); a focused view (`q`) keeps the entities and predicates that
//! match plus their one-hop neighbourhood, at most [`FOCUS_CAP`] nodes.

use super::collect;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use crate::store::{AsOf, MemoryStore, EngineError, FactId, FactQuery};

/// Facts read for one graph view.
pub const MAX_SCAN: usize = 100_000;
/// Nodes in a focused view when no smaller `limit` is given.
pub const FOCUS_CAP: usize = 80;

#[derive(Debug, Clone, Default)]
pub struct GraphRequest {
    pub q: Option<String>,
    /// Top-N nodes by degree; 0 keeps them all (focused views: at most 80).
    pub limit: usize,
    pub as_of: Option<AsOf>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Node {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub label: String,
    pub degree: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GraphEdge {
    pub id: FactId,
    pub source: String,
    pub target: String,
    pub predicate: String,
    pub confidence: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<GraphEdge>,
    pub total_nodes: usize,
    pub total_edges: usize,
    pub truncated: bool,
}

pub fn graph(engine: &dyn MemoryStore, tenant: &str, req: &GraphRequest) -> Result<Graph, EngineError> {
    let q = FactQuery { as_of: req.as_of, ..Default::default() };
    let (facts, truncated) = collect(engine, tenant, &q, MAX_SCAN)?;
    let mut edges: Vec<GraphEdge> = facts
        .into_iter()
        .filter_map(|f| {
            let target = f.object_entity()?.to_string();
            Some(GraphEdge { id: f.id, source: f.subject, target, predicate: f.predicate, confidence: f.confidence })
        })
        .collect();

    if let Some(q) = req.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        let needle = q.to_lowercase();
        let matched: BTreeSet<String> = edges
            .iter()
            .flat_map(|e| {
                let hit_pred = e.predicate.to_lowercase().contains(&needle);
                [(&e.source, hit_pred), (&e.target, hit_pred)]
            })
            .filter(|(n, hit_pred)| *hit_pred || n.to_lowercase().contains(&needle))
            .map(|(n, _)| n.clone())
            .collect();
        // One hop: every edge touching a match, and the entities it brings.
        edges.retain(|e| matched.contains(&e.source) || matched.contains(&e.target));
    }

    let degrees = degrees(&edges);
    let total_nodes = degrees.len();
    let total_edges = edges.len();
    let focused = req.q.as_deref().is_some_and(|q| !q.trim().is_empty());
    let cap = match (req.limit, focused) {
        (0, false) => usize::MAX,
        (0, true) => FOCUS_CAP,
        (n, true) => n.min(FOCUS_CAP),
        (n, false) => n,
    };

    // Top nodes by degree, ties by id: the same store gives the same picture.
    let mut ranked: Vec<(&String, &usize)> = degrees.iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let kept: BTreeSet<&String> = ranked.iter().take(cap).map(|(n, _)| *n).collect();
    let edges: Vec<GraphEdge> =
        edges.into_iter().filter(|e| kept.contains(&e.source) && kept.contains(&e.target)).collect();
    let nodes = ranked
        .into_iter()
        .take(cap)
        .map(|(id, degree)| {
            let (kind, label) = id.split_once(':').unwrap_or(("", id.as_str()));
            Node { id: id.clone(), kind: kind.to_string(), label: label.to_string(), degree: *degree }
        })
        .collect();
    Ok(Graph { nodes, edges, total_nodes, total_edges, truncated })
}

fn degrees(edges: &[GraphEdge]) -> BTreeMap<String, usize> {
    let mut d = BTreeMap::new();
    for e in edges {
        *d.entry(e.source.clone()).or_insert(0) += 1;
        *d.entry(e.target.clone()).or_insert(0) += 1;
    }
    d
}
