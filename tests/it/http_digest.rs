//! `POST /api/digest` over a real socket: every structured format with the
//! exact facts it gives, pages and their mentions, receipts and rejections,
//! PII masking tables per strategy (and `shift_date` across a restart), the
//! model path against a local OpenAI-compatible endpoint (masked text only,
//! failures write nothing, the key never leaks), idempotent replay, tenant
//! isolation, request errors, and pages in context packets.

use crate::common::fake_llm::{self, FakeLlm};
use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

const MODEL_KEY: &str = "sk-digest-5b1e-do-not-leak";
const ALLOW_PRIVATE: (&str, &str) = ("TEMPORA_OUTBOUND_ALLOW_PRIVATE", "true");

async fn digest(api: &Api, body: Value) -> Value {
    let r = api.post("/api/digest", &body).await;
    let v = r.expect(200).clone();
    check_receipt(&v);
    v
}

/// The invariants of every receipt.
#[track_caller]
fn check_receipt(v: &Value) {
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert_eq!(v["facts"].as_array().unwrap().len() as u64, n("asserted") + n("candidates"), "{v}");
    let rejected: BTreeSet<u64> = v["rejections"].as_array().unwrap().iter().map(|r| r["record"].as_u64().unwrap()).collect();
    assert_eq!(rejected.len() as u64, n("rejected"), "{v}");
    for r in v["rejections"].as_array().unwrap() {
        assert!(r["reason"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
        assert!(r["record"].as_u64().unwrap() >= 1 && r["record"].as_u64().unwrap() <= n("records"), "{v}");
    }
    assert!(v["page"].as_str().is_some_and(|p| p.starts_with("Page:")), "{v}");
    assert!(v["tx"].as_u64().is_some(), "{v}");
}

/// Current facts of a subject: predicate -> objects (in index order).
async fn facts_of(api: &Api, subject: &str) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for f in api.list(&format!("subject={}&limit=1000", enc(subject))).await {
        out.entry(f["predicate"].as_str().unwrap().to_string()).or_default().push(f["object"].clone());
    }
    out
}

/// Current facts of a subject, one object per predicate.
async fn one_each(api: &Api, subject: &str) -> BTreeMap<String, Value> {
    facts_of(api, subject)
        .await
        .into_iter()
        .map(|(p, mut v)| {
            assert_eq!(v.len(), 1, "{subject} {p}: {v:?}");
            (p, v.remove(0))
        })
        .collect()
}

fn obj(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn page_body(api: &Api, page: &str) -> String {
    one_each_but_mentions(api, page).await["body"].as_str().unwrap().to_string()
}

/// Pages the tenant holds (each page has one title).
async fn page_count(api: &Api) -> usize {
    api.list("predicate=title&limit=1000").await.iter().filter(|f| f["subject"].as_str().unwrap().starts_with("Page:")).count()
}

fn reasons(v: &Value) -> Vec<(u64, String)> {
    v["rejections"].as_array().unwrap().iter().map(|r| (r["record"].as_u64().unwrap(), r["reason"].as_str().unwrap().to_string())).collect()
}

// ---------------------------------------------------------------- formats

#[tokio::test(flavor = "multi_thread")]
async fn json_object_and_array() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);

    let content = json!({
        "id": "sarah", "type": "Person", "works_at": "Org:acme", "age": 34,
        "address": {"city": "Paris"}, "tags": ["a", "b"], "nothing": null,
    })
    .to_string();
    let r = digest(&api, json!({"content": content, "content_type": "application/json", "source": "crm"})).await;
    assert_eq!((r["records"].as_u64(), r["asserted"].as_u64(), r["candidates"].as_u64(), r["rejected"].as_u64()), (Some(1), Some(4), Some(0), Some(0)), "{r}");
    assert_eq!(r["mode"], "structured");
    assert_eq!(r["mask"], "redact");
    assert_eq!(r["source"], "crm");
    assert_eq!(
        one_each(&api, "Person:sarah").await,
        obj(&[("works_at", json!("Org:acme")), ("age", json!(34)), ("address", json!({"city": "Paris"})), ("tags", json!(["a", "b"]))])
    );
    let page = r["page"].as_str().unwrap();
    for f in api.list("subject=Person:sarah").await {
        assert_eq!(f["source"], "crm");
        assert_eq!(f["confidence"], 1.0);
        assert_eq!(f["status"], "active");
        assert_eq!(f["properties"], json!({"page": page, "record": 1}));
        assert!(r["facts"].as_array().unwrap().contains(&f["id"]), "{f}");
    }
    // The page: title, the body as sent (nothing to mask), source, content type, mentions.
    let pf = facts_of(&api, page).await;
    assert_eq!(pf["title"], vec![json!("crm: 1 JSON records")]);
    assert_eq!(pf["body"], vec![json!(content)]);
    assert_eq!(pf["source"], vec![json!("crm")]);
    assert_eq!(pf["content_type"], vec![json!("application/json")]);
    let mentions: BTreeSet<String> = pf["mentions"].iter().map(|m| m.as_str().unwrap().to_string()).collect();
    assert_eq!(mentions, set(&["Person:sarah", "Org:acme"]));
    assert_eq!(strings(&r["mentions"]), mentions);
    assert_eq!(api.get("/api/predicates/mentions").await.expect(200)["cardinality"], "many");
    // The page is found from the entity, like any edge.
    let inbound = api.list("object=Person:sarah&predicate=mentions").await;
    assert_eq!(inbound.len(), 1);
    assert_eq!(inbound[0]["subject"], page);

    // An array: good records land, bad ones are rejected with their reason.
    let long = "x".repeat(300);
    let content = json!([
        {"id": 1, "name": "Acme", "type": "Org"},
        42,
        {"@id": "Deal:7", "amount": 1000, "owner": "Person:sarah"},
        {"subject": "bob", long.clone(): 1, "ok": true},
        {"name": "no id"},
        {"id": "x y", "type": "bad type!"},
        {"id": "Ann Lee", "city": "Oslo"},
    ])
    .to_string();
    let r = digest(&api, json!({"content": content, "content_type": "application/json", "subject": "Customer"})).await;
    assert_eq!(r["records"], 7);
    assert_eq!(r["rejected"], 3, "{r}");
    assert_eq!(r["asserted"], 1 + 2 + 1 + 1);
    let why = reasons(&r);
    assert_eq!(why.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec![2, 4, 6]);
    assert!(why[0].1.contains("not a JSON object"), "{why:?}");
    assert!(why[1].1.contains("256"), "{why:?}");
    assert!(why[2].1.contains("not an entity type"), "{why:?}");
    assert_eq!(one_each(&api, "Org:1").await, obj(&[("name", json!("Acme"))]));
    assert_eq!(one_each(&api, "Deal:7").await, obj(&[("amount", json!(1000)), ("owner", json!("Person:sarah"))]));
    assert_eq!(facts_of(&api, "Customer:bob").await, BTreeMap::new(), "a rejected record writes none of its facts");
    assert_eq!(one_each(&api, "Customer:Ann_Lee").await, obj(&[("city", json!("Oslo"))]), "whitespace in ids becomes _");
    // No id: a content-derived id, the same for the same record.
    let no_id: Vec<Value> = api.list("predicate=name").await.into_iter().filter(|f| f["object"] == "no id").collect();
    assert_eq!(no_id.len(), 1);
    let derived = no_id[0]["subject"].as_str().unwrap().to_string();
    assert!(derived.starts_with("Customer:") && derived.len() == "Customer:".len() + 16, "{derived}");
    let again = digest(&api, json!({"content": "{\"name\": \"no id\"}", "content_type": "application/json", "subject": "Customer"})).await;
    assert_eq!(again["mentions"], json!([derived]));
    // Deal:7's page mentions it and the owner it points at.
    assert!(strings(&r["mentions"]).is_superset(&set(&["Org:1", "Deal:7", "Person:sarah", "Customer:Ann_Lee"])), "{r}");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn json_lines_and_csv() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);

    let content = "{\"id\": \"p1\", \"type\": \"Person\", \"name\": \"Ann\"}\nnot json\n[1, 2]\n\n{\"id\": \"p2\", \"type\": \"Person\", \"knows\": \"Person:p1\"}\n";
    let r = digest(&api, json!({"content": content, "content_type": "application/x-ndjson"})).await;
    assert_eq!(r["records"], 4);
    assert_eq!(r["asserted"], 2);
    let rej = r["rejections"].as_array().unwrap();
    assert_eq!(rej.len(), 2);
    assert_eq!((rej[0]["record"].as_u64(), rej[0]["line"].as_u64()), (Some(2), Some(2)));
    assert!(rej[0]["reason"].as_str().unwrap().contains("not valid JSON"), "{r}");
    assert_eq!((rej[1]["record"].as_u64(), rej[1]["line"].as_u64()), (Some(3), Some(3)));
    assert!(rej[1]["reason"].as_str().unwrap().contains("not a JSON object"), "{r}");
    assert_eq!(rej[0]["origin"], "content");
    assert_eq!(one_each(&api, "Person:p1").await, obj(&[("name", json!("Ann"))]));
    assert_eq!(one_each(&api, "Person:p2").await, obj(&[("knows", json!("Person:p1"))]));
    // application/jsonl is the same format.
    let r = digest(&api, json!({"content": "{\"id\": \"p3\", \"type\": \"Person\", \"age\": 5}", "content_type": "application/jsonl"})).await;
    assert_eq!(r["asserted"], 1);

    let csv = "id,name,email,score,zip,active\r\nc1,\"Chen, Sarah\",sarah@example.com,42,02134,true\r\nc2,Bob\r\nc3,Tom,,7.5,,false\r\n";
    let r = digest(&api, json!({"content": csv, "content_type": "text/csv", "subject": "Customer", "mask": "none", "source": "crm.csv"})).await;
    assert_eq!((r["records"].as_u64(), r["asserted"].as_u64(), r["rejected"].as_u64()), (Some(3), Some(8), Some(1)), "{r}");
    let rej = &r["rejections"][0];
    assert_eq!((rej["record"].as_u64(), rej["line"].as_u64()), (Some(2), Some(3)));
    assert!(rej["reason"].as_str().unwrap().contains("2 fields, the header has 6"), "{r}");
    assert_eq!(
        one_each(&api, "Customer:c1").await,
        obj(&[
            ("name", json!("Chen, Sarah")),
            ("email", json!("sarah@example.com")),
            ("score", json!(42)),
            ("zip", json!("02134")),
            ("active", json!(true)),
        ])
    );
    assert_eq!(one_each(&api, "Customer:c3").await, obj(&[("name", json!("Tom")), ("score", json!(7.5)), ("active", json!(false))]));
    assert_eq!(one_each_but_mentions(&api, r["page"].as_str().unwrap()).await["title"], "crm.csv: 3 CSV records");
    // Without an id column the first column names the row, and stays a fact.
    let r = digest(&api, json!({"content": "name,city\nAnn Lee,Paris\n", "content_type": "text/csv"})).await;
    assert_eq!(r["asserted"], 2);
    assert_eq!(one_each(&api, "Record:Ann_Lee").await, obj(&[("name", json!("Ann Lee")), ("city", json!("Paris"))]));
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn markdown_and_plain_text() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);

    let md = "---\nsubject: Person:sarah\ntitle: Sarah notes\ntags: [lead, dev]\n---\n# Meeting with Sarah\n\nEmployer: Org:acme\n- **Start date:** 2024-01-15\nSarah met Person:bob and (Deal:42) about the renewal.\nSee https://example.com/x for details.\n```\ncode: not a fact\n```\n";
    let r = digest(&api, json!({"content": md, "source": "notes"})).await;
    assert_eq!((r["records"].as_u64(), r["asserted"].as_u64(), r["rejected"].as_u64()), (Some(4), Some(4), Some(0)), "{r}");
    assert_eq!(r["content_type"], "text/markdown", "the default content type");
    assert_eq!(
        one_each(&api, "Person:sarah").await,
        obj(&[
            ("title", json!("Sarah notes")),
            ("tags", json!(["lead", "dev"])),
            ("employer", json!("Org:acme")),
            ("start_date", json!("2024-01-15")),
        ])
    );
    let page = r["page"].as_str().unwrap();
    let pf = one_each_but_mentions(&api, page).await;
    assert_eq!(pf["title"], "Meeting with Sarah", "the first heading");
    assert_eq!(pf["body"], md);
    assert_eq!(strings(&r["mentions"]), set(&["Person:sarah", "Org:acme", "Person:bob", "Deal:42"]));
    // The page links to every entity it names; URLs are not entities.
    let mentions: BTreeSet<String> =
        facts_of(&api, page).await["mentions"].iter().map(|m| m.as_str().unwrap().to_string()).collect();
    assert_eq!(mentions, strings(&r["mentions"]));
    // Facts carry their line's record number.
    let start = api.list("subject=Person:sarah&predicate=start_date").await;
    assert_eq!(start[0]["properties"]["record"], 4);

    // No subject in the front matter: the facts are about the page itself.
    let r = digest(&api, json!({"content": "Owner: Person:sarah\nStatus: draft\n\nFree text here.", "content_type": "text/markdown"})).await;
    let page = r["page"].as_str().unwrap();
    let pf = one_each_but_mentions(&api, page).await;
    assert_eq!(pf["owner"], "Person:sarah");
    assert_eq!(pf["status"], "draft");
    assert_eq!(pf["title"], "Owner: Person:sarah", "no heading: the first line");
    // An entity subject hint names it instead.
    let r = digest(&api, json!({"content": "Status: signed", "content_type": "text/markdown", "subject": "Deal:42"})).await;
    assert_eq!(r["asserted"], 1);
    assert_eq!(one_each(&api, "Deal:42").await["status"], "signed");

    // Plain text: no facts, only the page and its mentions.
    let text = "Call with Person:sarah about Org:acme.\nstatus: not parsed in plain text\n";
    let r = digest(&api, json!({"content": text, "content_type": "text/plain"})).await;
    assert_eq!((r["records"].as_u64(), r["asserted"].as_u64(), r["facts"].as_array().map(Vec::len)), (Some(0), Some(0), Some(0)));
    assert_eq!(r["mentions"], json!(["Person:sarah", "Org:acme"]));
    let page = r["page"].as_str().unwrap();
    let pf = facts_of(&api, page).await;
    assert_eq!(pf.keys().cloned().collect::<BTreeSet<_>>(), set(&["title", "body", "source", "content_type", "mentions"]));
    assert_eq!(pf["title"], vec![json!("Call with Person:sarah about Org:acme.")]);
    assert_eq!(pf["source"], vec![json!("upload")], "the default source");
    assert_eq!(pf["mentions"].len(), 2);
    server.stop_ok();
}

