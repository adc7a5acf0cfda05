//! The record decoder of the storage engine (`tempora_storage::record::decode`):
//! a version byte, then MessagePack (rmp-serde). Stored values are read back
//! as each of the record types the engine keeps; on arbitrary bytes the
//! decoder may refuse but must not panic or allocate without bound. What
//! decodes must encode again and decode to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::{de::DeserializeOwned, Serialize};
use std::fmt::Debug;
use tempora_storage::record::{self, Clock, LogEntry};
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
});
