//! Who is calling: keys to principals.
//!
//! Only SHA-256 hashes of keys are kept in memory; a presented key is hashed
//! and compared against every stored hash in constant time (all of them, so
//! the time taken says nothing about which key, if any, matched). Keys are
//! never logged. A console session keeps a fingerprint of the key it was
//! made with ([`session_fingerprint`]), checked against the configured keys
//! the same way, so a key removed from the configuration ends its sessions.

use crate::config::AuthConfig;
use sha2::{Digest, Sha256};
use std::time::Duration;
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

/// The tenant of open mode.
pub const DEFAULT_TENANT: &str = "default";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A tenant key (or anyone, in open mode): reads and writes that tenant.
    Tenant(String),
    /// An admin token: may read any tenant and see whole-graph totals.
    Admin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Open,
    Tenant,
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Open => "open",
            Scope::Tenant => "tenant",
            Scope::Admin => "admin",
        }
    }
}

struct KeyEntry {
    hash: [u8; 32],
    principal: Principal,
}

pub struct Auth {
    open: bool,
    keys: Vec<KeyEntry>,
    tenant_host: Option<String>,
    session_lifetime: Duration,
}

fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// What a console session stores of the key it was made with: a hash of the
/// key's hash and the session's id. The id is not stored (only a hash of
/// it), so a stored session says nothing about its key, not even to a
/// guesser, without the cookie.
pub fn session_fingerprint(key: &str, session_id: &str) -> [u8; 32] {
    fingerprint_of(&hash(key), session_id)
}

fn fingerprint_of(key_hash: &[u8; 32], session_id: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"tempora session\0");
    h.update(session_id.as_bytes());
    h.update(b"\0");
    h.update(key_hash);
    h.finalize().into()
}

impl Auth {
    pub fn new(cfg: &AuthConfig) -> Auth {
        let mut keys = Vec::new();
        for t in &cfg.tenants {
            for k in &t.keys {
                keys.push(KeyEntry { hash: hash(k), principal: Principal::Tenant(t.name.clone()) });
            }
        }
        for k in &cfg.admin_tokens {
            keys.push(KeyEntry { hash: hash(k), principal: Principal::Admin });
        }
        let session_lifetime =
            Duration::from_secs(cfg.session_lifetime_secs.unwrap_or(crate::config::DEFAULT_SESSION_LIFETIME_SECS));
        Auth { open: cfg.is_open(), keys, tenant_host: cfg.tenant_host.clone(), session_lifetime }
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// How long a console session lasts from sign-in.
    pub fn session_lifetime(&self) -> Duration {
        self.session_lifetime
    }

    /// Whether `tenant` is one an admin may name: a configured tenant (in
    /// open mode, the default tenant). Naming anything else would create a
    /// tenant by typo.
    pub fn knows_tenant(&self, tenant: &str) -> bool {
        if self.open {
            return tenant == DEFAULT_TENANT;
        }
        self.keys.iter().any(|k| matches!(&k.principal, Principal::Tenant(t) if t == tenant))
    }

    /// The principal a key stands for, on the given `Host` (port ignored).
    /// `None` when the key is unknown, or is a tenant key presented on
    /// another tenant's host.
    pub fn check_key(&self, key: &str, host: Option<&str>) -> Option<Principal> {
        let (found, _) = find(self.keys.iter().map(|k| k.hash), &hash(key));
        let principal = &self.keys[found?].principal;
        self.admits_on(principal, host).then(|| principal.clone())
    }

    /// Who the configured key a session was made with stands for now (the
    /// key whose [`session_fingerprint`] for `session_id` is
    /// `fingerprint`); `None` once that key is no longer configured. The
    /// host is the caller's to check ([`Auth::admits_on`]).
    pub fn session_key(&self, fingerprint: &[u8; 32], session_id: &str) -> Option<Principal> {
        let (found, _) = find(self.keys.iter().map(|k| fingerprint_of(&k.hash, session_id)), fingerprint);
        Some(self.keys[found?].principal.clone())
    }

    /// Whether `principal` may authenticate on the given `Host` (port
    /// ignored): with host binding, a tenant only on its own host.
    pub fn admits_on(&self, principal: &Principal, host: Option<&str>) -> bool {
        match (principal, &self.tenant_host) {
            (Principal::Tenant(t), Some(pattern)) => {
                let want = pattern.replace("{tenant}", t).to_ascii_lowercase();
                let got = host.map(strip_port).unwrap_or_default().to_ascii_lowercase();
                want == got
            }
            _ => true,
        }
    }
}

/// The index of the hash that is `presented`, and how many hashes were
/// compared. Every one is compared, with no early exit and no branch on a
/// comparison's outcome (the index is selected in constant time), so the
/// time taken depends only on the number of keys, not on which one (if any)
/// matched or how much of a hash did. Only the final answer, match or not,
/// is a branch; that is what the caller is told anyway.
fn find(hashes: impl Iterator<Item = [u8; 32]>, presented: &[u8; 32]) -> (Option<usize>, usize) {
    let mut index = 0u64;
    let mut found = Choice::from(0);
    let mut compared = 0;
    for (i, hash) in hashes.enumerate() {
        let same = hash.ct_eq(presented);
        index.conditional_assign(&(i as u64), same);
        found |= same;
        compared += 1;
    }
    (bool::from(found).then_some(index as usize), compared)
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        // [v6]:port
        return host.split_once(']').map(|(h, _)| &host[..h.len() + 1]).unwrap_or(host);
    }
    host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TenantKeys;

