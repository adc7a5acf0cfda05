//! The writer's view of the store while it builds a commit group: the
//! mutations of the group so far, layered over the committed data.
//!
//! Requests of one group must see each other's writes (the second assertion
//! on a key supersedes the first), yet the group reaches the store as one
//! atomic batch. Marks let one failed request be undone without disturbing
//! the rest of its group.

use crate::error::StorageError;
use crate::kv::{scan_prefix, Keyspace, OrderedKv, WriteBatch};
use std::collections::{BTreeMap, HashSet};

type Slot = (Keyspace, Vec<u8>);
/// Key-value pairs, ascending by key.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

pub struct Overlay<'a> {
    kv: &'a dyn OrderedKv,
    pending: BTreeMap<Slot, Option<Vec<u8>>>,
    /// Slots put with [`Overlay::put_new`]: keys no write has ever stored.
    /// Not undone by a rollback: such a key is made from a fact id the
    /// rolled-back request made, which no other request uses.
    new_keys: HashSet<Slot>,
    /// For each change, what the slot held in `pending` before it
    /// (`None`: the slot was absent).
    undo: Vec<(Slot, Option<Option<Vec<u8>>>)>,
}

#[derive(Debug, Clone, Copy)]
pub struct Mark(usize);

impl<'a> Overlay<'a> {
    pub fn new(kv: &'a dyn OrderedKv) -> Self {
        Overlay { kv, pending: BTreeMap::new(), new_keys: HashSet::new(), undo: Vec::new() }
    }

    pub fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        match self.pending.get(&(ks, key.to_vec())) {
            Some(v) => Ok(v.clone()),
            None => self.kv.get(ks, key),
        }
    }

    pub fn put(&mut self, ks: Keyspace, key: Vec<u8>, value: Vec<u8>) {
        self.set(ks, key, Some(value));
    }

    /// A put of a key no write has ever stored: one made from a fact id this
    /// group made. The caller vouches for it; a key that was stored would be
    /// left behind in the store by a later delete.
    pub fn put_new(&mut self, ks: Keyspace, key: Vec<u8>, value: Vec<u8>) {
        self.new_keys.insert((ks, key.clone()));
        self.set(ks, key, Some(value));
    }

    pub fn delete(&mut self, ks: Keyspace, key: Vec<u8>) {
        self.set(ks, key, None);
    }

    fn set(&mut self, ks: Keyspace, key: Vec<u8>, value: Option<Vec<u8>>) {
        let slot = (ks, key);
        let before = self.pending.insert(slot.clone(), value);
        self.undo.push((slot, before));
    }

    /// Every key with `prefix`, ascending, as the group currently sees it.
    pub fn scan_prefix(&self, ks: Keyspace, prefix: &[u8]) -> Result<Rows, StorageError> {
        self.scan_prefix_from(ks, prefix, prefix)
    }

    /// Keys with `prefix` that are `>= start` (`start` itself begins with
    /// `prefix`), ascending, as the group currently sees them.
    pub fn scan_prefix_from(
        &self,
        ks: Keyspace,
        prefix: &[u8],
        start: &[u8],
    ) -> Result<Rows, StorageError> {
        use std::ops::Bound;
        let hi = crate::codec::prefix_end(prefix);
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for item in self.kv.scan(ks, Bound::Included(start.to_vec()), hi, false) {
            let (k, v) = item?;
            merged.insert(k, v);
        }
        for ((_, k), v) in self.pending_range(ks, prefix).filter(|((_, k), _)| k.as_slice() >= start) {
            match v {
                Some(v) => merged.insert(k.clone(), v.clone()),
                None => merged.remove(k),
            };
        }
        Ok(merged.into_iter().collect())
    }

    /// Whether any key starts with `prefix`.
    pub fn has_prefix(&self, ks: Keyspace, prefix: &[u8]) -> Result<bool, StorageError> {
        // Stops at the first pending put: a big group writing many keys under
        // one prefix must not make each check walk all of them.
        if self.pending_range(ks, prefix).any(|(_, v)| v.is_some()) {
            return Ok(true);
        }
        // A stored key counts unless the group deleted it.
        for item in scan_prefix(self.kv, ks, prefix, false) {
            let (k, _) = item?;
            if !matches!(self.pending.get(&(ks, k)), Some(None)) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Pending slots of `ks` whose key starts with `prefix` (they are contiguous).
    fn pending_range<'s>(
        &'s self,
        ks: Keyspace,
        prefix: &'s [u8],
    ) -> impl Iterator<Item = (&'s Slot, &'s Option<Vec<u8>>)> + 's {
        use std::ops::Bound;
        self.pending
            .range((Bound::Included((ks, prefix.to_vec())), Bound::Unbounded))
            .take_while(move |((k, key), _)| *k == ks && key.starts_with(prefix))
    }

    pub fn mark(&self) -> Mark {
        Mark(self.undo.len())
    }

    /// Undoes every change made after `mark`.
    pub fn rollback(&mut self, mark: Mark) {
        while self.undo.len() > mark.0 {
            let (slot, before) = self.undo.pop().expect("len checked");
            match before {
                Some(v) => self.pending.insert(slot, v),
                None => self.pending.remove(&slot),
            };
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn into_batch(self) -> WriteBatch {
        let mut batch = WriteBatch::default();
        batch.ops.reserve(self.pending.len());
        for (slot, v) in self.pending {
            let new = self.new_keys.contains(&slot);
            let (ks, k) = slot;
            match v {
                Some(v) if new => batch.put_new(ks, k, v),
                Some(v) => batch.put(ks, k, v),
                // Put and deleted within the group: nothing below holds it.
                None if new => {}
                None => batch.delete(ks, k),
            }
        }
        batch
    }
}

