//! TLS to the PostgreSQL store: a cluster of these tests' own with
//! `ssl = on`, a certificate made at test time (a CA of the test's, a server
//! certificate for `localhost` and 127.0.0.1), and a `pg_hba.conf` that
//! takes TCP clients over TLS only (`hostssl`), with a password (SCRAM) or a
//! client certificate. `tempora serve --store postgres://…?sslmode=…`
//! against it: what each `sslmode` connects to and what it refuses, and the
//! password nowhere in what the server prints.

use crate::common::postgres::{Cluster, Setup};
use crate::common::{tempora_command, Api, Server};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// The password of the role `tempora` over TCP; never to be printed.
const PASSWORD: &str = "TlsTestSecret-7f3a9c";
/// The role that signs in with a client certificate instead.
const CERT_USER: &str = "certuser";

/// The certificates, as PEM files in a directory that lives as long as the
/// test process.
struct Pki {
    dir: PathBuf,
    /// The CA that signed the server's certificate.
    ca: PathBuf,
    /// Another CA, which signed nothing the server shows.
    other_ca: PathBuf,
    /// A client certificate for `certuser`, and its key.
    client_cert: PathBuf,
    client_key: PathBuf,
    server_cert: String,
    server_key: String,
    ca_pem: String,
}

fn ca(name: &str) -> (rcgen::CertifiedIssuer<'static, rcgen::KeyPair>, String) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let issuer = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let pem = issuer.pem();
    (issuer, pem)
}

fn leaf(
    issuer: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    names: &[&str],
    common_name: &str,
    usage: rcgen::ExtendedKeyUsagePurpose,
) -> (String, String) {
    let mut params = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, common_name);
    params.extended_key_usages = vec![usage];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

static PKI: LazyLock<Pki> = LazyLock::new(|| {
    // Those of test processes that are gone.
    for e in std::fs::read_dir(std::env::temp_dir()).into_iter().flatten().flatten() {
        let name = e.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix("tempora-tls-")).filter(|p| p.bytes().all(|b| b.is_ascii_digit()));
        if pid.is_some_and(|p| !p.is_empty() && !Path::new("/proc").join(p).exists()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let dir = std::env::temp_dir().join(format!("tempora-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (issuer, ca_pem) = ca("tempora test CA");
    let (_, other_pem) = ca("another test CA");
    let (server_cert, server_key) =
        leaf(&issuer, &["localhost", "127.0.0.1"], "localhost", rcgen::ExtendedKeyUsagePurpose::ServerAuth);
    let (client_pem, client_key_pem) = leaf(&issuer, &[], CERT_USER, rcgen::ExtendedKeyUsagePurpose::ClientAuth);
    let write = |name: &str, pem: &str| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    Pki {
        ca: write("ca.pem", &ca_pem),
        other_ca: write("other-ca.pem", &other_pem),
        client_cert: write("client.pem", &client_pem),
        client_key: write("client.key", &client_key_pem),
        dir,
        server_cert,
        server_key,
        ca_pem,
    }
});

/// The cluster of these tests: TLS for every TCP client, a password or a
/// client certificate. The Unix socket (the tests' own setup) is trusted.
static CLUSTER: LazyLock<Cluster> = LazyLock::new(|| {
    let pki = &*PKI;
    let cluster = Cluster::for_the_process(Setup {
        settings: vec![
            "ssl = on".into(),
            "ssl_cert_file = 'server.crt'".into(),
            "ssl_key_file = 'server.key'".into(),
            "ssl_ca_file = 'ca.crt'".into(),
            "password_encryption = 'scram-sha-256'".into(),
        ],
        files: vec![
            ("server.crt".into(), pki.server_cert.clone().into_bytes()),
            ("server.key".into(), pki.server_key.clone().into_bytes()),
            ("ca.crt".into(), pki.ca_pem.clone().into_bytes()),
        ],
        hba: Some(format!(
            "local all all trust\n\
             hostssl all {CERT_USER} 127.0.0.1/32 cert\n\
             hostssl all all 127.0.0.1/32 scram-sha-256\n"
        )),
    });
    // The roles, once (the tests run on runtimes; this on one of its own).
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
                cluster
                    .admin()
                    .await
                    .batch_execute(&format!(
                        "ALTER ROLE tempora PASSWORD '{PASSWORD}'; CREATE ROLE {CERT_USER} LOGIN;"
                    ))
                    .await
                    .expect("the roles");
            })
        });
    });
    cluster
});

