//! `/api/walk`: a breadth-first walk over entity-ref facts from one entity.
//!
//! An edge is a current fact whose object is an entity ref (`Type:id`);
//! walking *out* of a node follows the facts it is the subject of, walking
//! *in* follows the facts that point at it (the engine's object index). The
//! walk is bounded twice: by depth and by the number of nodes reached, so a
//! hub entity cannot make one request read the whole tenant.

use super::collect;
use serde::Serialize;
use std::collections::{HashMap, HashSet, VecDeque};
use crate::store::{is_entity_ref, AsOf, MemoryStore, EngineError, Fact, FactId, FactQuery};

pub const DEFAULT_DEPTH: usize = 2;
pub const MAX_DEPTH: usize = 6;
pub const DEFAULT_MAX_NODES: usize = 200;
pub const MAX_NODES: usize = 2000;
/// Edges read per node and direction; a node with more is marked truncated.
pub const MAX_EDGES_PER_NODE: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Out,
    In,
    Both,
}

impl std::str::FromStr for Direction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "out" => Ok(Direction::Out),
            "in" => Ok(Direction::In),
            "both" => Ok(Direction::Both),
            other => Err(format!("direction must be out, in or both, got {other:?}")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct WalkRequest {
    pub start: String,
    pub depth: usize,
    pub direction: Direction,
    /// Predicates to follow; empty follows every predicate.
    pub edge_types: Vec<String>,
    pub as_of: Option<AsOf>,
    pub max_nodes: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub predicate: String,
    pub fact_id: FactId,
    pub confidence: f64,
    /// Hops from the start to the node the edge was found from, plus one.
    pub depth: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WalkResult {
    pub start: String,
    /// Entity refs in the order the walk reached them, the start first.
    pub reached: Vec<String>,
    /// Hops from the start, by entity.
    pub depths: HashMap<String, usize>,
    pub edges: Vec<Edge>,
    /// The walk stopped at `max_nodes`, or a node had more edges than are
    /// read per node: the answer is a prefix of the full walk.
    pub truncated: bool,
}

pub fn walk(engine: &dyn MemoryStore, tenant: &str, req: &WalkRequest) -> Result<WalkResult, EngineError> {
    if !is_entity_ref(&req.start) {
        return Err(EngineError::Invalid(format!("start must be an entity ref like Person:sarah, got {:?}", req.start)));
    }
    let mut reached = vec![req.start.clone()];
    let mut depths = HashMap::from([(req.start.clone(), 0usize)]);
    let mut seen_edges = HashSet::new();
    let mut edges = Vec::new();
    let mut truncated = false;
    let mut queue = VecDeque::from([(req.start.clone(), 0usize)]);

    'bfs: while let Some((node, d)) = queue.pop_front() {
        if d >= req.depth {
            continue;
        }
        for (fact, neighbour) in neighbours(engine, tenant, &node, req, &mut truncated)? {
            if !seen_edges.insert(fact.id) {
                continue;
            }
            let (from, to) = if fact.subject == node { (node.clone(), neighbour.clone()) } else { (neighbour.clone(), node.clone()) };
            edges.push(Edge { from, to, predicate: fact.predicate.clone(), fact_id: fact.id, confidence: fact.confidence, depth: d + 1 });
            if !depths.contains_key(&neighbour) {
                if reached.len() >= req.max_nodes {
                    // The edge stays (it was traversed); its far end is
                    // not expanded.
                    truncated = true;
                    break 'bfs;
                }
                depths.insert(neighbour.clone(), d + 1);
                reached.push(neighbour.clone());
                queue.push_back((neighbour, d + 1));
            }
        }
    }
    Ok(WalkResult { start: req.start.clone(), reached, depths, edges, truncated })
}

/// The current edges at `node` in the walk's direction, each with the entity
/// at its other end, in index order (deterministic).
fn neighbours(
    engine: &dyn MemoryStore,
    tenant: &str,
    node: &str,
    req: &WalkRequest,
    truncated: &mut bool,
) -> Result<Vec<(Fact, String)>, EngineError> {
    let mut out = Vec::new();
    let follows = |f: &Fact| req.edge_types.is_empty() || req.edge_types.iter().any(|p| p == &f.predicate);
    if matches!(req.direction, Direction::Out | Direction::Both) {
        let q = FactQuery { subject: Some(node.to_string()), as_of: req.as_of, ..Default::default() };
        let (facts, more) = collect(engine, tenant, &q, MAX_EDGES_PER_NODE)?;
        *truncated |= more;
        for f in facts {
            if let Some(to) = f.object_entity().map(str::to_string) {
                if follows(&f) {
                    out.push((f, to));
                }
            }
        }
    }
    if matches!(req.direction, Direction::In | Direction::Both) {
        let q = FactQuery {
            object: Some(serde_json::Value::String(node.to_string())),
            as_of: req.as_of,
            ..Default::default()
        };
        let (facts, more) = collect(engine, tenant, &q, MAX_EDGES_PER_NODE)?;
        *truncated |= more;
        for f in facts {
            if follows(&f) && is_entity_ref(&f.subject) {
                let from = f.subject.clone();
                out.push((f, from));
            }
        }
    }
    Ok(out)
}
