//! Pull syncs: fetching a connector's URL under the outbound policy.
//!
//! The guard (see `crate::outbound`): the URL's host is resolved once, every
//! address it gives is checked, and the connection goes to exactly those
//! addresses (the client is pinned to them; it does not resolve again, so a
//! name cannot change its answer between the check and the connect).
//! Redirects are followed by hand, at most [`PullSettings::max_redirects`],
//! and every hop is checked the same way, so a public URL that redirects to
//! `http://169.254.169.254/` is refused. The body is read as it arrives
//! under the delivery's byte bound, and the whole pull under a deadline.

use super::ingest::{Bounds, Ingest, Receipt, Stop};
use super::records::Framing;
use super::Connector;
use crate::digest::mask::Masker;
use crate::memory::Memory;
use crate::outbound::{GuardedResolver, Policy, Refusal};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PullSettings {
    /// The whole pull: connecting, every redirect, the body.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub max_redirects: usize,
}

impl Default for PullSettings {
    fn default() -> Self {
        PullSettings { timeout: Duration::from_secs(60), connect_timeout: Duration::from_secs(5), max_redirects: 5 }
    }
}

/// Why a pull failed.
#[derive(Debug)]
pub enum PullError {
    /// The URL (or a redirect's) is not allowed: the caller's mistake.
    Refused(String),
    /// The source did not answer usefully: unreachable, an HTTP error, too
    /// many redirects, a content type that is not records.
    Upstream(String),
    /// Over the deadline.
    Timeout(Duration),
    /// Stopped part-way (see [`Stop`]); the receipt says what landed.
    Stopped(Stop),
}

impl std::fmt::Display for PullError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PullError::Refused(m) | PullError::Upstream(m) => f.write_str(m),
            PullError::Timeout(d) => write!(f, "the pull did not finish within {} s", d.as_secs()),
            PullError::Stopped(Stop::TooLarge(m, _)) | PullError::Stopped(Stop::Body(m, _)) => f.write_str(m),
            PullError::Stopped(Stop::Engine(e, _)) => write!(f, "storage error: {e}"),
        }
    }
}

/// The state of a connector's last pull, kept outside history (an aux
/// record): when, and how it went.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LastPull {
    pub at: i64,
    pub ok: bool,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub records: usize,
    pub asserted: usize,
    pub candidates: usize,
    pub unchanged: usize,
    pub rejected: usize,
    /// Who asked: `request` or `schedule`.
    pub trigger: String,
}

