//! How facts are stored (format 4): each value leaves out what its key holds.
//!
//! An `idx_sp`/`idx_closed` key is tenant | subject | predicate | fact id,
//! and a `versions` key is fact id | tx. Up to format 3 every value was the
//! whole fact, so the index values repeated all four fields of their key
//! (the tenant by name) and every version repeated its id: about a third of
//! each index entry, in the two tables every read scans. From format 4:
//!
//! - an index value is [`RECORD_INDEXED`] and MessagePack of the fact's
//!   other fields ([`BodyRef`]);
//! - a version is [`RECORD_VERSION`] and MessagePack of (tenant, subject,
//!   predicate, the same fields): its key gives the id.
//!
//! Both store the status as one byte, and the fact's creation (tx, time)
//! only when it is not the version's own: a fact's first version, and every
//! fact never closed, leave it out.
//!
//! Whole facts ([`record::RECORD_V1`]) are still read in both tables:
//! format 4's migration rewrites them in chunks after it has recorded the
//! format, so a crash part way leaves some (`migrations/m0004_fact_values.rs`).

use crate::error::StorageError;
use crate::keys;
use crate::model::{Fact, FactId, Millis, Status, Tx};
use crate::record;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// First byte of an `idx_sp`/`idx_closed` value written by format 4.
pub const RECORD_INDEXED: u8 = 2;
/// First byte of a `versions` value written by format 4.
pub const RECORD_VERSION: u8 = 3;

/// The fields neither key holds, borrowed from the fact for writing. The
/// field order is the stored order (MessagePack arrays); `Body` must match it.
#[derive(Serialize)]
struct BodyRef<'a> {
    object: &'a Value,
    confidence: f64,
    source: Option<&'a str>,
    properties: Option<&'a Map<String, Value>>,
    valid_from: Millis,
    valid_until: Option<Millis>,
    recorded_at: Millis,
    tx: Tx,
    status: u8,
    /// `created_tx` and `created_at`, when they differ from `tx` and `recorded_at`.
    created: Option<(Tx, Millis)>,
    supersedes: &'a [FactId],
    superseded_by: Option<FactId>,
    continues: Option<FactId>,
    continued_by: &'a [FactId],
}

#[derive(Deserialize)]
struct Body {
    object: Value,
    confidence: f64,
    source: Option<String>,
    properties: Option<Map<String, Value>>,
    valid_from: Millis,
    valid_until: Option<Millis>,
    recorded_at: Millis,
    tx: Tx,
    status: u8,
    created: Option<(Tx, Millis)>,
    supersedes: Vec<FactId>,
    superseded_by: Option<FactId>,
    continues: Option<FactId>,
    continued_by: Vec<FactId>,
}

fn status_code(s: Status) -> u8 {
    match s {
        Status::Active => 0,
        Status::Candidate => 1,
        Status::Superseded => 2,
        Status::Retracted => 3,
    }
}

fn status_of(code: u8) -> Result<Status, StorageError> {
    Ok(match code {
        0 => Status::Active,
        1 => Status::Candidate,
        2 => Status::Superseded,
        3 => Status::Retracted,
        other => return Err(StorageError::Corrupt(format!("unknown status code {other} in a stored fact"))),
    })
}

fn body(f: &Fact) -> BodyRef<'_> {
    let own_creation = f.created_tx == f.tx && f.created_at == f.recorded_at;
    BodyRef {
        object: &f.object,
        confidence: f.confidence,
        source: f.source.as_deref(),
        properties: f.properties.as_ref(),
        valid_from: f.valid_from,
        valid_until: f.valid_until,
        recorded_at: f.recorded_at,
        tx: f.tx,
        status: status_code(f.status),
        created: (!own_creation).then_some((f.created_tx, f.created_at)),
        supersedes: &f.supersedes,
        superseded_by: f.superseded_by,
        continues: f.continues,
        continued_by: &f.continued_by,
    }
}

