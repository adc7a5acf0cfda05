//! Scheduled pulls: connectors registered with `every_secs` are pulled by
//! the server when due (their last pull, scheduled or requested, is older
//! than `every_secs`).
//!
//! The schedule is an in-memory table, filled at startup from every
//! tenant's connectors and kept current by registrations, so a tick does
//! not query memory. Due pulls run a few at a time; a connector is never
//! pulled twice at once by the schedule.

use super::ingest::Bounds;
use super::pull::{self, LastPull, PullError, PullSettings};
use crate::digest::mask::Masker;
use crate::memory::{blocking, Memory};
use crate::outbound::Policy;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Pulls the schedule runs at once.
const CONCURRENT_PULLS: usize = 4;
const TICK: Duration = Duration::from_secs(1);

/// The connector runtime the HTTP handlers and the schedule share.
pub struct Runtime {
    pub policy: Policy,
    pub pull: PullSettings,
    pub bounds: Bounds,
    /// Shortest `every_secs` accepted.
    pub min_every_secs: u64,
    /// (tenant, connector) → every_secs.
    table: Mutex<HashMap<(String, String), u64>>,
    running: Mutex<HashSet<(String, String)>>,
}

impl Runtime {
    pub fn new(policy: Policy, pull: PullSettings, bounds: Bounds, min_every_secs: u64) -> Runtime {
        Runtime {
            policy,
            pull,
            bounds,
            min_every_secs,
            table: Mutex::new(HashMap::new()),
            running: Mutex::new(HashSet::new()),
        }
    }

    /// Records a connector's schedule (`None`: not scheduled).
    pub fn set(&self, tenant: &str, name: &str, every_secs: Option<u64>) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let key = (tenant.to_string(), name.to_string());
        match every_secs {
            Some(s) => t.insert(key, s),
            None => t.remove(&key),
        };
    }

    /// The connectors due now that this server takes: each due pull is
    /// claimed (`MemoryStore::claim`, named by the connector and its last
    /// pull), so servers sharing a store pull it once between them.
    fn due(&self, engine: &dyn crate::store::MemoryStore, now: i64) -> Vec<(String, String)> {
        let table: Vec<((String, String), u64)> =
            self.table.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(k, v)| (k.clone(), *v)).collect();
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut due = Vec::new();
        for ((tenant, name), every) in table {
            if running.contains(&(tenant.clone(), name.clone())) {
                continue;
            }
            let last = pull::last_pull(engine, &tenant, &name).map(|l| l.at);
            if last.is_some_and(|at| now - at < (every as i64) * 1000) {
                continue;
            }
            let claim = format!("connector-pull/{tenant}/{name}/{}", last.unwrap_or(0));
            match engine.claim(claim.as_bytes()) {
                Ok(true) => due.push((tenant, name)),
                Ok(false) => {}
                Err(e) => tracing::warn!(tenant = %tenant, connector = %name, error = %e, "cannot claim a scheduled pull"),
            }
        }
        due
    }
}

/// Fills the table from every tenant's connectors.
pub fn load(rt: &Runtime, engine: &dyn crate::store::MemoryStore) -> Result<usize, crate::store::EngineError> {
    reload(rt, engine)?;
    Ok(rt.table.lock().unwrap_or_else(|p| p.into_inner()).len())
}

