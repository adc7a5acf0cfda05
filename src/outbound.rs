//! The guard on outbound requests to caller-chosen URLs (model endpoints
//! now, connector pulls later): unless the operator allows it, a request
//! may reach only public addresses, never loopback, private networks,
//! link-local (cloud metadata at 169.254.169.254) and the like, or a caller
//! could make the server probe its own network (SSRF).
//!
//! The check runs twice: once up front on the URL's host, for a clear error,
//! and again inside the HTTP client's resolver on every connection, so a
//! name that resolves to a public address first and a private one later (DNS
//! rebinding) is still refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Whether `ip` is an ordinary public unicast address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x0064 && s[1] == 0xff9b)) // NAT64 can reach private v4
}

/// Why a URL is not called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The caller's URL: no host, or an address the policy refuses.
    Invalid(String),
    /// The name does not resolve (right now): the endpoint is unreachable.
    Unresolvable(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Invalid(m) | Refusal::Unresolvable(m) => f.write_str(m),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// Allow loopback and private addresses (`[outbound] allow_private`):
    /// for model servers on the same host or network.
    pub allow_private: bool,
}

impl Policy {
    /// Checks the host of `url` up front; `Err` says why it is refused.
    pub async fn check_url(&self, url: &reqwest::Url) -> Result<(), Refusal> {
        if self.allow_private {
            return Ok(());
        }
        let host = url.host_str().ok_or_else(|| Refusal::Invalid("the URL has no host".to_string()))?;
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs: Vec<SocketAddr> = match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((host, port))
                .await
                .map_err(|e| Refusal::Unresolvable(format!("cannot resolve {host}: {e}")))?
                .collect(),
        };
        match addrs.iter().find(|a| !is_public(a.ip())) {
            Some(a) => Err(Refusal::Invalid(format!(
                "{host} is a private, loopback or otherwise non-public address ({}); the server only calls public \
                 endpoints unless the operator sets [outbound] allow_private = true (TEMPORA_OUTBOUND_ALLOW_PRIVATE=true)",
                a.ip()
            ))),
            None => Ok(()),
        }
    }
}

/// The HTTP client's resolver: system DNS, then the policy.
pub struct GuardedResolver {
    pub policy: Policy,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> =
                addrs.into_iter().filter(|a| policy.allow_private || is_public(a.ip())).collect();
            if allowed.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            let it: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(it)
        })
    }
}

/// An HTTP client whose every connection obeys `policy`.
pub fn client(policy: Policy) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(5))
        .dns_resolver(Arc::new(GuardedResolver { policy }))
        // A redirect could lead anywhere; endpoints that redirect are refused.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("the HTTP client builds with static settings")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for ip in [
            "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0", "100.64.0.1",
            "255.255.255.255", "224.0.0.1", "::1", "fd00::1", "fe80::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip} must not count as public");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(ip.parse().unwrap()), "{ip} is public");
        }
    }

    #[tokio::test]
    async fn literal_private_urls_are_refused_unless_allowed() {
        let url: reqwest::Url = "http://127.0.0.1:9/v1".parse().unwrap();
        let err = Policy::default().check_url(&url).await.unwrap_err();
        assert!(matches!(&err, Refusal::Invalid(m) if m.contains("allow_private")), "{err}");
        assert!(Policy { allow_private: true }.check_url(&url).await.is_ok());
        let url: reqwest::Url = "http://[::1]:9/v1".parse().unwrap();
        assert!(Policy::default().check_url(&url).await.is_err());
    }
}
