//! Who is calling: what a caller presents, on any wire, resolved once to a
//! principal and the tenant its request is about. HTTP and SSE (the
//! `Authorization` header or the console's session cookie, `sessions.rs`),
//! `/mcp`, gRPC metadata and NeuroDock's `AUTH` packet all come here.

use super::error::{Result, ServiceError};
use super::Service;
pub use crate::auth::{Principal, Scope, DEFAULT_TENANT};

/// What a request presents. Each wire fills in what it has.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    /// A bearer key (`Authorization: Bearer`, gRPC `authorization`
    /// metadata, NeuroDock's `AUTH` key).
    pub bearer: Option<&'a str>,
    /// The console's session cookie (an opaque session id,
    /// `sessions.rs`), used when no bearer key is given.
    pub session: Option<&'a str>,
    /// The `Host` the request was sent to (a tenant key may be bound to
    /// its tenant's host name).
    pub host: Option<&'a str>,
    /// The tenant an admin names for the request.
    pub tenant: Option<&'a str>,
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub principal: Principal,
    /// The tenant the request is about: the key's own tenant, or the one an
    /// admin named.
    pub tenant: Option<String>,
}

impl Caller {
    /// The tenant of the request, or a clear error for an admin who named none.
    pub fn tenant(&self) -> Result<&str> {
        self.tenant.as_deref().ok_or_else(|| {
            ServiceError::invalid("admin requests name their tenant with ?tenant= or the X-Tempora-Tenant header")
        })
    }

    pub fn is_admin(&self) -> bool {
        self.principal == Principal::Admin
    }
}

/// The key of an `Authorization` value of the `Bearer` scheme (HTTP
/// headers and gRPC metadata alike).
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl Service {
    /// Whether the server runs in open mode (no keys: one tenant, `default`).
    pub fn is_open(&self) -> bool {
        self.auth.is_open()
    }

    /// Whether `tenant` is one a caller may name: a configured tenant (in
    /// open mode, the default one).
    pub fn knows_tenant(&self, tenant: &str) -> bool {
        self.auth.knows_tenant(tenant)
    }

    /// Resolves what a caller presents. A missing or wrong key, and an admin
    /// naming a tenant that is not configured, are all the plain
    /// "not found": the answer never says what exists.
    pub fn authenticate(&self, credentials: &Credentials<'_>) -> Result<Caller> {
        self.authenticate_naming(credentials, || credentials.tenant.map(String::from))
    }

    /// [`Service::authenticate`], reading the tenant an admin names only
    /// when the key is an admin's (a tenant key names its own; the request
    /// need not be searched for one).
    pub fn authenticate_naming(
        &self,
        credentials: &Credentials<'_>,
        named: impl FnOnce() -> Option<String>,
    ) -> Result<Caller> {
        let principal = self.principal_of(credentials)?.ok_or_else(ServiceError::not_found)?;
        let tenant = match &principal {
            Principal::Tenant(t) => Some(t.clone()),
            // An admin may name configured tenants only: a typo must not
            // create a tenant.
            Principal::Admin => match named() {
                Some(t) if !self.auth.knows_tenant(&t) => return Err(ServiceError::not_found()),
                other => other,
            },
        };
        Ok(Caller { principal, tenant })
    }

    /// Who the credentials stand for: in open mode anyone is the default
    /// tenant; in keyed mode a bearer key, else the session cookie.
    fn principal_of(&self, credentials: &Credentials<'_>) -> Result<Option<Principal>> {
        if self.auth.is_open() {
            return Ok(Some(Principal::Tenant(DEFAULT_TENANT.to_string())));
        }
        match (credentials.bearer, credentials.session) {
            (Some(key), _) => Ok(self.auth.check_key(key, credentials.host)),
            (None, Some(id)) => self.session_principal(id, credentials.host),
            (None, None) => Ok(None),
        }
    }
}
