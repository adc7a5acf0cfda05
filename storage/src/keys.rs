//! Key layouts of every keyspace. `docs/storage.md` is the prose version of
//! this file; keep them in step.
//!
//! Tenants are interned to a `u32` (fixed width, so it never needs escaping)
//! and lead every tenant-scoped key, which makes every read a scan inside one
//! tenant's range: isolation by construction.

use crate::codec::{KeyBuf, KeyReader};
use crate::error::StorageError;
use crate::model::{FactId, Tx};
use serde_json::Value;
use uuid::Uuid;

pub type TenantId = u32;

// --- meta ---------------------------------------------------------------
pub mod meta {
    use super::*;
    /// `0x01` -> u32 format version.
    pub const FORMAT: &[u8] = &[0x01];
    /// `0x02` -> clock record: last tx and last recorded_at.
    pub const CLOCK: &[u8] = &[0x02];
    /// `0x09` -> u64, the stored facts format 4 rewrote: present once that
    /// rewrite is done (`migrations/m0004_fact_values.rs`).
    pub const FACTS_REWRITTEN: &[u8] = &[0x09];
    const TENANT_BY_NAME: u8 = 0x03;
    const TENANT_BY_ID: u8 = 0x04;
    const PREDICATE: u8 = 0x05;
    const THRESHOLD: u8 = 0x06;
    const STATS: u8 = 0x07;
    const SOURCE_STATS: u8 = 0x08;
    const SUPERSEDED_UNTIL: u8 = 0x0A;

    pub fn tenant_by_name(name: &str) -> Vec<u8> {
        KeyBuf::new().raw(&[TENANT_BY_NAME]).str(name).finish()
    }
    pub fn tenant_by_name_prefix() -> Vec<u8> {
        vec![TENANT_BY_NAME]
    }
    pub fn tenant_by_id(id: TenantId) -> Vec<u8> {
        KeyBuf::new().raw(&[TENANT_BY_ID]).u32(id).finish()
    }
    pub fn predicate(t: TenantId, name: &str) -> Vec<u8> {
        KeyBuf::new().raw(&[PREDICATE]).u32(t).str(name).finish()
    }
    pub fn predicate_prefix(t: TenantId) -> Vec<u8> {
        KeyBuf::new().raw(&[PREDICATE]).u32(t).finish()
    }
    pub fn threshold(t: TenantId) -> Vec<u8> {
        KeyBuf::new().raw(&[THRESHOLD]).u32(t).finish()
    }
    pub fn threshold_prefix() -> Vec<u8> {
        vec![THRESHOLD]
    }
    pub fn stats(t: TenantId) -> Vec<u8> {
        KeyBuf::new().raw(&[STATS]).u32(t).finish()
    }
    pub fn stats_prefix() -> Vec<u8> {
        vec![STATS]
    }
    /// `0x08` | tenant | source -> `SourceStats` of the facts with that source.
    pub fn source_stats(t: TenantId, source: &str) -> Vec<u8> {
        KeyBuf::new().raw(&[SOURCE_STATS]).u32(t).str(source).finish()
    }
    /// `0x0A` | tenant -> `i64`, no earlier than the `valid_until` of every
    /// superseded fact the tenant has ever had (`i64::MIN`: none yet). A
    /// current read at a valid time past it skips `idx_closed` (format 5).
    pub fn superseded_until(t: TenantId) -> Vec<u8> {
        KeyBuf::new().raw(&[SUPERSEDED_UNTIL]).u32(t).finish()
    }
    pub fn superseded_until_prefix() -> Vec<u8> {
        vec![SUPERSEDED_UNTIL]
    }
    /// The tenant id in a `threshold`, `stats`, `source_stats` or
    /// `superseded_until` key.
    pub fn tenant_of(key: &[u8]) -> Result<TenantId, StorageError> {
        let mut r = KeyReader::new(after_tag(key)?);
        r.u32().map_err(corrupt)
    }
    pub fn tenant_name_of(key: &[u8]) -> Result<String, StorageError> {
        KeyReader::new(after_tag(key)?).string().map_err(corrupt)
    }
    /// The key after its one-byte tag; an empty key is corrupt, not a panic.
    fn after_tag(key: &[u8]) -> Result<&[u8], StorageError> {
        key.get(1..).ok_or_else(|| StorageError::Corrupt("empty meta key".into()))
    }
}

// --- aux: idempotency replies ------------------------------------------------
/// `I` | tenant name | the caller's key: a stored reply.
pub fn idempotency(tenant: &str, key: &[u8]) -> Vec<u8> {
    KeyBuf::new().raw(b"I").str(tenant).bytes(key).finish()
}

