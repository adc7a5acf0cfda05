//! Value encodings: MessagePack (rmp-serde) behind a one-byte record version,
//! so a future layout can be told apart from this one by its first byte.

use crate::error::StorageError;
use crate::model::{Asserted, Cardinality, Fact, FactId, Millis, Tx};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// First byte of every stored value written by this format.
pub const RECORD_V1: u8 = 1;

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![RECORD_V1];
    rmp_serde::encode::write(&mut out, value).expect("records serialize to a Vec");
    out
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StorageError> {
    match bytes.split_first() {
        Some((&RECORD_V1, body)) => rmp_serde::from_slice(body)
            .map_err(|e| StorageError::Corrupt(format!("undecodable record: {e}"))),
        Some((v, _)) => Err(StorageError::Corrupt(format!("unknown record version {v}"))),
        None => Err(StorageError::Corrupt("empty record".into())),
    }
}

/// The last committed transaction and its record time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    pub last_tx: Tx,
    pub last_recorded_at: Millis,
}

/// One change-log entry: what a transaction did, by fact id. The fact
/// versions themselves are in `versions` under `id | tx`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub recorded_at: Millis,
    pub events: Vec<LogEvent>,
}

/// What one operation of a transaction did. From format 7 an assert and a
/// retract also carry the fact's subject, and an assert how many of the facts
/// it closed held another object: enough for a reader that follows the log
/// by subject or counts value changes (the monitor's drift rule) without
/// reading every version. Entries written before format 7 have neither
/// (`None`); `Reader::change_log` reads the versions for them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LogEvent {
    Assert {
        fact: FactId,
        superseded: Vec<FactId>,
        continued: Vec<FactId>,
        #[serde(default)]
        subject: Option<String>,
        #[serde(default)]
        changed: Option<u32>,
    },
    Retract {
        fact: FactId,
        #[serde(default)]
        subject: Option<String>,
    },
    Cardinality { predicate: String, cardinality: Cardinality },
    Threshold { threshold: f64 },
}

impl LogEvent {
    /// What the log says of an assert: the new fact, what it closed and
    /// continued, its subject, and how many closed facts held another value.
    pub fn asserted(a: &Asserted) -> LogEvent {
        LogEvent::Assert {
            fact: a.fact.id,
            superseded: a.superseded.iter().map(|f| f.id).collect(),
            continued: a.continued.iter().map(|f| f.id).collect(),
            subject: Some(a.fact.subject.clone()),
            changed: Some(a.superseded.iter().filter(|f| f.object != a.fact.object).count() as u32),
        }
    }

    /// What the log says of a retraction that wrote a version.
    pub fn retracted(f: &Fact) -> LogEvent {
        LogEvent::Retract { fact: f.id, subject: Some(f.subject.clone()) }
    }
}
