//! The read path on PostgreSQL: the same answers as the embedded engine's
//! reads (`tempora_storage`'s `read.rs`), in the same order, from SQL.
//!
//! A current read works on `facts` (the latest version of each fact). A
//! read rewound with `as_of` walks the same rows in the same order and
//! takes, for each, the version visible then from `fact_versions`. The
//! status and valid-time filters are the engine's `selected`, written as
//! SQL.

use super::rows::{self, columns_of, db_tx, json_text, COLUMNS};
pub use super::shared::db;
use crate::store::{
    AsOf, Change, ChangeEvent, EngineError, Fact, FactHistory, FactId, FactPage, FactQuery, LoggedChange,
    LoggedEvent, Millis, PredicateInfo, SourceStats, Status, StatusFilter, TenantStats, Tx, DEFAULT_PAGE, MAX_PAGE,
};
use std::collections::HashMap;
use tempora_storage::record::LogEvent;
use deadpool_postgres::{Client, GenericClient};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

pub type Result<T> = std::result::Result<T, EngineError>;

/// The tenant's id, as a condition's right side: a tenant that has never
/// written has none, and matches nothing.
const TENANT: &str = "(SELECT id FROM tenants WHERE name = $1)";

/// Reads through statements each connection prepares once (its cache of
/// them is kept by the pool): the server parses a read's SQL once, and
/// after a few runs plans it once, instead of on every read; planning a
/// read costs more than running it.
trait Cached: GenericClient {
    async fn cached(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
        let s = self.prepare_cached(sql).await?;
        self.query(&s, params).await
    }

    async fn cached_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Option<Row>, tokio_postgres::Error> {
        let s = self.prepare_cached(sql).await?;
        self.query_opt(&s, params).await
    }

    async fn cached_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> std::result::Result<Row, tokio_postgres::Error> {
        let s = self.prepare_cached(sql).await?;
        self.query_one(&s, params).await
    }
}

impl<T: GenericClient> Cached for T {}

/// `as_of` as a transaction bound: a record time resolves to the last
/// transaction recorded at or before it. A time at or after the store's
/// last commit first waits for a group that is committing (its lock on the
/// clock), so a write recorded at or before that time cannot commit after
/// the read and change its answer: no late-arriving past.
pub async fn as_of_tx(c: &mut Client, as_of: Option<AsOf>) -> Result<Option<Tx>> {
    match as_of {
        None => Ok(None),
        Some(AsOf::Tx(x)) => Ok(Some(x)),
        Some(AsOf::Time(t)) => {
            let last_at: i64 = c.cached_one("SELECT last_recorded_at FROM clock", &[]).await.map_err(db)?.get(0);
            if t >= last_at {
                // Wait out a group that is committing: it holds the clock.
                let tx = c.transaction().await.map_err(db)?;
                tx.cached_one("SELECT last_tx FROM clock FOR SHARE", &[]).await.map_err(db)?;
                tx.commit().await.map_err(db)?;
            }
            // Every commit from now on is recorded at or after the
            // database's present, so the answer for a past time is final.
            let row = c
                .cached_opt(
                    "SELECT tx FROM changes WHERE recorded_at <= $1 ORDER BY recorded_at DESC, tx DESC LIMIT 1",
                    &[&t],
                )
                .await
                .map_err(db)?;
            Ok(Some(row.map_or(0, |r| r.get::<_, i64>(0) as Tx)))
        }
    }
}

pub async fn get(c: &mut Client, tenant: &str, id: FactId, as_of: Option<AsOf>) -> Result<Option<Fact>> {
    let row = match as_of_tx(c, as_of).await? {
        None => c.cached_opt(&format!("SELECT {COLUMNS} FROM facts WHERE tenant_id = {TENANT} AND id = $2"), &[&tenant, &id]).await,
        Some(x) => {
            c.cached_opt(
                &format!(
                    "SELECT {COLUMNS} FROM fact_versions WHERE tenant_id = {TENANT} AND id = $2 AND tx <= $3
                     ORDER BY tx DESC LIMIT 1"
                ),
                &[&tenant, &id, &db_tx(x)],
            )
            .await
        }
    };
    row.map_err(db)?.map(|r| rows::fact(tenant, &r)).transpose()
}

