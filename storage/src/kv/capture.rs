//! A point-in-time view of the store for an online backup, kept while
//! writes go on.
//!
//! [`CapturingKv`] wraps the engine's backend. While a capture is open, a
//! write batch first saves, for every key it changes that the backup's scan
//! has not yet reached, the value that key had when the capture opened (or
//! that it had none). The scan ([`CapturingKv::captured_scan`]) goes through
//! each keyspace in order and, under the same lock, decides every key as it
//! passes it: the saved value if there is one, else what the store holds. A
//! key deleted ahead of the scan is given back from its saved value, a key
//! created after the capture opened is left out. So the scan yields exactly
//! the store as it stood when the capture opened, with the write gate held
//! only for that instant, and keys behind the scan cost writers nothing.
//!
//! Why this works without a snapshot from the backend: a batch saves its
//! keys' old values before it applies them, so whenever the scan reads a
//! value newer than the capture point, the old one is already saved; and a
//! key the scan has decided is never saved again. The memory held is the old
//! values of the keys written ahead of the scan while it runs.

use super::{Keyspace, KvIter, KvPair, OrderedKv, WriteBatch};
use crate::error::StorageError;
use parking_lot::Mutex;
use std::collections::btree_map::{BTreeMap, Entry};
use std::ops::Bound;
use std::sync::Arc;

/// Keys the scan reads from the store before it takes the lock to decide them.
const SCAN_CHUNK: usize = 256;

/// The engine's [`OrderedKv`]: the backend, plus the capture of an online backup.
pub struct CapturingKv {
    inner: Arc<dyn OrderedKv>,
    capture: Mutex<Option<Capture>>,
}

/// The state of an open capture.
#[derive(Default)]
struct Capture {
    /// The keyspace the scan is in (`Keyspace::index`), and the last key of
    /// it the scan has decided: every key before that point is decided.
    ks: usize,
    cursor: Option<Vec<u8>>,
    /// Keys written since the capture opened, ahead of the scan, with the
    /// value each had then (`None`: it did not exist).
    before: BTreeMap<(usize, Vec<u8>), Option<Vec<u8>>>,
    /// Largest number of bytes `before` held at once.
    peak_bytes: usize,
    bytes: usize,
}

impl Capture {
    fn decided(&self, ks: usize, key: &[u8]) -> bool {
        ks < self.ks || (ks == self.ks && self.cursor.as_deref().is_some_and(|c| key <= c))
    }

    fn forget(&mut self, key: &[u8], old: &Option<Vec<u8>>) {
        self.bytes -= key.len() + old.as_ref().map_or(0, Vec::len);
    }

    /// Decides the keys of keyspace `ks` read from the store (ascending,
    /// after the cursor), and, with `to_end`, what is saved beyond the last
    /// of them; appends what the backup holds to `out`.
    fn decide(&mut self, ks: usize, read: Vec<KvPair>, to_end: bool, out: &mut Vec<KvPair>) {
        debug_assert_eq!(ks, self.ks);
        let last = read.last().map(|(k, _)| k.clone());
        for (key, value) in read {
            if self.before.is_empty() {
                out.push((key, value));
                continue;
            }
            // Saved keys before this one are keys the store no longer has.
            self.give_back(ks, Some(&key), out);
            let entry = (ks, key);
            match self.before.remove(&entry) {
                Some(old) => {
                    self.forget(&entry.1, &old);
                    if let Some(old) = old {
                        out.push((entry.1, old));
                    }
                }
                None => out.push((entry.1, value)),
            }
        }
        if let Some(last) = last {
            self.cursor = Some(last);
        }
        if to_end {
            self.give_back(ks, None, out);
            self.ks = ks + 1;
            self.cursor = None;
        }
    }