/// A new database of the cluster, owned by `owner`.
async fn database(owner: &str) -> String {
    let admin = CLUSTER.admin().await;
    let name = format!("tls{}_{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    admin.batch_execute(&format!("CREATE DATABASE {name} OWNER {owner}")).await.expect("a database");
    name
}

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// `postgres://tempora:<password>@<host>:<port>/<db>[?<query>]`.
fn url(host: &str, db: &str, query: &str) -> String {
    let query = if query.is_empty() { String::new() } else { format!("?{query}") };
    format!("postgres://tempora:{PASSWORD}@{host}:{}/{db}{query}", CLUSTER.port)
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn assert_no_password(output: &str) {
    assert!(!output.contains(PASSWORD), "the password is in the server's output:\n{output}");
}

/// A server on `store` that writes a fact and reads it back, then stops;
/// its output, which must not hold the password.
async fn serves(store: &str, env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut vars = vec![("TEMPORA_STORE", store)];
    vars.extend_from_slice(env);
    let server = Server::start(&dir.path().join("data"), &vars);
    let api = Api::new(&server, None);
    let fact = api.assert_fact(json!({"subject": "Db:main", "predicate": "transport", "object": "Tls:on"})).await;
    assert!(fact["id"].is_string(), "{fact}");
    let listed = api.list("subject=Db:main").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["object"], "Tls:on");
    let log = server.log.clone();
    server.stop_ok();
    let output = log.lock().unwrap().join("\n");
    assert_no_password(&output);
    output
}

/// `tempora serve` on `store`, which must fail to open it and exit; its
/// output, which names the problem and not the password.
fn refused(store: &str, env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tempora_command();
    cmd.args(["serve", "--data-dir"]).arg(dir.path().join("data"));
    cmd.args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "off", "--tcp-addr", "off"]);
    cmd.env("NO_COLOR", "1").env("TEMPORA_LOG", "info").env("TEMPORA_STORE", store);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("tempora starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("tempora served a store it should have refused:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "tempora exited 0:\n{output}");
    assert!(output.contains("cannot open the PostgreSQL store"), "{output}");
    assert_no_password(&output);
    output
}

