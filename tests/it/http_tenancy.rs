//! Keyed mode over a real socket: every gated route hides itself (404
//! NotFound) from callers without a valid key, a tenant key never reads or
//! changes another tenant's data, admins read any tenant, session cookies,
//! host binding, and idempotency keys per tenant.

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Duration;

const SOME_ID: &str = "0190a5d2-0000-7000-8000-000000000000";

fn fact(subject: &str, object: &str) -> Value {
    json!({"subject": subject, "predicate": "works_at", "object": object, "valid_from": year(2020)})
}

/// Every gated route, with a body where it takes one.
fn gated_routes(id: &str) -> Vec<(Method, String, Option<Value>)> {
    vec![
        (Method::GET, "/api/facts".into(), None),
        (Method::GET, "/api/facts?subject=Person:sarah".into(), None),
        (Method::POST, "/api/facts".into(), Some(fact("Person:x", "Org:x"))),
        (Method::POST, "/api/facts/batch".into(), Some(json!({"facts": [fact("Person:x", "Org:x")]}))),
        (Method::GET, format!("/api/facts/{id}"), None),
        (Method::DELETE, format!("/api/facts/{id}"), None),
        (Method::GET, format!("/api/facts/{id}/history"), None),
        (Method::GET, "/api/predicates/works_at".into(), None),
        (Method::PUT, "/api/predicates/works_at".into(), Some(json!({"cardinality": "many"}))),
        (Method::GET, "/api/stats".into(), None),
        (Method::GET, "/api/stream".into(), None),
        (Method::GET, "/metrics".into(), None),
    ]
}

