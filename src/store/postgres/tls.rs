//! TLS to PostgreSQL: the `ssl*` parameters of the store's URL, read as
//! libpq reads them, and the one connector every connection of the store
//! uses (the pool's, the writer's, the follower's).
//!
//! tokio-postgres understands `sslmode=disable|prefer|require` and nothing
//! else of libpq's TLS settings. This module takes `sslmode`, `sslrootcert`,
//! `sslcert` and `sslkey` out of the URL before tokio-postgres parses the
//! rest, and applies them itself:
//!
//! | `sslmode`          | encrypted                   | server certificate checked            |
//! |--------------------|-----------------------------|---------------------------------------|
//! | `disable`          | no                          | –                                     |
//! | `prefer` (default) | if the server offers it     | only with `sslrootcert`: as verify-ca |
//! | `require`          | yes                         | only with `sslrootcert`: as verify-ca |
//! | `verify-ca`        | yes                         | chain to a trusted root               |
//! | `verify-full`      | yes                         | chain, and the host name              |
//!
//! The trusted roots are the file `sslrootcert` names (PEM), or, without
//! one (or with `sslrootcert=system`), the system's store
//! (rustls-native-certs: `SSL_CERT_FILE`/`SSL_CERT_DIR`, else the
//! distribution's bundle). libpq would look for `~/.postgresql/root.crt`
//! instead; a service has no such home. `sslrootcert=system` asks for
//! `verify-full`, as libpq's does. `prefer` connects without TLS when the
//! server declines it, or when the handshake fails, as libpq does.
//! `sslcert` and `sslkey` (PEM) are a client certificate, for servers that
//! authenticate with one (`cert` in `pg_hba.conf`).
//!
//! The TLS stack is rustls on ring (no OpenSSL), through
//! tokio-postgres-rustls, which also gives SCRAM its channel binding
//! (`channel_binding=require` works).
//!
//! Nothing here logs or reports the URL: errors name the parameter and its
//! file, never the password.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The stream of a connection: TCP (or a Unix socket), TLS or not.
pub type Stream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;
/// A connection, to drive.
pub type Connection = tokio_postgres::Connection<Socket, Stream>;

/// libpq's `sslmode`, the values tempora supports (all but `allow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(v: &str) -> Result<SslMode, String> {
        Ok(match v {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => {
                return Err("sslmode=allow is not supported (use prefer, or disable)".into());
            }
            _ => {
                return Err(format!(
                    "sslmode={v:?} is not one of disable, prefer, require, verify-ca, verify-full"
                ))
            }
        })
    }
}

/// The TLS parameters of a URL, as written there.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Params {
    pub mode: Option<SslMode>,
    pub root_cert: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
}

/// The parameters this module reads; tokio-postgres would refuse the last
/// three, and takes only three values of the first.
const OURS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

impl Params {
    /// Takes one parameter; `false` when it is not one of ours.
    fn take(&mut self, key: &str, value: &str) -> Result<bool, String> {
        // An empty value is no value, as libpq reads it.
        let value = (!value.is_empty()).then(|| value.to_string());
        match key {
            "sslmode" => self.mode = value.as_deref().map(SslMode::parse).transpose()?,
            "sslrootcert" => self.root_cert = value,
            "sslcert" => self.cert = value,
            "sslkey" => self.key = value,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Splits `url` (a `postgres://` URL or the `key=value` form) into the
/// text tokio-postgres is to parse and the TLS parameters it would not take.
pub fn split(url: &str) -> Result<(String, Params), String> {
    let mut params = Params::default();
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        split_url(url, &mut params)?
    } else {
        split_key_values(url, &mut params)?
    };
    Ok((rest, params))
}

/// The URL form. Where the query starts is found as tokio-postgres finds
/// it: after the first `@` (the user and password may hold a `?`), then at
/// the first `?`.
fn split_url(url: &str, params: &mut Params) -> Result<String, String> {
    let after_creds = url.find('@').map_or(0, |i| i + 1);
    let Some(q) = url[after_creds..].find('?').map(|i| after_creds + i) else { return Ok(url.to_string()) };
    let (base, query) = (&url[..q], &url[q + 1..]);
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let taken = match pair.split_once('=') {
            Some((k, v)) => {
                let k = decode(k)?;
                OURS.contains(&k.as_str()) && params.take(&k, &decode(v)?)?
            }
            // tokio-postgres reports it.
            None => false,
        };
        if !taken {
            kept.push(pair);
        }
    }
    Ok(if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) })
}

fn decode(s: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| "the store's PostgreSQL URL does not parse: a parameter is not UTF-8 once decoded".to_string())
}

