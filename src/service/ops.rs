//! The operator's calls: readiness, totals, metrics, backups.

use super::error::{Result, ServiceError};
use super::principal::Caller;
use super::Service;
use crate::store::{BackupSummary, TenantStats, Tx};
use serde::Serialize;

/// Whether the store answers, and whether it takes writes now.
#[derive(Debug, Serialize)]
pub struct Readiness {
    pub ready: bool,
    pub last_tx: Tx,
    /// `ok`, or why writes are refused (a full or read-only disk); reads go
    /// on either way, so the server stays ready.
    pub writes: String,
}

/// Fact counts, by status.
#[derive(Debug, Serialize)]
pub struct FactCounts {
    pub active: u64,
    pub candidate: u64,
    pub superseded: u64,
    pub retracted: u64,
    pub total: u64,
}

/// The totals of a tenant, or of every tenant for an admin.
#[derive(Debug, Serialize)]
pub struct Stats {
    pub facts: FactCounts,
    pub entities: u64,
    pub predicates: u64,
    pub tenants: usize,
    /// The tenant, or `admin` for the totals of all.
    pub tenant: String,
    pub version: &'static str,
    pub last_tx: Tx,
    pub last_recorded_at: i64,
}

impl Service {
    /// Ready while the store answers; `writes` says whether it takes
    /// writes too (a full disk stops writes, not reads).
    pub fn readiness(&self) -> Readiness {
        let store = self.memory.store();
        if let Err(e) = store.reachable() {
            return Readiness { ready: false, last_tx: 0, writes: e.to_string() };
        }
        let (last_tx, _) = store.last_tx();
        let writes = match store.writable() {
            Ok(()) => "ok".to_string(),
            Err(e) => e.to_string(),
        };
        Readiness { ready: true, last_tx, writes }
    }

    /// The caller's tenant's totals; an admin who names no tenant gets the
    /// totals of all.
    pub fn stats(&self, caller: &Caller) -> Result<Stats> {
        let store = self.memory.store();
        let (name, tenants, s) = match (&caller.tenant, caller.is_admin()) {
            (Some(t), _) => (t.clone(), 1, store.stats(t)),
            (None, true) => {
                let names = store.tenants();
                let total = names.iter().map(|t| store.stats(t)).fold(TenantStats::default(), |mut acc, s| {
                    acc.active += s.active;
                    acc.candidate += s.candidate;
                    acc.superseded += s.superseded;
                    acc.retracted += s.retracted;
                    acc.subjects += s.subjects;
                    acc.predicates += s.predicates;
                    acc
                });
                ("admin".to_string(), names.len(), total)
            }
            (None, false) => return Err(ServiceError::not_found()),
        };
        let (last_tx, last_recorded_at) = store.last_tx();
        Ok(Stats {
            facts: FactCounts {
                active: s.active,
                candidate: s.candidate,
                superseded: s.superseded,
                retracted: s.retracted,
                total: s.total(),
            },
            entities: s.subjects,
            predicates: s.predicates,
            tenants,
            tenant: name,
            version: env!("CARGO_PKG_VERSION"),
            last_tx,
            last_recorded_at,
        })
    }

    /// The Prometheus text of the server's metrics.
    pub fn metrics_text(&self) -> String {
        self.metrics.render(self.memory.store().as_ref())
    }

    /// Whether `caller` may see what spans every tenant (metrics, backups):
    /// anyone in open mode, admins in keyed mode.
    pub fn may_see_all(&self, caller: Option<&Caller>) -> bool {
        self.auth.is_open() || caller.is_some_and(Caller::is_admin)
    }

    /// Writes a consistent backup of the whole store to `out` and flushes
    /// it; blocks until it is written (run it off the async threads). One
    /// backup runs at a time: another is `FailedPrecondition`.
    pub fn backup(&self, out: &mut dyn std::io::Write) -> Result<BackupSummary> {
        let made = self.memory.store().backup(out).and_then(|s| {
            out.flush().map_err(|e| crate::store::StorageError::Io(e).into()).map(|()| s)
        });
        made.map_err(|e| match e {
            crate::store::EngineError::Conflict(m) => ServiceError::FailedPrecondition(m),
            other => ServiceError::from(other),
        })
    }
}