async fn call(api: &Api, m: Method, path: &str, body: Option<&Value>) -> Resp {
    let r = api.req(m, path);
    send(match body {
        Some(b) => r.json(b),
        None => r,
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn gated_routes_are_hidden_without_a_valid_key() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let f = nas.assert_fact(fact("Person:sarah", "Org:acme")).await;
    let id = f["id"].as_str().unwrap();
    let before = Api::new(&server, Some(ADMIN)).stats().await;

    let anonymous = Api::new(&server, None);
    let wrong = Api::new(&server, Some("nas-key-2-not-configured"));
    for api in [&anonymous, &wrong] {
        for (m, path, body) in gated_routes(id) {
            let r = call(api, m.clone(), &path, body.as_ref()).await;
            assert_eq!(r.status.as_u16(), 404, "{m} {path} key={:?}: {}", api.key, r.text);
            r.expect_hidden();
        }
        // A session cookie with a bad key is no better.
        let r = send(api.http.get(server.url("/api/facts")).header("cookie", "tempora_session=bogus-key-123")).await;
        r.expect_hidden();
    }
    // Other schemes are not keys either.
    let r = send(anonymous.http.get(server.url("/api/stats")).header("authorization", format!("Basic {NAS_KEY}"))).await;
    r.expect_hidden();

    // Nothing was written or retracted by those attempts.
    let admin = Api::new(&server, Some(ADMIN));
    assert_eq!(admin.stats().await, before);
    assert_eq!(nas.get(&format!("/api/facts/{id}")).await.expect(200)["status"], "active");
    assert_eq!(nas.get("/api/predicates/works_at").await.expect(200)["cardinality"], "one");

    // Public routes stay public.
    for p in ["/api/health", "/healthz", "/livez", "/readyz", "/openapi.json"] {
        anonymous.get(p).await.expect(200);
    }
    anonymous.delete("/api/session").await.expect(200);
    // Unknown routes are the same 404 for everyone.
    anonymous.get("/api/nope").await.expect_hidden();
    nas.get("/api/nope").await.expect_hidden();
    // An id that does not exist looks the same as one that is not yours.
    nas.get(&format!("/api/facts/{SOME_ID}")).await.expect_hidden();
    nas.get(&format!("/api/facts/{SOME_ID}/history")).await.expect_hidden();
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_key_never_sees_or_changes_another_tenant() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let admin = Api::new(&server, Some(ADMIN));

    // The same subject in both tenants; nas also holds a second fact.
    let n1 = nas.assert_fact(fact("Person:sarah", "Org:acme")).await;
    let n2 = nas.assert_fact(json!({"subject": "Person:sam", "predicate": "likes", "object": "Org:acme"})).await;
    let a1 = acme.assert_fact(fact("Person:sarah", "Org:globex")).await;
    assert_eq!(a1["status"], "active");
    assert_eq!(a1["superseded"], json!([]), "acme's write closed a fact of nas");
    assert_eq!(n1["tenant"], "nas");
    assert_eq!(a1["tenant"], "acme");
    let n1_id = n1["id"].as_str().unwrap();

    // acme's key on nas's fact: get, history, delete are all 404.
    acme.get(&format!("/api/facts/{n1_id}")).await.expect_hidden();
    acme.get(&format!("/api/facts/{n1_id}?tenant=nas")).await.expect_hidden();
    acme.get(&format!("/api/facts/{n1_id}/history")).await.expect_hidden();
    acme.delete(&format!("/api/facts/{n1_id}")).await.expect_hidden();
    send(acme.req(Method::GET, &format!("/api/facts/{n1_id}")).header("x-tempora-tenant", "nas")).await.expect_hidden();
    // ... and the fact is untouched.
    let still = nas.get(&format!("/api/facts/{n1_id}/history")).await;
    assert_eq!(still.expect(200)["versions"].as_array().unwrap().len(), 1);
    assert_eq!(nas.get(&format!("/api/facts/{n1_id}")).await.json["status"], "active");

    // Lists never show the other tenant, whatever the filter or ?tenant= says.
    for q in [
        "",
        "subject=Person:sarah",
        "subject=Person:sam",
        "object=Org:acme",
        "predicate=likes",
        "status=all&include_retracted=true",
        "tenant=nas",
        "subject=Person:sarah&tenant=nas",
    ] {
        let list = acme.list(q).await;
        for f in &list {
            assert_eq!(f["tenant"], "acme", "acme saw {f} with {q:?}");
        }
        let expected: Vec<&str> = if q.contains("Person:sam") || q.contains("likes") || q.contains("Org:acme") {
            vec![]
        } else {
            vec![a1["id"].as_str().unwrap()]
        };
        assert_eq!(ids(&list), expected, "query {q:?}");
    }
    let r = send(acme.req(Method::GET, "/api/facts").header("x-tempora-tenant", "nas")).await;
    assert_eq!(ids(r.expect(200).as_array().unwrap()), vec![a1["id"].as_str().unwrap()]);
    let nas_list = nas.list("subject=Person:sarah").await;
    assert_eq!(ids(&nas_list), vec![n1_id]);

    // Predicates are per tenant.
    acme.put("/api/predicates/works_at", &json!({"cardinality": "strict"})).await.expect(200);
    assert_eq!(nas.get("/api/predicates/works_at").await.expect(200)["cardinality"], "one");
    assert_eq!(acme.get("/api/predicates/works_at").await.expect(200)["cardinality"], "strict");
    // strict for acme does not stop nas.
    nas.assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:initech", "valid_from": year(2023)}))
        .await;
    // ... and acme's own strict predicate rejects a conflict.
    acme.post("/api/facts", &json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:x", "valid_from": year(2021)}))
        .await
        .expect_error(400, "Conflict");

    // A tenant's writes cannot name another tenant.
    let sneaky = acme.assert_fact(json!({"subject": "Person:eve", "predicate": "p", "object": 1, "tenant": "nas"})).await;
    assert_eq!(sneaky["tenant"], "acme");
    let sneaky_batch = acme.post("/api/facts/batch?tenant=nas", &json!([{"subject": "Person:eve", "predicate": "q", "object": 2}])).await;
    assert_eq!(sneaky_batch.expect(201)["facts"][0]["tenant"], "acme");

    // Stats: each tenant its own; the admin the whole graph or a named tenant.
    let ns = nas.stats().await;
    let as_ = acme.stats().await;
    assert_eq!(ns["tenant"], "nas");
    assert_eq!(ns["tenants"], 1);
    assert_eq!(ns["facts"]["total"], 3); // n1 (superseded), n2, initech; none of acme's
    assert_eq!(ns["facts"]["superseded"], 1);
    assert_eq!(as_["tenant"], "acme");
    assert_eq!(as_["facts"]["total"], 3);
    let acme_scoped = send(acme.req(Method::GET, "/api/stats?tenant=nas")).await;
    assert_eq!(acme_scoped.expect(200)["tenant"], "acme");
    let all = admin.stats().await;
    assert_eq!(all["tenants"], 2, "{all}");
    for k in ["active", "candidate", "superseded", "retracted", "total"] {
        assert_eq!(
            all["facts"][k].as_u64().unwrap(),
            ns["facts"][k].as_u64().unwrap() + as_["facts"][k].as_u64().unwrap(),
            "whole-graph {k}"
        );
    }
    let named = admin.get("/api/stats?tenant=nas").await;
    assert_eq!(named.expect(200)["facts"], ns["facts"]);
    assert_eq!(named.json["tenant"], "nas");

    // The admin reads a named tenant, by ?tenant= or the header.
    let admin_list = admin.list("tenant=nas&subject=Person:sarah&status=all").await;
    assert_eq!(admin_list.len(), 2);
    for f in &admin_list {
        assert_eq!(f["tenant"], "nas");
    }
    let h = send(admin.req(Method::GET, "/api/facts?subject=Person:sarah").header("x-tempora-tenant", "acme")).await;
    assert_eq!(ids(h.expect(200).as_array().unwrap()), vec![a1["id"].as_str().unwrap()]);
    assert_eq!(admin.get(&format!("/api/facts/{n1_id}?tenant=nas")).await.expect(200)["id"], n1_id);
    admin.get(&format!("/api/facts/{n1_id}?tenant=acme")).await.expect_hidden();
    assert_eq!(admin.get(&format!("/api/facts/{}/history?tenant=nas", n2["id"].as_str().unwrap())).await.expect(200)["id"], n2["id"]);
    // An admin who names no tenant gets a clear error on tenant routes.
    admin.get("/api/facts").await.expect_error(400, "SchemaInvalid");

    // /metrics: admin only in keyed mode.
    nas.get("/metrics").await.expect_hidden();
    let m = admin.get("/metrics").await;
    assert!(m.expect(200).is_null() && m.text.contains("tempora_http_requests_total"), "{}", m.text);

    // Retracting one's own fact works; the other tenant's copy of the subject is untouched.
    acme.delete(&format!("/api/facts/{}", a1["id"].as_str().unwrap())).await.expect(200);
    assert_eq!(ids(&nas.list("subject=Person:sam").await), vec![n2["id"].as_str().unwrap()]);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn session_cookie_login_use_and_logout() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let f = nas.assert_fact(fact("Person:sarah", "Org:acme")).await;
    let anonymous = Api::new(&server, None);

    // A bad key is the one 401 of the API.
    anonymous.post("/api/session", &json!({"key": "not-a-key-at-all"})).await.expect_error(401, "Unauthorized");
    anonymous.post("/api/session", &json!({"key": ""})).await.expect_error(401, "Unauthorized");

    let login = anonymous.post("/api/session", &json!({"key": NAS_KEY})).await;
    assert_eq!(login.expect(200).clone(), json!({"scope": "tenant", "tenant": "nas"}));
    let cookie = login.header("set-cookie").expect("Set-Cookie").to_string();
    assert!(cookie.starts_with("tempora_session="), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(!cookie.contains("Max-Age=0"), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();
    // The cookie is an opaque session id, not the key.
    let value = session_id(&cookie);
    assert!(!value.contains(NAS_KEY) && value != NAS_KEY, "{cookie}");

    // Only the cookie: the request is nas's.
    let r = send(anonymous.http.get(server.url("/api/facts?subject=Person:sarah")).header("cookie", pair.clone())).await;
    assert_eq!(ids(r.expect(200).as_array().unwrap()), vec![f["id"].as_str().unwrap()]);
    let w = send(anonymous.http.post(server.url("/api/facts")).header("cookie", pair.clone()).json(&fact("Person:bo", "Org:x"))).await;
    assert_eq!(w.expect(201)["tenant"], "nas");

    // The same through a browser-like client with a cookie store.
    let jar = reqwest::Client::builder().cookie_store(true).timeout(Duration::from_secs(30)).build().unwrap();
    send(jar.get(server.url("/api/stats"))).await.expect_hidden();
    let l = send(jar.post(server.url("/api/session")).json(&json!({"key": ACME_KEY}))).await;
    assert_eq!(l.expect(200)["tenant"], "acme");
    let s = send(jar.get(server.url("/api/stats"))).await;
    assert_eq!(s.expect(200)["tenant"], "acme");
    let out = send(jar.delete(server.url("/api/session"))).await;
    out.expect(200);
    let cleared = out.header("set-cookie").expect("Set-Cookie on logout");
    assert!(cleared.starts_with("tempora_session=;") && cleared.contains("Max-Age=0"), "{cleared}");
    send(jar.get(server.url("/api/stats"))).await.expect_hidden();

    // An admin token makes an admin session, which names its tenant.
    let a = anonymous.post("/api/session", &json!({"key": ADMIN})).await;
    assert_eq!(a.expect(200)["scope"], "admin");
    let admin = a.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
    assert!(!admin.contains(ADMIN), "{admin}");
    let r = send(anonymous.http.get(server.url("/api/facts?tenant=nas&subject=Person:sarah")).header("cookie", admin)).await;
    assert_eq!(ids(r.expect(200).as_array().unwrap()), vec![f["id"].as_str().unwrap()]);
    server.stop_ok();
}

/// The value of the `tempora_session` cookie a `Set-Cookie` header sets.
fn session_id(set_cookie: &str) -> String {
    let pair = set_cookie.split(';').next().unwrap();
    pair.strip_prefix("tempora_session=").unwrap_or_else(|| panic!("{set_cookie}")).to_string()
}

/// Signs in with `key`; the `Set-Cookie` header and the `name=value` pair to send back.
async fn sign_in(server: &Server, key: &str, headers: &[(&str, &str)]) -> (String, String) {
    let mut r = client().post(server.url("/api/session")).json(&json!({"key": key}));
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let r = send(r).await;
    r.expect(200);
    let set = r.header("set-cookie").expect("Set-Cookie").to_string();
    let pair = set.split(';').next().unwrap().to_string();
    (set, pair)
}

/// GET `path` with only the cookie `pair`.
async fn with_cookie(server: &Server, path: &str, pair: &str) -> Resp {
    send(client().get(server.url(path)).header("cookie", pair)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_session_cookie_is_an_opaque_server_side_session() {
    let (tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let f = nas.assert_fact(fact("Person:sarah", "Org:acme")).await;
    let mine = vec![f["id"].as_str().unwrap().to_string()];

    let (set, pair) = sign_in(&server, NAS_KEY, &[]).await;
    let id = session_id(&set);
    assert_eq!(id.len(), 64, "{set}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{set}");
    assert!(!id.contains(NAS_KEY), "{set}");
    let attributes: Vec<&str> = set.split(';').skip(1).map(str::trim).collect();
    for a in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=43200"] {
        assert!(attributes.contains(&a), "{a} missing: {set}");
    }
    assert!(!attributes.contains(&"Secure"), "Secure over plain HTTP: {set}");

    // A scoped read with the cookie alone; a second sign-in is another session.
    let r = with_cookie(&server, "/api/facts?subject=Person:sarah", &pair).await;
    assert_eq!(ids(r.expect(200).as_array().unwrap()), mine);
    let (set2, pair2) = sign_in(&server, NAS_KEY, &[]).await;
    assert_ne!(session_id(&set2), id);

    // Signing out ends the session on the server: the same cookie, replayed
    // by anyone, is refused; the other session goes on.
    let out = send(client().delete(server.url("/api/session")).header("cookie", pair.clone())).await;
    out.expect(200);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    with_cookie(&server, "/api/facts?subject=Person:sarah", &pair).await.expect_hidden();
    with_cookie(&server, "/api/stats", &pair).await.expect_hidden();
    assert_eq!(with_cookie(&server, "/api/stats", &pair2).await.expect(200)["tenant"], "nas");
    // Signing out again, or with a cookie that is no session, is still fine.
    send(client().delete(server.url("/api/session")).header("cookie", pair.clone())).await.expect(200);
    send(client().delete(server.url("/api/session")).header("cookie", format!("tempora_session={NAS_KEY}"))).await.expect(200);
    // The key itself as the cookie is no session.
    with_cookie(&server, "/api/stats", &format!("tempora_session={NAS_KEY}")).await.expect_hidden();
    // A bearer key still wins over the cookie.
    let r = send(client().get(server.url("/api/stats")).header("cookie", pair2.clone()).bearer_auth(ACME_KEY)).await;
    assert_eq!(r.expect(200)["tenant"], "acme");
    send(client().get(server.url("/api/stats")).header("cookie", pair2.clone()).bearer_auth("wrong-key-123")).await.expect_hidden();

    // Secure when a TLS-terminating proxy says the browser used HTTPS.
    for proxy in [
        [("x-forwarded-proto", "https")],
        [("x-forwarded-proto", "HTTPS, http")],
        [("forwarded", "for=192.0.2.60;proto=https;by=203.0.113.43")],
        [("forwarded", "For=\"[2001:db8:cafe::17]\";Proto=\"https\", for=10.0.0.1;proto=http")],
    ] {
        let (set, _) = sign_in(&server, NAS_KEY, &proxy).await;
        assert!(set.split(';').any(|a| a.trim() == "Secure"), "{proxy:?}: {set}");
    }
    for proxy in [[("x-forwarded-proto", "http")], [("forwarded", "for=192.0.2.60;proto=http")]] {
        let (set, _) = sign_in(&server, NAS_KEY, &proxy).await;
        assert!(!set.contains("Secure"), "{proxy:?}: {set}");
    }
    let out = send(client().delete(server.url("/api/session")).header("x-forwarded-proto", "https")).await;
    assert!(out.header("set-cookie").unwrap().contains("; Secure"));

    // Neither the key nor a live cookie is anywhere in the data directory.
    server.stop_ok();
    let mut files = vec![tmp.path().join("data")];
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        for secret in [NAS_KEY, &session_id(&set2)] {
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{secret} in {}", p.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_ends_after_its_lifetime() {
    let mut env = keyed();
    env.push(("TEMPORA_SESSION_LIFETIME_SECS", "1"));
    let (_tmp, server) = fresh(&env);
    let (set, pair) = sign_in(&server, NAS_KEY, &[]).await;
    assert!(set.split(';').any(|a| a.trim() == "Max-Age=1"), "{set}");
    assert_eq!(with_cookie(&server, "/api/stats", &pair).await.expect(200)["tenant"], "nas");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    with_cookie(&server, "/api/stats", &pair).await.expect_hidden();
    // A new sign-in is a new session.
    let (_, fresh_pair) = sign_in(&server, NAS_KEY, &[]).await;
    assert_eq!(with_cookie(&server, "/api/stats", &fresh_pair).await.expect(200)["tenant"], "nas");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_outlive_a_restart_but_not_their_key() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &keyed());
    let (_, nas) = sign_in(&server, NAS_KEY, &[]).await;
    let (_, acme) = sign_in(&server, ACME_KEY, &[]).await;
    let (_, admin) = sign_in(&server, ADMIN, &[]).await;
    server.stop_ok();

    // Same keys: every session goes on.
    let server = Server::start(&data, &keyed());
    assert_eq!(with_cookie(&server, "/api/stats", &nas).await.expect(200)["tenant"], "nas");
    assert_eq!(with_cookie(&server, "/api/stats", &acme).await.expect(200)["tenant"], "acme");
    with_cookie(&server, "/api/stats?tenant=acme", &admin).await.expect(200);
    server.stop_ok();

    // nas's key rotated out, the admin token too: their sessions end; acme's goes on.
    let rotated = [("TEMPORA_TENANT_KEYS", "nas=nas-key-2,acme=acme-key-1"), ("TEMPORA_ADMIN_TOKENS", "adm-secret-2")];
    let server = Server::start(&data, &rotated);
    with_cookie(&server, "/api/stats", &nas).await.expect_hidden();
    with_cookie(&server, "/api/stats?tenant=acme", &admin).await.expect_hidden();
    assert_eq!(with_cookie(&server, "/api/stats", &acme).await.expect(200)["tenant"], "acme");
    server.stop_ok();

    // Moved to another tenant, acme's key ends acme's session; and the
    // ended ones stay ended when the old keys come back.
    let moved = [("TEMPORA_TENANT_KEYS", "nas=acme-key-1,acme=acme-key-2"), ("TEMPORA_ADMIN_TOKENS", ADMIN)];
    let server = Server::start(&data, &moved);
    with_cookie(&server, "/api/stats", &acme).await.expect_hidden();
    server.stop_ok();
    let server = Server::start(&data, &keyed());
    for pair in [&nas, &acme] {
        with_cookie(&server, "/api/stats", pair).await.expect_hidden();
    }
    with_cookie(&server, "/api/stats?tenant=acme", &admin).await.expect_hidden();
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_key_works_only_on_its_own_host() {
    let mut env = keyed();
    env.push(("TEMPORA_TENANT_HOST", "{tenant}.example.com"));
    let (_tmp, server) = fresh(&env);
    let nas = Api::new(&server, Some(NAS_KEY));
    let port = server.authority().rsplit(':').next().unwrap().to_string();
    let on = |host: &str, path: &str| nas.req(Method::GET, path).header("host", host.to_string());

    // Default Host (127.0.0.1:port): the key does not authenticate.
    nas.get("/api/stats").await.expect_hidden();
    send(on("acme.example.com", "/api/stats")).await.expect_hidden();
    send(on("nas.example.com.evil.org", "/api/stats")).await.expect_hidden();
    let r = send(on("nas.example.com", "/api/stats")).await;
    assert_eq!(r.expect(200)["tenant"], "nas");
    let r = send(on(&format!("NAS.example.com:{port}"), "/api/stats")).await;
    assert_eq!(r.expect(200)["tenant"], "nas");
    let w = send(nas.req(Method::POST, "/api/facts").header("host", "nas.example.com").json(&fact("Person:h", "Org:h"))).await;
    w.expect(201);
    let w = send(nas.req(Method::POST, "/api/facts").header("host", "acme.example.com").json(&fact("Person:h", "Org:h"))).await;
    w.expect_hidden();

    // Session login checks the host too.
    let anon = client();
    let bad = send(anon.post(server.url("/api/session")).header("host", "acme.example.com").json(&json!({"key": NAS_KEY}))).await;
    bad.expect_error(401, "Unauthorized");
    let good = send(anon.post(server.url("/api/session")).header("host", "nas.example.com").json(&json!({"key": NAS_KEY}))).await;
    assert_eq!(good.expect(200)["tenant"], "nas");
    let pair = good.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
    send(anon.get(server.url("/api/stats")).header("host", "nas.example.com").header("cookie", pair.clone())).await.expect(200);
    send(anon.get(server.url("/api/stats")).header("host", "acme.example.com").header("cookie", pair.clone())).await.expect_hidden();
    // Refused on the wrong host, the session still holds on its own.
    send(anon.get(server.url("/api/stats")).header("host", "nas.example.com").header("cookie", pair)).await.expect(200);

    // The admin token is not bound to a host.
    let admin = Api::new(&server, Some(ADMIN));
    let all = admin.stats().await;
    assert_eq!(all["facts"]["total"], 1);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn idempotency_keys_are_per_tenant() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let post = |api: &Api, object: &str| {
        send(api.req(Method::POST, "/api/facts").header("Idempotency-Key", "shared-key").json(&fact("Person:sarah", object)))
    };
    let n1 = post(&nas, "Org:acme").await;
    n1.expect(201);
    assert_eq!(n1.header("idempotency-replayed"), None);
    let a1 = post(&acme, "Org:globex").await;
    a1.expect(201);
    assert_eq!(a1.header("idempotency-replayed"), None, "acme got nas's stored reply");
    assert_eq!(a1.json["tenant"], "acme");
    assert_ne!(a1.json["id"], n1.json["id"]);
    let n2 = post(&nas, "Org:other").await;
    assert_eq!(n2.header("idempotency-replayed"), Some("true"));
    assert_eq!(n2.text, n1.text);
    let a2 = post(&acme, "Org:other").await;
    assert_eq!(a2.header("idempotency-replayed"), Some("true"));
    assert_eq!(a2.text, a1.text);
    assert_eq!(nas.stats().await["facts"]["total"], 1);
    assert_eq!(acme.stats().await["facts"]["total"], 1);
    server.stop_ok();
}
