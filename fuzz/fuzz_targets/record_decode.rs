//! The record decoder of the storage engine (`tempora_storage::record::decode`):
//! a version byte, then MessagePack (rmp-serde). Stored values are read back
//! as each of the record types the engine keeps; on arbitrary bytes the
//! decoder may refuse but must not panic or allocate without bound. What
//! decodes must encode again and decode to the same value. The same holds of
//! the stored facts of format 4 (`tempora_storage::fact_record`), read with
//! their keys.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::{de::DeserializeOwned, Serialize};
use std::fmt::Debug;
use tempora_storage::record::{self, Clock, LogEntry};
use tempora_storage::{fact_record, keys};
use tempora_storage::{Fact, PredicateInfo, SourceStats, TenantStats};

fn check<T: DeserializeOwned + Serialize + PartialEq + Debug>(data: &[u8]) {
    if let Ok(v) = record::decode::<T>(data) {
        let again = record::encode(&v);
        let back: T = record::decode(&again).expect("a re-encoded record decodes");
        // NaN floats (confidence, threshold) are not equal to themselves.
        if v == v {
            assert_eq!(back, v);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The version byte is given, so the fuzzer spends its time in the body.
    let mut stored = Vec::with_capacity(data.len() + 1);
    stored.push(record::RECORD_V1);
    stored.extend_from_slice(data);
    check::<Fact>(&stored);
    check::<LogEntry>(&stored);
    check::<Clock>(&stored);
    check::<PredicateInfo>(&stored);
    check::<TenantStats>(&stored);
    check::<SourceStats>(&stored);
    check::<u32>(&stored);
    check::<f64>(&stored);
    let _ = record::decode::<Fact>(data);

    let id = uuid::Uuid::from_u128(7);
    let key = keys::sp(3, "Person:sarah", "works_at", id);
    let mut indexed = vec![fact_record::RECORD_INDEXED];
    indexed.extend_from_slice(data);
    if let Ok(f) = fact_record::decode_indexed("default", &key, &indexed) {
        let again = fact_record::encode_indexed(&f);
        let back = fact_record::decode_indexed("default", &key, &again).expect("a re-encoded value decodes");
        if f == f {
            assert_eq!(back, f);
        }
    }
    let key = keys::version(id, 42);
    let mut version = vec![fact_record::RECORD_VERSION];
    version.extend_from_slice(data);
    if let Ok(f) = fact_record::decode_version(&key, &version) {
        let again = fact_record::encode_version(&f);
        let back = fact_record::decode_version(&key, &again).expect("a re-encoded version decodes");
        if f == f {
            assert_eq!(back, f);
        }
    }
    let _ = fact_record::decode_indexed("default", data, data);
    let _ = fact_record::decode_version(data, data);
});
