//! The background task: every `[monitor] interval_secs` it evaluates the
//! alert rules of every tenant and runs the scheduled reports that are due.
//! It stops with the server's shutdown signal.

use super::{alerts, reports, Monitor};
use crate::memory::{blocking, Memory};
use std::time::Duration;
use crate::store::EngineError;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Evaluates one tenant's rules and writes what changed; `(fired, resolved)`.
pub async fn evaluate(memory: &Memory, monitor: &Monitor, tenant: &str) -> Result<(usize, usize), EngineError> {
    let lock = monitor.lock(tenant);
    let _held = lock.lock().await;
    let plan = {
        let (engine, tenant, defaults) = (memory.store().clone(), tenant.to_string(), monitor.config.defaults.clone());
        blocking(move || alerts::plan(&*engine, &tenant, &defaults)).await?
    };
    if !plan.ops.is_empty() {
        let ops = plan.ops.clone();
        memory.write(tenant, ops, None).await?.map_err(|_| EngineError::Invalid("unexpected replay".into()))?;
    }
    Ok(plan.summary())
}

/// Runs the tenant's scheduled reports that are due, oldest first, until
/// `stop` is set; how many ran.
pub async fn run_due(memory: &Memory, monitor: &Monitor, tenant: &str, stop: &watch::Receiver<bool>) -> Result<usize, EngineError> {
    let due = {
        let (engine, tenant) = (memory.store().clone(), tenant.to_string());
        blocking(move || {
            let now = super::time::now_ms();
            Ok(reports::list(&*engine, &tenant)?.into_iter().filter(|r| r.due_at().is_some_and(|t| t <= now)).collect::<Vec<_>>())
        })
        .await?
    };
    let mut ran = 0;
    for r in due {
        if *stop.borrow() {
            break;
        }
        // Once per due time, whichever server sharing the store takes it.
        let claim = format!("report-run/{tenant}/{}/{}", r.id, r.due_at().unwrap_or(0)).into_bytes();
        let store = memory.store().clone();
        if !blocking(move || store.claim(&claim)).await? {
            continue;
        }
        let run = {
            let (engine, tenant, defaults) = (memory.store().clone(), tenant.to_string(), monitor.config.defaults.clone());
            blocking(move || reports::run(&*engine, &tenant, &defaults, &r)).await?
        };
        memory.write(tenant, run.ops(), None).await?.map_err(|_| EngineError::Invalid("unexpected replay".into()))?;
        ran += 1;
    }
    Ok(ran)
}

/// One pass over every tenant. The alert evaluation of an interval is
/// claimed (`MemoryStore::claim`), so servers sharing a store evaluate each
/// tenant once per interval between them.
async fn tick(memory: &Memory, monitor: &Monitor, stop: &watch::Receiver<bool>) {
    let slot = super::time::now_ms() / (monitor.config.interval_secs.max(1) as i64 * 1000);
    for tenant in memory.store().tenants() {
        if *stop.borrow() {
            return;
        }
        let claim = format!("alert-evaluation/{tenant}/{slot}").into_bytes();
        let store = memory.store().clone();
        match blocking(move || store.claim(&claim)).await {
            Ok(true) => match evaluate(memory, monitor, &tenant).await {
                Ok((0, 0)) => {}
                Ok((fired, resolved)) => tracing::info!(tenant = %tenant, fired, resolved, "alerts evaluated"),
                Err(e) => tracing::warn!(tenant = %tenant, error = %e, "alert evaluation failed"),
            },
            // Another server evaluates this interval.
            Ok(false) => {}
            Err(e) => tracing::warn!(tenant = %tenant, error = %e, "cannot claim the alert evaluation"),
        }
        match run_due(memory, monitor, &tenant, stop).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(tenant = %tenant, reports = n, "scheduled reports ran"),
            Err(e) => tracing::warn!(tenant = %tenant, error = %e, "scheduled report run failed"),
        }
    }
}

/// Starts the task (`None` when `interval_secs` is 0).
pub fn start(memory: Memory, monitor: Monitor, mut stop: watch::Receiver<bool>) -> Option<JoinHandle<()>> {
    let every = monitor.config.interval_secs;
    if every == 0 {
        tracing::info!("background alert evaluation and scheduled reports off ([monitor] interval_secs = 0)");
        return None;
    }
    Some(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(every)) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            tick(&memory, &monitor, &stop).await;
        }
    }))
}
