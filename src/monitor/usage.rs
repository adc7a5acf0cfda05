//! Model-token usage per tenant per UTC day, in aux records
//! (`monitor/usage/<tenant>\0<YYYY-MM-DD>` → JSON). The model-calling routes
//! (`/api/digest`, `/api/ask`) record what each successful call used; the
//! cost rule compares today's total with the tenant's budget.

use super::time;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use crate::store::{MemoryStore, EngineError};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayUsage {
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub calls: u64,
}

impl DayUsage {
    pub fn total(&self) -> u64 {
        self.tokens_in.saturating_add(self.tokens_out)
    }
}

fn prefix(tenant: &str) -> Vec<u8> {
    let mut k = b"monitor/usage/".to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k
}

fn key(tenant: &str, day: &str) -> Vec<u8> {
    let mut k = prefix(tenant);
    k.extend_from_slice(day.as_bytes());
    k
}

/// Read-modify-write of one counter is serialized in this process.
static RECORD: Mutex<()> = Mutex::new(());

/// Adds one model call's tokens to today's counter of `tenant`.
pub fn record(engine: &dyn MemoryStore, tenant: &str, tokens_in: u64, tokens_out: u64) -> Result<(), EngineError> {
    record_on(engine, tenant, &time::day(time::now_ms()), tokens_in, tokens_out)
}

pub fn record_on(engine: &dyn MemoryStore, tenant: &str, day: &str, tokens_in: u64, tokens_out: u64) -> Result<(), EngineError> {
    let _guard = RECORD.lock().unwrap_or_else(|e| e.into_inner());
    let k = key(tenant, day);
    let mut u: DayUsage = engine.aux_get(&k)?.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    u.tokens_in = u.tokens_in.saturating_add(tokens_in);
    u.tokens_out = u.tokens_out.saturating_add(tokens_out);
    u.calls += 1;
    engine.aux_put(&k, &serde_json::to_vec(&u).expect("usage serializes"))
}

/// The tenant's usage on one UTC day.
pub fn on_day(engine: &dyn MemoryStore, tenant: &str, day: &str) -> Result<DayUsage, EngineError> {
    Ok(engine.aux_get(&key(tenant, day))?.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default())
}

/// Every recorded day of the tenant, oldest first, at most the last `max`.
pub fn days(engine: &dyn MemoryStore, tenant: &str, max: usize) -> Result<Vec<(String, DayUsage)>, EngineError> {
    let p = prefix(tenant);
    let mut out = Vec::new();
    engine.aux_scan(&p, &mut |k, v| {
        if let (Ok(day), Ok(u)) = (std::str::from_utf8(&k[p.len()..]), serde_json::from_slice::<DayUsage>(v)) {
            out.push((day.to_string(), u));
        }
        true
    })?;
    let skip = out.len().saturating_sub(max);
    Ok(out.split_off(skip))
}

/// Records a model call's usage after the fact; a failure to count is logged,
/// never turned into a failed request.
pub async fn record_async(engine: std::sync::Arc<dyn MemoryStore>, tenant: String, tokens_in: u64, tokens_out: u64) {
    if tokens_in == 0 && tokens_out == 0 {
        return;
    }
    let done = tokio::task::spawn_blocking(move || record(&*engine, &tenant, tokens_in, tokens_out)).await;
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "cannot record model token usage"),
        Err(e) => tracing::warn!(error = %e, "token usage task failed"),
    }
}