fn fact(id: FactId, tenant: String, subject: String, predicate: String, b: Body) -> Result<Fact, StorageError> {
    let (created_tx, created_at) = b.created.unwrap_or((b.tx, b.recorded_at));
    Ok(Fact {
        id,
        tenant,
        subject,
        predicate,
        object: b.object,
        confidence: b.confidence,
        source: b.source,
        properties: b.properties,
        valid_from: b.valid_from,
        valid_until: b.valid_until,
        recorded_at: b.recorded_at,
        tx: b.tx,
        status: status_of(b.status)?,
        created_tx,
        created_at,
        supersedes: b.supersedes,
        superseded_by: b.superseded_by,
        continues: b.continues,
        continued_by: b.continued_by,
    })
}

fn write(first: u8, value: &impl Serialize) -> Vec<u8> {
    let mut out = vec![first];
    rmp_serde::encode::write(&mut out, value).expect("fact values serialize to a Vec");
    out
}

fn read<'a, T: Deserialize<'a>>(body: &'a [u8], what: &str) -> Result<T, StorageError> {
    rmp_serde::from_slice(body).map_err(|e| StorageError::Corrupt(format!("undecodable {what}: {e}")))
}

/// The index value of `f`, stored under `keys::sp(tenant, subject, predicate, id)` of the same fact.
pub fn encode_indexed(f: &Fact) -> Vec<u8> {
    write(RECORD_INDEXED, &body(f))
}

/// The fact an index entry holds: `key` is its `idx_sp`/`idx_closed` key and
/// `tenant` the name of the tenant the key's id stands for.
pub fn decode_indexed(tenant: &str, key: &[u8], bytes: &[u8]) -> Result<Fact, StorageError> {
    match bytes.split_first() {
        Some((&RECORD_INDEXED, b)) => {
            let b: Body = read(b, "index value")?;
            let (_, subject, predicate, id) = keys::decode_sp(key)?;
            fact(id, tenant.to_string(), subject, predicate, b)
        }
        // Written before format 4 and not rewritten yet.
        Some((&record::RECORD_V1, _)) => record::decode(bytes),
        Some((v, _)) => Err(StorageError::Corrupt(format!("unknown index value version {v}"))),
        None => Err(StorageError::Corrupt("empty index value".into())),
    }
}

/// The `versions` value of `f`, stored under `keys::version(id, tx)` of the same version.
pub fn encode_version(f: &Fact) -> Vec<u8> {
    write(RECORD_VERSION, &(&f.tenant, &f.subject, &f.predicate, body(f)))
}

/// The fact version a `versions` entry holds.
pub fn decode_version(key: &[u8], bytes: &[u8]) -> Result<Fact, StorageError> {
    match bytes.split_first() {
        Some((&RECORD_VERSION, b)) => {
            let (tenant, subject, predicate, b): (String, String, String, Body) = read(b, "fact version")?;
            fact(keys::decode_version_id(key)?, tenant, subject, predicate, b)
        }
        Some((&record::RECORD_V1, _)) => record::decode(bytes),
        Some((v, _)) => Err(StorageError::Corrupt(format!("unknown fact version record {v}"))),
        None => Err(StorageError::Corrupt("empty fact version".into())),
    }
}

