//! Connectors (`docs/connectors.md`): registering them, webhook deliveries
//! read as they arrive, and pulls; the work itself is `crate::connectors`.

use super::error::{Result, ServiceError};
use super::idempotency::{Answer, IdempotencyKey, Op};
use super::Service;
use crate::connectors::ingest::{Ingest, Receipt, Stop};
use crate::connectors::pull::{self, PullError};
use crate::connectors::records::Framing;
use crate::connectors::{self, schedule, Connector};
use crate::digest::mask::Masker;
use crate::json::present;
use crate::memory::blocking;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// A connector to register (or to change: the same name again).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewConnector {
    pub name: String,
    #[serde(default, deserialize_with = "present")]
    pub kind: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub label: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub fields: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub mask: Option<String>,
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub every_secs: Option<crate::json::JsonInt>,
}

/// The connector with its live parts: the ingested count and the last pull.
fn describe(
    engine: &dyn crate::store::MemoryStore,
    tenant: &str,
    c: &Connector,
) -> std::result::Result<Value, tempora_storage::EngineError> {
    let mut v = c.to_json();
    v["ingested"] = json!(connectors::ingested(engine, tenant, &c.name)?);
    v["last_pull"] = json!(pull::last_pull(engine, tenant, &c.name));
    Ok(v)
}

/// What landed before a delivery stopped, for the error message.
fn landed(r: &Receipt) -> String {
    format!(
        "{} records read before it: {} facts asserted, {} candidates, {} records unchanged, {} rejected (delivery {})",
        r.records, r.asserted, r.candidates, r.unchanged, r.rejected, r.delivery
    )
}

fn stop_error(stop: Stop) -> ServiceError {
    match stop {
        Stop::TooLarge(why, r) => ServiceError::TooLarge(format!("{why}; the {} are stored", landed(&r))),
        Stop::Body(why, r) => ServiceError::Invalid(format!("{why}; the {} are stored", landed(&r))),
        Stop::Engine(e, _) => ServiceError::from(e),
    }
}

fn pull_error(e: PullError) -> ServiceError {
    tracing::warn!(error = %e, "pull failed");
    match e {
        PullError::Refused(m) => ServiceError::Invalid(m),
        PullError::Upstream(m) => ServiceError::Upstream(m),
        PullError::Timeout(_) => ServiceError::UpstreamTimeout(e.to_string()),
        PullError::Stopped(Stop::TooLarge(why, r)) | PullError::Stopped(Stop::Body(why, r)) => {
            ServiceError::Upstream(format!("{why}; the {} are stored", landed(&r)))
        }
        PullError::Stopped(Stop::Engine(e, _)) => ServiceError::from(e),
    }
}

/// The records of a delivery, in the format its content type names.
pub enum Records {
    /// JSON or JSON Lines.
    Json(Framing),
    Csv,
}

/// A webhook delivery being read: feed it the body as it arrives, then
/// finish it.
pub struct Delivery {
    ingest: Ingest,
    key: Option<Vec<u8>>,
}

impl Delivery {
    /// A piece of the body; records are written in chunks as they complete.
    pub async fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        self.ingest.feed(bytes).await.map_err(stop_error)
    }

    /// The body broke off: what was read is kept, and the error says so.
    pub fn broken(self, why: String) -> ServiceError {
        let r = self.ingest.receipt().clone();
        stop_error(Stop::Body(why, r))
    }

    /// The end of the body: the rest is written and the receipt answered
    /// (stored under the delivery's key with its last write).
    pub async fn finish(self) -> Result<Answer<Value>> {
        if self.ingest.receipt().bytes == 0 {
            return Err(ServiceError::invalid("the delivery is empty: send one record or more"));
        }
        match self.ingest.finish(self.key).await.map_err(stop_error)? {
            Ok(receipt) => Ok(Answer::Fresh(receipt.to_json())),
            Err(stored) => Ok(Answer::Replayed(super::idempotency::decode(&stored))),
        }
    }
}

/// What starting a delivery gives: one to feed, or the answer an earlier
/// delivery under the same key got.
pub enum Started {
    /// Boxed: a delivery holds its ingest state, far larger than a reply.
    Open(Box<Delivery>),
    Replayed(Result<Value>),
}

impl Service {
    /// The tenant's connectors.
    pub async fn connectors(&self, tenant: &str) -> Result<Vec<Value>> {
        let (engine, tenant) = (Arc::clone(self.memory.store()), tenant.to_string());
        Ok(blocking(move || {
            let mut out = Vec::new();
            for c in connectors::list(&*engine, &tenant)? {
                out.push(describe(&*engine, &tenant, &c)?);
            }
            Ok(out)
        })
        .await?)
    }