/// The table as the store has it now: connectors scheduled or changed
/// through other servers are added, unscheduled ones dropped.
fn reload(rt: &Runtime, engine: &dyn crate::store::MemoryStore) -> Result<(), crate::store::EngineError> {
    let mut fresh = HashMap::new();
    for tenant in engine.tenants() {
        for c in super::list(engine, &tenant)? {
            if let (Some(every), Some(_)) = (c.every_secs, &c.url) {
                fresh.insert((tenant.clone(), c.name.clone()), every);
            }
        }
    }
    *rt.table.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
    Ok(())
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// One pull of a connector and the record of how it went: the same for a
/// request and the schedule.
pub async fn pull_and_record(
    rt: &Runtime,
    memory: &Memory,
    tenant: &str,
    c: &super::Connector,
    trigger: &str,
) -> Result<super::ingest::Receipt, PullError> {
    let engine = Arc::clone(memory.store());
    let secret = {
        let (engine, tenant) = (Arc::clone(&engine), tenant.to_string());
        blocking(move || crate::digest::tenant_secret(&*engine, &tenant))
            .await
            .map_err(|e| PullError::Stopped(super::ingest::Stop::Engine(e, Default::default())))?
    };
    let masker = Masker::new(c.mask, secret);
    let started = Instant::now();
    let at = now_ms();
    let result = pull::pull(memory, &rt.policy, &rt.pull, rt.bounds, tenant, c, masker).await;
    let receipt = match &result {
        Ok(r) => Some(r.clone()),
        Err(PullError::Stopped(super::ingest::Stop::TooLarge(_, r)))
        | Err(PullError::Stopped(super::ingest::Stop::Body(_, r)))
        | Err(PullError::Stopped(super::ingest::Stop::Engine(_, r))) => Some(r.clone()),
        Err(_) => None,
    };
    let r = receipt.unwrap_or_default();
    let state = LastPull {
        at,
        ok: result.is_ok(),
        duration_ms: started.elapsed().as_millis() as u64,
        error: result.as_ref().err().map(|e| e.to_string()),
        records: r.records,
        asserted: r.asserted,
        candidates: r.candidates,
        unchanged: r.unchanged,
        rejected: r.rejected,
        trigger: trigger.to_string(),
    };
    let (tenant_s, name) = (tenant.to_string(), c.name.clone());
    let _ = blocking(move || {
        pull::record_pull(&*engine, &tenant_s, &name, &state);
        Ok(())
    })
    .await;
    result
}

/// How often the table is read again from the store, for connectors
/// registered (or changed) through another server sharing it.
const RELOAD: Duration = Duration::from_secs(30);

/// The schedule's loop; ends when `stop` turns true.
pub async fn run(rt: Arc<Runtime>, memory: Memory, mut stop: watch::Receiver<bool>) {
    let limit = Arc::new(tokio::sync::Semaphore::new(CONCURRENT_PULLS));
    let mut loaded = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if loaded.elapsed() >= RELOAD {
            loaded = Instant::now();
            let (rt, engine) = (Arc::clone(&rt), Arc::clone(memory.store()));
            let reloaded = tokio::task::spawn_blocking(move || reload(&rt, &*engine)).await;
            if let Ok(Err(e)) = reloaded {
                tracing::warn!(error = %e, "cannot read the scheduled connectors again");
            }
        }
        let due = {
            let (rt, engine) = (Arc::clone(&rt), Arc::clone(memory.store()));
            match tokio::task::spawn_blocking(move || rt.due(&*engine, now_ms())).await {
                Ok(d) => d,
                Err(_) => continue,
            }
        };
        for (tenant, name) in due {
            let Ok(permit) = Arc::clone(&limit).acquire_owned().await else {
                return;
            };
            rt.running.lock().unwrap_or_else(|p| p.into_inner()).insert((tenant.clone(), name.clone()));
            let (rt, memory) = (Arc::clone(&rt), memory.clone());
            tokio::spawn(async move {
                let _permit = permit;
                let c = {
                    let (engine, t, n) = (Arc::clone(memory.store()), tenant.clone(), name.clone());
                    blocking(move || super::load(&*engine, &t, &n)).await
                };
                match c {
                    Ok(Some(c)) if c.every_secs.is_some() && c.url.is_some() => {
                        match pull_and_record(&rt, &memory, &tenant, &c, "schedule").await {
                            Ok(r) => tracing::info!(
                                tenant = %tenant, connector = %name, records = r.records, asserted = r.asserted,
                                unchanged = r.unchanged, rejected = r.rejected, "scheduled pull"
                            ),
                            Err(e) => {
                                tracing::warn!(tenant = %tenant, connector = %name, error = %e, "scheduled pull failed")
                            }
                        }
                    }
                    Ok(_) => rt.set(&tenant, &name, None),
                    Err(e) => tracing::warn!(error = %e, "cannot load a scheduled connector"),
                }
                rt.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&(tenant, name));
            });
        }
    }
}
