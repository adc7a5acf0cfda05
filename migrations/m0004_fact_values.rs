//! Format 4: stored facts without the fields their keys hold.
//!
//! From format 4 the values of `idx_sp` and `idx_closed` leave out the
//! tenant, subject, predicate and fact id (they are the key), those of
//! `versions` the fact id, and both store the status as one byte
//! (`storage/src/fact_record.rs`): about a third less in the two index
//! tables every read scans.
//!
//! The step itself only records format 4, so that older builds refuse the
//! store before any value changes shape. [`rewrite`] then converts the
//! values written before, in chunks of [`CHUNK`] entries, each chunk one
//! batch: a store of millions of facts never becomes one transaction held in
//! memory. Format 4 reads both shapes, so a crash part way loses nothing;
//! `meta` key `0x09` records that the rewrite is done, and until it is there
//! every open resumes it (entries already converted are skipped by their
//! first byte).

use crate::error::StorageError;
use crate::fact_record;
use crate::keys;
use crate::kv::{Keyspace, OrderedKv, WriteBatch};
use crate::model::Fact;
use crate::record;
use std::ops::Bound;

/// Index entries read and rewritten per batch.
pub const CHUNK: usize = 4096;

pub fn apply(_kv: &dyn OrderedKv, _batch: &mut WriteBatch) -> Result<(), StorageError> {
    Ok(())
}

/// Converts the values still holding whole facts, unless an earlier open
/// finished that. Returns how many it converted.
pub fn rewrite(kv: &dyn OrderedKv) -> Result<u64, StorageError> {
    if kv.get(Keyspace::Meta, keys::meta::FACTS_REWRITTEN)?.is_some() {
        return Ok(0);
    }
    let started = std::time::Instant::now();
    let (mut converted, mut chunks) = (0u64, 0u64);
    for ks in [Keyspace::Sp, Keyspace::Closed, Keyspace::Versions] {
        let mut from = Bound::Unbounded;
        loop {
            let mut batch = WriteBatch::default();
            let mut last = None;
            for item in kv.scan(ks, from.clone(), Bound::Unbounded, false).take(CHUNK) {
                let (k, v) = item?;
                if fact_record::is_whole_fact(&v) {
                    let fact: Fact = record::decode(&v)?;
                    let slim = match ks {
                        Keyspace::Versions => fact_record::encode_version(&fact),
                        _ => fact_record::encode_indexed(&fact),
                    };
                    batch.put(ks, k.clone(), slim);
                    converted += 1;
                }
                last = Some(k);
            }
            let Some(last) = last else { break };
            if !batch.ops.is_empty() {
                kv.apply(batch)?;
            }
            from = Bound::Excluded(last);
            chunks += 1;
            if chunks.is_multiple_of(64) {
                tracing::info!(converted, "format 4: rewriting stored facts");
            }
        }
    }
    let mut done = WriteBatch::default();
    done.put(Keyspace::Meta, keys::meta::FACTS_REWRITTEN.to_vec(), record::encode(&converted));
    kv.apply(done)?;
    kv.sync()?;
    if converted > 0 {
        tracing::info!(converted, ms = started.elapsed().as_millis() as u64, "format 4: stored facts rewritten");
    }
    Ok(converted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::SledKv;
    use crate::model::Status;

    fn fact(subject: &str, status: Status) -> Fact {
        Fact {
            id: uuid::Uuid::now_v7(),
            tenant: "a".into(),
            subject: subject.into(),
            predicate: "p".into(),
            object: serde_json::json!("O:x"),
            confidence: 1.0,
            source: Some("s".into()),
            properties: None,
            valid_from: 0,
            valid_until: None,
            recorded_at: 9,
            tx: 9,
            status,
            created_tx: 3,
            created_at: 3,
            supersedes: Vec::new(),
            superseded_by: None,
            continues: None,
            continued_by: Vec::new(),
        }
    }

    /// A format-3 store's facts: for each of `n` subjects a live and a
    /// closed fact, each in its index and in `versions`, all whole.
    fn old_facts(kv: &SledKv, n: usize) -> Vec<(Keyspace, Vec<u8>, Fact)> {
        let mut b = WriteBatch::default();
        let mut out = Vec::new();
        for i in 0..n {
            for (ks, status) in [(Keyspace::Sp, Status::Active), (Keyspace::Closed, Status::Superseded)] {
                let f = fact(&format!("E:{i}"), status);
                for (ks, k) in [(ks, keys::sp(1, &f.subject, &f.predicate, f.id)), (Keyspace::Versions, keys::version(f.id, f.tx))] {
                    b.put(ks, k.clone(), record::encode(&f));
                    out.push((ks, k, f.clone()));
                }
            }
        }
        kv.apply(b).unwrap();
        out
    }

    fn read_back(kv: &SledKv, ks: Keyspace, k: &[u8]) -> (Fact, bool) {
        let v = kv.get(ks, k).unwrap().unwrap();
        let f = match ks {
            Keyspace::Versions => fact_record::decode_version(k, &v),
            _ => fact_record::decode_indexed("a", k, &v),
        };
        (f.unwrap(), fact_record::is_whole_fact(&v))
    }

    #[test]
    fn every_whole_fact_is_rewritten_and_reads_back_the_same() {
        let kv = SledKv::temporary().unwrap();
        // More than a chunk in each table, so the walk crosses chunk boundaries.
        let entries = old_facts(&kv, CHUNK / 2 + 7);
        assert_eq!(rewrite(&kv).unwrap(), entries.len() as u64);
        for (ks, k, f) in &entries {
            assert_eq!(read_back(&kv, *ks, k), (f.clone(), false), "{ks:?}");
        }
        // Done is recorded: the next open does not walk the tables again.
        let more = old_facts(&kv, 1);
        assert_eq!(rewrite(&kv).unwrap(), 0);
        assert!(read_back(&kv, more[0].0, &more[0].1).1);
    }

    #[test]
    fn a_rewrite_cut_short_resumes_where_values_are_still_whole() {
        let kv = SledKv::temporary().unwrap();
        let entries = old_facts(&kv, 10);
        // As if a crash came after part of the rewrite: some values converted, no done marker.
        let mut b = WriteBatch::default();
        for (ks, k, f) in entries.iter().step_by(3) {
            let slim = if *ks == Keyspace::Versions { fact_record::encode_version(f) } else { fact_record::encode_indexed(f) };
            b.put(*ks, k.clone(), slim);
        }
        kv.apply(b).unwrap();
        assert_eq!(rewrite(&kv).unwrap(), 40 - 14);
        for (ks, k, f) in &entries {
            assert_eq!(read_back(&kv, *ks, k), (f.clone(), false), "{ks:?}");
        }
    }
}
