//! Online backup and restore of a whole store.
//!
//! A backup is every record of every keyspace as the store stood at one
//! moment: the write gate is held only while the capture opens (the writer
//! finishes the commit group it is applying first), then writes and reads go
//! on while the backup is written, and [`crate::kv::CapturingKv`] keeps the
//! old values of what they change ahead of the scan. So a backup is one
//! consistent state, at a commit-group boundary, of all tenants. The search
//! index is not in it: a restored server rebuilds it from the change log.
//!
//! The file is a stream, so it can be sent over HTTP as it is made:
//!
//! ```text
//! header   "TEMPORA-BACKUP\0\0" | u32 file version (1) | u32 store format
//!          | u64 last tx | i64 its record time (ms) | i64 made at (ms)
//! records  u8 keyspace (0..=9, `Keyspace::ALL` order) | u32 key length | key
//!          | u32 value length | value                     (repeated)
//! trailer  u8 0xFF | u64 record count | 32-byte BLAKE3 of every byte before it
//! ```
//!
//! All integers are big-endian. A restore writes into a fresh directory
//! beside the target and moves it into place only once the trailer checks
//! out, so a truncated or damaged file never leaves a half-restored store.

use crate::error::{EngineError, Result, StorageError};
use crate::config::{Backend, EngineConfig};
use crate::kv::{CapturingKv, Keyspace, OrderedKv, WriteBatch};
use crate::model::{Millis, Tx};
use crate::record::{self, Clock};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 16] = b"TEMPORA-BACKUP\0\0";
const FILE_VERSION: u32 = 1;
const END: u8 = 0xFF;
/// Records per batch while restoring.
const RESTORE_BATCH: usize = 4096;
/// Page cache of the store while it is restored into.
const RESTORE_CACHE: u64 = 64 << 20;
/// Bytes of records restored before the store is synced, closed and opened
/// again. It was for sled, which restores wrote before redb (redb needs no
/// reopening, and it costs redb nothing): sled frees each node it replaces
/// only once its epoch is collected, and with one thread inserting flat out
/// the replaced copies pile up far faster than they are collected, whatever
/// the cache size: restoring a 500 MB backup (1M facts) in one go held 10 GB
/// of memory. Closing the store frees them; reopening every 4 MiB holds 430
/// MB and takes 99 s instead of 115 (docs/operations.md, "Cost").
const RESTORE_REOPEN_BYTES: usize = 4 << 20;

/// What a backup holds, from its header and trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupSummary {
    /// The store format of the records.
    pub format: u32,
    pub last_tx: Tx,
    pub last_recorded_at: Millis,
    /// When the backup was made (unix ms).
    pub made_at: Millis,
    pub records: u64,
    /// Bytes of the whole file.
    pub bytes: u64,
}

/// A writer that hashes and counts what goes through it.
struct Hashing<W> {
    inner: W,
    hash: blake3::Hasher,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes a backup of `kv` to `out`: the store as it stood when `gate`, the
/// lock every write batch is applied under, was taken, for an instant, at
/// the start.
pub(crate) fn write(
    kv: &CapturingKv,
    gate: &parking_lot::Mutex<()>,
    format: u32,
    out: &mut dyn Write,
) -> Result<BackupSummary> {
    /// Closes the capture however the backup ends.
    struct Open<'a>(&'a CapturingKv);
    impl Drop for Open<'_> {
        fn drop(&mut self) {
            let held = self.0.close_capture();
            tracing::debug!(held_bytes = held, "backup capture closed");
        }
    }
    let _open;
    let clock: Clock = {
        let _writes_wait = gate.lock();
        if !kv.open_capture() {
            return Err(EngineError::Conflict("a backup is already running; try again when it has finished".into()));
        }
        _open = Open(kv);
        match kv.get(Keyspace::Meta, crate::keys::meta::CLOCK)? {
            Some(bytes) => record::decode(&bytes)?,
            None => Clock::default(),
        }
    };
    let made_at = crate::write::wall_clock();
    let mut w =
        Hashing { inner: std::io::BufWriter::with_capacity(256 << 10, out), hash: blake3::Hasher::new(), bytes: 0 };
    let io = |e: std::io::Error| EngineError::Storage(StorageError::Io(e));
    w.write_all(MAGIC).map_err(io)?;
    w.write_all(&FILE_VERSION.to_be_bytes()).map_err(io)?;
    w.write_all(&format.to_be_bytes()).map_err(io)?;
    w.write_all(&clock.last_tx.to_be_bytes()).map_err(io)?;
    w.write_all(&clock.last_recorded_at.to_be_bytes()).map_err(io)?;
    w.write_all(&made_at.to_be_bytes()).map_err(io)?;
    let mut records = 0u64;
    for ks in Keyspace::ALL {
        for item in kv.captured_scan(ks) {
            let (k, v) = item?;
            w.write_all(&[ks.index() as u8]).map_err(io)?;
            w.write_all(&(k.len() as u32).to_be_bytes()).map_err(io)?;
            w.write_all(&k).map_err(io)?;
            w.write_all(&(v.len() as u32).to_be_bytes()).map_err(io)?;
            w.write_all(&v).map_err(io)?;
            records += 1;
        }
    }
    w.write_all(&[END]).map_err(io)?;
    w.write_all(&records.to_be_bytes()).map_err(io)?;
    let digest = *w.hash.finalize().as_bytes();
    w.inner.write_all(&digest).map_err(io)?;
    w.inner.flush().map_err(io)?;
    Ok(BackupSummary {
        format,
        last_tx: clock.last_tx,
        last_recorded_at: clock.last_recorded_at,
        made_at,
        records,
        bytes: w.bytes + digest.len() as u64,
    })
}