/// A page's facts, one object per predicate, `mentions` left out.
async fn one_each_but_mentions(api: &Api, page: &str) -> BTreeMap<String, Value> {
    facts_of(api, page).await.into_iter().filter(|(p, _)| p != "mentions").map(|(p, mut v)| (p, v.remove(0))).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_strict_predicate_rejects_only_the_conflicting_record() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    api.put("/api/predicates/tier", &json!({"cardinality": "strict"})).await.expect(200);
    api.assert_fact(json!({"subject": "Customer:c1", "predicate": "tier", "object": "gold"})).await;
    let csv = "id,tier\nc1,silver\nc2,bronze\nc3,gold\nc3,silver\n";
    let r = digest(&api, json!({"content": csv, "content_type": "text/csv", "subject": "Customer"})).await;
    assert_eq!((r["records"].as_u64(), r["asserted"].as_u64(), r["rejected"].as_u64()), (Some(4), Some(2), Some(2)), "{r}");
    let why = reasons(&r);
    assert_eq!(why.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec![1, 4]);
    assert!(why[0].1.contains("strict") && why[0].1.contains("gold"), "{why:?}");
    assert_eq!(one_each(&api, "Customer:c1").await["tier"], "gold");
    assert_eq!(one_each(&api, "Customer:c2").await["tier"], "bronze");
    assert_eq!(one_each(&api, "Customer:c3").await["tier"], "gold");
    server.stop_ok();
}

