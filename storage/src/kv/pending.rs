//! The redb backend's writes since its last checkpoint, held in memory.
//!
//! redb copies every page a transaction touches. A batch of ~50 writes to
//! random keys in five trees copies a leaf (and the branches above it) for
//! nearly every write, and commits them all: 12-17 µs per write at 1M facts.
//! The same writes in one transaction of tens of thousands cost a third of
//! that, because each touched page is copied once. So the backend keeps every
//! batch since its last checkpoint here (the journal makes them durable) and
//! writes them to redb in one transaction at the checkpoint, in key order.
//!
//! Readers see redb's state at the last checkpoint with this layer over it,
//! each reader as it was when its view was taken, however the writer goes
//! on. So a layer is made of immutable sorted runs behind `Arc`s: a view's
//! copy is a list of `Arc`s, and a batch adds a run of its own. Runs are
//! merged as they pile up, the newer over the older, whenever a run is not
//! more than twice the size of the one after it; sizes then fall by half or
//! more from the oldest run to the newest, so a layer of n writes has at
//! most about log2(n) runs, and each write is copied (an `Arc` count, not
//! its bytes) about log2(n) times in all.

use super::{Keyspace, KvPair, WriteBatch};
use crate::error::StorageError;
use std::cmp::Ordering;
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::Arc;

type Bytes = Arc<[u8]>;
/// A key and its value, or `None` where the key was deleted.
type Entry = (Bytes, Option<Bytes>);
/// Entries sorted by key, each key once.
type Run = Arc<SortedRun>;

/// Every keyspace's writes since the last checkpoint, the later write to a
/// key replacing the earlier.
#[derive(Clone)]
pub struct Pending {
    /// Per keyspace, its runs, oldest first.
    runs: Vec<Vec<Run>>,
    /// Key and value bytes of the writes applied, overwritten ones included.
    bytes: u64,
}

impl Default for Pending {
    fn default() -> Self {
        Pending { runs: Keyspace::ALL.iter().map(|_| Vec::new()).collect(), bytes: 0 }
    }
}