// --- versions: fact_id | tx -> fact (see fact_record) ------------------------
pub fn version(id: FactId, tx: Tx) -> Vec<u8> {
    KeyBuf::new().raw(id.as_bytes()).u64(tx).finish()
}
/// The tx of a `versions` key.
pub fn decode_version_tx(key: &[u8]) -> Result<Tx, StorageError> {
    let mut r = KeyReader::new(key.get(16..).ok_or_else(|| StorageError::Corrupt("short versions key".into()))?);
    r.u64().map_err(corrupt)
}
/// The fact id of a `versions` key.
pub fn decode_version_id(key: &[u8]) -> Result<FactId, StorageError> {
    let id = key.get(..16).ok_or_else(|| StorageError::Corrupt("short versions key".into()))?;
    Ok(Uuid::from_bytes(id.try_into().expect("16 bytes")))
}
pub fn version_prefix(id: FactId) -> Vec<u8> {
    id.as_bytes().to_vec()
}

// --- idx_sp / idx_closed: tenant | subject | predicate | fact_id -> fact (see fact_record)
pub fn sp(t: TenantId, subject: &str, predicate: &str, id: FactId) -> Vec<u8> {
    KeyBuf::new().u32(t).str(subject).str(predicate).raw(id.as_bytes()).finish()
}
/// (tenant, subject, predicate, id) from an `idx_sp` or `idx_closed` key.
pub fn decode_sp(key: &[u8]) -> Result<(TenantId, String, String, FactId), StorageError> {
    let mut r = KeyReader::new(key);
    let t = r.u32().map_err(corrupt)?;
    let s = r.string().map_err(corrupt)?;
    let p = r.string().map_err(corrupt)?;
    let id = Uuid::from_bytes(r.raw16().map_err(corrupt)?);
    Ok((t, s, p, id))
}
pub fn sp_prefix(t: TenantId, subject: Option<&str>, predicate: Option<&str>) -> Vec<u8> {
    let mut k = KeyBuf::new().u32(t);
    if let Some(s) = subject {
        k = k.str(s);
        if let Some(p) = predicate {
            k = k.str(p);
        }
    }
    k.finish()
}

// --- idx_valid: tenant | subject | predicate | valid_until | fact_id -> () ----
pub fn valid(t: TenantId, subject: &str, predicate: &str, valid_until: i64, id: FactId) -> Vec<u8> {
    KeyBuf::new().u32(t).str(subject).str(predicate).i64(valid_until).raw(id.as_bytes()).finish()
}
/// The first `idx_valid` key of (subject, predicate) whose `valid_until` is
/// after `t`.
pub fn valid_after(t: TenantId, subject: &str, predicate: &str, after: i64) -> Vec<u8> {
    KeyBuf::new().u32(t).str(subject).str(predicate).i64(after.saturating_add(1)).finish()
}
pub fn decode_valid_id(key: &[u8]) -> Result<FactId, StorageError> {
    let tail = key.len().checked_sub(16).ok_or_else(|| StorageError::Corrupt("short idx_valid key".into()))?;
    Ok(Uuid::from_bytes(key[tail..].try_into().expect("16 bytes")))
}

// --- idx_ps: tenant | predicate | subject -> () ---------------------------------
// One key per (predicate, subject) pair that has ever had a fact (format 6):
// a by-predicate read takes the pairs from here and the facts from the
// pair's `idx_sp` (and `idx_closed`) range. Up to format 5 the key went on
// with the fact id, one key per fact; a store upgraded from those keeps its
// keys, which sort right after their pair's and read the same
// (`decode_ps`).
pub fn ps(t: TenantId, predicate: &str, subject: &str) -> Vec<u8> {
    KeyBuf::new().u32(t).str(predicate).str(subject).finish()
}
pub fn ps_prefix(t: TenantId, predicate: &str) -> Vec<u8> {
    KeyBuf::new().u32(t).str(predicate).finish()
}
/// Where a by-predicate page ended: the pair and the last fact id returned,
/// laid out as a format-5 key, so that cursors handed out before an upgrade
/// still resume.
pub fn ps_cursor(t: TenantId, predicate: &str, subject: &str, id: FactId) -> Vec<u8> {
    KeyBuf::new().u32(t).str(predicate).str(subject).raw(id.as_bytes()).finish()
}
/// (subject, predicate, fact id) from an `idx_ps` key or a cursor: the id
/// only in a format-5 key or a cursor.
pub fn decode_ps(key: &[u8]) -> Result<(String, String, Option<FactId>), StorageError> {
    let mut r = KeyReader::new(key);
    r.u32().map_err(corrupt)?;
    let p = r.string().map_err(corrupt)?;
    let s = r.string().map_err(corrupt)?;
    let id = if r.is_empty() { None } else { Some(Uuid::from_bytes(r.raw16().map_err(corrupt)?)) };
    if !r.is_empty() {
        return Err(StorageError::Corrupt("idx_ps key runs on past its fact id".into()));
    }
    Ok((s, p, id))
}

// --- idx_os: tenant | object | predicate | subject | fact_id -> () --------------
/// Objects longer than this are indexed by a hash of their canonical JSON.
pub const MAX_INLINE_OBJECT: usize = 128;

