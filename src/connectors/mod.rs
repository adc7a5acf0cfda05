//! Connectors: named, tenant-scoped sources of records. A connector is
//! pushed to (`POST /api/connectors/{name}/events`, a webhook) or pulls from
//! its URL (`POST /api/connectors/{name}/pull`, optionally on a schedule);
//! either way each record becomes facts stamped with the source
//! `connector:<name>`.
//!
//! A connector's settings are facts too, about `Connector:<name>` in the
//! tenant's own memory: registering again supersedes the settings that
//! changed, so how a connector was configured at any time stays answerable.
//! The state of its last pull is operational, not history: it is an aux
//! record (`pull::LastPull`).
//!
//! - `records.rs`: bodies split into records as the bytes arrive.
//! - `mapping.rs`: a record's subject and which fields become facts.
//! - `ingest.rs`: records to facts, written in bounded transactions.
//! - `pull.rs`: the SSRF-guarded fetch.
//! - `schedule.rs`: pulls every `every_secs`.

pub mod config;
pub mod ingest;
pub mod mapping;
pub mod pull;
pub mod records;
pub mod schedule;

use crate::digest::mask::Strategy;
use mapping::{FieldMap, SubjectRule};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use crate::store::{MemoryStore, EngineError, Fact, FactInput, FactQuery, Status, StatusFilter, StatusSet, WriteOp};

pub const ENTITY_TYPE: &str = "Connector";
pub const KINDS: [&str; 2] = ["webhook", "pull"];
pub const MAX_NAME_LEN: usize = 64;
/// Shortest schedule by default (`[connectors] min_every_secs`): a pull more
/// often than this is a load test, not a sync.
pub const MIN_EVERY_SECS: u64 = 10;
/// Longest schedule: about a year.
pub const MAX_EVERY_SECS: u64 = 366 * 24 * 3600;

/// The settings a connector keeps, each one a predicate of `Connector:<name>`
/// under [`SETTING_PREFIX`]: the prefix keeps listing connectors an index
/// read of their own (`connector.kind`), not a scan of every `kind` fact a
/// tenant may hold.
pub const SETTING_PREFIX: &str = "connector.";
const SETTINGS: [&str; 8] = ["kind", "label", "url", "subject", "fields", "mask", "confidence", "every_secs"];

/// A connector's settings, as registered.
#[derive(Debug, Clone, PartialEq)]
pub struct Connector {
    pub name: String,
    pub kind: String,
    pub label: Option<String>,
    pub url: Option<String>,
    /// The subject mapping as written (`Person:{id}`, `Person`, `Org:acme`).
    pub subject: Option<String>,
    pub fields: FieldMap,
    pub mask: Strategy,
    /// Confidence given to the facts (the tenant's threshold decides whether
    /// they land active or as candidates); unset means the engine default.
    pub confidence: Option<f64>,
    /// Pull every this many seconds (needs `url`).
    pub every_secs: Option<u64>,
    /// When these settings were first registered and last changed.
    pub created_at: i64,
    pub updated_at: i64,
}

impl Connector {
    pub fn entity(name: &str) -> String {
        format!("{ENTITY_TYPE}:{name}")
    }

    /// The `source` of every fact this connector writes.
    pub fn source(name: &str) -> String {
        format!("connector:{name}")
    }

    pub fn subject_rule(&self) -> SubjectRule {
        // Checked when registered.
        SubjectRule::parse(self.subject.as_deref()).unwrap_or(SubjectRule::Record)
    }

    fn setting(&self, predicate: &str) -> Value {
        match predicate {
            "kind" => json!(self.kind),
            "label" => json!(self.label),
            "url" => json!(self.url),
            "subject" => json!(self.subject),
            "fields" => self.fields.to_value(),
            "mask" => json!(self.mask.as_str()),
            "confidence" => json!(self.confidence),
            "every_secs" => json!(self.every_secs),
            _ => Value::Null,
        }
    }

    /// The wire form (`Connector` in the OpenAPI document), without the
    /// live parts the handler adds.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "kind": self.kind,
            "label": self.label.clone().unwrap_or_else(|| self.name.clone()),
            "url": self.url,
            "subject": self.subject.clone().unwrap_or_default(),
            "fields": self.fields.to_value(),
            "mask": self.mask.as_str(),
            "confidence": self.confidence,
            "every_secs": self.every_secs,
            "source": Connector::source(&self.name),
            "entity": Connector::entity(&self.name),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }
}

pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("name must be 1 to {MAX_NAME_LEN} characters, got {}", name.len()));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
        return Err(format!("name may hold letters, digits, '-', '_' and '.', got {name:?}"));
    }
    Ok(())
}

impl Connector {
    /// The connector a registration asks for, checked in everything that
    /// does not need the network (its times are set when it is stored).
    /// `kind` defaults to `pull` when a schedule is given and `webhook`
    /// otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn checked(
        name: String,
        kind: Option<String>,
        label: Option<String>,
        url: Option<String>,
        subject: Option<String>,
        fields: Option<&Value>,
        mask: Option<&str>,
        confidence: Option<f64>,
        every_secs: Option<i64>,
        min_every_secs: u64,
    ) -> Result<Connector, String> {
        check_name(&name)?;
        let kind = kind.unwrap_or_else(|| if every_secs.is_some() { "pull" } else { "webhook" }.to_string());
        if !KINDS.contains(&kind.as_str()) {
            return Err(format!("kind must be one of {}, got {kind:?}", KINDS.join(", ")));
        }
        if label.as_ref().is_some_and(|l| l.chars().count() > 200) {
            return Err("label must be at most 200 characters".into());
        }
        let label = label.map(|l| l.trim().to_string()).filter(|l| !l.is_empty());
        if let Some(u) = &url {
            check_url_syntax(u)?;
        }
        if kind == "pull" && url.is_none() {
            return Err("a pull connector needs a url".into());
        }
        if every_secs.is_some() && url.is_none() {
            return Err("every_secs schedules pulls of the connector's url: give a url".into());
        }
        if let Some(s) = every_secs {
            if !(min_every_secs as i64..=MAX_EVERY_SECS as i64).contains(&s) {
                return Err(format!("every_secs must be within [{min_every_secs}, {MAX_EVERY_SECS}], got {s}"));
            }
        }
        let every_secs = every_secs.map(|s| s as u64);
        let subject = subject.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
        SubjectRule::parse(subject.as_deref()).map_err(|e| format!("subject: {e}"))?;
        let fields = FieldMap::from_value(fields)?;
        let mask: Strategy = mask.unwrap_or("redact").parse()?;
        if let Some(c) = confidence {
            if !(0.0..=1.0).contains(&c) {
                return Err(format!("confidence must be within [0, 1], got {c}"));
            }
        }
        Ok(Connector {
            name,
            kind,
            label,
            url,
            subject,
            fields,
            mask,
            confidence,
            every_secs,
            created_at: 0,
            updated_at: 0,
        })
    }
}

/// The stored settings of one connector: the current fact of each setting.
fn settings(engine: &dyn MemoryStore, tenant: &str, name: &str) -> Result<BTreeMap<String, Fact>, EngineError> {
    let q = FactQuery {
        subject: Some(Connector::entity(name)),
        status: StatusFilter::Current,
        limit: 100,
        ..Default::default()
    };
    let mut out = BTreeMap::new();
    for f in engine.query(tenant, &q)?.facts {
        let Some(setting) = f.predicate.strip_prefix(SETTING_PREFIX) else { continue };
        if SETTINGS.contains(&setting) && f.valid_until.is_none() {
            out.insert(setting.to_string(), f);
        }
    }
    Ok(out)
}

fn from_settings(name: &str, s: &BTreeMap<String, Fact>) -> Option<Connector> {
    let kind = s.get("kind")?.object.as_str()?.to_string();
    let text = |p: &str| s.get(p).and_then(|f| f.object.as_str()).map(String::from);
    let created_at = s.values().map(|f| f.created_at).min().unwrap_or(0);
    let updated_at = s.values().map(|f| f.recorded_at).max().unwrap_or(0);
    Some(Connector {
        name: name.to_string(),
        kind,
        label: text("label"),
        url: text("url"),
        subject: text("subject"),
        fields: FieldMap::from_value(s.get("fields").map(|f| &f.object)).unwrap_or_default(),
        mask: text("mask").and_then(|m| m.parse().ok()).unwrap_or(Strategy::Redact),
        confidence: s.get("confidence").and_then(|f| f.object.as_f64()),
        every_secs: s.get("every_secs").and_then(|f| f.object.as_u64()),
        created_at,
        updated_at,
    })
}

