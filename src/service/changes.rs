//! The change feed: a tenant's committed transactions, in transaction
//! order, read from the store's change log. A commit notice only says "tx N
//! of tenant T is committed" and wakes a follower early; what it delivers is
//! always read from the log after the last transaction it delivered. So a
//! follower resumes without gaps from any transaction, a missed notice loses
//! nothing, a writer never waits on a follower, and a store shared by several
//! processes feeds every one of them alike.

use super::error::{Result, ServiceError};
use super::Service;
use crate::memory::{Committed, Memory};
use crate::store::{Change, Millis, Tx};
use std::collections::VecDeque;
use tokio::sync::broadcast::{self, error::RecvError};

/// Transactions read from the log per step.
const LOG_CHUNK: usize = 256;
/// Changes a page of [`Service::changes_page`] holds by default, and at most.
pub const DEFAULT_CHANGES: usize = 50;
pub const MAX_CHANGES: usize = 500;

/// What a follower gets next.
#[derive(Debug)]
pub enum Next {
    Change(Change),
    /// The follower fell more than its allowance of notices behind and is
    /// dropped; it may follow again from the last transaction it got.
    Dropped,
}

/// A tenant's changes as they commit, from a starting transaction on.
pub struct Follower {
    memory: Memory,
    tenant: String,
    last: Tx,
    notices: broadcast::Receiver<Committed>,
    pending: VecDeque<Change>,
    max_lag: usize,
    dropped: bool,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

impl Follower {
    /// The next committed transaction, waiting for one; `None` once the
    /// server shuts down (or the feed is gone).
    pub async fn next(&mut self) -> Option<Result<Next>> {
        loop {
            if let Some(c) = self.pending.pop_front() {
                return Some(Ok(Next::Change(c)));
            }
            if self.dropped {
                return None;
            }
            match self.memory.changes(&self.tenant, self.last, LOG_CHUNK).await {
                Err(e) => return Some(Err(ServiceError::from(e))),
                Ok(changes) if !changes.is_empty() => {
                    if let Some(c) = changes.last() {
                        self.last = c.tx;
                    }
                    self.pending.extend(changes);
                    continue;
                }
                Ok(_) => {}
            }
            // Caught up: wait for a notice of this tenant past what was sent.
            loop {
                let notice = tokio::select! {
                    n = self.notices.recv() => n,
                    _ = self.shutdown.wait_for(|stop| *stop) => return None,
                };
                match notice {
                    Ok(c) if *c.tenant == self.tenant && c.tx > self.last => break,
                    Ok(_) => continue,
                    Err(RecvError::Lagged(n)) if n as usize > self.max_lag => {
                        self.dropped = true;
                        return Some(Ok(Next::Dropped));
                    }
                    // Missed notices: the log has everything, read it.
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return None,
                }
            }
        }
    }
}

/// A page of changes and where the next one starts.
#[derive(Debug)]
pub struct ChangesPage {
    pub changes: Vec<Change>,
    /// The last transaction of the page (the starting point when empty).
    pub last_tx: Tx,
    /// Whether more changes follow the page.
    pub more: bool,
}

impl Service {
    /// Follows the tenant's changes after transaction `after` (by default,
    /// from now on). `max_lag` is how many notices it may fall behind before
    /// it is dropped.
    pub fn follow(&self, tenant: &str, after: Option<Tx>, max_lag: usize) -> Follower {
        // Subscribe before reading the head, so nothing committed in between is missed.
        let notices = self.memory.subscribe();
        let last = after.unwrap_or_else(|| self.memory.store().last_tx().0);
        Follower {
            memory: self.memory.clone(),
            tenant: tenant.to_string(),
            last,
            notices,
            pending: VecDeque::new(),
            max_lag,
            dropped: false,
            shutdown: self.shutdown.clone(),
        }
    }

    /// A page of the tenant's changes after transaction `after` and, with
    /// `since`, recorded at or after `since`.
    pub async fn changes_page(
        &self,
        tenant: &str,
        after: Tx,
        since: Option<Millis>,
        limit: usize,
    ) -> Result<ChangesPage> {
        let store = self.memory.store().clone();
        let tenant = tenant.to_string();
        let (changes, after) = crate::memory::blocking(move || {
            let mut start = after;
            if let Some(t) = since {
                start = start.max(tx_before(&*store, &tenant, t)?);
            }
            // One more than the page, to know whether another follows.
            Ok((store.changes(&tenant, start, limit + 1)?, start))
        })
        .await?;
        let more = changes.len() > limit;
        let mut changes = changes;
        changes.truncate(limit);
        let last_tx = changes.last().map_or(after, |c| c.tx);
        Ok(ChangesPage { changes, last_tx, more })
    }
}

/// The last tx of `tenant` recorded before `since`: the tenant's changes
/// after it are exactly those recorded at or after `since`. Record times
/// grow with tx, so a binary search over the log finds it in O(log tx)
/// one-change reads.
fn tx_before(store: &dyn crate::store::MemoryStore, tenant: &str, since: Millis) -> crate::store::Result<Tx> {
    let (mut lo, mut hi) = (0u64, store.last_tx().0);
    // Invariant: the first change after `hi` (if any) is recorded at or
    // after `since`; find the smallest such point.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match store.changes(tenant, mid, 1)?.first() {
            Some(c) if c.recorded_at < since => lo = mid + 1,
            _ => hi = mid,
        }
    }
    Ok(lo)
}