    fn config(host: Option<&str>) -> AuthConfig {
        AuthConfig {
            admin_tokens: vec!["adm-secret-1".into()],
            tenants: vec![
                TenantKeys { name: "nas".into(), keys: vec!["nas-key-1".into(), "nas-key-2".into()] },
                TenantKeys { name: "acme".into(), keys: vec!["acme-key-1".into()] },
            ],
            tenant_host: host.map(String::from),
            session_lifetime_secs: None,
        }
    }

    fn keyed(host: Option<&str>) -> Auth {
        Auth::new(&config(host))
    }

    #[test]
    fn no_keys_is_open_mode() {
        assert!(Auth::new(&AuthConfig::default()).is_open());
        assert!(!keyed(None).is_open());
    }

    #[test]
    fn keys_select_their_tenant_and_unknown_keys_nothing() {
        let a = keyed(None);
        assert_eq!(a.check_key("nas-key-2", None), Some(Principal::Tenant("nas".into())));
        assert_eq!(a.check_key("acme-key-1", None), Some(Principal::Tenant("acme".into())));
        assert_eq!(a.check_key("adm-secret-1", None), Some(Principal::Admin));
        assert_eq!(a.check_key("nas-key-3", None), None);
        assert_eq!(a.check_key("", None), None);
    }

    #[test]
    fn every_key_is_compared_whichever_matches() {
        let a = keyed(None);
        let n = a.keys.len();
        assert_eq!(n, 4);
        let hashes = || a.keys.iter().map(|k| k.hash);
        // The first, a middle, the last entry, and none: always all of them.
        for (key, want) in
            [("nas-key-1", Some(0)), ("nas-key-2", Some(1)), ("adm-secret-1", Some(3)), ("nobody-key", None)]
        {
            let (found, compared) = find(hashes(), &hash(key));
            assert_eq!(found, want, "{key}");
            assert_eq!(compared, n, "{key}: compared {compared} of {n}");
        }
        // A hash that differs from an entry only in its last byte is no match.
        let mut near = hash("acme-key-1");
        near[31] ^= 1;
        assert_eq!(find(hashes(), &near), (None, n));
        assert_eq!(find(std::iter::empty(), &hash("x")), (None, 0));
    }

    #[test]
    fn a_tenant_key_works_only_on_its_own_host() {
        let a = keyed(Some("{tenant}.example.com"));
        assert_eq!(a.check_key("nas-key-1", Some("nas.example.com:8080")), Some(Principal::Tenant("nas".into())));
        assert_eq!(a.check_key("nas-key-1", Some("acme.example.com")), None);
        assert_eq!(a.check_key("nas-key-1", None), None);
        assert_eq!(a.check_key("adm-secret-1", Some("anything")), Some(Principal::Admin));
    }

    #[test]
    fn a_session_holds_while_its_key_is_configured() {
        let id = "0123456789abcdef";
        let fp = session_fingerprint("nas-key-2", id);
        assert_ne!(&fp, &hash("nas-key-2"), "the fingerprint is not the key's plain hash");
        assert_ne!(fp, session_fingerprint("nas-key-2", "another-session"));
        assert_eq!(keyed(None).session_key(&fp, id), Some(Principal::Tenant("nas".into())));
        // The same fingerprint with another id, and an admin's session.
        assert_eq!(keyed(None).session_key(&fp, "another-session"), None);
        let admin = session_fingerprint("adm-secret-1", id);
        assert_eq!(keyed(None).session_key(&admin, id), Some(Principal::Admin));
        // The key removed from the configuration, or given to another tenant.
        let mut c = config(None);
        c.tenants[0].keys.retain(|k| k != "nas-key-2");
        assert_eq!(Auth::new(&c).session_key(&fp, id), None);
        c.tenants[1].keys.push("nas-key-2".into());
        assert_eq!(Auth::new(&c).session_key(&fp, id), Some(Principal::Tenant("acme".into())));
        // Host binding, as for the key itself.
        let bound = keyed(Some("{tenant}.example.com"));
        let nas = Principal::Tenant("nas".into());
        assert!(bound.admits_on(&nas, Some("nas.example.com")));
        assert!(!bound.admits_on(&nas, Some("acme.example.com")));
        assert!(bound.admits_on(&Principal::Admin, None));
        assert!(keyed(None).admits_on(&nas, None));
    }
}