/// A reader that hashes and counts what comes through it.
struct Hashed<R> {
    inner: R,
    hash: blake3::Hasher,
    bytes: u64,
}

impl<R: Read> Hashed<R> {
    fn exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => corrupt("the file ends before its trailer (truncated?)"),
            _ => EngineError::Storage(StorageError::Io(e)),
        })?;
        self.hash.update(buf);
        self.bytes += buf.len() as u64;
        Ok(())
    }
    fn u8(&mut self) -> Result<u8> {
        let mut b = [0u8; 1];
        self.exact(&mut b)?;
        Ok(b[0])
    }
    fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.exact(&mut b)?;
        Ok(u32::from_be_bytes(b))
    }
    fn u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        self.exact(&mut b)?;
        Ok(u64::from_be_bytes(b))
    }
    /// A length-prefixed field, refusing lengths no record can have (so a
    /// damaged length cannot make us allocate gigabytes).
    fn field(&mut self, what: &str) -> Result<Vec<u8>> {
        let n = self.u32()? as usize;
        if n > MAX_FIELD {
            return Err(corrupt(&format!("a {what} of {n} bytes is longer than any record")));
        }
        let mut v = vec![0u8; n];
        self.exact(&mut v)?;
        Ok(v)
    }
}

/// Longest key or value a store holds (values are at most a few hundred KiB;
/// this leaves room and still stops a damaged length early).
const MAX_FIELD: usize = 64 << 20;

/// Every way a file can fail its checks once it has the right magic says
/// "damaged", whichever byte was hit: a flipped bit in a length reads as a
/// truncation, in a keyspace tag as an unknown keyspace, in a value only as a
/// checksum mismatch.
fn corrupt(msg: &str) -> EngineError {
    EngineError::Storage(StorageError::Corrupt(format!("the backup file is damaged: {msg}")))
}

fn not_a_backup(msg: &str) -> EngineError {
    EngineError::Storage(StorageError::Corrupt(format!("not a tempora backup ({msg})")))
}