/// One connector's settings; `None` when it was never registered.
pub fn load(engine: &dyn MemoryStore, tenant: &str, name: &str) -> Result<Option<Connector>, EngineError> {
    if check_name(name).is_err() {
        return Ok(None);
    }
    Ok(from_settings(name, &settings(engine, tenant, name)?))
}

/// Every connector of the tenant, by name.
pub fn list(engine: &dyn MemoryStore, tenant: &str) -> Result<Vec<Connector>, EngineError> {
    let mut names = Vec::new();
    let mut cursor = None;
    loop {
        let q = FactQuery {
            predicate: Some(format!("{SETTING_PREFIX}kind")),
            status: StatusFilter::Current,
            limit: crate::store::MAX_PAGE,
            cursor,
            ..Default::default()
        };
        let page = engine.query(tenant, &q)?;
        for f in &page.facts {
            if let Some(name) = f.subject.strip_prefix("Connector:") {
                if check_name(name).is_ok() && f.valid_until.is_none() {
                    names.push(name.to_string());
                }
            }
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for n in names {
        if let Some(c) = load(engine, tenant, &n)? {
            out.push(c);
        }
    }
    Ok(out)
}

/// The write that makes the stored settings equal `r`: changed settings
/// are asserted (superseding the old value), settings no longer given are
/// retracted, unchanged ones are left alone. Empty when nothing changed.
pub fn register_ops(engine: &dyn MemoryStore, tenant: &str, wanted: &Connector) -> Result<Vec<WriteOp>, EngineError> {
    let current = settings(engine, tenant, &wanted.name)?;
    let entity = Connector::entity(&wanted.name);
    let mut ops = Vec::new();
    for p in SETTINGS {
        let v = wanted.setting(p);
        match (current.get(p), v.is_null()) {
            (Some(f), true) => ops.push(WriteOp::Retract(f.id)),
            (Some(f), false) if f.object == v => {}
            (_, false) => {
                ops.push(WriteOp::Assert(FactInput::new(&entity, format!("{SETTING_PREFIX}{p}"), v).source("connectors")))
            }
            (None, true) => {}
        }
    }
    Ok(ops)
}

/// Live facts (active and candidate) the connector wrote, now.
pub fn ingested(engine: &dyn MemoryStore, tenant: &str, name: &str) -> Result<u64, EngineError> {
    Ok(engine.source_stats(tenant, &Connector::source(name))?.live())
}

/// Facts of `(subject, predicate)` live now (active or candidate), to tell
/// a record that repeats what is stored from one that changes it.
pub fn live_values(engine: &dyn MemoryStore, tenant: &str, subject: &str, predicate: &str) -> Result<Vec<Fact>, EngineError> {
    let statuses: StatusSet = [Status::Active, Status::Candidate].into_iter().collect();
    let q = FactQuery {
        subject: Some(subject.to_string()),
        predicate: Some(predicate.to_string()),
        status: StatusFilter::Among(statuses),
        limit: 100,
        ..Default::default()
    };
    Ok(engine.query(tenant, &q)?.facts.into_iter().filter(|f| f.valid_until.is_none()).collect())
}

/// Checks what can be checked of a URL without the network: a URL with an
/// http or https scheme and a host, without credentials (the URL is stored
/// in history, where a password must not go).
pub fn check_url_syntax(u: &str) -> Result<reqwest::Url, String> {
    // The shape first, as /openapi.json states it (a lenient parser would
    // quietly trim or re-encode what this refuses).
    let rest = u.strip_prefix("https://").or_else(|| u.strip_prefix("http://"));
    let Some(rest) = rest else {
        let scheme = u.split(':').next().unwrap_or_default();
        return Err(format!("url must be http or https (lower case), got {scheme:?}"));
    };
    if u.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("url must not contain whitespace or control characters".into());
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err("url has no host".into());
    }
    if authority.contains('@') {
        return Err("url must not carry credentials: they would be kept in the connector's history".into());
    }
    let url: reqwest::Url = u.parse().map_err(|e| format!("url {u:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("url must be http or https, got {}", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("url has no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url must not carry credentials: they would be kept in the connector's history".into());
    }
    Ok(url)
}