// ---------------------------------------------------------------- masking

/// Inputs every strategy masks: (text, kind).
const CAUGHT: &[(&str, &str)] = &[
    ("sarah.chen@example.com", "EMAIL"),
    ("+1 415 555 0132", "PHONE"),
    ("(415) 555-0132", "PHONE"),
    ("415-555-0132", "PHONE"),
    ("415.555.0132", "PHONE"),
    ("+44 20 7946 0958", "PHONE"),
    ("4111 1111 1111 1111", "CARD"),
    ("5500-0055-5555-5559", "CARD"),
    ("378282246310005", "CARD"),
    ("DE89 3704 0044 0532 0130 00", "IBAN"),
    ("GB82WEST12345698765432", "IBAN"),
    ("192.168.1.20", "IP"),
    ("2001:db8::8a2e:370:7334", "IP"),
    ("123-45-6789", "NATIONAL_ID"),
];

/// Inputs no strategy masks (dates only `shift_date` moves).
const KEPT: &[&str] = &[
    "4111 1111 1111 1112",         // a 16-digit number failing the Luhn check
    "DE89 3704 0044 0532 0130 01", // an IBAN failing mod 97
    "666-45-6789",                 // an SSN area never issued
    "555-0132",                    // a 7-digit local number
    "order 12345",
    "version 1.2.3",
    "at 10:30",
    "Person:sarah",
];

