//! The redb store's journal: every batch applied since the last durable redb
//! commit, in order, so that a durable write costs one sequential append and
//! one `fdatasync` instead of a redb durable commit. Two files,
//! `DIR/tempora.journal` and `DIR/tempora.journal.2`: batches go to one while
//! a checkpoint writes the batches of the other to redb.
//!
//! A redb durable commit writes every page the commits since the previous
//! one changed, scattered over the file, then the header, and holds redb's
//! write lock all the while, so the writer cannot apply the next group
//! during it. Appending the batch here and syncing this file is what sled's
//! log did: sequential, and it runs while the writer goes on. From time to
//! time (`RedbKv`'s checkpoint) the batches are committed durably in redb and
//! their journal starts over.
//!
//! Starting over writes the file again from its start, over the old records,
//! rather than truncating it: an append that grows a file makes each
//! `fdatasync` commit the file system's own journal too (the new size and
//! blocks), and a truncation frees blocks the next commit must process.
//! Over blocks already written, a sync writes the data alone: measured on
//! this machine's ext4, while another file took 100 MB of random writes and
//! their sync, a record's sync took half the median time and a third of the
//! 99th percentile time. What is left of the old records past the new ones is
//! never read back: the run read at open stops at the first record that does
//! not carry the next number, and the old ones carry lower numbers. Opening
//! a store truncates both files after replaying them (`truncate`), so the
//! records left over always belong to the store's batches since that open.
//!
//! Record: `len: u32 LE | check: 8 bytes | body`, where `check` is the
//! start of the BLAKE3 hash of `body` and `body` is `seq: u64 LE`, then per
//! mutation `keyspace: u8 | key_len: u32 LE | key | 0` (delete) or
//! `... | 1 | value_len: u32 LE | value` (put). `seq` numbers batches
//! without gaps; the store keeps the `seq` of its last batch in the same
//! commit as the batch, so after a crash the records past it are replayed.

use super::{Keyspace, WriteBatch};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The journal's two files; the first is the one stores made before the
/// second existed.
pub const FILE_NAMES: [&str; 2] = ["tempora.journal", "tempora.journal.2"];

const HEADER: usize = 4 + 8;

pub struct Journal {
    file: File,
    /// Bytes appended since the journal last started over: where the next
    /// record goes.
    bytes: u64,
    /// Records appended since the file was opened, for its [`SyncHandle`].
    appended: Arc<AtomicU64>,
    /// Whether the file may hold bytes: anything appended since it was last
    /// truncated, or found in it at open.
    nonempty: bool,
}

/// A second handle on a journal file, to `fdatasync` it without holding the
/// writer's lock (appends go on meanwhile).
pub struct SyncHandle {
    file: File,
    appended: Arc<AtomicU64>,
    /// How many of the appended records the last sync covered.
    synced: AtomicU64,
}

impl SyncHandle {
    /// Returns once every record appended before the call is on stable
    /// storage, and whether that took an `fdatasync`: a file with nothing
    /// appended since its last sync is not synced again (a sync can cost a
    /// flush of the drive's cache even with nothing to write).
    pub fn sync(&self) -> std::io::Result<bool> {
        // Read before syncing: every append counted here had finished its
        // write, so the sync covers it.
        let appended = self.appended.load(Ordering::Acquire);
        if appended == self.synced.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.file.sync_data()?;
        self.synced.fetch_max(appended, Ordering::AcqRel);
        Ok(true)
    }
}

/// A batch read back from the journal.
#[derive(Debug)]
pub struct Record {
    pub seq: u64,
    pub batch: WriteBatch,
}

