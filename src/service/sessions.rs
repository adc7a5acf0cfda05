//! Console sessions: a key traded once, at sign-in, for an opaque id that
//! the browser sends back as its cookie.
//!
//! The id is 244 random bits; the store keeps only its SHA-256 hash, as the
//! key of the session's record in the aux keyspace, where every server over
//! the same store sees it (and a copy of the store holds no usable cookie).
//! The record says who the session is (a tenant, or an admin), holds a
//! fingerprint of the key it was made with (`auth::session_fingerprint`:
//! never the key, nor anything that tells it without the id), and when the
//! session began and ends. A request presenting the cookie is resolved
//! again every time, like a bearer key: the record must exist and not have
//! ended, and its key must still be configured for the same principal (and
//! host), so removing a key, or moving it to another tenant, ends its
//! sessions. Signing out deletes the record, so the same cookie replayed
//! from anywhere is refused.

use super::error::{Result, ServiceError};
use super::principal::{Principal, Scope, DEFAULT_TENANT};
use super::Service;
use crate::memory::blocking;
use crate::store::MemoryStore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// What signing in gives: the scope, the tenant (none for an admin), and
/// the new session (none in open mode, where nothing needs one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    pub scope: Scope,
    pub tenant: Option<String>,
    pub session: Option<NewSession>,
}

/// A session just begun: the id its cookie carries, and how long it lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub id: String,
    pub lifetime: Duration,
}

/// A session as stored (JSON), under [`record_key`] of its id.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    /// The session's tenant; none for an admin's.
    tenant: Option<String>,
    /// `auth::session_fingerprint` of the key and the id, in hex.
    key: String,
    created_at: i64,
    expires_at: i64,
}

const RECORD_PREFIX: &[u8] = b"auth/session/";

/// A session id: 64 lowercase hex digits.
const ID_LEN: usize = 64;

/// Ended sessions are swept at most this often (per process), at sign-in.
const SWEEP_EVERY_MS: i64 = 60_000;
static LAST_SWEEP: AtomicI64 = AtomicI64::new(i64::MIN);

impl Service {
    /// Checks a key a person signs in with (the console) and, in keyed
    /// mode, begins a session for it, stored durably before this returns.
    /// In open mode any key will do and no session is made. A wrong key is
    /// `Unauthorized`, since saying so discloses nothing the person did not
    /// type.
    pub async fn sign_in(&self, key: &str, host: Option<&str>) -> Result<SignedIn> {
        if self.auth.is_open() {
            return Ok(SignedIn { scope: Scope::Open, tenant: Some(DEFAULT_TENANT.to_string()), session: None });
        }
        let (scope, tenant) = match self.auth.check_key(key, host).ok_or(ServiceError::Unauthorized)? {
            Principal::Tenant(t) => (Scope::Tenant, Some(t)),
            Principal::Admin => (Scope::Admin, None),
        };
        let id = new_id();
        let lifetime = self.auth.session_lifetime();
        let now = now_ms();
        let record = Record {
            tenant: tenant.clone(),
            key: hex(&crate::auth::session_fingerprint(key, &id)),
            created_at: now,
            expires_at: now.saturating_add(i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX)),
        };
        let bytes = serde_json::to_vec(&record).map_err(ServiceError::internal)?;
        let (store, at) = (self.memory.store().clone(), record_key(&id));
        blocking(move || {
            store.aux_put(&at, &bytes)?;
            sweep(store.as_ref(), now);
            Ok(())
        })
        .await?;
        Ok(SignedIn { scope, tenant, session: Some(NewSession { id, lifetime }) })
    }

    /// Ends the session whose cookie is `id`: its record is deleted (durably),
    /// so the cookie is refused everywhere from now on. An id that names no
    /// session is no error; nothing is written for it.
    pub async fn sign_out(&self, id: &str) -> Result<()> {
        if !well_formed(id) {
            return Ok(());
        }
        let (store, at) = (self.memory.store().clone(), record_key(id));
        blocking(move || match store.aux_get(&at)? {
            Some(_) => store.aux_delete_many(vec![at]),
            None => Ok(()),
        })
        .await?;
        Ok(())
    }

    /// Who the session whose cookie is `id` stands for, on `host`: `None`
    /// when there is no such session, it has ended, the key it was made with
    /// no longer stands for the same principal (which ends it), or host
    /// binding puts its tenant on another host.
    pub(super) fn session_principal(&self, id: &str, host: Option<&str>) -> Result<Option<Principal>> {
        if !well_formed(id) {
            return Ok(None);
        }
        let at = record_key(id);
        let Some(bytes) = self.memory.store().aux_get(&at)? else { return Ok(None) };
        let record = match serde_json::from_slice::<Record>(&bytes) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "an unreadable session record; it is removed");
                self.forget(at);
                return Ok(None);
            }
        };
        if record.expires_at <= now_ms() {
            self.forget(at);
            return Ok(None);
        }
        let stored = match record.tenant {
            Some(t) => Principal::Tenant(t),
            None => Principal::Admin,
        };
        // Its key removed from the configuration, or now another tenant's:
        // the session has ended for good, even if the key comes back.
        let now = unhex32(&record.key).and_then(|fingerprint| self.auth.session_key(&fingerprint, id));
        if now.as_ref() != Some(&stored) {
            self.forget(at);
            return Ok(None);
        }
        // On another tenant's host the session is refused there, not ended.
        Ok(self.auth.admits_on(&stored, host).then_some(stored))
    }

    /// Deletes a record that is of no more use, off the caller's thread
    /// (the delete is a synced write).
    fn forget(&self, at: Vec<u8>) {
        let store = self.memory.store().clone();
        let delete = move || {
            if let Err(e) = store.aux_delete_many(vec![at]) {
                tracing::warn!(error = %e, "cannot delete an ended session");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(delete)),
            Err(_) => delete(),
        }
    }
}

