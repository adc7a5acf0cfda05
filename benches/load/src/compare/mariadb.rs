//! MariaDB with its native bitemporal table: record time by system
//! versioning (`WITH SYSTEM VERSIONING`, history kept by the server), valid
//! time as an application-time period with `WITHOUT OVERLAPS` (two current
//! rows of one key can never overlap), and supersession as one stored
//! procedure call: lock the key's rows, close the active value's valid time
//! at now (the server keeps the row as it was in its history), insert the new
//! value, commit.
//!
//! The native way to close valid time is `DELETE ... FOR PORTION OF valid
//! FROM now TO the end` (the server keeps the part before now as its own
//! row). On MariaDB 10.11.19 with 16 concurrent writers it answered
//! `Duplicate entry for key 'PRIMARY'` and then crashed the server (signal
//! 11) within seconds, so the procedure closes the interval with a plain
//! `UPDATE` of `valid_to`, which is the same change for this data.

use super::data::{self, PREDICATE, VALID_STARTS_SQL};
use super::system::{Done, Op, Violations};
use anyhow::{Context, Result};
use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder, Row, Statement};

/// The end of an open valid interval (`DATETIME` has no infinity).
const OPEN: &str = "9999-12-31 00:00:00";

pub struct Mariadb {
    opts: Opts,
}

pub struct Conn {
    conn: mysql_async::Conn,
    supersede: Statement,
    current: Statement,
    as_of: Statement,
    history: Statement,
    one: Statement,
}

const SCHEMA: [&str; 3] = [
    "DROP PROCEDURE IF EXISTS supersede",
    "DROP TABLE IF EXISTS facts",
    "CREATE TABLE facts (
        id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
        subject VARCHAR(191) NOT NULL,
        predicate VARCHAR(64) NOT NULL,
        object VARCHAR(255) NOT NULL,
        confidence DOUBLE NOT NULL,
        source VARCHAR(64),
        valid_from DATETIME(6) NOT NULL,
        valid_to DATETIME(6) NOT NULL,
        PERIOD FOR valid(valid_from, valid_to),
        PRIMARY KEY (id),
        UNIQUE KEY one_value_at_a_time (subject, predicate, valid WITHOUT OVERLAPS)
    ) ENGINE=InnoDB WITH SYSTEM VERSIONING",
];

const PROCEDURE: &str = "CREATE PROCEDURE supersede(IN p_subject VARCHAR(191), IN p_predicate VARCHAR(64),
        IN p_object VARCHAR(255), IN p_source VARCHAR(64))
    BEGIN
        DECLARE ts DATETIME(6);
        DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
        START TRANSACTION;
        SELECT COUNT(*) INTO @locked FROM facts WHERE subject = p_subject AND predicate = p_predicate FOR UPDATE;
        -- Read after the lock: later than anything the previous holder wrote.
        SET ts = SYSDATE(6);
        UPDATE facts SET valid_to = ts
            WHERE subject = p_subject AND predicate = p_predicate AND valid_from < ts AND valid_to > ts;
        INSERT INTO facts (subject, predicate, object, confidence, source, valid_from, valid_to)
            VALUES (p_subject, p_predicate, p_object, 0.9, p_source, ts, '9999-12-31 00:00:00');
        COMMIT;
    END";

const COLUMNS: &str = "id, subject, predicate, object, confidence, source, valid_from, valid_to, row_start, row_end";

impl Mariadb {
    pub fn new(url: &str) -> Result<Mariadb> {
        let opts = Opts::from_url(url).with_context(|| format!("a MariaDB URL: {url}"))?;
        // Every time in UTC, as tempora and the PostgreSQL peer use.
        // Over TCP like the other systems (not the server's socket, which the driver prefers by default).
        let opts = OptsBuilder::from_opts(opts).prefer_socket(false).init(vec!["SET time_zone = '+00:00'"]).into();
        Ok(Mariadb { opts })
    }

    async fn conn(&self) -> Result<mysql_async::Conn> {
        mysql_async::Conn::new(self.opts.clone()).await.context("connecting to MariaDB")
    }

    pub async fn setup(&self) -> Result<()> {
        let mut c = self.conn().await?;
        for sql in SCHEMA {
            c.query_drop(sql).await.context("creating the MariaDB schema")?;
        }
        c.query_drop(PROCEDURE).await.context("creating the MariaDB procedure")?;
        Ok(())
    }

    pub async fn connect(&self) -> Result<Conn> {
        let mut conn = self.conn().await?;
        let supersede = conn.prep("CALL supersede(?, ?, ?, ?)").await?;
        let current = conn
            .prep(format!(
                "SELECT {COLUMNS} FROM facts WHERE subject = ? AND predicate = ? \
                 AND valid_from <= NOW(6) AND valid_to > NOW(6)"
            ))
            .await?;
        let as_of = conn
            .prep(format!(
                "SELECT {COLUMNS} FROM facts FOR SYSTEM_TIME AS OF TIMESTAMP FROM_UNIXTIME(? / 1000) \
                 WHERE subject = ? AND predicate = ? \
                 AND valid_from <= FROM_UNIXTIME(? / 1000) AND valid_to > FROM_UNIXTIME(? / 1000)"
            ))
            .await?;
        let history = conn.prep(format!("SELECT {COLUMNS} FROM facts WHERE subject = ? ORDER BY valid_from")).await?;
        let one = conn.prep("SELECT 1").await?;
        Ok(Conn { conn, supersede, current, as_of, history, one })
    }