impl Pending {
    pub fn apply(&mut self, batch: &WriteBatch) {
        let mut by_keyspace: Vec<Vec<(Entry, bool)>> = Keyspace::ALL.iter().map(|_| Vec::new()).collect();
        let mut new_keys = batch.new_keys.iter().copied().peekable();
        for (i, (ks, key, value)) in batch.ops.iter().enumerate() {
            self.bytes += (key.len() + value.as_ref().map_or(0, Vec::len)) as u64;
            let new = new_keys.next_if_eq(&i).is_some();
            by_keyspace[ks.index()].push(((Bytes::from(key.as_slice()), value.as_deref().map(Bytes::from)), new));
        }
        for (runs, mut entries) in self.runs.iter_mut().zip(by_keyspace) {
            if entries.is_empty() {
                continue;
            }
            // Stable: of two writes to a key, the later stays behind the
            // earlier, and only the last of each key is kept, new if the
            // first was.
            entries.sort_by(|a, b| a.0 .0.cmp(&b.0 .0));
            let mut run: Vec<(Entry, bool)> = Vec::with_capacity(entries.len());
            for (entry, new) in entries {
                match run.last_mut() {
                    Some((last, _)) if last.0 == entry.0 => *last = entry,
                    _ => run.push((entry, new)),
                }
            }
            // A new key deleted again is nowhere: nothing to hide, nothing to
            // write.
            run.retain(|((_, value), new)| !(*new && value.is_none()));
            if run.is_empty() {
                continue;
            }
            runs.push(Arc::new(SortedRun::with_new(run)));
            while runs.len() >= 2 && runs[runs.len() - 2].len() <= 2 * runs[runs.len() - 1].len() {
                let newer = runs.pop().expect("two runs");
                let older = runs.pop().expect("two runs");
                let merged = merge_runs(&older, &newer);
                if merged.len() > 0 {
                    runs.push(merged);
                }
            }
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.runs.iter().all(Vec::is_empty)
    }

    pub fn is_empty_in(&self, ks: Keyspace) -> bool {
        self.runs[ks.index()].is_empty()
    }

    /// `Some(Some(value))` for a key written here, `Some(None)` for one
    /// deleted here, `None` for one this layer does not know.
    pub fn get(&self, ks: Keyspace, key: &[u8]) -> Option<Option<&[u8]>> {
        self.runs[ks.index()].iter().rev().find_map(|run| {
            let (k, value) = run.entries.get(run.position(key, false))?;
            (**k == *key).then_some(value.as_deref())
        })
    }

    /// The keyspace's writes in key order, for the checkpoint.
    pub fn entries(&self, ks: Keyspace) -> impl Iterator<Item = Entry> {
        self.cursor(ks, &Bound::Unbounded, &Bound::Unbounded, false)
    }

    /// `stored` (redb's keys in the same bounds and direction) with this
    /// layer's writes over it: a key written here replaces the stored one,
    /// a key deleted here hides it.
    pub fn merge<I>(&self, ks: Keyspace, stored: I, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, reverse: bool) -> Merged<I>
    where
        I: Iterator<Item = Result<KvPair, StorageError>>,
    {
        Merged { stored: stored.peekable(), pending: self.cursor(ks, lo, hi, reverse).peekable(), reverse }
    }

    fn cursor(&self, ks: Keyspace, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, reverse: bool) -> Cursor {
        // Newest first, so that of equal keys the newest run's entry wins.
        let runs = self.runs[ks.index()].iter().rev().map(|run| RunCursor::new(run, lo, hi)).collect();
        Cursor { runs, reverse }
    }
}

/// A run's entries and what its searches go by: the length of the prefix
/// all its keys share, and each key's head, the 8 bytes after that prefix.
struct SortedRun {
    entries: Vec<Entry>,
    prefix_len: usize,
    heads: Vec<u64>,
    /// Per entry, whether its key is stored nowhere below this layer (it
    /// was first written here by `WriteBatch::put_new`): a later delete of
    /// it in this layer drops both instead of keeping the delete.
    new: Vec<bool>,
}

/// The first 8 bytes of `rest` as a big-endian integer, zeros past its end.
/// Of two byte strings, the one with the smaller head is the smaller; equal
/// heads say nothing (`ab` and `ab\0` have the same one).
fn head(rest: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = rest.len().min(8);
    b[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(b)
}

impl SortedRun {
    /// `entries` must be sorted by key, each key once; none is new.
    #[cfg(test)]
    fn new(entries: Vec<Entry>) -> SortedRun {
        SortedRun::with_new(entries.into_iter().map(|e| (e, false)).collect())
    }

    /// Entries sorted by key, each key once, each with whether it is new.
    fn with_new(entries: Vec<(Entry, bool)>) -> SortedRun {
        let (entries, new): (Vec<Entry>, Vec<bool>) = entries.into_iter().unzip();
        // Sorted, so every key shares the prefix the first and last share.
        let prefix_len = match (entries.first(), entries.last()) {
            (Some((a, _)), Some((b, _))) => a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count(),
            _ => 0,
        };
        let heads = entries.iter().map(|(k, _)| head(&k[prefix_len..])).collect();
        SortedRun { entries, prefix_len, heads, new }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many keys are less than `key` (or not greater, when `or_equal`).
    fn position(&self, key: &[u8], or_equal: bool) -> usize {
        let Some((first, _)) = self.entries.first() else { return 0 };
        let prefix = &first[..self.prefix_len];
        let common = prefix.len().min(key.len());
        match key[..common].cmp(&prefix[..common]) {
            Ordering::Less => return 0,
            Ordering::Greater => return self.len(),
            // A proper prefix of the shared prefix is less than every key.
            Ordering::Equal if key.len() < prefix.len() => return 0,
            Ordering::Equal => {}
        }
        let h = head(&key[prefix.len()..]);
        let from = self.heads.partition_point(|&x| x < h);
        let to = from + self.heads[from..].partition_point(|&x| x == h);
        from + self.entries[from..to].partition_point(|(k, _)| if or_equal { **k <= *key } else { **k < *key })
    }
}

/// The merge of an older and a newer run, the newer entry of a key kept; it
/// is new if the older was, and a new key the newer run deletes is dropped.
fn merge_runs(older: &SortedRun, newer: &SortedRun) -> Run {
    let mut out = Vec::with_capacity(older.len() + newer.len());
    let mut o = older.entries.iter().zip(older.new.iter().copied()).peekable();
    let mut n = newer.entries.iter().zip(newer.new.iter().copied()).peekable();
    loop {
        let order = match (o.peek(), n.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((a, _)), Some((b, _))) => a.0.cmp(&b.0),
        };
        match order {
            Ordering::Less => out.push(o.next().map(|(entry, new)| (entry.clone(), new)).expect("peeked")),
            Ordering::Greater => out.push(n.next().map(|(entry, new)| (entry.clone(), new)).expect("peeked")),
            Ordering::Equal => {
                let (_, new) = o.next().expect("peeked");
                let (entry, _) = n.next().expect("peeked");
                if !(new && entry.1.is_none()) {
                    out.push((entry.clone(), new));
                }
            }
        }
    }
    Arc::new(SortedRun::with_new(out))
}

/// The entries of one run between two bounds, `[front, back)`, taken from
/// either end. It holds the run, not a borrow of it: a scan outlives the
/// view it came from.
struct RunCursor {
    run: Run,
    front: usize,
    back: usize,
}

impl RunCursor {
    fn new(run: &Run, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> RunCursor {
        let front = match lo {
            Bound::Included(l) => run.position(l, false),
            Bound::Excluded(l) => run.position(l, true),
            Bound::Unbounded => 0,
        };
        let back = match hi {
            Bound::Included(h) => run.position(h, true),
            Bound::Excluded(h) => run.position(h, false),
            Bound::Unbounded => run.len(),
        };
        // An inverted range holds nothing.
        RunCursor { run: Arc::clone(run), front, back: back.max(front) }
    }

    /// The next key from the front, or from the back when `reverse`.
    fn peek(&self, reverse: bool) -> Option<&[u8]> {
        if self.front == self.back {
            return None;
        }
        let i = if reverse { self.back - 1 } else { self.front };
        Some(&self.run.entries[i].0)
    }

    fn take(&mut self, reverse: bool) -> Entry {
        if reverse {
            self.back -= 1;
            self.run.entries[self.back].clone()
        } else {
            self.front += 1;
            self.run.entries[self.front - 1].clone()
        }
    }
}

/// A layer's runs merged in scan order, the newest entry of each key.
struct Cursor {
    /// Newest run first.
    runs: Vec<RunCursor>,
    reverse: bool,
}

impl Iterator for Cursor {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        let reverse = self.reverse;
        // The first key in scan order; of equal keys, the newest run's.
        let mut best: Option<usize> = None;
        for (i, run) in self.runs.iter().enumerate() {
            let Some(key) = run.peek(reverse) else { continue };
            let better = match best.and_then(|b| self.runs[b].peek(reverse)) {
                None => true,
                Some(current) => {
                    let order = key.cmp(current);
                    if reverse {
                        order == Ordering::Greater
                    } else {
                        order == Ordering::Less
                    }
                }
            };
            if better {
                best = Some(i);
            }
        }
        let entry = self.runs[best?].take(reverse);
        // Older runs' entries for the same key are replaced by it.
        for run in &mut self.runs {
            if run.peek(reverse) == Some(&*entry.0) {
                run.take(reverse);
            }
        }
        Some(entry)
    }
}

/// Stored keys and pending writes merged in scan order.
pub struct Merged<I: Iterator> {
    stored: Peekable<I>,
    pending: Peekable<Cursor>,
    reverse: bool,
}

impl<I> Iterator for Merged<I>
where
    I: Iterator<Item = Result<KvPair, StorageError>>,
{
    type Item = Result<KvPair, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let first = match (self.stored.peek(), self.pending.peek()) {
                (None, None) => return None,
                (Some(Err(_)), _) | (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(Ok((stored, _))), Some((pending, _))) => {
                    let order = stored.as_slice().cmp(pending);
                    if self.reverse {
                        order.reverse()
                    } else {
                        order
                    }
                }
            };
            match first {
                Ordering::Less => return self.stored.next(),
                // The pending write replaces the stored value.
                Ordering::Equal => drop(self.stored.next()),
                Ordering::Greater => {}
            }
            let (key, value) = self.pending.next().expect("peeked");
            if let Some(value) = value {
                return Some(Ok((key.to_vec(), value.to_vec())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::within;

    fn run_of(keys: impl Iterator<Item = u16>) -> Run {
        Arc::new(SortedRun::new(
            keys.map(|k| (Bytes::from(&k.to_be_bytes()[..]), Some(Bytes::from(&[1u8][..])))).collect(),
        ))
    }

    fn bounds(k: u16) -> [Bound<Vec<u8>>; 3] {
        [Bound::Included(k.to_be_bytes().to_vec()), Bound::Excluded(k.to_be_bytes().to_vec()), Bound::Unbounded]
    }

    /// Every pair of bounds over keys in and between a run's (the run holds
    /// the even numbers below 2 * len), inverted ranges included, against a
    /// filter of the whole run.
    #[test]
    fn a_run_cursor_holds_exactly_the_keys_within_its_bounds() {
        for len in [0u16, 1, 2, 3, 7, 40] {
            let run = run_of((0..len).map(|i| 2 * i));
            let probes: Vec<u16> = (0..=2 * len + 1).collect();
            for &a in &probes {
                for &b in &probes {
                    for lo in bounds(a) {
                        for hi in bounds(b) {
                            let c = RunCursor::new(&run, &lo, &hi);
                            let got: Vec<&[u8]> = run.entries[c.front..c.back].iter().map(|(k, _)| &**k).collect();
                            let want: Vec<&[u8]> = run
                                .entries
                                .iter()
                                .map(|(k, _)| &**k)
                                .filter(|k| within(k, &lo, &hi))
                                .collect();
                            assert_eq!(got, want, "len {len}, {lo:?}..{hi:?}");
                        }
                    }
                }
            }
        }
    }

    /// One test write: how (`"new"` for `put_new`, anything else for `put`), key, and value (none: a delete).
    type Op<'a> = (&'a str, &'a [u8], Option<&'a [u8]>);

    fn batch(ops: &[Op]) -> WriteBatch {
        let mut b = WriteBatch::default();
        for (how, key, value) in ops {
            match (*how, value) {
                ("new", Some(v)) => b.put_new(Keyspace::Sp, key.to_vec(), v.to_vec()),
                (_, Some(v)) => b.put(Keyspace::Sp, key.to_vec(), v.to_vec()),
                (_, None) => b.delete(Keyspace::Sp, key.to_vec()),
            }
        }
        b
    }

    /// A key first written by `put_new` and deleted later in the same layer
    /// leaves nothing there: no delete for each scan over it to walk, none
    /// for the checkpoint to write. A key written by `put` keeps its delete,
    /// which hides what the store below may hold.
    #[test]
    fn a_new_key_deleted_in_the_same_layer_leaves_no_delete() {
        let mut layer = Pending::default();
        // In one batch.
        layer.apply(&batch(&[("new", b"a", Some(b"1")), ("put", b"a", None)]));
        assert_eq!(layer.get(Keyspace::Sp, b"a"), None);
        // Across batches, so across a merge of runs; a new key written again
        // stays new.
        layer.apply(&batch(&[("new", b"b", Some(b"1")), ("put", b"c", Some(b"1")), ("new", b"d", Some(b"1"))]));
        layer.apply(&batch(&[("put", b"d", Some(b"2"))]));
        layer.apply(&batch(&[("put", b"b", None), ("put", b"c", None), ("put", b"d", None)]));
        for key in [&b"b"[..], b"d"] {
            assert_eq!(layer.get(Keyspace::Sp, key), None, "{key:?}");
        }
        assert_eq!(layer.get(Keyspace::Sp, b"c"), Some(None));
        let left: Vec<Entry> = layer.entries(Keyspace::Sp).collect();
        assert_eq!(left, vec![(Bytes::from(&b"c"[..]), None)]);
        assert_eq!(layer.runs[Keyspace::Sp.index()].len(), 1, "the runs merged");
    }

    /// Keys from a small alphabet with zero bytes, of every length up to
    /// twenty, under a long shared prefix or none: runs whose keys differ
    /// only past their head's 8 bytes, keys that are prefixes of others, and
    /// sought keys shorter than, inside and beyond the run's shared prefix.
    fn key() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        (any::<bool>(), proptest::collection::vec(prop::sample::select(vec![0u8, 1, 7, 255]), 0..20)).prop_map(
            |(shared, tail)| {
                let mut k = if shared { b"tenant\0Person:k".to_vec() } else { Vec::new() };
                k.extend(tail);
                k
            },
        )
    }

    proptest::proptest! {
        /// A run's searches by heads agree with a search of its whole keys,
        /// and a point read finds exactly the keys the run holds.
        #[test]
        fn searches_by_head_agree_with_whole_keys(
            keys in proptest::collection::btree_set(key(), 0..60),
            probes in proptest::collection::vec(key(), 1..40),
        ) {
            let entries: Vec<Entry> =
                keys.iter().map(|k| (Bytes::from(k.as_slice()), Some(Bytes::from(&k[..])))).collect();
            let run = Arc::new(SortedRun::new(entries));
            let mut layer = Pending::default();
            layer.runs[Keyspace::Sp.index()].push(Arc::clone(&run));
            for p in probes.iter().chain(keys.iter()) {
                let less = keys.iter().filter(|k| *k < p).count();
                let not_greater = keys.iter().filter(|k| *k <= p).count();
                proptest::prop_assert_eq!(run.position(p, false), less, "{:?} < {:?}", keys, p);
                proptest::prop_assert_eq!(run.position(p, true), not_greater, "{:?} <= {:?}", keys, p);
                let want = keys.contains(p).then_some(Some(p.as_slice()));
                proptest::prop_assert_eq!(layer.get(Keyspace::Sp, p), want);
            }
        }
    }
}
