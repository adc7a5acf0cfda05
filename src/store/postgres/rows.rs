//! Facts as rows of `facts` and `fact_versions`, and back.

use crate::store::{Cardinality, EngineError, Fact, Status, StorageError};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

/// The columns a fact version is read from and written to, in the order of
/// [`FactParams::params`].
pub const COLUMNS: &str = "id, tx, subject, predicate, object, confidence, source, properties, valid_from, \
                           valid_until, recorded_at, status, created_tx, created_at, supersedes, superseded_by, \
                           continues, continued_by";

/// The same columns, each prefixed with a table alias (`v.id, v.tx, ...`).
pub fn columns_of(alias: &str) -> String {
    COLUMNS.split(", ").map(|c| format!("{alias}.{c}")).collect::<Vec<_>>().join(", ")
}

fn status_of(name: &str) -> Result<Status, EngineError> {
    name.parse().map_err(|e: String| corrupt(format!("a fact row has status {name:?}: {e}")))
}

pub fn cardinality_of(name: &str) -> Result<Cardinality, EngineError> {
    name.parse().map_err(|e: String| corrupt(format!("a predicate row has cardinality {name:?}: {e}")))
}

pub fn corrupt(m: String) -> EngineError {
    EngineError::Storage(StorageError::Corrupt(m))
}

/// A database-side u64 (tx numbers) stored as bigint.
pub fn db_tx(tx: u64) -> i64 {
    i64::try_from(tx).unwrap_or(i64::MAX)
}

/// JSON as tempora writes it: keys sorted (serde_json's map is ordered),
/// numbers as parsed, so equal values have equal text.
pub fn json_text(v: &Value) -> String {
    v.to_string()
}

/// The parameters that write `f` into the [`COLUMNS`].
pub struct FactParams {
    tx: i64,
    object: String,
    properties: Option<String>,
    status: &'static str,
    created_tx: i64,
}

impl FactParams {
    pub fn new(f: &Fact) -> FactParams {
        FactParams {
            tx: db_tx(f.tx),
            object: json_text(&f.object),
            properties: f.properties.as_ref().map(|p| json_text(&Value::Object(p.clone()))),
            status: f.status.as_str(),
            created_tx: db_tx(f.created_tx),
        }
    }

    /// The values for `$1..$18` of an insert naming [`COLUMNS`].
    pub fn params<'a>(&'a self, f: &'a Fact) -> [&'a (dyn ToSql + Sync); 18] {
        [
            &f.id,
            &self.tx,
            &f.subject,
            &f.predicate,
            &self.object,
            &f.confidence,
            &f.source,
            &self.properties,
            &f.valid_from,
            &f.valid_until,
            &f.recorded_at,
            &self.status,
            &self.created_tx,
            &f.created_at,
            &f.supersedes,
            &f.superseded_by,
            &f.continues,
            &f.continued_by,
        ]
    }
}

/// A fact version from a row holding [`COLUMNS`] (in any order, by name).
pub fn fact(tenant: &str, row: &Row) -> Result<Fact, EngineError> {
    let object: String = row.try_get("object").map_err(db_read)?;
    let properties: Option<String> = row.try_get("properties").map_err(db_read)?;
    let properties = match properties {
        None => None,
        Some(text) => match serde_json::from_str(&text) {
            Ok(Value::Object(m)) => Some(m),
            _ => return Err(corrupt(format!("a fact row's properties are not a JSON object: {text:.80}"))),
        },
    };
    let tx: i64 = row.try_get("tx").map_err(db_read)?;
    let created_tx: i64 = row.try_get("created_tx").map_err(db_read)?;
    let status: String = row.try_get("status").map_err(db_read)?;
    Ok(Fact {
        id: row.try_get("id").map_err(db_read)?,
        tenant: tenant.to_string(),
        subject: row.try_get("subject").map_err(db_read)?,
        predicate: row.try_get("predicate").map_err(db_read)?,
        object: serde_json::from_str(&object).map_err(|e| corrupt(format!("a fact row's object is not JSON: {e}")))?,
        confidence: row.try_get("confidence").map_err(db_read)?,
        source: row.try_get("source").map_err(db_read)?,
        properties,
        valid_from: row.try_get("valid_from").map_err(db_read)?,
        valid_until: row.try_get("valid_until").map_err(db_read)?,
        recorded_at: row.try_get("recorded_at").map_err(db_read)?,
        tx: tx as u64,
        status: status_of(&status)?,
        created_tx: created_tx as u64,
        created_at: row.try_get("created_at").map_err(db_read)?,
        supersedes: row.try_get("supersedes").map_err(db_read)?,
        superseded_by: row.try_get("superseded_by").map_err(db_read)?,
        continues: row.try_get("continues").map_err(db_read)?,
        continued_by: row.try_get("continued_by").map_err(db_read)?,
    })
}

fn db_read(e: tokio_postgres::Error) -> EngineError {
    corrupt(format!("a row of the database does not read as a fact: {e}"))
}