fn last_pull_key(tenant: &str, name: &str) -> Vec<u8> {
    let mut k = b"tempora/connectors/last-pull/".to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

pub fn last_pull(engine: &dyn crate::store::MemoryStore, tenant: &str, name: &str) -> Option<LastPull> {
    let bytes = engine.aux_get(&last_pull_key(tenant, name)).ok()??;
    serde_json::from_slice(&bytes).ok()
}

pub fn record_pull(engine: &dyn crate::store::MemoryStore, tenant: &str, name: &str, p: &LastPull) {
    match serde_json::to_vec(p) {
        Ok(bytes) => {
            if let Err(e) = engine.aux_put(&last_pull_key(tenant, name), &bytes) {
                tracing::warn!(error = %e, connector = name, "cannot record the pull's state");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot encode the pull's state"),
    }
}

/// The framing of a pulled body by its content type (`None`: CSV);
/// `Err` for types that are not records.
fn framing(content_type: &str) -> Result<Option<Framing>, String> {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if matches!(essence.as_str(), "text/csv" | "application/csv") {
        return Ok(None);
    }
    if essence.ends_with("+json") {
        return Ok(Some(Framing::Json));
    }
    Framing::from_content_type(&essence).map(Some).ok_or_else(|| {
        format!("the source answered {essence:?}; a pull reads JSON, JSON Lines (application/x-ndjson) or CSV")
    })
}

/// One hop: a client that connects only to the checked addresses.
fn pinned_client(
    policy: &Policy,
    resolved: &crate::outbound::Resolved,
    s: &PullSettings,
) -> Result<reqwest::Client, String> {
    let mut b = reqwest::Client::builder()
        .connect_timeout(s.connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        // Other names (none are expected) still go through the policy.
        .dns_resolver(Arc::new(GuardedResolver { policy: policy.clone() }))
        .user_agent(concat!("tempora/", env!("CARGO_PKG_VERSION"), " (connector pull)"));
    if !resolved.literal {
        b = b.resolve_to_addrs(&resolved.host, &resolved.addrs);
    }
    b.build().map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// Follows the URL (and its redirects, each checked) to a successful answer.
async fn open(policy: &Policy, url: &str, s: &PullSettings) -> Result<reqwest::Response, PullError> {
    let mut url = super::check_url_syntax(url).map_err(PullError::Refused)?;
    for hop in 0..=s.max_redirects {
        // Resolution gets the connect timeout too: a resolver that does not
        // answer must not hold the pull to its whole deadline.
        let resolved = tokio::time::timeout(s.connect_timeout, policy.resolve(&url))
            .await
            .map_err(|_| PullError::Upstream(format!("resolving {} timed out", url.host_str().unwrap_or_default())))?
            .map_err(|r| match r {
            Refusal::Invalid(m) if hop == 0 => PullError::Refused(m),
            Refusal::Invalid(m) => PullError::Refused(format!("redirect {hop} refused: {m}")),
            Refusal::Unresolvable(m) => PullError::Upstream(m),
        })?;
        let client = pinned_client(policy, &resolved, s).map_err(PullError::Upstream)?;
        let resp = client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json, application/x-ndjson, text/csv;q=0.9")
            .send()
            .await
            .map_err(|e| PullError::Upstream(format!("cannot fetch {}: {}", redacted(&url), e.without_url())))?;
        let status = resp.status();
        if status.is_redirection() {
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| PullError::Upstream(format!("HTTP {status} without a Location")))?;
            let next = url.join(location).map_err(|e| PullError::Upstream(format!("redirect to a bad URL: {e}")))?;
            super::check_url_syntax(next.as_str())
                .map_err(|m| PullError::Refused(format!("redirect {} refused: {m}", hop + 1)))?;
            url = next;
            continue;
        }
        if !status.is_success() {
            return Err(PullError::Upstream(format!("the source answered HTTP {status}")));
        }
        return Ok(resp);
    }
    Err(PullError::Upstream(format!("more than {} redirects", s.max_redirects)))
}

/// A URL for messages: no query string (it may carry a token).
fn redacted(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

/// Pulls the connector's URL and ingests what it answers.
pub async fn pull(
    memory: &Memory,
    policy: &Policy,
    settings: &PullSettings,
    bounds: Bounds,
    tenant: &str,
    c: &Connector,
    masker: Masker,
) -> Result<Receipt, PullError> {
    let url = c.url.clone().ok_or_else(|| PullError::Refused(format!("connector {} has no url to pull", c.name)))?;
    let work = async {
        let mut resp = open(policy, &url, settings).await?;
        let ct = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json");
        let framing = framing(ct).map_err(PullError::Upstream)?;
        if let Some(len) = resp.content_length() {
            if len > bounds.max_bytes {
                return Err(PullError::Upstream(format!(
                    "the source's body is {len} bytes, over the limit of {} bytes",
                    bounds.max_bytes
                )));
            }
        }
        let mut ingest = Ingest::new(memory.clone(), tenant, c, masker, framing, bounds);
        loop {
            match resp.chunk().await {
                Ok(Some(bytes)) => ingest.feed(&bytes).await.map_err(PullError::Stopped)?,
                Ok(None) => break,
                Err(e) => {
                    let receipt = ingest.receipt().clone();
                    return Err(PullError::Stopped(Stop::Body(
                        format!("reading the source's body failed: {}", e.without_url()),
                        receipt,
                    )));
                }
            }
        }
        match ingest.finish(None).await.map_err(PullError::Stopped)? {
            Ok(receipt) => Ok(receipt),
            Err(_) => unreachable!("no idempotency key on a pull"),
        }
    };
    match tokio::time::timeout(settings.timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(PullError::Timeout(settings.timeout)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_before_any_connection() {
        assert!(super::super::check_url_syntax("https://example.com/export.jsonl").is_ok());
        for (u, why) in [
            ("ftp://example.com/x", "http or https"),
            ("file:///etc/passwd", "http or https"),
            ("https://user:pw@example.com/", "credentials"),
            ("not a url", "http or https"),
            ("HTTPS://example.com/", "lower case"),
            ("https://example.com/a b", "whitespace"),
            ("https:///path", "no host"),
            ("gopher://127.0.0.1:6379/_INFO", "http or https"),
        ] {
            let err = super::super::check_url_syntax(u).unwrap_err();
            assert!(err.contains(why), "{u}: {err}");
        }
    }

    #[test]
    fn content_types_choose_the_reader() {
        assert_eq!(framing("application/json; charset=utf-8"), Ok(Some(Framing::Json)));
        assert_eq!(framing("application/ld+json"), Ok(Some(Framing::Json)));
        assert_eq!(framing("application/x-ndjson"), Ok(Some(Framing::Lines)));
        assert_eq!(framing("text/csv"), Ok(None));
        assert!(framing("text/html").unwrap_err().contains("text/html"));
    }
}