/// The index form of an object: `v` + canonical JSON when short, else
/// `h` + BLAKE3 of it. Equality of this form is necessary, not sufficient:
/// readers compare the stored object too.
pub fn object_key(object: &Value) -> Vec<u8> {
    // serde_json's Map is ordered by key, so this serialization is canonical.
    let json = serde_json::to_string(object).expect("a JSON value serializes");
    if json.len() <= MAX_INLINE_OBJECT {
        let mut out = Vec::with_capacity(json.len() + 1);
        out.push(b'v');
        out.extend_from_slice(json.as_bytes());
        out
    } else {
        let mut out = Vec::with_capacity(33);
        out.push(b'h');
        out.extend_from_slice(blake3::hash(json.as_bytes()).as_bytes());
        out
    }
}
pub fn os(t: TenantId, object: &Value, predicate: &str, subject: &str, id: FactId) -> Vec<u8> {
    KeyBuf::new()
        .u32(t)
        .bytes(&object_key(object))
        .str(predicate)
        .str(subject)
        .raw(id.as_bytes())
        .finish()
}
pub fn os_prefix(t: TenantId, object: &Value, predicate: Option<&str>) -> Vec<u8> {
    let k = KeyBuf::new().u32(t).bytes(&object_key(object));
    match predicate {
        Some(p) => k.str(p).finish(),
        None => k.finish(),
    }
}
/// (subject, predicate, id) from an `idx_os` key.
pub fn decode_os(key: &[u8]) -> Result<(String, String, FactId), StorageError> {
    let mut r = KeyReader::new(key);
    r.u32().map_err(corrupt)?;
    r.bytes().map_err(corrupt)?;
    let p = r.string().map_err(corrupt)?;
    let s = r.string().map_err(corrupt)?;
    let id = Uuid::from_bytes(r.raw16().map_err(corrupt)?);
    Ok((s, p, id))
}

// --- idx_spo: tenant | subject | predicate | object | fact_id -> () -----------
// One key per live fact, that is per `idx_sp` key (format 8): an assert
// under `many` finds the live facts of its own value with one prefix read,
// however many values the pair holds or how often this one was asserted.
// The object is in its `idx_os` form, so a long one is a hash: the reader
// compares the stored object.
pub fn spo(t: TenantId, subject: &str, predicate: &str, object: &Value, id: FactId) -> Vec<u8> {
    KeyBuf::new()
        .u32(t)
        .str(subject)
        .str(predicate)
        .bytes(&object_key(object))
        .raw(id.as_bytes())
        .finish()
}
/// The `idx_spo` keys of one value of (subject, predicate): the object is
/// terminated, so the prefix holds exactly those.
pub fn spo_prefix(t: TenantId, subject: &str, predicate: &str, object: &Value) -> Vec<u8> {
    KeyBuf::new().u32(t).str(subject).str(predicate).bytes(&object_key(object)).finish()
}
/// (tenant, subject, predicate, fact id) from an `idx_spo` key: the
/// `idx_sp` key of the same fact is `sp` of them.
pub fn decode_spo(key: &[u8]) -> Result<(TenantId, String, String, FactId), StorageError> {
    let mut r = KeyReader::new(key);
    let t = r.u32().map_err(corrupt)?;
    let s = r.string().map_err(corrupt)?;
    let p = r.string().map_err(corrupt)?;
    r.bytes().map_err(corrupt)?;
    let id = Uuid::from_bytes(r.raw16().map_err(corrupt)?);
    if !r.is_empty() {
        return Err(StorageError::Corrupt("idx_spo key runs on past its fact id".into()));
    }
    Ok((t, s, p, id))
}

// --- log: tenant | tx -> LogEntry ------------------------------------------
pub fn log(t: TenantId, tx: Tx) -> Vec<u8> {
    KeyBuf::new().u32(t).u64(tx).finish()
}
pub fn decode_log_tx(key: &[u8]) -> Result<Tx, StorageError> {
    let mut r = KeyReader::new(key);
    r.u32().map_err(corrupt)?;
    r.u64().map_err(corrupt)
}

fn corrupt(e: crate::codec::KeyDecodeError) -> StorageError {
    StorageError::Corrupt(e.to_string())
}

/// The tenant id leading any tenant-scoped index key.
pub fn tenant_of_index_key(key: &[u8]) -> Result<TenantId, StorageError> {
    KeyReader::new(key).u32().map_err(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_meta_key_is_corrupt_not_a_panic() {
        assert!(matches!(meta::tenant_of(&[]), Err(StorageError::Corrupt(_))));
        assert!(matches!(meta::tenant_name_of(&[]), Err(StorageError::Corrupt(_))));
        assert_eq!(meta::tenant_of(&meta::stats(7)).unwrap(), 7);
        assert_eq!(meta::tenant_name_of(&meta::tenant_by_name("acme")).unwrap(), "acme");
    }
}