/// The `key=value` form: parsed as tokio-postgres parses it (values bare
/// or in single quotes, `\` escaping the next character), the pairs that
/// are not ours written out again, quoted.
fn split_key_values(s: &str, params: &mut Params) -> Result<String, String> {
    let bad = |what: &str| format!("the store's PostgreSQL connection string does not parse: {what}");
    let mut it = s.chars().peekable();
    let mut kept = Vec::new();
    loop {
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        let mut key = String::new();
        while let Some(c) = it.next_if(|c| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        if key.is_empty() {
            if it.peek().is_some() {
                return Err(bad("a parameter without a name"));
            }
            break;
        }
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        if it.next() != Some('=') {
            return Err(bad("a parameter without `=`"));
        }
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if it.next_if_eq(&'\'').is_some() {
            loop {
                match it.next() {
                    Some('\'') => break,
                    Some('\\') => value.extend(it.next()),
                    Some(c) => value.push(c),
                    None => return Err(bad("an unterminated quoted value")),
                }
            }
        } else {
            while let Some(c) = it.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(it.next());
                } else {
                    value.push(c);
                }
            }
            if value.is_empty() {
                return Err(bad("a parameter without a value"));
            }
        }
        if !params.take(&key, &value)? {
            let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push(format!("{key}='{quoted}'"));
        }
    }
    Ok(kept.join(" "))
}

/// Reads the store's URL: the connection settings, and the connector that
/// applies its TLS parameters. Errors never hold the URL.
pub fn parse(url: &str) -> Result<(Config, Tls), String> {
    let (rest, params) = split(url)?;
    let mut config: Config =
        rest.parse().map_err(|e| format!("the store's PostgreSQL URL does not parse: {}", describe(&e)))?;
    let tls = Tls::new(&params)?;
    config.ssl_mode(match tls.mode {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Prefer => PgSslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
    });
    Ok((config, tls))
}

/// How the server's certificate is checked.
enum Check {
    /// Not at all (libpq's `prefer` and `require` without a root
    /// certificate): encrypted against a passive listener, not against a
    /// man in the middle.
    Nothing,
    /// Signed by one of these roots, whatever host it names.
    Chain(Arc<RootCertStore>),
    /// Signed by one of these roots, and naming the host connected to.
    ChainAndName(Arc<RootCertStore>),
}

/// The connector of the store's connections: tokio-postgres-rustls over a
/// rustls configuration made from the URL's TLS parameters.
#[derive(Clone)]
pub struct Tls {
    make: MakeRustlsConnect,
    mode: SslMode,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("mode", &self.mode).finish_non_exhaustive()
    }
}

impl Tls {
    /// The connector for `params`; reads the files they name (the roots,
    /// the client certificate and key) now, so that a bad one stops the
    /// store from opening rather than each connection from being made.
    pub fn new(params: &Params) -> Result<Tls, String> {
        let system_roots = params.root_cert.as_deref() == Some("system");
        let mode = match params.mode {
            Some(m) => m,
            // libpq: sslrootcert=system makes verify-full the default.
            None if system_roots => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if system_roots && mode != SslMode::VerifyFull && mode != SslMode::Disable {
            return Err(format!(
                "sslrootcert=system needs sslmode=verify-full (the system's roots vouch for host names), not {}",
                mode_name(mode)
            ));
        }
        let roots = || match params.root_cert.as_deref() {
            Some(path) if path != "system" => root_file(path),
            _ => system_store(),
        };
        let check = match mode {
            SslMode::Disable => Check::Nothing,
            // libpq: with a root certificate, prefer and require check the
            // chain as verify-ca does.
            SslMode::Prefer | SslMode::Require => match &params.root_cert {
                Some(_) => Check::Chain(roots()?),
                None => Check::Nothing,
            },
            SslMode::VerifyCa => Check::Chain(roots()?),
            SslMode::VerifyFull => Check::ChainAndName(roots()?),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match check {
            Check::Nothing => Arc::new(Unchecked(Arc::clone(&provider))),
            Check::Chain(roots) => Arc::new(ChainOnly { roots, provider: Arc::clone(&provider) }),
            Check::ChainAndName(roots) => WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
                .build()
                .map_err(|e| format!("the trusted roots for sslmode=verify-full: {e}"))?,
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS to PostgreSQL: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match (&params.cert, &params.key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(client_chain(cert)?, client_key(key)?)
                .map_err(|e| format!("sslcert={cert} and sslkey={key}: not a certificate and its key: {e}"))?,
            (Some(_), None) => return Err("sslcert needs sslkey (the client certificate's private key)".into()),
            (None, Some(_)) => return Err("sslkey needs sslcert (the client certificate)".into()),
        };
        // As libpq 17 does: PostgreSQL 17 wants it for sslnegotiation=direct,
        // older servers ignore it.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(Tls { make: MakeRustlsConnect::new(config), mode })
    }

    /// The `sslmode` in force.
    #[cfg(test)]
    pub fn mode(&self) -> SslMode {
        self.mode
    }

    /// A connection made with `config`. Under `prefer`, a TLS handshake
    /// that fails is followed by a plain connection, as libpq does (a
    /// server that declines TLS gets one at once, from tokio-postgres).
    pub async fn connect(&self, config: &Config) -> Result<(Client, Connection), tokio_postgres::Error> {
        match config.connect(self.make.clone()).await {
            Err(e) if self.mode == SslMode::Prefer && handshake_failed(&e) => {
                tracing::debug!(error = %e, "TLS to the database failed; sslmode=prefer, so connecting without");
                let mut plain = config.clone();
                plain.ssl_mode(PgSslMode::Disable);
                plain.connect(self.make.clone()).await
            }
            other => other,
        }
    }

    /// The connection factory of the read pool, which drives each
    /// connection on a task of its own.
    pub fn pool_connect(&self) -> PoolConnect {
        PoolConnect(self.clone())
    }
}

/// [`Tls::connect`] for deadpool-postgres.
pub struct PoolConnect(Tls);

type Connected = Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>;

impl deadpool_postgres::Connect for PoolConnect {
    fn connect(&self, config: &Config) -> Pin<Box<dyn Future<Output = Connected> + Send + '_>> {
        let config = config.clone();
        Box::pin(async move {
            let (client, conn) = self.0.connect(&config).await?;
            // What deadpool-postgres's own connector does with it.
            let driver = tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::warn!(target: "deadpool.postgres", "Connection error: {}", e);
                }
            });
            Ok((client, driver))
        })
    }
}

