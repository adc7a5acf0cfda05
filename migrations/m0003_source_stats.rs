//! Format 3: per-source fact counts.
//!
//! From format 3 the writer keeps, for every (tenant, source), the counts of
//! the facts with that `source` by their latest status, in `meta` under
//! `0x08` | tenant | source (see `docs/storage.md`). Formats 1 and 2 kept no
//! such counts.
//!
//! This step builds them from the stored facts, counting each fact once at
//! its latest status: that version is in `idx_sp` while the fact is live and
//! in `idx_closed` once it is closed, and both share one key layout, so the
//! two keyspaces are walked merged in key order. A key found in both (which
//! the write path never leaves behind) is counted once, by its newer
//! version. `versions` is not read: it holds every version of a fact, not
//! just the latest.

use crate::error::StorageError;
use crate::keys::{self, TenantId};
use crate::kv::{Keyspace, KvIter, KvPair, OrderedKv, WriteBatch};
use crate::model::{Fact, SourceStats};
use crate::record;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::Bound;

pub fn apply(kv: &dyn OrderedKv, batch: &mut WriteBatch) -> Result<(), StorageError> {
    let mut counts: BTreeMap<(TenantId, String), SourceStats> = BTreeMap::new();
    let all = |ks| kv.scan(ks, Bound::Unbounded, Bound::Unbounded, false).peekable();
    let (mut live, mut closed) = (all(Keyspace::Sp), all(Keyspace::Closed));
    while let Some((key, fact)) = next_latest(&mut live, &mut closed)? {
        if let Some(source) = fact.source {
            let tenant = keys::tenant_of_index_key(&key)?;
            *counts.entry((tenant, source)).or_default().count_mut(fact.status) += 1;
        }
    }
    for ((tenant, source), s) in counts {
        batch.put(Keyspace::Meta, keys::meta::source_stats(tenant, &source), record::encode(&s));
    }
    Ok(())
}

/// The next index key of the merged walk and the latest version of its fact.
fn next_latest(
    live: &mut Peekable<KvIter<'_>>,
    closed: &mut Peekable<KvIter<'_>>,
) -> Result<Option<(Vec<u8>, Fact)>, StorageError> {
    let order = match (live.peek(), closed.peek()) {
        (None, None) => return Ok(None),
        (Some(Err(_)), _) | (Some(_), None) => std::cmp::Ordering::Less,
        (_, Some(Err(_))) | (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(Ok((a, _))), Some(Ok((b, _)))) => a.cmp(b),
    };
    let decode = |item: Option<Result<KvPair, StorageError>>| -> Result<(Vec<u8>, Fact), StorageError> {
        let (k, v) = item.expect("peeked")?;
        Ok((k, record::decode(&v)?))
    };
    Ok(Some(match order {
        std::cmp::Ordering::Less => decode(live.next())?,
        std::cmp::Ordering::Greater => decode(closed.next())?,
        std::cmp::Ordering::Equal => {
            let (k, a) = decode(live.next())?;
            let (_, b) = decode(closed.next())?;
            (k, if b.tx >= a.tx { b } else { a })
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::SledKv;
    use crate::model::Status;

    fn fact(tenant: &str, subject: &str, source: Option<&str>, status: Status, tx: u64) -> Fact {
        Fact {
            id: uuid::Uuid::now_v7(),
            tenant: tenant.into(),
            subject: subject.into(),
            predicate: "p".into(),
            object: serde_json::json!("O:x"),
            confidence: 1.0,
            source: source.map(str::to_string),
            properties: None,
            valid_from: 0,
            valid_until: None,
            recorded_at: tx as i64,
            tx,
            status,
            created_tx: 1,
            created_at: 1,
            supersedes: Vec::new(),
            superseded_by: None,
            continues: None,
            continued_by: Vec::new(),
        }
    }

    fn put(b: &mut WriteBatch, ks: Keyspace, t: TenantId, f: &Fact) {
        b.put(ks, keys::sp(t, &f.subject, &f.predicate, f.id), record::encode(f));
    }

    #[test]
    fn counts_each_fact_once_at_its_latest_status() {
        let kv = SledKv::temporary().unwrap();
        let mut b = WriteBatch::default();
        put(&mut b, Keyspace::Sp, 1, &fact("a", "E:1", Some("s"), Status::Active, 2));
        put(&mut b, Keyspace::Sp, 1, &fact("a", "E:2", Some("s"), Status::Candidate, 2));
        put(&mut b, Keyspace::Closed, 1, &fact("a", "E:1", Some("s"), Status::Superseded, 3));
        put(&mut b, Keyspace::Closed, 1, &fact("a", "E:3", Some("s"), Status::Retracted, 4));
        put(&mut b, Keyspace::Sp, 1, &fact("a", "E:3", None, Status::Active, 4));
        put(&mut b, Keyspace::Sp, 2, &fact("b", "E:1", Some("s"), Status::Active, 5));
        // One fact under the same key in both indexes (never left so by the
        // write path): counted once, by its newer version.
        let old = fact("a", "E:9", Some("t"), Status::Active, 6);
        let newer = Fact { status: Status::Retracted, tx: 7, ..old.clone() };
        put(&mut b, Keyspace::Sp, 1, &old);
        put(&mut b, Keyspace::Closed, 1, &newer);
        kv.apply(b).unwrap();

        let mut out = WriteBatch::default();
        apply(&kv, &mut out).unwrap();
        let got: BTreeMap<Vec<u8>, SourceStats> = out
            .ops
            .into_iter()
            .map(|(ks, k, v)| {
                assert_eq!(ks, Keyspace::Meta);
                (k, record::decode(&v.unwrap()).unwrap())
            })
            .collect();
        let want = |active, candidate, superseded, retracted| SourceStats { active, candidate, superseded, retracted };
        let expected: BTreeMap<Vec<u8>, SourceStats> = [
            (keys::meta::source_stats(1, "s"), want(1, 1, 1, 1)),
            (keys::meta::source_stats(1, "t"), want(0, 0, 0, 1)),
            (keys::meta::source_stats(2, "s"), want(1, 0, 0, 0)),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, expected);
    }
}
