//! The in-memory vector index: per tenant, a flat array of unit-length f32
//! vectors searched by brute force (cosine = dot product of unit vectors).
//!
//! Memory: `4 * dims` bytes per fact plus its id and a map entry (about 40
//! bytes), so 1536-dimension vectors cost about 6 KiB a fact; the worker
//! stops adding at `max_vectors` (all tenants). A search scans every vector
//! of the tenant: O(n * dims), a few milliseconds per 100,000 vectors of
//! 384 dimensions.

use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use crate::store::FactId;

#[derive(Default)]
struct TenantVectors {
    ids: Vec<FactId>,
    /// `ids.len() * dims` floats, unit length each.
    data: Vec<f32>,
    pos: HashMap<FactId, usize>,
}

#[derive(Default)]
struct Inner {
    dims: Option<usize>,
    tenants: HashMap<String, TenantVectors>,
    len: usize,
}

/// Shared by the worker (writes) and the searches (reads).
#[derive(Default)]
pub struct VectorIndex {
    inner: RwLock<Inner>,
}

/// `v` scaled to unit length; `None` for the zero vector.
pub fn normalized(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| (*x as f64) * (*x as f64)).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return None;
    }
    Some(v.iter().map(|x| (*x as f64 / norm) as f32).collect())
}

impl VectorIndex {
    pub fn new() -> VectorIndex {
        VectorIndex::default()
    }

    // A panic while holding the lock leaves the data consistent (every
    // mutation is a single step), so a poisoned lock is still usable.
    fn r(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn w(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Vectors held, all tenants.
    pub fn len(&self) -> usize {
        self.r().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The vectors' length, once one is held.
    pub fn dims(&self) -> Option<usize> {
        self.r().dims
    }

    pub fn tenant_len(&self, tenant: &str) -> usize {
        self.r().tenants.get(tenant).map_or(0, |t| t.ids.len())
    }

    pub fn contains(&self, tenant: &str, id: FactId) -> bool {
        self.r().tenants.get(tenant).is_some_and(|t| t.pos.contains_key(&id))
    }

    /// Adds (or replaces) the vector of a fact. A zero vector, or one of
    /// another length than those held, is refused (false).
    pub fn insert(&self, tenant: &str, id: FactId, v: &[f32]) -> bool {
        let Some(unit) = normalized(v) else { return false };
        let mut inner = self.w();
        match inner.dims {
            Some(d) if d != unit.len() => return false,
            Some(_) => {}
            None => inner.dims = Some(unit.len()),
        }
        let dims = unit.len();
        let t = inner.tenants.entry(tenant.to_string()).or_default();
        let added = match t.pos.get(&id) {
            Some(&i) => {
                t.data[i * dims..(i + 1) * dims].copy_from_slice(&unit);
                false
            }
            None => {
                t.pos.insert(id, t.ids.len());
                t.ids.push(id);
                t.data.extend_from_slice(&unit);
                true
            }
        };
        if added {
            inner.len += 1;
        }
        true
    }

    /// Drops every vector (a model change).
    pub fn clear(&self) {
        *self.w() = Inner::default();
    }

    /// The tenant's facts by cosine similarity to `query`, best first (ties
    /// by id), at most `limit`, similarity above zero only.
    pub fn nearest(&self, tenant: &str, query: &[f32], limit: usize) -> Vec<(FactId, f32)> {
        let Some(q) = normalized(query) else { return Vec::new() };
        let inner = self.r();
        let (Some(dims), Some(t)) = (inner.dims, inner.tenants.get(tenant)) else { return Vec::new() };
        if dims != q.len() || limit == 0 {
            return Vec::new();
        }
        let mut scored: Vec<(FactId, f32)> = t
            .ids
            .iter()
            .zip(t.data.chunks_exact(dims))
            .map(|(id, v)| (*id, v.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>()))
            .filter(|(_, s)| *s > 0.0)
            .collect();
        let cmp = |a: &(FactId, f32), b: &(FactId, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if scored.len() > limit {
            scored.select_nth_unstable_by(limit - 1, cmp);
            scored.truncate(limit);
        }
        scored.sort_by(cmp);
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> FactId {
        FactId::from_u128(n)
    }

    #[test]
    fn nearest_is_cosine_per_tenant() {
        let ix = VectorIndex::new();
        assert!(ix.insert("a", id(1), &[1.0, 0.0, 0.0]));
        assert!(ix.insert("a", id(2), &[3.0, 3.0, 0.0]));
        assert!(ix.insert("a", id(3), &[0.0, 0.0, 5.0]));
        assert!(ix.insert("b", id(4), &[1.0, 0.0, 0.0]));
        assert!(!ix.insert("a", id(5), &[0.0, 0.0, 0.0]), "zero vector refused");
        assert!(!ix.insert("a", id(6), &[1.0, 0.0]), "other length refused");
        assert_eq!(ix.len(), 4);
        assert_eq!(ix.tenant_len("a"), 3);
        let got = ix.nearest("a", &[2.0, 0.1, 0.0], 10);
        assert_eq!(got.iter().map(|x| x.0).collect::<Vec<_>>(), [id(1), id(2)], "orthogonal 3 is left out");
        assert!((got[0].1 - 0.99875).abs() < 1e-3);
        assert_eq!(ix.nearest("a", &[2.0, 0.1, 0.0], 1).len(), 1);
        assert_eq!(ix.nearest("b", &[1.0, 1.0, 0.0], 10).iter().map(|x| x.0).collect::<Vec<_>>(), [id(4)]);
        assert!(ix.nearest("nobody", &[1.0, 0.0, 0.0], 10).is_empty());
        assert!(ix.nearest("a", &[1.0, 0.0], 10).is_empty(), "query of another length");
        // Replacing keeps the count.
        assert!(ix.insert("a", id(1), &[0.0, 0.0, 1.0]));
        assert_eq!(ix.len(), 4);
        assert_eq!(ix.nearest("a", &[0.0, 0.0, 1.0], 10)[0].1, 1.0);
        ix.clear();
        assert!(ix.is_empty() && ix.dims().is_none());
    }

    #[test]
    fn ties_go_to_the_smaller_id() {
        let ix = VectorIndex::new();
        for n in [9, 3, 7] {
            ix.insert("a", id(n), &[1.0, 1.0]);
        }
        let got: Vec<FactId> = ix.nearest("a", &[1.0, 1.0], 2).into_iter().map(|x| x.0).collect();
        assert_eq!(got, [id(3), id(7)]);
    }
}
