//! The guard on outbound requests to caller-chosen URLs (model endpoints and
//! connector pulls): unless the operator allows it, a request
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
    // 6to4 (2002::/16) carries an IPv4 address in its next 32 bits; a relay
    // would deliver to it, so it is as public as that address.
    if s[0] == 0x2002 {
        let [a, b] = s[1].to_be_bytes();
        let [c, d] = s[2].to_be_bytes();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || s[..6] == [0; 6] // IPv4-compatible (::a.b.c.d, deprecated) and the rest of ::/96
        || (s[0] & 0xfe00) == 0xfc00 // unique local (AWS metadata fd00:ec2::254 among them)
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] == 0x0000) // Teredo: tunnels to anywhere
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // discard-only
        || (s[0] == 0x0064 && s[1] == 0xff9b)) // NAT64 (well-known and local-use) can reach private v4
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

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// Allow every non-public address (`[outbound] allow_private`): for
    /// model servers on the same host or network.
    pub allow_private: bool,
    /// Networks allowed although not public (`[outbound] allow`, e.g.
    /// `10.1.2.0/24` for one internal export server): narrower than
    /// `allow_private`.
    pub allow: Arc<[ipnet::IpNet]>,
}

impl Policy {
    /// Whether a connection to `ip` is allowed.
    pub fn allows(&self, ip: IpAddr) -> bool {
        if self.allow_private || is_public(ip) {
            return true;
        }
        let mapped = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.allow.iter().any(|net| net.contains(&ip) || mapped.is_some_and(|m| net.contains(&m)))
    }

    /// Parses an allowlist entry: a network (`10.0.0.0/8`, `fd00::/8`) or
    /// one address (`127.0.0.1`).
    pub fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
        let s = s.trim();
        s.parse::<ipnet::IpNet>()
            .or_else(|_| s.parse::<IpAddr>().map(ipnet::IpNet::from))
            .map_err(|_| format!("{s:?} is not an IP address or network (like 10.0.0.0/8)"))
    }

    /// Checks the host of `url` up front; `Err` says why it is refused.
    pub async fn check_url(&self, url: &reqwest::Url) -> Result<(), Refusal> {
        if self.allow_private {
            return Ok(());
        }
        self.resolve(url).await.map(|_| ())
    }

    /// Resolves the host of `url` once and checks every address it gives:
    /// one refused address refuses the URL (a name that mixes public and
    /// private answers is a rebinding setup). The answer is what a caller
    /// must connect to, so nothing is resolved again between the check and
    /// the connection.
    pub async fn resolve(&self, url: &reqwest::Url) -> Result<Resolved, Refusal> {
        let host = url.host_str().ok_or_else(|| Refusal::Invalid("the URL has no host".to_string()))?;
        let port = url.port_or_known_default().unwrap_or(443);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let (literal, addrs): (bool, Vec<SocketAddr>) = match bare.parse::<IpAddr>() {
            Ok(ip) => (true, vec![SocketAddr::new(ip, port)]),
            Err(_) => (
                false,
                tokio::net::lookup_host((bare, port))
                    .await
                    .map_err(|e| Refusal::Unresolvable(format!("cannot resolve {host}: {e}")))?
                    .collect(),
            ),
        };
        if addrs.is_empty() {
            return Err(Refusal::Unresolvable(format!("{host} resolves to no address")));
        }
        if let Some(a) = addrs.iter().find(|a| !self.allows(a.ip())) {
            return Err(Refusal::Invalid(format!(
                "{host} is a private, loopback or otherwise non-public address ({}); the server only calls public \
                 endpoints unless the operator allows it ([outbound] allow = [\"<network>\"] or allow_private = true; \
                 TEMPORA_OUTBOUND_ALLOW, TEMPORA_OUTBOUND_ALLOW_PRIVATE)",
                a.ip()
            )));
        }
        Ok(Resolved { host: bare.to_string(), literal, addrs })
    }
}

/// A host resolved and checked by [`Policy::resolve`].
#[derive(Debug, Clone)]
pub struct Resolved {
    pub host: String,
    /// The URL named an address, not a name.
    pub literal: bool,
    pub addrs: Vec<SocketAddr>,
}

/// The HTTP client's resolver: system DNS, then the policy.
pub struct GuardedResolver {
    pub policy: Policy,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = addrs.into_iter().filter(|a| policy.allows(a.ip())).collect();
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
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::a00:1",
            "::127.0.0.1",
            "::",
            "2002:7f00:1::",
            "2002:a00:1::1",
            "2001:0:4136:e378::1",
            "fec0::1",
            "fd00:ec2::254",
            "100.100.100.200",
            "198.18.0.1",
            "192.0.0.170",
            "240.0.0.1",
            "0.1.2.3",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip} must not count as public");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"] {
            assert!(is_public(ip.parse().unwrap()), "{ip} is public");
        }
    }

    #[tokio::test]
    async fn literal_private_urls_are_refused_unless_allowed() {
        let url: reqwest::Url = "http://127.0.0.1:9/v1".parse().unwrap();
        let err = Policy::default().check_url(&url).await.unwrap_err();
        assert!(matches!(&err, Refusal::Invalid(m) if m.contains("allow_private")), "{err}");
        assert!(Policy { allow_private: true, ..Default::default() }.check_url(&url).await.is_ok());
        let url: reqwest::Url = "http://[::1]:9/v1".parse().unwrap();
        assert!(Policy::default().check_url(&url).await.is_err());
    }

    #[test]
    fn the_allowlist_admits_only_the_networks_it_names() {
        let policy = Policy {
            allow_private: false,
            allow: vec![Policy::parse_net("127.0.0.1").unwrap(), Policy::parse_net("10.1.0.0/16").unwrap()].into(),
        };
        for ip in ["127.0.0.1", "::ffff:127.0.0.1", "10.1.2.3", "8.8.8.8"] {
            assert!(policy.allows(ip.parse().unwrap()), "{ip} is allowed");
        }
        for ip in ["127.0.0.2", "10.2.0.1", "169.254.169.254", "::1", "192.168.0.1"] {
            assert!(!policy.allows(ip.parse().unwrap()), "{ip} is not on the allowlist");
        }
        assert!(Policy::parse_net("10.0.0.0/33").is_err());
        assert!(Policy::parse_net("localhost").is_err());
    }
}