/// Reads a backup from `input`, handing each record to `sink`, and checks
/// the trailer. `sink` may have been given records of a file that then turns
/// out to be damaged: callers write into a scratch place first.
fn read(input: &mut dyn Read, mut sink: impl FnMut(Keyspace, Vec<u8>, Vec<u8>) -> Result<()>) -> Result<BackupSummary> {
    let mut r =
        Hashed { inner: std::io::BufReader::with_capacity(256 << 10, input), hash: blake3::Hasher::new(), bytes: 0 };
    let mut magic = [0u8; 16];
    r.exact(&mut magic).map_err(|_| not_a_backup("too short"))?;
    if &magic != MAGIC {
        return Err(not_a_backup("wrong magic bytes"));
    }
    let version = r.u32()?;
    if version != FILE_VERSION {
        return Err(EngineError::Invalid(format!(
            "backup file version {version} is not one this build reads (it reads version {FILE_VERSION})"
        )));
    }
    let format = r.u32()?;
    if format > crate::migrate::CURRENT_FORMAT {
        return Err(EngineError::FormatTooNew(format!(
            "the backup holds store format {format}, newer than this build's {}; restore it with a newer tempora",
            crate::migrate::CURRENT_FORMAT
        )));
    }
    let last_tx = r.u64()?;
    let last_recorded_at = r.u64()? as Millis;
    let made_at = r.u64()? as Millis;
    let mut records = 0u64;
    loop {
        let tag = r.u8()?;
        if tag == END {
            break;
        }
        let ks = *Keyspace::ALL.get(tag as usize).ok_or_else(|| corrupt(&format!("unknown keyspace {tag}")))?;
        let key = r.field("key")?;
        let value = r.field("value")?;
        sink(ks, key, value)?;
        records += 1;
    }
    let count = r.u64()?;
    let digest = *r.hash.finalize().as_bytes();
    let mut stored = [0u8; 32];
    r.inner.read_exact(&mut stored).map_err(|_| corrupt("the file ends inside its checksum (truncated?)"))?;
    if count != records {
        return Err(corrupt(&format!("the trailer counts {count} records, the file holds {records}")));
    }
    if stored != digest {
        return Err(corrupt("checksum mismatch"));
    }
    let mut rest = [0u8; 1];
    if r.inner.read(&mut rest).map_err(StorageError::from)? != 0 {
        return Err(corrupt("bytes after the trailer"));
    }
    Ok(BackupSummary { format, last_tx, last_recorded_at, made_at, records, bytes: r.bytes + 32 })
}

/// Reads a whole backup and checks it, writing nothing.
pub fn verify(input: &mut dyn Read) -> Result<BackupSummary> {
    read(input, |_, _, _| Ok(()))
}

/// Restores a backup into `dir`, which must not exist or be empty, as a store
/// of the default backend (so a restore also moves a sled store to redb). The
/// records go into a scratch directory beside it that is moved into place
/// only once the whole file has checked out; on any error nothing is left.
/// The next open migrates an older store format forward as usual.
pub fn restore(input: &mut dyn Read, dir: &Path) -> Result<BackupSummary> {
    restore_reopening_every(input, dir, RESTORE_REOPEN_BYTES)
}

/// [`restore`], closing and reopening the store after every `bytes` of
/// records; tests use a small `bytes` to restore a small file in many pieces.
#[doc(hidden)]
pub fn restore_reopening_every(input: &mut dyn Read, dir: &Path, bytes: usize) -> Result<BackupSummary> {
    if let Ok(mut entries) = std::fs::read_dir(dir) {
        if entries.next().is_some() {
            return Err(EngineError::Invalid(format!(
                "{} is not empty: restore into a new directory (a restore never overwrites a store)",
                dir.display()
            )));
        }
    }
    let scratch = scratch_path(dir);
    if scratch.exists() {
        // Left by a restore that was interrupted: it never got into place.
        std::fs::remove_dir_all(&scratch).map_err(StorageError::from)?;
    }
    if let Some(parent) = scratch.parent() {
        std::fs::create_dir_all(parent).map_err(StorageError::from)?;
    }
    let config = EngineConfig::default().cache_bytes(RESTORE_CACHE);
    let result = (|| {
        let mut kv = Some(Backend::default().open(&scratch, &config)?);
        let mut batch = WriteBatch::default();
        let mut since_open = 0usize;
        let summary = read(input, |ks, k, v| {
            since_open += k.len() + v.len();
            batch.put(ks, k, v);
            if batch.len() >= RESTORE_BATCH || since_open >= bytes {
                let store = kv.as_ref().expect("the store is open between records");
                store.apply(std::mem::take(&mut batch))?;
                if since_open >= bytes {
                    store.sync()?;
                    kv = None; // closed before it is opened again: one handle holds the directory
                    kv = Some(Backend::default().open(&scratch, &config)?);
                    since_open = 0;
                }
            }
            Ok(())
        })?;
        let store = kv.as_ref().expect("the store is open after the last record");
        store.apply(batch)?;
        store.sync()?;
        Ok::<_, EngineError>(summary)
    })();
    match result {
        Ok(summary) => {
            if dir.exists() {
                std::fs::remove_dir(dir).map_err(StorageError::from)?;
            }
            std::fs::rename(&scratch, dir).map_err(StorageError::from)?;
            Ok(summary)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&scratch);
            Err(e)
        }
    }
}

fn scratch_path(dir: &Path) -> PathBuf {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "data".into());
    dir.with_file_name(format!(".{name}.restoring"))
}