/// The connections of database `db` that tempora holds, and whether each
/// is encrypted.
async fn tls_of_connections(db: &str) -> Vec<bool> {
    let admin = CLUSTER.admin().await;
    let rows = admin
        .query(
            "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
             WHERE a.datname = $1 AND a.application_name = 'tempora'",
            &[&db],
        )
        .await
        .unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_full_with_the_ca_serves_over_tls_with_channel_binding() {
    let db = database("tempora").await;
    let ca = path(&PKI.ca);
    let store = url("127.0.0.1", &db, &format!("sslmode=verify-full&sslrootcert={ca}&channel_binding=require"));

    // While it serves, its connections (the writer's, the follower's, the
    // pool's) are encrypted, every one.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[("TEMPORA_STORE", store.as_str())]);
    let api = Api::new(&server, None);
    api.assert_fact(json!({"subject": "Db:main", "predicate": "transport", "object": "Tls:on"})).await;
    let connections = tls_of_connections(&db).await;
    assert!(connections.len() >= 2, "{connections:?}");
    assert!(connections.iter().all(|ssl| *ssl), "{connections:?}");
    server.stop_ok();

    let output = serves(&store, &[]).await;
    assert!(output.contains("PostgreSQL store open"), "{output}");
    // The host name checked is the one the URL names, not the address.
    serves(&url("localhost", &db, &format!("sslmode=verify-full&sslrootcert={ca}&hostaddr=127.0.0.1")), &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn require_encrypts_without_checking_the_certificate() {
    let db = database("tempora").await;
    // No CA named, a host name the certificate does not hold: both fine.
    serves(&url("127.0.0.1", &db, "sslmode=require"), &[]).await;
    serves(&url("db.wrong.example", &db, "sslmode=require&hostaddr=127.0.0.1"), &[]).await;
    // prefer (the default) takes the TLS the server offers.
    serves(&url("127.0.0.1", &db, ""), &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn disable_is_refused_by_a_server_that_takes_only_tls() {
    let db = database("tempora").await;
    let output = refused(&url("127.0.0.1", &db, "sslmode=disable"), &[]);
    assert!(output.contains("no pg_hba.conf entry") && output.contains("no encryption"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_full_refuses_a_certificate_for_another_name_verify_ca_does_not() {
    let db = database("tempora").await;
    let ca = path(&PKI.ca);
    let wrong = |mode: &str| url("db.wrong.example", &db, &format!("sslmode={mode}&sslrootcert={ca}&hostaddr=127.0.0.1"));
    let output = refused(&wrong("verify-full"), &[]);
    assert!(output.contains("not valid for name"), "{output}");
    assert!(output.contains("db.wrong.example"), "{output}");
    serves(&wrong("verify-ca"), &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_of_another_ca_is_refused() {
    let db = database("tempora").await;
    let other = path(&PKI.other_ca);
    for mode in ["verify-ca", "verify-full", "require"] {
        // require with a root certificate checks the chain, as libpq's does.
        let output = refused(&url("127.0.0.1", &db, &format!("sslmode={mode}&sslrootcert={other}")), &[]);
        assert!(output.contains("invalid peer certificate") && output.contains("UnknownIssuer"), "{mode}: {output}");
    }
    // prefer gives up on TLS then, as libpq's does, and the server wants it.
    let output = refused(&url("127.0.0.1", &db, &format!("sslmode=prefer&sslrootcert={other}")), &[]);
    assert!(output.contains("no encryption"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_root_certificate_file_that_is_not_one_is_named() {
    let db = database("tempora").await;
    let missing = PKI.dir.join("missing.pem");
    let output = refused(&url("127.0.0.1", &db, &format!("sslmode=verify-full&sslrootcert={}", path(&missing))), &[]);
    assert!(output.contains("sslrootcert") && output.contains("missing.pem") && output.contains("cannot read"), "{output}");
    let output = refused(&url("127.0.0.1", &db, &format!("sslmode=verify-ca&sslrootcert={}", path(&PKI.client_key))), &[]);
    assert!(output.contains("no PEM certificate"), "{output}");
    let output = refused(&url("127.0.0.1", &db, "sslmode=verify-everything"), &[]);
    assert!(output.contains("sslmode"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_sslrootcert_the_system_roots_are_trusted() {
    let db = database("tempora").await;
    let store = url("127.0.0.1", &db, "sslmode=verify-full");
    // The system's store, as rustls-native-certs reads it: SSL_CERT_FILE
    // first, as OpenSSL does.
    let ca = path(&PKI.ca);
    serves(&store, &[("SSL_CERT_FILE", ca.as_str())]).await;
    serves(&url("127.0.0.1", &db, "sslrootcert=system"), &[("SSL_CERT_FILE", ca.as_str())]).await;
    let other = path(&PKI.other_ca);
    let output = refused(&store, &[("SSL_CERT_FILE", other.as_str())]);
    assert!(output.contains("UnknownIssuer"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_certificate_signs_in() {
    let db = database(CERT_USER).await;
    let ca = path(&PKI.ca);
    let base = format!("postgres://{CERT_USER}@127.0.0.1:{}/{db}?sslmode=verify-full&sslrootcert={ca}", CLUSTER.port);
    let with_cert = format!("{base}&sslcert={}&sslkey={}", path(&PKI.client_cert), path(&PKI.client_key));
    serves(&with_cert, &[]).await;
    let output = refused(&base, &[]);
    assert!(output.contains("certificate"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn require_refuses_a_server_without_tls_prefer_takes_it_plain() {
    // The suite's shared cluster: no TLS at all.
    let plain = crate::common::postgres::database().await;
    let output = refused(&format!("{plain}?sslmode=require"), &[]);
    assert!(output.contains("server does not support TLS"), "{output}");
    let ca = path(&PKI.ca);
    let output = refused(&format!("{plain}?sslmode=verify-full&sslrootcert={ca}"), &[]);
    assert!(output.contains("server does not support TLS"), "{output}");
    serves(&format!("{plain}?sslmode=prefer"), &[]).await;
}