/// Whether a stored fact value is still a whole fact from before format 4.
pub fn is_whole_fact(bytes: &[u8]) -> bool {
    bytes.first() == Some(&record::RECORD_V1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Status;
    use uuid::Uuid;

    fn fact() -> Fact {
        Fact {
            id: Uuid::now_v7(),
            tenant: "acme".into(),
            subject: "Person:123456".into(),
            predicate: "works_at".into(),
            object: Value::String("Org:o1234-5".into()),
            confidence: 0.9,
            source: Some("import".into()),
            properties: None,
            valid_from: 1_700_000_000_000,
            valid_until: None,
            recorded_at: 1_764_000_000_000,
            tx: 1_000_123,
            status: Status::Active,
            created_tx: 1_000_123,
            created_at: 1_764_000_000_000,
            supersedes: vec![],
            superseded_by: None,
            continues: None,
            continued_by: vec![],
        }
    }

    fn idx_key(f: &Fact) -> Vec<u8> {
        keys::sp(7, &f.subject, &f.predicate, f.id)
    }

    fn version_key(f: &Fact) -> Vec<u8> {
        keys::version(f.id, f.tx)
    }

    /// `f` through both shapes, each read back with its key.
    fn round_trips(f: &Fact) {
        assert_eq!(&decode_indexed("acme", &idx_key(f), &encode_indexed(f)).unwrap(), f);
        assert_eq!(&decode_version(&version_key(f), &encode_version(f)).unwrap(), f);
    }

    #[test]
    fn a_fact_comes_back_whole_from_its_key_and_value() {
        let mut f = fact();
        round_trips(&f);
        // A closed fact with links, properties and a creation of its own.
        f.status = Status::Superseded;
        f.valid_until = Some(1_800_000_000_000);
        f.tx += 5;
        f.recorded_at += 77;
        f.superseded_by = Some(Uuid::now_v7());
        f.supersedes = vec![Uuid::now_v7()];
        f.continues = Some(Uuid::now_v7());
        f.continued_by = vec![Uuid::now_v7(), Uuid::now_v7()];
        f.properties = Some(serde_json::json!({"team": "infra", "n": [1, 2.5, null]}).as_object().unwrap().clone());
        f.object = serde_json::json!({"name": "Acme", "since": 2020});
        f.source = None;
        round_trips(&f);
        // Only the tx differs from the creation (the same millisecond).
        f.recorded_at = f.created_at;
        round_trips(&f);
        for s in [Status::Candidate, Status::Retracted] {
            f.status = s;
            round_trips(&f);
        }
    }

    #[test]
    fn values_leave_out_what_their_keys_hold() {
        let f = fact();
        let whole = record::encode(&f);
        let (indexed, version) = (encode_indexed(&f), encode_version(&f));
        let holds = |v: &[u8], part: &[u8]| v.windows(part.len()).any(|w| w == part);
        for part in [f.subject.as_bytes(), f.predicate.as_bytes(), f.tenant.as_bytes(), f.id.as_bytes()] {
            assert!(holds(&whole, part) && !holds(&indexed, part));
        }
        assert!(!holds(&version, f.id.as_bytes()) && holds(&version, f.subject.as_bytes()));
        // An index value: under two thirds of the whole fact; a version, under 85 %.
        assert!(indexed.len() * 3 < whole.len() * 2, "{} of {} bytes", indexed.len(), whole.len());
        assert!(version.len() * 100 < whole.len() * 85, "{} of {} bytes", version.len(), whole.len());
    }

    #[test]
    fn whole_facts_from_before_format_4_are_still_read() {
        let f = fact();
        let whole = record::encode(&f);
        assert!(is_whole_fact(&whole) && !is_whole_fact(&encode_indexed(&f)) && !is_whole_fact(&encode_version(&f)));
        assert_eq!(decode_indexed("acme", &idx_key(&f), &whole).unwrap(), f);
        assert_eq!(decode_version(&version_key(&f), &whole).unwrap(), f);
    }

    #[test]
    fn damaged_values_are_corruption_not_a_panic() {
        let f = fact();
        let mut bad_status = body(&f);
        bad_status.status = 9;
        let bad_indexed = write(RECORD_INDEXED, &bad_status);
        let bad_version = write(RECORD_VERSION, &("acme", "S", "P", bad_status));
        let corrupt = |r: Result<Fact, StorageError>| matches!(r, Err(StorageError::Corrupt(_)));
        let (ik, vk) = (idx_key(&f), version_key(&f));
        for v in [vec![], vec![9, 1, 2], vec![RECORD_INDEXED, 0xc1], encode_indexed(&f)[..10].to_vec(), bad_indexed] {
            assert!(corrupt(decode_indexed("acme", &ik, &v)), "{v:?}");
        }
        for v in [vec![], vec![9, 1, 2], vec![RECORD_VERSION, 0xc1], encode_version(&f)[..10].to_vec(), bad_version] {
            assert!(corrupt(decode_version(&vk, &v)), "{v:?}");
        }
        // Each shape belongs to its own table.
        assert!(corrupt(decode_indexed("acme", &ik, &encode_version(&f))));
        assert!(corrupt(decode_version(&vk, &encode_indexed(&f))));
        // Keys too short for what they must hold.
        assert!(corrupt(decode_indexed("acme", &ik[..6], &encode_indexed(&f))));
        assert!(corrupt(decode_version(&vk[..10], &encode_version(&f))));
    }
}
