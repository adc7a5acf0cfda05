//! PostgreSQL with its best honest bitemporal schema: valid and record time
//! as `tstzrange`s, an exclusion constraint that makes two current facts of
//! one key with overlapping valid time impossible (the guarantee tempora
//! gives), and supersession as one server-side function call (one round trip,
//! plan cached) that closes the active fact and inserts the new one in one
//! transaction, serialised per key by a transaction-scoped advisory lock.

use super::data::{self, PREDICATE, VALID_STARTS_SQL};
use super::system::{Done, Op, Violations};
use anyhow::{Context, Result};
use futures_util::SinkExt;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls, Statement};

pub struct Postgres {
    config: String,
}

pub struct Conn {
    client: Client,
    supersede: Statement,
    current: Statement,
    as_of: Statement,
    history: Statement,
    one: Statement,
}

const SCHEMA: &str = r#"
DROP TABLE IF EXISTS facts;
DROP SEQUENCE IF EXISTS fact_ids;
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE SEQUENCE fact_ids;
CREATE TABLE facts (
    fact_id bigint NOT NULL DEFAULT nextval('fact_ids'),
    subject text NOT NULL,
    predicate text NOT NULL,
    object text NOT NULL,
    confidence real NOT NULL,
    source text,
    status text NOT NULL CHECK (status IN ('active', 'superseded', 'retracted')),
    superseded_by bigint,
    valid tstzrange NOT NULL,
    recorded tstzrange NOT NULL DEFAULT tstzrange(now(), NULL)
);
CREATE OR REPLACE FUNCTION supersede(p_subject text, p_predicate text, p_object text, p_source text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    ts timestamptz;
    new_id bigint := nextval('fact_ids');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_subject || chr(31) || p_predicate, 0));
    -- Taken after the lock: later than anything the previous holder wrote.
    ts := clock_timestamp();
    WITH old AS (
        UPDATE facts SET recorded = tstzrange(lower(recorded), ts)
        WHERE subject = p_subject AND predicate = p_predicate AND upper_inf(recorded) AND status = 'active'
          AND (upper_inf(valid) OR upper(valid) > ts)
        RETURNING fact_id, object, confidence, source, valid
    )
    INSERT INTO facts (fact_id, subject, predicate, object, confidence, source, status, superseded_by, valid, recorded)
    SELECT fact_id, p_subject, p_predicate, object, confidence, source, 'superseded', new_id,
           tstzrange(lower(valid), greatest(lower(valid), ts)), tstzrange(ts, NULL)
    FROM old;
    INSERT INTO facts (fact_id, subject, predicate, object, confidence, source, status, valid, recorded)
    VALUES (new_id, p_subject, p_predicate, p_object, 0.9, p_source, 'active', tstzrange(ts, NULL), tstzrange(ts, NULL));
    RETURN new_id;
END $$;
"#;

/// Built after the bulk load (PostgreSQL's advice for populating a table) and
/// kept for every later write.
const INDEXES: &str = r#"
CREATE INDEX facts_key ON facts (subject, predicate);
CREATE INDEX facts_current ON facts (subject, predicate) WHERE upper_inf(recorded);
ALTER TABLE facts ADD CONSTRAINT one_value_at_a_time
    EXCLUDE USING gist (subject WITH =, predicate WITH =, valid WITH &&)
    WHERE (upper_inf(recorded) AND status <> 'retracted');
ANALYZE facts;
"#;

const COLUMNS: &str = "fact_id, subject, predicate, object, confidence, source, status, valid::text, recorded::text";

/// The bytes on disk of the database `config` connects to.
pub async fn database_size(config: &str) -> Result<u64> {
    let client = Postgres::new(config).client().await?;
    let size: i64 = client.query_one("SELECT pg_database_size(current_database())", &[]).await?.get(0);
    Ok(size as u64)
}

impl Postgres {
    pub fn new(config: &str) -> Postgres {
        Postgres { config: config.to_string() }
    }