fn document() -> String {
    let mut doc = String::from("Masking table\n");
    for (raw, _) in CAUGHT {
        doc.push_str(&format!("caught: {raw} end\n"));
    }
    for raw in KEPT {
        doc.push_str(&format!("kept: {raw} end\n"));
    }
    doc.push_str("born: 1990-04-01 end\n");
    doc
}

/// The masked form of each CAUGHT line.
fn masked_lines(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("caught: ").and_then(|r| r.strip_suffix(" end")))
        .map(String::from)
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn normalized(raw: &str, kind: &str) -> String {
    match kind {
        "EMAIL" => raw.to_lowercase(),
        "PHONE" => {
            let digits: String = raw.chars().filter(char::is_ascii_digit).collect();
            if raw.starts_with('+') {
                format!("+{digits}")
            } else {
                digits
            }
        }
        "IBAN" => raw.replace(' ', "").to_uppercase(),
        "IP" => raw.parse::<std::net::IpAddr>().unwrap().to_string(),
        _ => raw.chars().filter(char::is_ascii_digit).collect(),
    }
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

fn day_number(date: &str) -> i64 {
    let p: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    days_from_civil(p[0], p[1], p[2])
}

fn born_line(body: &str) -> String {
    body.lines().find_map(|l| l.strip_prefix("born: ").and_then(|r| r.strip_suffix(" end"))).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn masking_tables_per_strategy() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let doc = document();
    let expected_counts = json!({"email": 1, "phone": 5, "card": 3, "iban": 2, "ip": 2, "national_id": 1});

    let mut bodies = BTreeMap::new();
    for strategy in ["redact", "hash", "hash_sha256", "shift_date", "none"] {
        let r = digest(&api, json!({"content": doc, "content_type": "text/plain", "mask": strategy})).await;
        let body = page_body(&api, r["page"].as_str().unwrap()).await;
        assert_eq!(r["mask"], strategy);
        if strategy == "none" {
            assert_eq!(body, doc);
            assert_eq!(r["masked"], json!({}));
            continue;
        }
        let mut counts = expected_counts.clone();
        if strategy == "shift_date" {
            counts["date"] = json!(1);
        }
        assert_eq!(r["masked"], counts, "{strategy}");
        let lines = masked_lines(&body);
        assert_eq!(lines.len(), CAUGHT.len());
        for ((raw, kind), masked) in CAUGHT.iter().zip(&lines) {
            assert!(!body.contains(raw), "{strategy}: {raw} is still in the body:\n{body}");
            match strategy {
                "redact" => assert_eq!(masked, &format!("[{kind}]"), "{raw}"),
                "hash" | "shift_date" => {
                    let h = masked.strip_prefix(&format!("[{kind}:")).and_then(|m| m.strip_suffix(']'));
                    assert!(h.is_some_and(|h| h.len() == 12 && h.chars().all(|c| c.is_ascii_hexdigit())), "{strategy} {raw}: {masked}");
                }
                "hash_sha256" => {
                    let want = format!("[{kind}:{}]", hex(&Sha256::digest(normalized(raw, kind).as_bytes())));
                    assert_eq!(masked, &want, "{raw}");
                }
                _ => unreachable!(),
            }
        }
        for raw in KEPT {
            assert!(body.contains(&format!("kept: {raw} end")), "{strategy}: {raw} was changed:\n{body}");
        }
        let born = born_line(&body);
        if strategy == "shift_date" {
            let shift = day_number(&born) - day_number("1990-04-01");
            assert!(shift != 0 && shift.abs() <= 365, "shifted by {shift} days: {born}");
        } else {
            assert_eq!(born, "1990-04-01", "{strategy} keeps dates");
        }
        bodies.insert(strategy, body);
    }
    // `hash` and `shift_date` share the tenant's keyed hash.
    assert_eq!(masked_lines(&bodies["hash"]), masked_lines(&bodies["shift_date"]));
    // The same spelling-insensitive token for the same value, across calls.
    let again = digest(&api, json!({"content": "mail SARAH.CHEN@EXAMPLE.COM or +1 (415) 555-0132", "content_type": "text/plain", "mask": "hash"})).await;
    let body = page_body(&api, again["page"].as_str().unwrap()).await;
    let lines = masked_lines(&bodies["hash"]);
    assert_eq!(body, format!("mail {} or {}", lines[0], lines[1]), "hash is stable across calls");

    // Structured values are masked too; an id that is PII is hashed even
    // under redact, so records keep distinct subjects.
    let content = json!([
        {"id": "sarah.chen@example.com", "phone": "+1 415 555 0132", "card": 4111111111111111u64, "note": "ip 10.0.0.1 ok"},
        {"id": "bob@example.com", "phone": "n/a"},
    ])
    .to_string();
    let r = digest(&api, json!({"content": content, "content_type": "application/json", "subject": "Customer"})).await;
    assert_eq!(r["asserted"], 4);
    let hashed_email = &lines[0];
    let c = one_each(&api, &format!("Customer:{hashed_email}")).await;
    assert_eq!(c, obj(&[("phone", json!("[PHONE]")), ("card", json!("[CARD]")), ("note", json!("ip [IP] ok"))]));
    let body = page_body(&api, r["page"].as_str().unwrap()).await;
    assert!(!body.contains("sarah.chen") && !body.contains("bob@example.com") && !body.contains("4111111111111111"), "{body}");
    let subjects: BTreeSet<String> = api.list("predicate=phone").await.iter().map(|f| f["subject"].as_str().unwrap().to_string()).collect();
    assert_eq!(subjects.len(), 2, "{subjects:?}");
    assert!(subjects.iter().all(|s| s.starts_with("Customer:[EMAIL:")), "{subjects:?}");
    // Nothing raw in any fact of that digest.
    for id in r["facts"].as_array().unwrap() {
        let f = api.get(&format!("/api/facts/{}", id.as_str().unwrap())).await;
        for leaked in ["example.com", "415 555 0132", "4111111111111111", "10.0.0.1"] {
            assert!(!f.text.contains(leaked), "{leaked} is stored: {}", f.text);
        }
    }
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn shift_date_is_consistent_across_calls_and_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    let doc = "born: 1990-04-01 end\nmail a@b.io, seen 2024-02-29T10:15:00Z\n";
    let first = digest(&api, json!({"content": doc, "content_type": "text/plain", "mask": "shift_date"})).await;
    let body1 = page_body(&api, first["page"].as_str().unwrap()).await;
    let second = digest(&api, json!({"content": doc, "content_type": "text/plain", "mask": "shift_date"})).await;
    assert_eq!(page_body(&api, second["page"].as_str().unwrap()).await, body1);
    let shift = day_number(&born_line(&body1)) - day_number("1990-04-01");
    assert!(shift != 0 && shift.abs() <= 365);
    // The time of day is kept; the date moves by the same offset.
    let seen = body1.split("seen ").nth(1).unwrap().trim();
    let (date, time) = seen.split_once('T').unwrap();
    assert_eq!(time, "10:15:00Z");
    assert_eq!(day_number(date) - day_number("2024-02-29"), shift);
    // Structured values shift alike.
    let r = digest(&api, json!({"content": "{\"id\": \"p1\", \"type\": \"Person\", \"born\": \"1990-04-01\"}", "content_type": "application/json", "mask": "shift_date"})).await;
    assert_eq!(r["asserted"], 1);
    assert_eq!(one_each(&api, "Person:p1").await["born"], json!(born_line(&body1)));
    server.stop_ok();

    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    let third = digest(&api, json!({"content": doc, "content_type": "text/plain", "mask": "shift_date"})).await;
    assert_eq!(page_body(&api, third["page"].as_str().unwrap()).await, body1, "the tenant's offset and key survive a restart");
    server.stop_ok();
}

// ---------------------------------------------------------------- models

fn model(fake: &FakeLlm, name: &str) -> Value {
    json!({"base_url": fake.base_url, "api_key": MODEL_KEY, "model": name, "timeout_ms": 300})
}

const MEMO: &str = "Sarah (sarah.chen@example.com, +1 415 555 0132) is a staff engineer at Org:acme.";

#[tokio::test(flavor = "multi_thread")]
async fn extract_and_judge_with_a_model() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[ALLOW_PRIVATE]);
    let api = Api::new(&server, None);

    let r = digest(
        &api,
        json!({"content": MEMO, "content_type": "text/plain", "source": "memo", "extract_model": model(&fake, "ok"), "judge_model": model(&fake, "judge-x")}),
    )
    .await;
    assert_eq!(r["mode"], "model");
    // Five proposals (four fixed, one about the masked e-mail): one has no
    // subject; the rumor scored low is a candidate.
    assert_eq!((r["records"].as_u64(), r["asserted"].as_u64(), r["candidates"].as_u64(), r["rejected"].as_u64()), (Some(5), Some(3), Some(1), Some(1)), "{r}");
    let why = &r["rejections"][0];
    assert_eq!((why["record"].as_u64(), why["origin"].as_str()), (Some(4), Some("extract")));
    assert!(why["reason"].as_str().unwrap().contains("subject"), "{r}");
    assert_eq!(r["tokens"], json!({"in": 100, "out": 6}));

    let active = one_each(&api, "Person:sarah").await;
    assert_eq!(active, obj(&[("works_at", json!("Org:acme")), ("role", json!("staff engineer")), ("contact", json!("[EMAIL]"))]));
    let works = &api.list("subject=Person:sarah&predicate=works_at").await[0];
    assert_eq!(works["confidence"], fake_llm::JUDGE_SCORE, "the judge's score is the confidence");
    assert_eq!(works["source"], "memo");
    assert_eq!(works["properties"], json!({"page": r["page"], "record": 1, "extracted_by": "ok", "judged_by": "judge-x"}));
    let rumor = api.list("subject=Person:sarah&status=candidate").await;
    assert_eq!(rumor.len(), 1);
    assert_eq!((rumor[0]["predicate"].as_str(), rumor[0]["confidence"].as_f64()), (Some("rumor"), Some(fake_llm::RUMOR_SCORE)));
    assert!(strings(&r["mentions"]).is_superset(&set(&["Org:acme", "Person:sarah"])), "{r}");

    // The endpoint saw the masked text only, with the key on each call.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    for q in &reqs {
        let sent = q.body.to_string();
        for raw in ["sarah.chen@example.com", "415 555 0132", "sarah.chen"] {
            assert!(!sent.contains(raw), "the model was sent {raw}: {sent}");
        }
        assert!(sent.contains("[EMAIL]") && sent.contains("[PHONE]"), "{sent}");
        assert_eq!(q.authorization.as_deref(), Some(format!("Bearer {MODEL_KEY}").as_str()));
    }
    assert!(reqs[1].body["messages"][1]["content"].as_str().unwrap().contains("[3] Person:sarah rumor leaving for Org:globex"));

    // No judge: the extractor's own confidences, against the request's threshold.
    let r = digest(&api, json!({"content": MEMO, "content_type": "text/plain", "threshold": 0.92, "extract_model": model(&fake, "ok"), "subject": "Person"})).await;
    assert_eq!((r["asserted"].as_u64(), r["candidates"].as_u64()), (Some(1), Some(3)), "{r}");
    assert_eq!(r["threshold"], 0.92);
    assert_eq!(fake.requests().len(), 3, "one call without a judge");
    // The tenant's own threshold is unchanged.
    let f = api.assert_fact(json!({"subject": "Person:tom", "predicate": "likes", "object": "tea", "confidence": 0.8})).await;
    assert_eq!(f["status"], "active");
    // `model` alone serves both roles.
    let r = digest(&api, json!({"content": MEMO, "content_type": "text/plain", "model": model(&fake, "ok")})).await;
    assert_eq!((r["asserted"].as_u64(), r["candidates"].as_u64()), (Some(3), Some(1)), "{r}");
    assert_eq!(fake.requests().len(), 5);

    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!server.stderr().contains(MODEL_KEY), "the key reached the log");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn model_failures_write_nothing_and_never_leak_the_key() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[ALLOW_PRIVATE]);
    let api = Api::new(&server, None);
    let cases = [
        (json!({"extract_model": model(&fake, "fail-500")}), 502, "UpstreamError"),
        (json!({"extract_model": model(&fake, "malformed")}), 502, "UpstreamError"),
        (json!({"extract_model": model(&fake, "no-choices")}), 502, "UpstreamError"),
        (json!({"extract_model": model(&fake, "junk")}), 502, "UpstreamError"),
        (json!({"model": model(&fake, "slow")}), 504, "UpstreamTimeout"),
        (json!({"extract_model": model(&fake, "ok"), "judge_model": model(&fake, "fail-500")}), 502, "UpstreamError"),
        (json!({"extract_model": model(&fake, "ok"), "judge_model": model(&fake, "junk")}), 502, "UpstreamError"),
        (json!({"extract_model": model(&fake, "echo-key")}), 502, "UpstreamError"),
    ];
    for (models, status, code) in cases {
        let mut body = json!({"content": format!("---\nsubject: Person:sarah\nage: 34\n---\n{MEMO}"), "source": "memo"});
        for (k, v) in models.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = api.post("/api/digest", &body).await;
        r.expect_error(status, code);
        assert!(!r.text.contains(MODEL_KEY), "the key is in the error: {}", r.text);
        assert!(!r.text.contains("sarah.chen"), "{}", r.text);
    }
    let junk = api.post("/api/digest", &json!({"content": MEMO, "extract_model": model(&fake, "junk")})).await;
    assert!(junk.json["error"]["message"].as_str().unwrap().contains("not answer a JSON list of facts"), "{}", junk.text);
    // Nothing written: no page, no fact of the front matter, no fact at all.
    assert_eq!(page_count(&api).await, 0);
    assert!(api.list("subject=Person:sarah").await.is_empty());
    assert!(api.list("limit=10").await.is_empty());
    // A model configuration the server refuses is the caller's error.
    let r = api.post("/api/digest", &json!({"content": MEMO, "model": {"model": "ok", "base_url": "ftp://x"}})).await;
    r.expect_error(400, "SchemaInvalid");

    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let log = server.stderr();
    assert!(log.contains("model call failed"), "failures are logged");
    assert!(!log.contains(MODEL_KEY), "the key reached the log:\n{log}");
    assert!(!log.contains("sarah.chen"), "raw PII reached the log");
    server.stop_ok();
}