fn mode_name(m: SslMode) -> &'static str {
    match m {
        SslMode::Disable => "disable",
        SslMode::Prefer => "prefer",
        SslMode::Require => "require",
        SslMode::VerifyCa => "verify-ca",
        SslMode::VerifyFull => "verify-full",
    }
}

/// `e` with its causes: tokio-postgres's own text is only the kind of
/// error ("error performing TLS handshake"), the cause says which
/// ("invalid peer certificate: UnknownIssuer"). No cause holds the URL or
/// the password.
pub fn describe(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.ends_with(&said) {
            text = format!("{text}: {said}");
        }
        cause = c.source();
    }
    text
}

/// Whether `e` is the TLS handshake failing (rustls refused the server,
/// or the server refused rustls), not the network or the server's answer.
fn handshake_failed(e: &tokio_postgres::Error) -> bool {
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    io.and_then(|io| io.get_ref()).is_some_and(|inner| inner.is::<rustls::Error>())
}

/// The roots in the PEM file at `path`.
fn root_file(path: &str) -> Result<Arc<RootCertStore>, String> {
    let certs = pem_certs(path, "sslrootcert")?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| format!("sslrootcert={path}: not a usable CA certificate: {e}"))?;
    }
    Ok(Arc::new(roots))
}

/// The system's trusted roots.
fn system_store() -> Result<Arc<RootCertStore>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    for e in &found.errors {
        tracing::warn!(error = %e, "reading the system's trusted root certificates");
    }
    if added == 0 {
        let why: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(format!(
            "no trusted root certificates in the system's store{}: name the server's CA with sslrootcert=/path/to/ca.pem",
            if why.is_empty() { String::new() } else { format!(" ({})", why.join("; ")) }
        ));
    }
    Ok(Arc::new(roots))
}

fn read(path: &str, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{what}={path}: cannot read it: {e}"))
}

fn pem_certs(path: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what}={path}: not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what}={path}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
    }
    Ok(certs)
}

fn client_chain(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    pem_certs(path, "sslcert")
}

fn client_key(path: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path, "sslkey")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| format!("sslkey={path}: no PEM private key in it: {e}"))
}

/// The handshake's signatures, checked with the provider's algorithms
/// whatever the certificate: they prove the server holds the certificate's
/// key, which is all that is left to check when the certificate is not.
fn tls12_signature(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    rustls::crypto::verify_tls12_signature(message, cert, dss, &provider.signature_verification_algorithms)
}

fn tls13_signature(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    rustls::crypto::verify_tls13_signature(message, cert, dss, &provider.signature_verification_algorithms)
}

