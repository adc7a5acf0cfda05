//! Who is calling: what a caller presents, on any wire, resolved once to a
//! principal and the tenant its request is about. HTTP and SSE (the
//! `Authorization` header or the console's session cookie), `/mcp`, gRPC
//! metadata and NeuroDock's `AUTH` packet all come here.

use super::error::{Result, ServiceError};
use super::Service;
pub use crate::auth::{Principal, Scope, DEFAULT_TENANT};

/// What a request presents. Each wire fills in what it has.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    /// A bearer key (`Authorization: Bearer`, gRPC `authorization`
    /// metadata, NeuroDock's `AUTH` key).
    pub bearer: Option<&'a str>,
    /// The console's session cookie, used when no bearer key is given.
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

/// What signing in with a key gives the console: its scope, and the
/// tenant for a tenant key (or open mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub scope: Scope,
    pub tenant: Option<String>,
}

impl Service {
    /// Checks a key a person signs in with (the console). In open mode any
    /// key will do; a wrong key is `Unauthorized`, since saying so discloses
    /// nothing the person did not type.
    pub fn sign_in(&self, key: &str, host: Option<&str>) -> Result<Session> {
        if self.auth.is_open() {
            return Ok(Session { scope: Scope::Open, tenant: Some(DEFAULT_TENANT.to_string()) });
        }
        match self.auth.check_key(key, host).ok_or(ServiceError::Unauthorized)? {
            Principal::Tenant(t) => Ok(Session { scope: Scope::Tenant, tenant: Some(t) }),
            Principal::Admin => Ok(Session { scope: Scope::Admin, tenant: None }),
        }
    }

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
        let principal = self
            .auth
            .resolve(credentials.bearer, credentials.session, credentials.host)
            .ok_or_else(ServiceError::not_found)?;
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
}
