//! The PostgreSQL schema: the migrations under `migrations/postgres/`,
//! applied when a tempora process starts on a database.
//!
//! Replicas often start together. Each takes the same session-level
//! advisory lock before it looks at the schema, so one applies what is
//! missing while the others wait, then find nothing left to do. Each
//! migration runs in its own transaction with the row that records it in
//! `tempora_schema`, so a crash leaves the schema at a version, never
//! between two. A database whose schema is newer than this build knows is
//! refused: an older tempora would write rows a newer schema does not
//! expect.

use tokio_postgres::Client;

/// The migrations, in order: version, name, SQL.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "schema", include_str!("../../../migrations/postgres/0001_schema.sql")),
    (2, "write path indexes", include_str!("../../../migrations/postgres/0002_write_path.sql")),
    (3, "many values index", include_str!("../../../migrations/postgres/0003_many_values.sql")),
];

/// The newest schema version this build knows.
pub fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// The advisory lock replicas take while they migrate ("tempora" in ASCII).
const LOCK: i64 = 0x0074_656d_706f_7261;

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "the database's tempora schema is version {found}, newer than this tempora knows ({known}): \
         run a tempora at least as new as the one that migrated it"
    )]
    Newer { found: i32, known: i32 },
    #[error("applying schema version {version} ({name}) failed: {source}")]
    Apply { version: i32, name: &'static str, source: tokio_postgres::Error },
    #[error("reading the schema version failed: {0}")]
    Database(#[from] tokio_postgres::Error),
}

/// What [`migrate`] found and left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// The version the database had (0: none).
    pub from: i32,
    /// The version it has now ([`latest`]).
    pub to: i32,
}

/// Brings the database's schema to [`latest`], holding the migration lock
/// while it looks and applies.
pub async fn migrate(client: &mut Client) -> Result<Migrated, SchemaError> {
    client.execute("SELECT pg_advisory_lock($1)", &[&LOCK]).await?;
    let applied = apply_missing(client).await;
    // Released whatever happened (the session's end would release it too).
    let released = client.execute("SELECT pg_advisory_unlock($1)", &[&LOCK]).await;
    let migrated = applied?;
    released?;
    Ok(migrated)
}

async fn apply_missing(client: &mut Client) -> Result<Migrated, SchemaError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS tempora_schema (
                 version integer PRIMARY KEY,
                 name text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await?;
    let from: i32 = client.query_one("SELECT coalesce(max(version), 0) FROM tempora_schema", &[]).await?.get(0);
    if from > latest() {
        return Err(SchemaError::Newer { found: from, known: latest() });
    }
    for &(version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > from) {
        let failed = |source| SchemaError::Apply { version, name, source };
        let tx = client.transaction().await?;
        tx.batch_execute(sql).await.map_err(failed)?;
        tx.execute("INSERT INTO tempora_schema (version, name) VALUES ($1, $2)", &[&version, &name])
            .await
            .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        tracing::info!(version, name, "applied a schema migration");
    }
    Ok(Migrated { from, to: latest() })
}