pub async fn history(c: &Client, tenant: &str, id: FactId) -> Result<FactHistory> {
    let not_found = || EngineError::NotFound(format!("no fact with id {id}"));
    let found = c
        .cached(&format!("SELECT {COLUMNS} FROM fact_versions WHERE tenant_id = {TENANT} AND id = $2 ORDER BY tx"), &[&tenant, &id])
        .await
        .map_err(db)?;
    let versions = found.iter().map(|r| rows::fact(tenant, r)).collect::<Result<Vec<_>>>()?;
    if versions.is_empty() {
        return Err(not_found());
    }
    let mut predecessors = Vec::new();
    let mut successors = Vec::new();
    for v in &versions {
        for p in v.supersedes.iter().chain(&v.continues) {
            if !predecessors.contains(p) {
                predecessors.push(*p);
            }
        }
        for s in v.superseded_by.iter().chain(&v.continued_by) {
            if !successors.contains(s) {
                successors.push(*s);
            }
        }
    }
    Ok(FactHistory { id, versions, predecessors, successors })
}

/// Which order a query's pages come in, as the engine's index for it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// By subject, predicate, id (a subject given, or nothing).
    Subject,
    /// By predicate, subject, id (an object given, no subject).
    Object,
}

impl Plan {
    fn tag(self) -> char {
        match self {
            Plan::Subject => 'S',
            Plan::Object => 'O',
        }
    }
}

/// The statuses a query admits (the engine's `selected`, as a list).
fn statuses(q: &FactQuery) -> Vec<&'static str> {
    let mut out: Vec<Status> = match q.status {
        StatusFilter::Current => {
            let mut s = vec![Status::Active];
            if q.valid_at.is_some() {
                s.push(Status::Superseded);
            }
            s
        }
        StatusFilter::Only(s) => vec![s],
        StatusFilter::Among(set) => Status::ALL.into_iter().filter(|s| set.contains(*s)).collect(),
        StatusFilter::Any => vec![Status::Active, Status::Candidate, Status::Superseded],
    };
    if q.include_retracted && !out.contains(&Status::Retracted) {
        out.push(Status::Retracted);
    }
    out.into_iter().map(Status::as_str).collect()
}

/// A page of facts matching `q`, in the engine's order.
pub async fn query(c: &mut Client, tenant: &str, q: &FactQuery) -> Result<FactPage> {
    let limit = match q.limit {
        0 => DEFAULT_PAGE,
        n => n.min(MAX_PAGE),
    };
    let plan = if q.subject.is_none() && q.object.is_some() { Plan::Object } else { Plan::Subject };
    let as_of = as_of_tx(c, q.as_of).await?;
    let object = q.object.as_ref().map(json_text);
    let status = statuses(q);
    let asof_tx = as_of.map(db_tx);

    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(tenant.to_string())];
    let mut bind = |v: Box<dyn ToSql + Sync + Send>| {
        params.push(v);
        format!("${}", params.len())
    };
    let mut wher = vec![format!("f.tenant_id = {TENANT}")];
    if let Some(s) = &q.subject {
        wher.push(format!("f.subject = {}", bind(Box::new(s.clone()))));
    }
    if let Some(p) = &q.predicate {
        wher.push(format!("f.predicate = {}", bind(Box::new(p.clone()))));
    }
    if let Some(o) = &object {
        let at = bind(Box::new(o.clone()));
        wher.push(format!("md5(f.object) = md5({at}) AND f.object = {at}"));
    }
    // Every version of a fact starts where its latest does.
    if let Some(t) = q.valid_at {
        wher.push(format!("f.valid_from <= {}", bind(Box::new(t))));
    }
    let order = match plan {
        Plan::Subject => ["subject", "predicate", "id"],
        Plan::Object => ["predicate", "subject", "id"],
    };
    if let Some(cursor) = &q.cursor {
        let (a, b, id) = decode_cursor(cursor, plan, q)?;
        // A cursor resumes the query it came from: its row must be one
        // this query could return.
        let (subject, predicate) = match plan {
            Plan::Subject => (&a, &b),
            Plan::Object => (&b, &a),
        };
        if q.subject.as_ref().is_some_and(|s| s != subject) || q.predicate.as_ref().is_some_and(|p| p != predicate) {
            return Err(EngineError::Invalid("cursor does not belong to this query".into()));
        }
        let (a, b, id) = (bind(Box::new(a)), bind(Box::new(b)), bind(Box::new(id)));
        wher.push(format!("(f.{}, f.{}, f.id) > ({a}, {b}, {id})", order[0], order[1]));
    }
    // The version the read sees: the latest, or the one visible at as_of.
    let (source, v) = match asof_tx {
        None => ("facts f".to_string(), "f"),
        Some(x) => {
            let x = bind(Box::new(x));
            (
                format!(
                    "facts f CROSS JOIN LATERAL (
                         SELECT {COLUMNS} FROM fact_versions fv
                         WHERE fv.tenant_id = f.tenant_id AND fv.id = f.id AND fv.tx <= {x}
                         ORDER BY fv.tx DESC LIMIT 1) v"
                ),
                "v",
            )
        }
    };
    wher.push(format!("{v}.status = ANY({})", bind(Box::new(status.iter().map(|s| s.to_string()).collect::<Vec<_>>()))));
    if let Some(t) = q.valid_at {
        let t = bind(Box::new(t));
        wher.push(format!("{v}.valid_from <= {t} AND ({v}.valid_until IS NULL OR {t} < {v}.valid_until)"));
    }
    let fetch = bind(Box::new((limit + 1) as i64));
    let sql = format!(
        "SELECT {} FROM {source} WHERE {} ORDER BY f.{}, f.{}, f.{} LIMIT {fetch}",
        columns_of(v),
        wher.join(" AND "),
        order[0],
        order[1],
        order[2]
    );
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect();
    let found = c.cached(&sql, &refs).await.map_err(db)?;
    let mut facts = found.iter().map(|r| rows::fact(tenant, r)).collect::<Result<Vec<_>>>()?;
    let more = facts.len() > limit;
    facts.truncate(limit);
    let next_cursor = match (more, facts.last()) {
        (true, Some(last)) => Some(encode_cursor(plan, q, last)),
        _ => None,
    };
    Ok(FactPage { facts, next_cursor })
}

