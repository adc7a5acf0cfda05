//! Who is calling: keys to principals.
//!
//! Only SHA-256 hashes of keys are kept in memory; a presented key is hashed
//! and compared against every stored hash in constant time (all of them, so
//! the time taken says nothing about which key, if any, matched). Keys are
//! never logged.

use crate::config::AuthConfig;
use sha2::{Digest, Sha256};
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
}

fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
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
        Auth { open: cfg.is_open(), keys, tenant_host: cfg.tenant_host.clone() }
    }

    pub fn is_open(&self) -> bool {
        self.open
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
        let (found, _) = find(&self.keys, &hash(key));
        let principal = self.keys[found?].principal.clone();
        if let (Principal::Tenant(t), Some(pattern)) = (&principal, &self.tenant_host) {
            let want = pattern.replace("{tenant}", t).to_ascii_lowercase();
            let got = host.map(strip_port).unwrap_or_default().to_ascii_lowercase();
            if want != got {
                return None;
            }
        }
        Some(principal)
    }

    /// Resolves a request: open mode is always the default tenant; keyed mode
    /// needs a bearer key or the session cookie.
    pub fn resolve(&self, bearer: Option<&str>, cookie: Option<&str>, host: Option<&str>) -> Option<Principal> {
        if self.open {
            return Some(Principal::Tenant(DEFAULT_TENANT.to_string()));
        }
        let key = bearer.or(cookie)?;
        self.check_key(key, host)
    }
}

/// The index of the entry whose hash is `presented`, and how many entries
/// were compared. Every entry is compared, with no early exit and no branch
/// on a comparison's outcome (the index is selected in constant time), so
/// the time taken depends only on the number of keys, not on which one (if
/// any) matched or how much of a hash did. Only the final answer, match or
/// not, is a branch; that is what the caller is told anyway.
fn find(entries: &[KeyEntry], presented: &[u8; 32]) -> (Option<usize>, usize) {
    let mut index = 0u64;
    let mut found = Choice::from(0);
    let mut compared = 0;
    for (i, entry) in entries.iter().enumerate() {
        let same = entry.hash.ct_eq(presented);
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

    fn keyed(host: Option<&str>) -> Auth {
        Auth::new(&AuthConfig {
            admin_tokens: vec!["adm-secret-1".into()],
            tenants: vec![
                TenantKeys { name: "nas".into(), keys: vec!["nas-key-1".into(), "nas-key-2".into()] },
                TenantKeys { name: "acme".into(), keys: vec!["acme-key-1".into()] },
            ],
            tenant_host: host.map(String::from),
        })
    }

    #[test]
    fn open_mode_is_the_default_tenant() {
        let a = Auth::new(&AuthConfig::default());
        assert_eq!(a.resolve(None, None, None), Some(Principal::Tenant("default".into())));
    }

    #[test]
    fn keys_select_their_tenant_and_unknown_keys_nothing() {
        let a = keyed(None);
        assert_eq!(a.resolve(Some("nas-key-2"), None, None), Some(Principal::Tenant("nas".into())));
        assert_eq!(a.resolve(None, Some("acme-key-1"), None), Some(Principal::Tenant("acme".into())));
        assert_eq!(a.resolve(Some("adm-secret-1"), None, None), Some(Principal::Admin));
        assert_eq!(a.resolve(Some("nas-key-3"), None, None), None);
        assert_eq!(a.resolve(None, None, None), None);
    }

    #[test]
    fn every_key_is_compared_whichever_matches() {
        let a = keyed(None);
        let n = a.keys.len();
        assert_eq!(n, 4);
        // The first, a middle, the last entry, and none: always all of them.
        for (key, want) in
            [("nas-key-1", Some(0)), ("nas-key-2", Some(1)), ("adm-secret-1", Some(3)), ("nobody-key", None)]
        {
            let (found, compared) = find(&a.keys, &hash(key));
            assert_eq!(found, want, "{key}");
            assert_eq!(compared, n, "{key}: compared {compared} of {n}");
        }
        // A hash that differs from an entry only in its last byte is no match.
        let mut near = hash("acme-key-1");
        near[31] ^= 1;
        assert_eq!(find(&a.keys, &near), (None, n));
        assert_eq!(find(&[], &hash("x")), (None, 0));
    }

    #[test]
    fn a_tenant_key_works_only_on_its_own_host() {
        let a = keyed(Some("{tenant}.example.com"));
        assert_eq!(a.check_key("nas-key-1", Some("nas.example.com:8080")), Some(Principal::Tenant("nas".into())));
        assert_eq!(a.check_key("nas-key-1", Some("acme.example.com")), None);
        assert_eq!(a.check_key("nas-key-1", None), None);
        assert_eq!(a.check_key("adm-secret-1", Some("anything")), Some(Principal::Admin));
    }
}