// ---------------------------------------------------------------- replay, tenants, errors

#[tokio::test(flavor = "multi_thread")]
async fn idempotent_replay() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[ALLOW_PRIVATE]);
    let api = Api::new(&server, None);
    let body = json!({"content": "{\"id\": \"a\", \"x\": 1}", "content_type": "application/json"});
    let post = |key: &'static str, body: Value| {
        let api = api.clone();
        async move { send(api.req(Method::POST, "/api/digest").header("idempotency-key", key).json(&body)).await }
    };
    let first = post("k-1", body.clone()).await;
    first.expect(200);
    assert_eq!(first.header("idempotency-replayed"), None);
    let again = post("k-1", body.clone()).await;
    again.expect(200);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(again.text, first.text);
    assert_eq!(page_count(&api).await, 1, "the retry wrote nothing");
    // Another key is another digest.
    post("k-2", body).await.expect(200);
    assert_eq!(page_count(&api).await, 2);

    // With a model, the retry is answered without calling it again.
    let body = json!({"content": MEMO, "model": model(&fake, "ok")});
    let first = post("k-3", body.clone()).await;
    first.expect(200);
    assert_eq!(fake.requests().len(), 2);
    let again = post("k-3", body).await;
    assert_eq!(again.text, first.text);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(fake.requests().len(), 2, "a replay calls no model");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn tenants_are_isolated() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let body = json!({"content": "{\"id\": \"sarah\", \"type\": \"Person\", \"email\": \"s@x.io\"}", "content_type": "application/json", "mask": "hash"});
    let a = digest(&nas, body.clone()).await;
    let b = digest(&acme, body.clone()).await;
    let token_a = one_each(&nas, "Person:sarah").await["email"].clone();
    let token_b = one_each(&acme, "Person:sarah").await["email"].clone();
    assert!(token_a.as_str().unwrap().starts_with("[EMAIL:"));
    assert_ne!(token_a, token_b, "each tenant hashes with its own secret");
    // Neither sees the other's page.
    assert!(acme.list(&format!("subject={}", enc(a["page"].as_str().unwrap()))).await.is_empty());
    assert!(nas.list(&format!("subject={}", enc(b["page"].as_str().unwrap()))).await.is_empty());
    assert_eq!(page_count(&nas).await, 1);
    let p = acme.post("/api/context", &json!({"seeds": ["Person:sarah"]})).await;
    let pages: Vec<&str> = p.expect(200)["pages"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap()).collect();
    assert_eq!(pages, vec![b["page"].as_str().unwrap()]);
    // Without a key, or with a wrong one: the non-disclosure answer.
    Api::new(&server, None).post("/api/digest", &body).await.expect_hidden();
    Api::new(&server, Some("wrong")).post("/api/digest", &body).await.expect_hidden();
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_and_write_nothing() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let long_source = "s".repeat(3000);
    for bad in [
        json!({}),
        json!({"content": ""}),
        json!({"content": " \n\t "}),
        json!({"content": null}),
        json!({"content": 42}),
        json!({"content": "x", "content_type": "application/xml"}),
        json!({"content": "x", "content_type": "TEXT/CSV"}),
        json!({"content": "x", "content_type": null}),
        json!({"content": "x", "threshold": 1.5}),
        json!({"content": "x", "threshold": -0.1}),
        json!({"content": "x", "threshold": "high"}),
        json!({"content": "x", "mask": "blur"}),
        json!({"content": "x", "surprise": true}),
        json!({"content": "{", "content_type": "application/json"}),
        json!({"content": "42", "content_type": "application/json"}),
        json!({"content": "x", "subject": "not a hint!"}),
        json!({"content": "x", "source": long_source}),
        json!({"content": "x", "judge_model": {"model": "ok"}}),
        json!({"content": "x", "model": {"model": "ok", "surprise": 1}}),
        json!({"content": "x", "model": {"model": ""}}),
        json!(["x"]),
    ] {
        let r = api.post("/api/digest", &bad).await;
        assert_eq!(r.status.as_u16(), 400, "{bad}: {}", r.text);
        r.expect_error(400, "SchemaInvalid");
    }
    let r = send(api.req(Method::POST, "/api/digest").header("content-type", "text/plain").body("hello")).await;
    r.expect_error(400, "SchemaInvalid");
    // Over the per-digest fact limit: 400, nothing written.
    let lines: String = (0..10_001).map(|i| format!("{{\"id\": {i}, \"a\": 1}}\n")).collect();
    let r = api.post("/api/digest", &json!({"content": lines, "content_type": "application/jsonl"})).await;
    r.expect_error(400, "SchemaInvalid");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("10000"), "{}", r.text);
    assert!(api.list("limit=10").await.is_empty(), "nothing was written");
    server.stop_ok();
}