/// Deletes every session that has ended (and any unreadable record), at
/// most once every [`SWEEP_EVERY_MS`] in this process, so that sessions
/// whose cookies never come back do not pile up. A failure is logged: the
/// sign-in that called it stands.
fn sweep(store: &dyn MemoryStore, now: i64) {
    let last = LAST_SWEEP.load(Ordering::Relaxed);
    if now.saturating_sub(last) < SWEEP_EVERY_MS
        || LAST_SWEEP.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err()
    {
        return;
    }
    let mut ended = Vec::new();
    let scanned = store.aux_scan(RECORD_PREFIX, &mut |k, v| {
        if serde_json::from_slice::<Record>(v).map_or(true, |r| r.expires_at <= now) {
            ended.push(k.to_vec());
        }
        true
    });
    let deleted = scanned.and_then(|()| {
        for batch in ended.chunks(1000) {
            store.aux_delete_many(batch.to_vec())?;
        }
        Ok(())
    });
    if let Err(e) = deleted {
        tracing::warn!(error = %e, "cannot sweep ended sessions");
    }
}

/// A new session id: 244 random bits, as 64 hex digits. The bits are two
/// version-4 UUIDs', which come from a CSPRNG (`rand`'s thread generator,
/// seeded by the OS, behind uuid's `fast-rng`).
fn new_id() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Whether `id` can be a session id at all (anything else is refused
/// without a read).
fn well_formed(id: &str) -> bool {
    id.len() == ID_LEN && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The aux key of a session's record: the prefix and the SHA-256 of its id.
fn record_key(id: &str) -> Vec<u8> {
    let mut k = RECORD_PREFIX.to_vec();
    k.extend_from_slice(&Sha256::digest(id.as_bytes()));
    k
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex32(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_fresh_and_well_formed() {
        let (a, b) = (new_id(), new_id());
        assert!(well_formed(&a) && well_formed(&b), "{a} {b}");
        assert_ne!(a, b);
        for bad in ["", "nas-key-1", &a[1..], &a.to_uppercase(), &format!("{a}0"), &format!("{}g", &a[1..])] {
            assert!(!well_formed(bad), "{bad}");
        }
    }

    #[test]
    fn records_are_keyed_by_a_hash_of_the_id() {
        let id = new_id();
        let k = record_key(&id);
        assert!(k.starts_with(RECORD_PREFIX));
        assert_eq!(k.len(), RECORD_PREFIX.len() + 32);
        assert!(!k.windows(id.len()).any(|w| w == id.as_bytes()));
        let fp = crate::auth::session_fingerprint("nas-key-1", &id);
        assert_eq!(unhex32(&hex(&fp)), Some(fp));
        assert_eq!(unhex32("zz"), None);
    }
}
