//! Format 8: the `idx_spo` keyspace, the live facts by value.
//!
//! Up to format 7 an assert under `many` looked its value up through
//! `idx_os`, which keeps every fact the value ever had, and read the whole
//! (subject, predicate) pair instead once the value had more than a few
//! there: an assert of a value reasserted often cost in proportion to the
//! pair's live values. From format 8 the write path keeps one `idx_spo` key,
//! tenant | subject | predicate | object | fact id, for every live fact
//! (every `idx_sp` key) and the assert reads its value's prefix there.
//!
//! This step builds `idx_spo` from `idx_sp` in batches of [`CHUNK`] entries,
//! applied as it goes (a store of millions of live facts never becomes one
//! batch held in memory); the format is recorded after the last one, so a
//! crash part way leaves format 7 and the next open builds it again. It
//! first deletes whatever `idx_spo` holds: keys of a build cut short, which
//! a format-7 build may have left stale by closing their facts since.
//! `idx_sp` values may still be whole facts here (format 4's rewrite runs
//! after every step), which `fact_record::decode_indexed` reads too.

use crate::error::StorageError;
use crate::fact_record;
use crate::keys;
use crate::kv::{Keyspace, OrderedKv, WriteBatch};
use std::ops::Bound;

/// Entries read and written per batch.
pub const CHUNK: usize = 4096;

pub fn apply(kv: &dyn OrderedKv, _batch: &mut WriteBatch) -> Result<(), StorageError> {
    let started = std::time::Instant::now();
    loop {
        let mut batch = WriteBatch::default();
        for item in kv.scan(Keyspace::Spo, Bound::Unbounded, Bound::Unbounded, false).take(CHUNK) {
            batch.delete(Keyspace::Spo, item?.0);
        }
        if batch.is_empty() {
            break;
        }
        kv.apply(batch)?;
    }
    let (mut from, mut built) = (Bound::Unbounded, 0u64);
    loop {
        // A chunk at a time: no scan is open while its batch is applied.
        let page: Vec<(Vec<u8>, Vec<u8>)> =
            kv.scan(Keyspace::Sp, from.clone(), Bound::Unbounded, false).take(CHUNK).collect::<Result<_, _>>()?;
        let Some((last, _)) = page.last() else { break };
        from = Bound::Excluded(last.clone());
        let mut batch = WriteBatch::default();
        for (k, v) in &page {
            let tenant = keys::tenant_of_index_key(k)?;
            // The tenant's name is not needed: only the key's fields and the object.
            let f = fact_record::decode_indexed("", k, v)?;
            batch.put(Keyspace::Spo, keys::spo(tenant, &f.subject, &f.predicate, &f.object, f.id), Vec::new());
        }
        built += batch.len() as u64;
        kv.apply(batch)?;
    }
    tracing::info!(live_facts = built, ms = started.elapsed().as_millis() as u64, "built idx_spo");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::SledKv;
    use crate::model::{Fact, Status};
    use serde_json::json;

    fn fact(subject: &str, object: serde_json::Value, status: Status) -> Fact {
        Fact {
            id: uuid::Uuid::now_v7(),
            tenant: "t".into(),
            subject: subject.into(),
            predicate: "p".into(),
            object,
            confidence: 1.0,
            source: None,
            properties: None,
            valid_from: 0,
            valid_until: None,
            recorded_at: 1,
            tx: 1,
            status,
            created_tx: 1,
            created_at: 1,
            supersedes: Vec::new(),
            superseded_by: None,
            continues: None,
            continued_by: Vec::new(),
        }
    }

    fn spo_keys(kv: &dyn OrderedKv) -> Vec<Vec<u8>> {
        kv.scan(Keyspace::Spo, Bound::Unbounded, Bound::Unbounded, false).map(|i| i.unwrap().0).collect()
    }

    #[test]
    fn builds_one_key_per_live_fact_and_drops_stale_ones() {
        let kv = SledKv::temporary().unwrap();
        let mut b = WriteBatch::default();
        let long = json!("x".repeat(500));
        let live = [
            fact("E:1", json!("a"), Status::Active),
            fact("E:1", json!("a"), Status::Candidate),
            fact("E:1", long.clone(), Status::Active),
            fact("E:2", json!({"k": [1, 2]}), Status::Active),
        ];
        for (i, f) in live.iter().enumerate() {
            let key = keys::sp(1, &f.subject, &f.predicate, f.id);
            // Whole facts (before format 4's rewrite) and index values alike.
            let value = if i % 2 == 0 { crate::record::encode(f) } else { fact_record::encode_indexed(f) };
            b.put(Keyspace::Sp, key, value);
        }
        let closed = fact("E:1", json!("b"), Status::Superseded);
        b.put(Keyspace::Closed, keys::sp(1, &closed.subject, &closed.predicate, closed.id), fact_record::encode_indexed(&closed));
        // A key of a fact no longer live, as a build cut short may leave it.
        b.put(Keyspace::Spo, keys::spo(1, &closed.subject, &closed.predicate, &closed.object, closed.id), Vec::new());
        kv.apply(b).unwrap();

        let mut out = WriteBatch::default();
        apply(&kv, &mut out).unwrap();
        assert!(out.is_empty(), "the step applies its own batches");
        let mut want: Vec<Vec<u8>> =
            live.iter().map(|f| keys::spo(1, &f.subject, &f.predicate, &f.object, f.id)).collect();
        want.sort();
        assert_eq!(spo_keys(&kv), want);
        // Again, as after a crash before the format was recorded: the same keys.
        apply(&kv, &mut WriteBatch::default()).unwrap();
        assert_eq!(spo_keys(&kv), want);
        let prefix = keys::spo_prefix(1, "E:1", "p", &json!("a"));
        assert_eq!(spo_keys(&kv).iter().filter(|k| k.starts_with(&prefix)).count(), 2);
        let prefix = keys::spo_prefix(1, "E:1", "p", &long);
        assert_eq!(spo_keys(&kv).iter().filter(|k| k.starts_with(&prefix)).count(), 1);
    }
}