impl Journal {
    /// Opens (creating if needed) the journal file `name` in `dir` and reads
    /// back its records: the run of whole, intact records with consecutive
    /// `seq` from the start of the file. What follows the run is a record cut
    /// short by a crash, or bytes of an earlier run left behind when the
    /// journal started over; either way, never a write that was acknowledged.
    /// The next record goes right after the run.
    pub fn open(dir: &Path, name: &str) -> std::io::Result<(Journal, Vec<Record>)> {
        let path = dir.join(name);
        let created = !path.exists();
        // Never truncated: the records already in the file are what `open` replays.
        let mut file = File::options().read(true).write(true).create(true).truncate(false).open(&path)?;
        if created {
            File::open(dir)?.sync_all()?;
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let (records, run) = decode(&bytes);
        let nonempty = !bytes.is_empty();
        Ok((Journal { file, bytes: run as u64, appended: Arc::default(), nonempty }, records))
    }

    /// Appends the batch numbered `seq`. It is durable after a sync through
    /// [`Journal::sync_handle`].
    pub fn append(&mut self, seq: u64, batch: &WriteBatch) -> std::io::Result<()> {
        let record = encode(seq, batch);
        self.file.write_all_at(&record, self.bytes)?;
        self.bytes += record.len() as u64;
        self.nonempty = true;
        self.appended.fetch_add(1, Ordering::Release);
        Ok(())
    }

    pub fn sync_handle(&self) -> std::io::Result<SyncHandle> {
        let file = self.file.try_clone()?;
        let synced = AtomicU64::new(self.appended.load(Ordering::Acquire));
        Ok(SyncHandle { file, appended: Arc::clone(&self.appended), synced })
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Starts the journal over, once everything in it is durable elsewhere:
    /// the next record is written at the start of the file, over the old
    /// ones, which stay until overwritten (see the module comment).
    pub fn start_over(&mut self) {
        self.bytes = 0;
    }

    /// Starts the journal over and empties its file, once everything in it
    /// is durable elsewhere: when a store opens, after the replay, and when
    /// it closes cleanly. Not synced: until the next sync a crash may leave
    /// the old records, which a reopen skips (the store already holds them).
    pub fn truncate(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.bytes = 0;
        self.nonempty = false;
        Ok(())
    }

    /// Whether the file may hold bytes, live records or old ones.
    pub fn nonempty(&self) -> bool {
        self.nonempty
    }
}

fn encode(seq: u64, batch: &WriteBatch) -> Vec<u8> {
    let size: usize =
        batch.ops.iter().map(|(_, k, v)| 1 + 4 + k.len() + 1 + v.as_ref().map_or(0, |v| 4 + v.len())).sum();
    let mut out = Vec::with_capacity(HEADER + 8 + size);
    out.extend_from_slice(&[0; HEADER]);
    out.extend_from_slice(&seq.to_le_bytes());
    for (ks, key, value) in &batch.ops {
        out.push(ks.index() as u8);
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
        match value {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                out.extend_from_slice(v);
            }
        }
    }
    let body_len = (out.len() - HEADER) as u32;
    let check = blake3::hash(&out[HEADER..]);
    out[..4].copy_from_slice(&body_len.to_le_bytes());
    out[4..HEADER].copy_from_slice(&check.as_bytes()[..8]);
    out
}

/// The run of records at the start of `bytes`, and its length in bytes.
fn decode(mut bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records: Vec<Record> = Vec::new();
    let mut run = 0;
    while bytes.len() >= HEADER {
        let len = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
        let Some(body) = bytes.get(HEADER..HEADER + len) else { break };
        if blake3::hash(body).as_bytes()[..8] != bytes[4..HEADER] {
            break;
        }
        let Some(record) = decode_body(body) else { break };
        if records.last().is_some_and(|last| record.seq != last.seq + 1) {
            break;
        }
        records.push(record);
        bytes = &bytes[HEADER + len..];
        run += HEADER + len;
    }
    (records, run)
}

fn decode_body(body: &[u8]) -> Option<Record> {
    let mut r = Reader(body);
    let seq = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
    let mut batch = WriteBatch::default();
    while !r.0.is_empty() {
        let ks = *Keyspace::ALL.get(r.take(1)?[0] as usize)?;
        let key = r.sized()?.to_vec();
        match r.take(1)?[0] {
            0 => batch.delete(ks, key),
            1 => batch.put(ks, key, r.sized()?.to_vec()),
            _ => return None,
        }
    }
    Some(Record { seq, batch })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn sized(&mut self) -> Option<&'a [u8]> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(i: u8) -> WriteBatch {
        let mut b = WriteBatch::default();
        b.put(Keyspace::Versions, vec![i, 1], vec![i; 300]);
        b.delete(Keyspace::Sp, vec![i, 2]);
        b.put(Keyspace::Aux, vec![], vec![]);
        b
    }

    fn seqs(records: &[Record]) -> Vec<u64> {
        records.iter().map(|r| r.seq).collect()
    }