    /// `LOAD DATA LOCAL INFILE` of 50 000 rows at a time, streamed from
    /// memory, `streams` loads at once into the indexed, versioned table. Two
    /// loads into one table can deadlock; the loser's chunk is rolled back and
    /// loaded again.
    pub async fn bulk_load(&self, size: u64, streams: usize) -> Result<()> {
        const CHUNK: u64 = 50_000;
        let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..streams.max(1) {
            let (mut conn, next) = (self.conn().await?, next.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let from = next.fetch_add(CHUNK, std::sync::atomic::Ordering::Relaxed);
                    if from >= size {
                        return Ok::<_, anyhow::Error>(());
                    }
                    let to = (from + CHUNK).min(size);
                    let mut retries = 0;
                    loop {
                        match load_chunk(&mut conn, from, to).await {
                            Ok(()) => break,
                            Err(e) if retryable(&e) && retries < super::MAX_RETRIES => {
                                retries += 1;
                                eprintln!("mariadb bulk load: rows {from}..{to} loaded again after: {e}");
                                super::backoff(retries).await;
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
            }));
        }
        for t in tasks {
            t.await??;
        }
        self.conn().await?.query_drop("ANALYZE TABLE facts").await?;
        Ok(())
    }

    pub async fn check(&self) -> Result<Violations> {
        let mut c = self.conn().await?;
        let row: Option<(u64, u64, u64, u64, u64)> = c
            .query_first(format!(
                "SELECT
                  (SELECT COUNT(*) FROM (SELECT 1 FROM facts WHERE valid_to = '{OPEN}'
                     GROUP BY subject, predicate HAVING COUNT(*) > 1) d),
                  (SELECT COUNT(*) FROM facts WHERE valid_to < valid_from),
                  (SELECT COUNT(*) FROM (SELECT valid_from, LAG(valid_to) OVER (PARTITION BY subject, predicate
                     ORDER BY valid_from) AS prev_to FROM facts) o WHERE prev_to > valid_from),
                  (SELECT COUNT(*) FROM facts),
                  (SELECT COUNT(*) FROM facts FOR SYSTEM_TIME ALL)"
            ))
            .await?;
        let (d, i, o, n, all) = row.context("the check returned no row")?;
        Ok(Violations { duplicate_active: d, inverted: i, overlapping: o, facts: n, versions: all })
    }
}

/// One `LOAD DATA LOCAL INFILE` of data set rows `from..to`, generated as it is sent.
async fn load_chunk(conn: &mut mysql_async::Conn, from: u64, to: u64) -> std::result::Result<(), mysql_async::Error> {
    const PIECE: u64 = 5_000;
    let pieces = futures_util::stream::iter((from..to).step_by(PIECE as usize)).map(move |start| {
        let mut buf = String::with_capacity(PIECE as usize * 80);
        for n in start..(start + PIECE).min(to) {
            let r = data::row(n);
            let until = VALID_STARTS_SQL.get(r.version + 1).copied().unwrap_or(OPEN);
            buf.push_str(&format!(
                "{}\t{PREDICATE}\t{}\t0.9\timport\t{}\t{until}\n",
                r.subject, r.object, VALID_STARTS_SQL[r.version]
            ));
        }
        Ok(bytes::Bytes::from(buf))
    });
    conn.set_infile_handler(async move { Ok(pieces.boxed()) });
    conn.query_drop(
        "LOAD DATA LOCAL INFILE 'facts.tsv' INTO TABLE facts FIELDS TERMINATED BY '\\t' \
         (subject, predicate, object, confidence, source, valid_from, valid_to)",
    )
    .await
}

/// Deadlock, lock wait timeout, and the unique period key refusing a racing insert.
fn retryable(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if [1213, 1205, 1062].contains(&s.code))
}

impl Conn {
    pub async fn run(&mut self, op: &Op<'_>) -> Result<Done> {
        let rows: Vec<Row> = match *op {
            Op::Supersede { subject, object } => {
                let mut retries = 0;
                loop {
                    match self.conn.exec_drop(&self.supersede, (subject, PREDICATE, object, "w1")).await {
                        Ok(()) => return Ok(Done { rows: 1, retries }),
                        Err(e) if retryable(&e) && retries < super::MAX_RETRIES => {
                            retries += 1;
                            super::backoff(retries).await;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Op::Current { subject } => self.conn.exec(&self.current, (subject, PREDICATE)).await?,
            Op::AsOf { subject, as_of_ms, valid_ms } => {
                self.conn.exec(&self.as_of, (as_of_ms, subject, PREDICATE, valid_ms, valid_ms)).await?
            }
            Op::History { subject } => self.conn.exec(&self.history, (subject,)).await?,
            Op::RoundTrip => self.conn.exec(&self.one, ()).await?,
        };
        Ok(Done { rows: rows.len(), retries: 0 })
    }
}