/// `prefer` and `require` without a root certificate: any certificate.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls12_signature(&self.0, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls13_signature(&self.0, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain to a trusted root and the validity dates, not
/// the name.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls12_signature(&self.provider, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls13_signature(&self.provider, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(mode: Option<SslMode>, root: Option<&str>) -> Params {
        Params { mode, root_cert: root.map(str::to_string), ..Params::default() }
    }

    #[test]
    fn the_url_form_loses_only_the_tls_parameters() {
        let (rest, p) = split(
            "postgres://u:p%3Fw@db.example:5432/mem?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u:p%3Fw@db.example:5432/mem?application_name=x");
        assert_eq!(p, params(Some(SslMode::VerifyFull), Some("/etc/ca.pem")));

        let (rest, p) = split("postgresql://h/db?sslmode=require").unwrap();
        assert_eq!((rest.as_str(), p.mode), ("postgresql://h/db", Some(SslMode::Require)));

        // A `?` in the password is the password's, as tokio-postgres reads it.
        let (rest, p) = split("postgres://u:a?sslmode=disable@h/db").unwrap();
        assert_eq!((rest.as_str(), p), ("postgres://u:a?sslmode=disable@h/db", Params::default()));

        let (rest, p) = split("postgres://h/db").unwrap();
        assert_eq!((rest.as_str(), p), ("postgres://h/db", Params::default()));
    }

    #[test]
    fn the_key_value_form_loses_only_the_tls_parameters() {
        let (rest, p) = split(r"host=h password='it\'s' user = a\ b sslmode= verify-ca sslrootcert='/x y/ca.pem'").unwrap();
        assert_eq!(rest, r"host='h' password='it\'s' user='a b'");
        assert_eq!(p, params(Some(SslMode::VerifyCa), Some("/x y/ca.pem")));
        let config: Config = rest.parse().unwrap();
        assert_eq!(config.get_password(), Some(&b"it's"[..]));
        assert_eq!(config.get_user(), Some("a b"));
    }

    #[test]
    fn sslmode_values_as_libpq_names_them() {
        for (v, m) in [
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            assert_eq!(split(&format!("postgres://h/d?sslmode={v}")).unwrap().1.mode, Some(m));
        }
        let e = split("postgres://h/d?sslmode=allow").unwrap_err();
        assert!(e.contains("allow"), "{e}");
        let e = split("postgres://h/d?sslmode=verify_full").unwrap_err();
        assert!(e.contains("verify-full"), "{e}");
    }

    #[test]
    fn the_mode_decides_what_tokio_postgres_is_told() {
        let mode = |url: &str| parse(url).map(|(c, t)| (c.get_ssl_mode(), t.mode()));
        assert_eq!(mode("postgres://h/d").unwrap(), (PgSslMode::Prefer, SslMode::Prefer));
        assert_eq!(mode("postgres://h/d?sslmode=disable").unwrap(), (PgSslMode::Disable, SslMode::Disable));
        assert_eq!(mode("postgres://h/d?sslmode=require").unwrap(), (PgSslMode::Require, SslMode::Require));
        let e = mode("postgres://h/d?sslrootcert=system&sslmode=require").unwrap_err();
        assert!(e.contains("verify-full"), "{e}");
    }

    #[test]
    fn errors_name_the_file_and_never_the_password() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate").unwrap();
        for (path, says) in [(&missing, "cannot read"), (&garbage, "no PEM certificate")] {
            let url = format!("postgres://u:hunter2secret@h/d?sslmode=verify-ca&sslrootcert={}", path.display());
            let e = parse(&url).unwrap_err();
            assert!(e.contains(says) && e.contains(&path.display().to_string()), "{e}");
            assert!(!e.contains("hunter2secret"), "{e}");
        }
        let e = parse("postgres://u:hunter2secret@h/d?sslmode=bogus").unwrap_err();
        assert!(!e.contains("hunter2secret"), "{e}");
        // tokio-postgres's error, with its cause.
        let e = parse("postgres://u:hunter2secret@h/d?port=x").unwrap_err();
        assert!(e.contains("invalid value for option `port`") && !e.contains("hunter2secret"), "{e}");
        let e = parse("postgres://u:hunter2secret@h/d?sslcert=/c.pem").unwrap_err();
        assert!(e.contains("sslkey") && !e.contains("hunter2secret"), "{e}");
    }

    #[test]
    fn the_config_debug_hides_the_password() {
        let (config, tls) = parse("postgres://u:hunter2secret@h/d?sslmode=require").unwrap();
        let shown = format!("{config:?} {tls:?}");
        assert!(!shown.contains("hunter2secret"), "{shown}");
    }
}