/// Which query a cursor belongs to: its filters. Two queries that read in
/// the same order would otherwise take each other's cursors, and a page
/// would silently come from another listing.
fn query_tag(q: &FactQuery) -> String {
    use sha2::Digest;
    let filters = serde_json::json!([q.subject, q.predicate, q.object]).to_string();
    format!("{:x}", sha2::Sha256::digest(filters.as_bytes()))[..16].to_string()
}

fn encode_cursor(plan: Plan, q: &FactQuery, last: &Fact) -> String {
    let (a, b) = match plan {
        Plan::Subject => (&last.subject, &last.predicate),
        Plan::Object => (&last.predicate, &last.subject),
    };
    let json = serde_json::json!([a, b, last.id, query_tag(q)]).to_string();
    let mut s = String::with_capacity(1 + json.len() * 2);
    s.push(plan.tag());
    for byte in json.as_bytes() {
        s.push_str(&format!("{byte:02x}"));
    }
    s
}

fn decode_cursor(c: &str, plan: Plan, q: &FactQuery) -> Result<(String, String, uuid::Uuid)> {
    let bad = || EngineError::Invalid("cursor does not belong to this query".into());
    let hex = c.strip_prefix(plan.tag()).ok_or_else(bad)?;
    if hex.len() % 2 != 0 || !hex.is_ascii() {
        return Err(bad());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<std::result::Result<Vec<u8>, _>>()
        .map_err(|_| bad())?;
    let (a, b, id, tag) = serde_json::from_slice::<(String, String, uuid::Uuid, String)>(&bytes).map_err(|_| bad())?;
    if tag != query_tag(q) {
        return Err(bad());
    }
    Ok((a, b, id))
}

/// Every version of every fact about `subject` visible at `as_of`, by tx
/// then id.
pub async fn subject_history(c: &mut Client, tenant: &str, subject: &str, as_of: Option<AsOf>) -> Result<Vec<Fact>> {
    let bound = as_of_tx(c, as_of).await?.map_or(i64::MAX, db_tx);
    let found = c
        .cached(
            &format!(
                "SELECT {COLUMNS} FROM fact_versions WHERE tenant_id = {TENANT} AND subject = $2 AND tx <= $3
                 ORDER BY tx, id"
            ),
            &[&tenant, &subject, &bound],
        )
        .await
        .map_err(db)?;
    found.iter().map(|r| rows::fact(tenant, r)).collect()
}

/// The tenant's change-log rows after `after`, oldest first.
async fn log_rows(c: &Client, tenant: &str, after: Tx, limit: usize) -> Result<Vec<(Tx, Millis, Vec<LogEvent>)>> {
    let found = c
        .cached(
            &format!("SELECT tx, recorded_at, events FROM changes WHERE tenant_id = {TENANT} AND tx > $2 ORDER BY tx LIMIT $3"),
            &[&tenant, &db_tx(after), &(limit.min(i64::MAX as usize) as i64)],
        )
        .await
        .map_err(db)?;
    found
        .iter()
        .map(|r| {
            let events: serde_json::Value = r.get(2);
            let events: Vec<LogEvent> = serde_json::from_value(events)
                .map_err(|e| rows::corrupt(format!("a change-log row does not read: {e}")))?;
            Ok((r.get::<_, i64>(0) as Tx, r.get(1), events))
        })
        .collect()
}

/// Committed transactions of the tenant after `after`, resolved to versions.
pub async fn changes(c: &Client, tenant: &str, after: Tx, limit: usize) -> Result<Vec<Change>> {
    let log = log_rows(c, tenant, after, limit).await?;
    let Some(last) = log.last().map(|l| l.0) else { return Ok(Vec::new()) };
    // Every version those transactions wrote, in one read.
    let found = c
        .cached(
            &format!("SELECT {COLUMNS} FROM fact_versions WHERE tenant_id = {TENANT} AND tx > $2 AND tx <= $3"),
            &[&tenant, &db_tx(after), &db_tx(last)],
        )
        .await
        .map_err(db)?;
    let mut versions: HashMap<(FactId, Tx), Fact> = HashMap::with_capacity(found.len());
    for r in &found {
        let f = rows::fact(tenant, r)?;
        versions.insert((f.id, f.tx), f);
    }
    let version = |id: FactId, tx: Tx| {
        versions
            .get(&(id, tx))
            .cloned()
            .ok_or_else(|| rows::corrupt(format!("the change log names version {id}@{tx}, which is missing")))
    };
    let mut out = Vec::with_capacity(log.len());
    for (tx, recorded_at, events) in log {
        let mut resolved = Vec::with_capacity(events.len());
        for e in events {
            resolved.push(match e {
                LogEvent::Assert { fact, superseded, continued, .. } => ChangeEvent::Assert {
                    fact: version(fact, tx)?,
                    superseded: superseded.into_iter().map(|id| version(id, tx)).collect::<Result<_>>()?,
                    continued: continued.into_iter().map(|id| version(id, tx)).collect::<Result<_>>()?,
                },
                LogEvent::Retract { fact, .. } => ChangeEvent::Retract { fact: version(fact, tx)? },
                LogEvent::Cardinality { predicate, cardinality } => {
                    ChangeEvent::Cardinality(PredicateInfo { name: predicate, cardinality })
                }
                LogEvent::Threshold { threshold } => ChangeEvent::Threshold(threshold),
            });
        }
        out.push(Change { tx, recorded_at, tenant: tenant.to_string(), events: resolved });
    }
    Ok(out)
}

/// The same by fact id: every row this store writes carries the subjects
/// and value-change counts.
pub async fn change_log(c: &Client, tenant: &str, after: Tx, limit: usize) -> Result<Vec<LoggedChange>> {
    let mut out = Vec::new();
    for (tx, recorded_at, events) in log_rows(c, tenant, after, limit).await? {
        let mut logged = Vec::with_capacity(events.len());
        for e in events {
            logged.push(match e {
                LogEvent::Assert { fact, superseded, continued, subject, changed } => LoggedEvent::Assert {
                    fact,
                    subject: subject.unwrap_or_default(),
                    superseded,
                    continued,
                    changed: changed.unwrap_or(0) as usize,
                },
                LogEvent::Retract { fact, subject } => LoggedEvent::Retract { fact, subject: subject.unwrap_or_default() },
                LogEvent::Cardinality { predicate, cardinality } => {
                    LoggedEvent::Cardinality(PredicateInfo { name: predicate, cardinality })
                }
                LogEvent::Threshold { threshold } => LoggedEvent::Threshold(threshold),
            });
        }
        out.push(LoggedChange { tx, recorded_at, events: logged });
    }
    Ok(out)
}

pub async fn tenant_last_write(c: &Client, tenant: &str) -> Result<Option<(Tx, Millis)>> {
    let row = c
        .cached_opt("SELECT last_tx, last_recorded_at FROM tenants WHERE name = $1 AND last_tx > 0", &[&tenant])
        .await
        .map_err(db)?;
    Ok(row.map(|r| (r.get::<_, i64>(0) as Tx, r.get(1))))
}

pub async fn last_tx(c: &Client) -> Result<(Tx, Millis)> {
    let r = c.cached_one("SELECT last_tx, last_recorded_at FROM clock", &[]).await.map_err(db)?;
    Ok((r.get::<_, i64>(0) as Tx, r.get(1)))
}

pub async fn predicate(c: &Client, tenant: &str, name: &str) -> Result<PredicateInfo> {
    let row = c
        .cached_opt(
            "SELECT p.cardinality FROM predicates p JOIN tenants t ON t.id = p.tenant_id WHERE t.name = $1 AND p.name = $2",
            &[&tenant, &name],
        )
        .await
        .map_err(db)?;
    let cardinality = match row {
        Some(r) => rows::cardinality_of(r.get(0))?,
        None => Default::default(),
    };
    Ok(PredicateInfo { name: name.to_string(), cardinality })
}

pub async fn predicates(c: &Client, tenant: &str) -> Result<Vec<PredicateInfo>> {
    let found = c
        .cached(
            "SELECT p.name, p.cardinality FROM predicates p JOIN tenants t ON t.id = p.tenant_id
             WHERE t.name = $1 ORDER BY p.name",
            &[&tenant],
        )
        .await
        .map_err(db)?;
    found.iter().map(|r| Ok(PredicateInfo { name: r.get(0), cardinality: rows::cardinality_of(r.get(1))? })).collect()
}

pub async fn threshold(c: &Client, tenant: &str) -> Result<Option<f64>> {
    let row = c.cached_opt("SELECT threshold FROM tenants WHERE name = $1", &[&tenant]).await.map_err(db)?;
    Ok(row.map(|r| r.get(0)))
}

pub async fn stats(c: &Client, tenant: &str) -> Result<TenantStats> {
    let row = c
        .cached_opt(
            "SELECT active, candidate, superseded, retracted, subjects, predicate_count FROM tenants WHERE name = $1",
            &[&tenant],
        )
        .await
        .map_err(db)?;
    Ok(row.map_or_else(TenantStats::default, |r| TenantStats {
        active: r.get::<_, i64>(0) as u64,
        candidate: r.get::<_, i64>(1) as u64,
        superseded: r.get::<_, i64>(2) as u64,
        retracted: r.get::<_, i64>(3) as u64,
        subjects: r.get::<_, i64>(4) as u64,
        predicates: r.get::<_, i64>(5) as u64,
    }))
}

pub async fn source_stats(c: &Client, tenant: &str, source: &str) -> Result<SourceStats> {
    let row = c
        .cached_opt(
            "SELECT s.active, s.candidate, s.superseded, s.retracted FROM source_stats s
             JOIN tenants t ON t.id = s.tenant_id WHERE t.name = $1 AND s.source = $2",
            &[&tenant, &source],
        )
        .await
        .map_err(db)?;
    Ok(row.map_or_else(SourceStats::default, |r| SourceStats {
        active: r.get::<_, i64>(0) as u64,
        candidate: r.get::<_, i64>(1) as u64,
        superseded: r.get::<_, i64>(2) as u64,
        retracted: r.get::<_, i64>(3) as u64,
    }))
}

pub async fn tenants(c: &Client) -> Result<Vec<String>> {
    // A tenant's row is made with its first write, and stays when that
    // write is refused; a tenant is one once it has a transaction.
    Ok(c
        .cached("SELECT name FROM tenants WHERE last_tx > 0 ORDER BY name", &[])
        .await
        .map_err(db)?
        .iter()
        .map(|r| r.get(0))
        .collect())
}