// ---------------------------------------------------------------- pages in context packets

#[tokio::test(flavor = "multi_thread")]
async fn context_packets_carry_the_pages_that_mention_their_entities() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    api.assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:acme"})).await;
    let long = "word ".repeat(400);
    let first = digest(&api, json!({"content": format!("# Kickoff\nPerson:sarah met Org:acme.\n{long}"), "source": "notes"})).await;
    let noted = first["recorded_at"].as_i64().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let second = digest(&api, json!({"content": "# Follow-up\nPerson:sarah signed.", "source": "crm"})).await;
    let only_acme = digest(&api, json!({"content": "# Acme news\nOrg:acme grew.", "source": "news"})).await;

    let p = api.post("/api/context", &json!({"seeds": ["Person:sarah"]})).await;
    let p = p.expect(200);
    let pages = p["pages"].as_array().unwrap();
    let ids: Vec<&str> = pages.iter().map(|x| x["id"].as_str().unwrap()).collect();
    // The seed's pages first, newest first; then the pages of the other entities of the packet.
    assert_eq!(ids, vec![second["page"].as_str().unwrap(), first["page"].as_str().unwrap(), only_acme["page"].as_str().unwrap()], "{p}");
    assert_eq!(pages[0]["subject"], "Person:sarah");
    assert_eq!(pages[0]["title"], "Follow-up");
    assert_eq!(pages[0]["body"], "# Follow-up\nPerson:sarah signed.");
    assert_eq!(pages[0]["source"], "crm");
    assert_eq!(pages[2]["subject"], "Org:acme");
    let snippet = pages[1]["body"].as_str().unwrap();
    assert!(snippet.chars().count() <= 501 && snippet.starts_with("# Kickoff"), "a snippet: {snippet}");
    // The pages' own facts are not facts of the packet.
    assert!(p["facts"].as_array().unwrap().iter().all(|f| !f["subject"].as_str().unwrap().starts_with("Page:")), "{p}");

    let capped = api.post("/api/context", &json!({"seeds": ["Person:sarah"], "max_pages": 1})).await;
    assert_eq!(capped.expect(200)["pages"].as_array().unwrap().len(), 1);
    let none = api.post("/api/context", &json!({"seeds": ["Person:sarah"], "max_pages": 0})).await;
    assert_eq!(none.expect(200)["pages"], json!([]));
    // As of a time before the later digests: only the first page.
    let then = api.post("/api/context", &json!({"seeds": ["Person:sarah"], "as_of": noted})).await;
    let then: Vec<String> =
        then.expect(200)["pages"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(then, vec![first["page"].as_str().unwrap().to_string()]);
    server.stop_ok();
}

