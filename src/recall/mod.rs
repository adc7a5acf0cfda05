//! Recall over the engine: graph walks, the entity graph view, context
//! packets and grounded answers. Everything here is a read of one tenant's
//! memory through the engine's indexes; nothing is cached, so every answer is
//! as fresh (or as rewound, with `as_of`) as the engine.

pub mod ask;
pub mod context;
pub mod graph;
pub mod text;
pub mod tokens;
pub mod walk;
pub mod when;

use crate::store::{MemoryStore, EngineError, Fact, FactQuery, MAX_PAGE};

/// Every fact `q` selects, page by page, up to `max`. The flag says the
/// answer stopped at `max` with more to come.
pub fn collect(engine: &dyn MemoryStore, tenant: &str, q: &FactQuery, max: usize) -> Result<(Vec<Fact>, bool), EngineError> {
    let mut q = q.clone();
    let mut out = Vec::new();
    loop {
        q.limit = (max - out.len()).clamp(1, MAX_PAGE);
        let page = engine.query(tenant, &q)?;
        out.extend(page.facts);
        match page.next_cursor {
            Some(c) if out.len() < max => q.cursor = Some(c),
            Some(_) => return Ok((out, true)),
            None => return Ok((out, false)),
        }
    }
}