    async fn client(&self) -> Result<Client> {
        let (client, connection) = tokio_postgres::connect(&self.config, NoTls)
            .await
            .with_context(|| format!("connecting to PostgreSQL ({})", self.config))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("postgres connection: {e}");
            }
        });
        Ok(client)
    }

    pub async fn setup(&self) -> Result<()> {
        let c = self.client().await?;
        c.batch_execute(SCHEMA).await.context("creating the PostgreSQL schema")?;
        c.batch_execute(INDEXES).await.context("creating the PostgreSQL indexes")?;
        Ok(())
    }

    pub async fn connect(&self) -> Result<Conn> {
        let client = self.client().await?;
        let supersede = client.prepare("SELECT supersede($1, $2, $3, $4)").await?;
        let current = client
            .prepare(&format!(
                "SELECT {COLUMNS} FROM facts WHERE subject = $1 AND predicate = $2 AND upper_inf(recorded) \
                 AND status <> 'retracted' AND valid @> now()"
            ))
            .await?;
        let as_of = client
            .prepare(&format!(
                "SELECT {COLUMNS} FROM facts WHERE subject = $1 AND predicate = $2 \
                 AND recorded @> to_timestamp($3::float8 / 1000) AND valid @> to_timestamp($4::float8 / 1000) \
                 AND status <> 'retracted'"
            ))
            .await?;
        let history = client
            .prepare(&format!(
                "SELECT {COLUMNS} FROM facts WHERE subject = $1 AND upper_inf(recorded) ORDER BY lower(valid)"
            ))
            .await?;
        let one = client.prepare("SELECT 1").await?;
        Ok(Conn { client, supersede, current, as_of, history, one })
    }

    /// `COPY ... FROM STDIN` into the table without its indexes, `streams`
    /// copies at once, then the indexes and the constraint are built (and
    /// checked) over everything.
    pub async fn bulk_load(&self, size: u64, streams: usize) -> Result<()> {
        let c = self.client().await?;
        let started = std::time::Instant::now();
        c.batch_execute(
            "ALTER TABLE facts DROP CONSTRAINT one_value_at_a_time; DROP INDEX facts_key; DROP INDEX facts_current;",
        )
        .await?;
        let streams = streams.max(1) as u64;
        let per = size.div_ceil(streams);
        let mut tasks = Vec::new();
        for s in 0..streams {
            let client = self.client().await?;
            let (from, to) = (s * per, ((s + 1) * per).min(size));
            tasks.push(tokio::spawn(async move {
                let sink = client
                    .copy_in("COPY facts (subject, predicate, object, confidence, source, status, valid) FROM STDIN")
                    .await?;
                futures_util::pin_mut!(sink);
                let mut buf = String::with_capacity(1 << 20);
                for n in from..to {
                    let r = data::row(n);
                    let until = VALID_STARTS_SQL.get(r.version + 1).map(|u| format!("\"{u}+00\"")).unwrap_or_default();
                    buf.push_str(&format!(
                        "{}\t{PREDICATE}\t{}\t0.9\timport\tactive\t[\"{}+00\",{until})\n",
                        r.subject, r.object, VALID_STARTS_SQL[r.version]
                    ));
                    if buf.len() > (1 << 20) - 256 {
                        sink.send(bytes::Bytes::from(std::mem::take(&mut buf))).await?;
                    }
                }
                if !buf.is_empty() {
                    sink.send(bytes::Bytes::from(buf)).await?;
                }
                sink.finish().await?;
                Ok::<_, anyhow::Error>(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        let copied = started.elapsed().as_secs_f64();
        c.batch_execute(INDEXES).await.context("building the indexes after the bulk load")?;
        eprintln!(
            "postgres bulk load: COPY {copied:.1} s, indexes and constraint {:.1} s",
            started.elapsed().as_secs_f64() - copied
        );
        Ok(())
    }

    /// A checkpoint, so the size on disk is the tables and a settled WAL,
    /// not the WAL of the bulk load still waiting to be recycled.
    pub async fn settle(&self) -> Result<()> {
        self.client().await?.batch_execute("CHECKPOINT").await?;
        Ok(())
    }

    pub async fn check(&self) -> Result<Violations> {
        let c = self.client().await?;
        let row = c
            .query_one(
                "SELECT
                  (SELECT count(*) FROM (SELECT 1 FROM facts WHERE upper_inf(recorded) AND status = 'active'
                     AND upper_inf(valid) GROUP BY subject, predicate HAVING count(*) > 1) d),
                  (SELECT count(*) FROM facts WHERE upper_inf(recorded) AND NOT isempty(valid)
                     AND NOT upper_inf(valid) AND upper(valid) < lower(valid)),
                  (SELECT count(*) FROM (SELECT valid, lag(valid) OVER (PARTITION BY subject, predicate
                     ORDER BY lower(valid)) AS prev FROM facts WHERE upper_inf(recorded) AND status <> 'retracted'
                     AND NOT isempty(valid)) o WHERE prev && valid),
                  (SELECT count(*) FROM facts WHERE upper_inf(recorded)),
                  (SELECT count(*) FROM facts)",
                &[],
            )
            .await?;
        let n = |i: usize| row.get::<_, i64>(i) as u64;
        Ok(Violations { duplicate_active: n(0), inverted: n(1), overlapping: n(2), facts: n(3), versions: n(4) })
    }
}

/// Errors after which the same transaction, started again, can succeed.
fn retryable(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        [SqlState::T_R_DEADLOCK_DETECTED, SqlState::T_R_SERIALIZATION_FAILURE, SqlState::EXCLUSION_VIOLATION]
            .contains(c)
            || *c == SqlState::LOCK_NOT_AVAILABLE
    })
}

impl Conn {
    pub async fn run(&mut self, op: &Op<'_>) -> Result<Done> {
        let rows = match *op {
            Op::Supersede { subject, object } => {
                let mut retries = 0;
                loop {
                    match self.client.query_one(&self.supersede, &[&subject, &PREDICATE, &object, &"w1"]).await {
                        Ok(_) => return Ok(Done { rows: 1, retries }),
                        Err(e) if retryable(&e) && retries < super::MAX_RETRIES => {
                            retries += 1;
                            super::backoff(retries).await;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Op::Current { subject } => self.client.query(&self.current, &[&subject, &PREDICATE]).await?,
            Op::AsOf { subject, as_of_ms, valid_ms } => {
                self.client.query(&self.as_of, &[&subject, &PREDICATE, &(as_of_ms as f64), &(valid_ms as f64)]).await?
            }
            Op::History { subject } => self.client.query(&self.history, &[&subject]).await?,
            Op::RoundTrip => self.client.query(&self.one, &[]).await?,
        };
        Ok(Done { rows: rows.len(), retries: 0 })
    }
}