    /// Registers a connector, or changes the one of that name.
    pub async fn register_connector(&self, tenant: &str, body: NewConnector) -> Result<Value> {
        let tenant = tenant.to_string();
        let rt = &self.connectors;
        let r = Connector::checked(
            body.name,
            body.kind,
            body.label,
            body.url,
            body.subject,
            body.fields.as_ref(),
            body.mask.as_deref(),
            body.confidence,
            body.every_secs.map(|s| s.0),
            rt.min_every_secs,
        )
        .map_err(ServiceError::invalid)?;
        // A URL that names a refused address is refused now; names are only
        // resolved when pulled (DNS may change, and may not be reachable here).
        if let Some(u) = &r.url {
            let url = connectors::check_url_syntax(u).map_err(ServiceError::invalid)?;
            let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
            if host.parse::<std::net::IpAddr>().is_ok() {
                // An address literal: checking it resolves nothing.
                rt.policy.resolve(&url).await.map_err(|e| ServiceError::invalid(format!("url: {e}")))?;
            }
        }
        let engine = Arc::clone(self.memory.store());
        let ops = {
            let (engine, tenant, r) = (Arc::clone(&engine), tenant.clone(), r.clone());
            blocking(move || connectors::register_ops(&*engine, &tenant, &r)).await?
        };
        if !ops.is_empty() {
            self.memory.write(&tenant, ops, None).await?.map_err(|_| ServiceError::Internal)?;
        }
        rt.set(&tenant, &r.name, r.every_secs.filter(|_| r.url.is_some()));
        let name = r.name.clone();
        let v = blocking(move || {
            let c = connectors::load(&*engine, &tenant, &name)?
                .ok_or_else(|| tempora_storage::EngineError::NotFound(name.clone()))?;
            describe(&*engine, &tenant, &c)
        })
        .await?;
        Ok(v)
    }

    async fn find_connector(&self, tenant: &str, name: &str) -> Result<Connector> {
        let (engine, tenant, name) = (Arc::clone(self.memory.store()), tenant.to_string(), name.to_string());
        blocking(move || connectors::load(&*engine, &tenant, &name)).await?.ok_or_else(ServiceError::not_found)
    }

    /// Not found unless the tenant has connector `name`.
    pub async fn connector_exists(&self, tenant: &str, name: &str) -> Result<()> {
        self.find_connector(tenant, name).await.map(|_| ())
    }

    /// Starts a webhook delivery to connector `name`. `declared` is the
    /// body's length when the client said it.
    pub async fn start_delivery(
        &self,
        tenant: &str,
        name: &str,
        records: Records,
        declared: Option<u64>,
        key: Option<&IdempotencyKey>,
    ) -> Result<Started> {
        let c = self.find_connector(tenant, name).await?;
        let bounds = self.connectors.bounds;
        if declared.is_some_and(|n| n > bounds.max_bytes) {
            return Err(ServiceError::TooLarge(format!(
                "the body is larger than the limit of {} bytes for one delivery; split it",
                bounds.max_bytes
            )));
        }
        if let Some(stored) = self.stored_answer(tenant, Op::ConnectorEvents, key).await? {
            return Ok(Started::Replayed(stored));
        }
        let secret = {
            let (engine, tenant) = (Arc::clone(self.memory.store()), tenant.to_string());
            blocking(move || crate::digest::tenant_secret(&*engine, &tenant)).await?
        };
        let masker = Masker::new(c.mask, secret);
        let framing = match records {
            Records::Json(f) => Some(f),
            Records::Csv => None,
        };
        let ingest = Ingest::new(self.memory.clone(), tenant, &c, masker, framing, bounds);
        Ok(Started::Open(Box::new(Delivery { ingest, key: key.map(|k| k.scoped(Op::ConnectorEvents)) })))
    }

    /// Pulls connector `name`'s url now.
    pub async fn pull_connector(&self, tenant: &str, name: &str) -> Result<Value> {
        let c = self.find_connector(tenant, name).await?;
        if c.url.is_none() {
            return Err(ServiceError::FailedPrecondition(format!(
                "connector {name} has no url to pull; register it with one"
            )));
        }
        match schedule::pull_and_record(&self.connectors, &self.memory, tenant, &c, "request").await {
            Ok(receipt) => Ok(receipt.to_json()),
            Err(e) => Err(pull_error(e)),
        }
    }
}