    #[test]
    fn records_read_back_as_written_up_to_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, none) = Journal::open(dir.path(), FILE_NAMES[0]).unwrap();
        assert!(none.is_empty());
        for i in 1..=3 {
            j.append(i as u64, &batch(i)).unwrap();
        }
        let whole = std::fs::read(dir.path().join(FILE_NAMES[0])).unwrap();
        drop(j);
        let (_, back) = Journal::open(dir.path(), FILE_NAMES[0]).unwrap();
        assert_eq!(seqs(&back), [1, 2, 3]);
        assert_eq!(format!("{:?}", back[1].batch), format!("{:?}", batch(2)));
        // Every cut inside the last record loses that record only.
        let last_start = whole.len() - encode(3, &batch(3)).len();
        for cut in [last_start + 1, last_start + HEADER, whole.len() - 1] {
            std::fs::write(dir.path().join(FILE_NAMES[0]), &whole[..cut]).unwrap();
            let (_, back) = Journal::open(dir.path(), FILE_NAMES[0]).unwrap();
            assert_eq!(seqs(&back), [1, 2], "cut at {cut}");
        }
        // A flipped bit in the middle record ends the run there.
        let mut flipped = whole.clone();
        flipped[last_start - 10] ^= 0x40;
        std::fs::write(dir.path().join(FILE_NAMES[0]), &flipped).unwrap();
        assert_eq!(seqs(&Journal::open(dir.path(), FILE_NAMES[0]).unwrap().1), [1]);
    }

    #[test]
    fn stale_records_after_a_fresh_start_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path(), FILE_NAMES[0]).unwrap();
        for i in 1..=4 {
            j.append(i as u64, &batch(i)).unwrap();
        }
        let old = std::fs::read(dir.path().join(FILE_NAMES[0])).unwrap();
        // The journal started over and got two records, but the truncation
        // did not reach the disk: the new records lie over the old ones.
        let mut new = encode(9, &batch(9));
        new.extend(encode(10, &batch(10)));
        let mut on_disk = new.clone();
        on_disk.extend_from_slice(&old[new.len().min(old.len())..]);
        std::fs::write(dir.path().join(FILE_NAMES[0]), &on_disk).unwrap();
        assert_eq!(seqs(&Journal::open(dir.path(), FILE_NAMES[0]).unwrap().1), [9, 10]);
        // And a journal started over holds nothing.
        let (mut j, _) = Journal::open(dir.path(), FILE_NAMES[0]).unwrap();
        j.start_over();
        assert_eq!(j.bytes(), 0);
        j.append(11, &batch(11)).unwrap();
        drop(j);
        assert_eq!(seqs(&Journal::open(dir.path(), FILE_NAMES[0]).unwrap().1), [11]);
    }

    #[test]
    fn a_journal_started_over_is_written_again_from_its_start_without_growing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAMES[0]);
        let (mut j, _) = Journal::open(dir.path(), FILE_NAMES[0]).unwrap();
        for i in 1..=4 {
            j.append(i as u64, &batch(i)).unwrap();
        }
        let full = std::fs::metadata(&path).unwrap().len();
        j.start_over();
        j.append(5, &batch(5)).unwrap();
        j.append(6, &batch(6)).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), full, "written over the old records");
        assert_eq!(j.bytes(), 2 * encode(5, &batch(5)).len() as u64);
        drop(j);
        // Reopened (after a crash, say): the new run alone, and the next
        // record goes right after it, over the old ones.
        let (mut j, back) = Journal::open(dir.path(), FILE_NAMES[0]).unwrap();
        assert_eq!(seqs(&back), [5, 6]);
        j.append(7, &batch(7)).unwrap();
        drop(j);
        let (mut j, back) = Journal::open(dir.path(), FILE_NAMES[0]).unwrap();
        assert_eq!(seqs(&back), [5, 6, 7]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), full);
        // Truncated, the file is empty.
        j.truncate().unwrap();
        assert_eq!((j.bytes(), std::fs::metadata(&path).unwrap().len()), (0, 0));
    }

    #[test]
    fn a_sync_handle_syncs_only_when_something_was_appended_since_its_last_sync() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path(), FILE_NAMES[0]).unwrap();
        let handle = j.sync_handle().unwrap();
        assert!(!handle.sync().unwrap(), "nothing appended yet");
        j.append(1, &batch(1)).unwrap();
        j.append(2, &batch(2)).unwrap();
        assert!(handle.sync().unwrap());
        assert!(!handle.sync().unwrap(), "both records were covered");
        j.start_over();
        j.append(3, &batch(3)).unwrap();
        assert!(handle.sync().unwrap(), "an append after starting over");
    }
}