/// The SSRF guard on the digest's model endpoints (`model`, `extract_model`,
/// `judge_model`): with only 127.0.0.1 allowed, every other private or
/// special address is refused as the caller's error and nothing is written.
#[tokio::test(flavor = "multi_thread")]
async fn private_model_endpoints_are_refused() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[("TEMPORA_OUTBOUND_ALLOW", "127.0.0.1/32")]);
    let api = Api::new(&server, None);
    for base in [
        fake.base_url.replace("127.0.0.1", "127.0.0.2"),
        fake.base_url.replace("127.0.0.1", "[::1]"),
        fake.base_url.replace("127.0.0.1", "[::ffff:127.0.0.2]"),
        "http://169.254.169.254/latest".to_string(),
        "http://[fd00:ec2::254]/latest".to_string(),
        "http://10.0.0.1/v1".to_string(),
        "http://192.168.1.1/v1".to_string(),
        "http://0.0.0.0/v1".to_string(),
    ] {
        let mut refused = model(&fake, "ok");
        refused["base_url"] = json!(base);
        for body in [
            json!({"content": MEMO, "model": refused}),
            json!({"content": MEMO, "extract_model": refused}),
            // The extractor is allowed; the judge is not.
            json!({"content": MEMO, "extract_model": model(&fake, "ok"), "judge_model": refused}),
        ] {
            let r = api.post("/api/digest", &body).await;
            r.expect_error(400, "SchemaInvalid");
            assert!(!r.text.contains(MODEL_KEY), "{base}: {}", r.text);
            assert!(r.json["error"]["message"].as_str().unwrap().contains("allow"), "{base}: {}", r.text);
        }
    }
    assert_eq!(page_count(&api).await, 0);
    assert!(api.list("limit=10").await.is_empty());
    // The allowed address itself works.
    api.post("/api/digest", &json!({"content": MEMO, "model": model(&fake, "ok")})).await.expect(200);
    server.stop_ok();
}