    /// Moves the saved keys of `ks` before `until` (all of them with `None`)
    /// out of `before`; those that existed at the capture point go to `out`.
    /// Every saved key is undecided (ahead of the cursor), and none belongs
    /// to a keyspace before `ks`, so they are the first ones of the map.
    fn give_back(&mut self, ks: usize, until: Option<&[u8]>, out: &mut Vec<KvPair>) {
        while let Some(((s, k), _)) = self.before.first_key_value() {
            if *s != ks || until.is_some_and(|u| k.as_slice() >= u) {
                break;
            }
            let ((_, key), old) = self.before.pop_first().expect("just seen");
            self.forget(&key, &old);
            if let Some(old) = old {
                out.push((key, old));
            }
        }
    }
}

impl CapturingKv {
    pub fn new(inner: Arc<dyn OrderedKv>) -> Self {
        CapturingKv { inner, capture: Mutex::new(None) }
    }

    /// Opens a capture of the store as it stands. The caller keeps every
    /// write out while this runs (the engine's write gate), so no batch is
    /// half applied at the capture point. `false` if one is open already.
    pub(crate) fn open_capture(&self) -> bool {
        let mut capture = self.capture.lock();
        if capture.is_some() {
            return false;
        }
        *capture = Some(Capture::default());
        true
    }

    /// Closes the capture; returns the most bytes of old values it held.
    pub(crate) fn close_capture(&self) -> usize {
        self.capture.lock().take().map_or(0, |c| c.peak_bytes)
    }

    /// Every record of `ks` as it stood when the capture opened, ascending.
    /// The keyspaces must be scanned in `Keyspace::ALL` order, each to its
    /// end, one at a time.
    pub(crate) fn captured_scan(&self, ks: Keyspace) -> impl Iterator<Item = Result<KvPair, StorageError>> + '_ {
        let i = ks.index();
        let mut store = self.inner.scan(ks, Bound::Unbounded, Bound::Unbounded, false);
        let mut ready: std::vec::IntoIter<KvPair> = Vec::new().into_iter();
        let mut done = false;
        std::iter::from_fn(move || loop {
            if let Some(pair) = ready.next() {
                return Some(Ok(pair));
            }
            if done {
                return None;
            }
            let mut read = Vec::with_capacity(SCAN_CHUNK);
            while read.len() < SCAN_CHUNK {
                match store.next() {
                    Some(Ok(pair)) => read.push(pair),
                    Some(Err(e)) => {
                        done = true;
                        return Some(Err(e));
                    }
                    None => {
                        done = true;
                        break;
                    }
                }
            }
            let mut out = Vec::with_capacity(read.len());
            match self.capture.lock().as_mut() {
                Some(c) if c.ks == i => c.decide(i, read, done, &mut out),
                _ => {
                    done = true;
                    return Some(Err(StorageError::Backend(format!(
                        "backup scan of {} out of order or without a capture",
                        ks.name()
                    ))));
                }
            }
            ready = out.into_iter();
        })
    }
}

impl OrderedKv for CapturingKv {
    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.get(ks, key)
    }

    fn scan(&self, ks: Keyspace, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, reverse: bool) -> KvIter<'_> {
        self.inner.scan(ks, lo, hi, reverse)
    }

    fn apply_published(&self, batch: WriteBatch, publish: &parking_lot::RwLock<()>) -> Result<(), StorageError> {
        if let Some(c) = self.capture.lock().as_mut() {
            for (ks, key, _) in &batch.ops {
                if c.decided(ks.index(), key) {
                    continue;
                }
                if let Entry::Vacant(slot) = c.before.entry((ks.index(), key.clone())) {
                    let old = self.inner.get(*ks, key)?;
                    c.bytes += key.len() + old.as_ref().map_or(0, Vec::len);
                    c.peak_bytes = c.peak_bytes.max(c.bytes);
                    slot.insert(old);
                }
            }
        }
        self.inner.apply_published(batch, publish)
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.inner.sync()
    }

    fn size_on_disk(&self) -> Option<u64> {
        self.inner.size_on_disk()
    }

    fn cache_fill(&self) -> Option<super::CacheFill> {
        self.inner.cache_fill()
    }
}
