//! `POST /api/conversations` over a real socket: a transcript becomes one
//! `said` fact a turn with the speaker as subject (valid from the turn's
//! time, with its conversation, number and speaker in the properties), the
//! conversation's participants and count, names for named speakers; appends
//! continue the numbering; bad input is refused naming the turn and writes
//! nothing; a tenant's other cardinality for `said` is refused; keys replay;
//! tenants stay apart.

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

const PATH: &str = "/api/conversations";

async fn record(api: &Api, body: Value) -> Value {
    api.post(PATH, &body).await.expect(201).clone()
}

/// The current facts of `subject predicate`.
async fn facts(api: &Api, subject: &str, predicate: &str) -> Vec<Value> {
    api.list(&format!("subject={}&predicate={predicate}&limit=1000", enc(subject))).await
}

/// The objects of the current facts of `subject predicate`, sorted.
async fn objects(api: &Api, subject: &str, predicate: &str) -> Vec<Value> {
    let mut out: Vec<Value> = facts(api, subject, predicate).await.into_iter().map(|f| f["object"].clone()).collect();
    out.sort_by_key(|v| v.to_string());
    out
}

async fn versions(api: &Api, id: &str) -> usize {
    api.get(&format!("/api/facts/{id}/history")).await.expect(200)["versions"].as_array().unwrap().len()
}

#[tokio::test]
async fn a_transcript_becomes_said_facts_of_its_speakers() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let t0 = 1_714_000_000_000i64;
    let r = record(
        &api,
        json!({"conversation": "c03-s07", "turns": [
            {"speaker": "Sam", "text": "I ran a half marathon!", "at": t0},
            {"speaker": "Person:ada", "text": "Congratulations! How long did it take?", "at": t0 + 60_000},
            {"speaker": "Sam", "text": "Two hours and five minutes.", "at": t0 + 120_000},
            {"speaker": "Mary Ann", "text": "Next year we run together."}
        ]}),
    )
    .await;

    // The answer: the conversation, the transaction, each turn's fact.
    assert_eq!(r["conversation"], "c03-s07");
    assert!(r["tx"].as_u64().is_some() && r["recorded_at"].as_i64().is_some(), "{r}");
    assert_eq!(r["speakers"], json!({"Sam": "Person:sam", "Person:ada": "Person:ada", "Mary Ann": "Person:mary_ann"}));
    let answered = r["facts"].as_array().unwrap();
    assert_eq!(answered.len(), 4, "{r}");
    let expect = [
        ("Sam", "Person:sam", "I ran a half marathon!"),
        ("Person:ada", "Person:ada", "Congratulations! How long did it take?"),
        ("Sam", "Person:sam", "Two hours and five minutes."),
        ("Mary Ann", "Person:mary_ann", "Next year we run together."),
    ];
    let recorded_at = r["recorded_at"].as_i64().unwrap();
    for (n, (speaker, subject, text)) in expect.iter().enumerate() {
        let a = &answered[n];
        assert_eq!((a["turn"].as_u64(), &a["speaker"], &a["subject"]), (Some(n as u64), &json!(speaker), &json!(subject)));
        // The stored fact, read back by the id the answer gave.
        let f = api.get(&format!("/api/facts/{}", a["id"].as_str().unwrap())).await.expect(200).clone();
        assert_eq!(f["subject"], *subject, "{f}");
        assert_eq!(f["predicate"], "said");
        assert_eq!(f["object"], *text);
        assert_eq!(f["status"], "active");
        assert_eq!(f["source"], "Conversation:c03-s07");
        assert_eq!(f["valid_until"], Value::Null);
        assert_eq!(f["properties"], json!({"conversation": "c03-s07", "turn": n, "speaker": speaker}));
        assert_eq!(f["valid_from"], a["valid_from"]);
        if n < 3 {
            assert_eq!(f["valid_from"], t0 + 60_000 * n as i64);
        } else {
            // No `at`: the server's time when the call came (plus the index).
            let at = f["valid_from"].as_i64().unwrap();
            assert!(at >= recorded_at - 60_000 && at <= recorded_at + 60_000, "{at} vs {recorded_at}");
        }
    }

    // Found again by speaker: Sam's two turns.
    let sam = facts(&api, "Person:sam", "said").await;
    let mut turns: Vec<u64> = sam.iter().map(|f| f["properties"]["turn"].as_u64().unwrap()).collect();
    turns.sort();
    assert_eq!(turns, [0, 2]);
    assert_eq!(api.get("/api/predicates/said").await.expect(200)["cardinality"], "many");
    // Names for the named speakers, none for a reference.
    assert_eq!(objects(&api, "Person:sam", "name").await, [json!("Sam")]);
    assert_eq!(objects(&api, "Person:mary_ann", "name").await, [json!("Mary Ann")]);
    assert!(facts(&api, "Person:ada", "name").await.is_empty());
    // The conversation: its participants (a walkable edge) and its count.
    assert_eq!(
        objects(&api, "Conversation:c03-s07", "participant").await,
        [json!("Person:ada"), json!("Person:mary_ann"), json!("Person:sam")]
    );
    assert_eq!(objects(&api, "Conversation:c03-s07", "turns").await, [json!(4)]);
    let walk = api.get("/api/walk?start=Conversation:c03-s07&depth=1").await.expect(200).clone();
    let reached: Vec<&str> = walk["reached"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(reached.contains(&"Person:sam") && reached.contains(&"Person:ada"), "{walk}");

    // Recallable through search.
    let found = api.get("/api/search?question=half%20marathon").await.expect(200).clone();
    let hit = found["answer_facts"].as_array().unwrap().iter().any(|f| f["subject"] == "Person:sam" && f["predicate"] == "said");
    assert!(hit, "{found}");
}

#[tokio::test]
async fn appending_continues_the_turn_numbers_and_adds_no_noise() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let first = record(
        &api,
        json!({"conversation": "chat_1", "source": "slack-export", "turns": [
            {"speaker": "Sam", "text": "hello", "at": 1000},
            {"speaker": "Bo", "text": "hi Sam", "at": 2000}
        ]}),
    )
    .await;
    let name_id = facts(&api, "Person:sam", "name").await[0]["id"].as_str().unwrap().to_string();
    let participants = facts(&api, "Conversation:chat_1", "participant").await;
    assert_eq!(participants.len(), 2);

    let second = record(
        &api,
        json!({"conversation": "chat_1", "turns": [
            {"speaker": "Sam", "text": "how are you?", "at": 3000},
            {"speaker": "Cy", "text": "late to the party", "at": 4000}
        ]}),
    )
    .await;
    let turns: Vec<u64> = second["facts"].as_array().unwrap().iter().map(|f| f["turn"].as_u64().unwrap()).collect();
    assert_eq!(turns, [2, 3], "{second}");
    assert!(second["tx"].as_u64() > first["tx"].as_u64());
    assert_eq!(objects(&api, "Conversation:chat_1", "turns").await, [json!(4)]);
    // The source is the request's, or the conversation.
    let said = facts(&api, "Person:sam", "said").await;
    let source_of = |text: &str| said.iter().find(|f| f["object"] == text).unwrap()["source"].clone();
    assert_eq!(source_of("hello"), "slack-export");
    assert_eq!(source_of("how are you?"), "Conversation:chat_1");
    let how = said.iter().find(|f| f["object"] == "how are you?").unwrap();
    assert_eq!(how["properties"], json!({"conversation": "chat_1", "turn": 2, "speaker": "Sam"}));
    // Sam's name and participation are not asserted again; Cy joins.
    assert_eq!(facts(&api, "Person:sam", "name").await.len(), 1);
    assert_eq!(versions(&api, &name_id).await, 1, "the name got a new version");
    for p in &participants {
        assert_eq!(versions(&api, p["id"].as_str().unwrap()).await, 1, "{p}");
    }
    assert_eq!(
        objects(&api, "Conversation:chat_1", "participant").await,
        [json!("Person:bo"), json!("Person:cy"), json!("Person:sam")]
    );

    // Another conversation numbers from 0; without an id, one is made.
    let other = record(&api, json!({"turns": [{"speaker": "Sam", "text": "new day"}]})).await;
    let id = other["conversation"].as_str().unwrap();
    assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{other}");
    assert_eq!(other["facts"][0]["turn"], 0);
    assert_eq!(objects(&api, &format!("Conversation:{id}"), "turns").await, [json!(1)]);
    assert_eq!(facts(&api, "Person:sam", "said").await.len(), 3);
}

#[tokio::test]
async fn a_name_already_given_is_kept() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let given = api.assert_fact(json!({"subject": "Person:sam", "predicate": "name", "object": "Samuel Jones"})).await;
    record(&api, json!({"turns": [{"speaker": "Sam", "text": "hi"}, {"speaker": "SAM", "text": "hi again"}]})).await;
    assert_eq!(objects(&api, "Person:sam", "name").await, [json!("Samuel Jones")]);
    assert_eq!(versions(&api, given["id"].as_str().unwrap()).await, 1);
    let speakers: Vec<Value> =
        facts(&api, "Person:sam", "said").await.iter().map(|f| f["properties"]["speaker"].clone()).collect();
    assert_eq!(speakers.len(), 2);
    assert!(speakers.contains(&json!("Sam")) && speakers.contains(&json!("SAM")), "{speakers:?}");
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_turn_and_writes_nothing() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let ok = json!({"speaker": "Sam", "text": "fine"});
    let many: Vec<Value> = (0..1001).map(|_| ok.clone()).collect();
    let cases = [
        (json!({"turns": []}), "turns"),
        (json!({}), "turns"),
        (json!({"turns": [ok, {"speaker": "Sam", "text": ""}]}), "turns[1].text"),
        (json!({"turns": [ok, {"speaker": "Sam", "text": "  \n"}]}), "turns[1].text"),
        (json!({"turns": [ok, ok, {"speaker": " ", "text": "x"}]}), "turns[2].speaker"),
        (json!({"turns": [{"text": "x"}]}), "speaker"),
        (json!({"turns": [{"speaker": "?!", "text": "x"}]}), "turns[0].speaker"),
        (json!({"turns": [ok, {"speaker": "Sam", "text": "x", "at": 1.5}]}), "turns[1].at"),
        (json!({"turns": [ok, {"speaker": "Sam", "text": "x", "at": "2024-05-01T00:00:00Z"}]}), "turns[1].at"),
        (json!({"turns": [{"speaker": "Sam", "text": "x", "at": null}]}), "turns[0].at"),
        (json!({"turns": [{"speaker": "Sam", "text": 7}]}), "turns[0].text"),
        (json!({"turns": [{"speaker": "Sam", "text": "x", "when": 5}]}), "when"),
        (json!({"conversation": "a b", "turns": [ok]}), "conversation"),
        (json!({"conversation": "", "turns": [ok]}), "conversation"),
        (json!({"conversation": "x".repeat(65), "turns": [ok]}), "conversation"),
        (json!({"conversation": "Conversation:x", "turns": [ok]}), "conversation"),
        (json!({"turns": [ok], "source": ""}), "source"),
        (json!({"turns": many}), "at most 1000"),
        (json!([ok]), "object"),
    ];
    for (body, names) in cases {
        let r = api.post(PATH, &body).await;
        r.expect_error(400, "SchemaInvalid");
        let message = r.json["error"]["message"].as_str().unwrap();
        assert!(message.contains(names), "{body}: {message}");
    }
    let r = send(api.req(Method::POST, PATH).header("content-type", "text/plain").body("Sam: hi")).await;
    r.expect_error(400, "SchemaInvalid");
    assert_eq!(api.stats().await["facts"]["total"].as_u64().unwrap_or(0), 0, "{}", api.stats().await);
    assert!(api.all_facts().await.is_empty());
    // `said` kept its default: a refused call sets no cardinality either.
    assert_eq!(api.get("/api/predicates/said").await.expect(200)["cardinality"], "one");
}

#[tokio::test]
async fn a_tenant_that_made_said_single_valued_is_told_how_to_fix_it() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    api.put("/api/predicates/said", &json!({"cardinality": "one"})).await.expect(200);
    let body = json!({"turns": [{"speaker": "Sam", "text": "hi"}]});
    let r = api.post(PATH, &body).await;
    r.expect_error(409, "Conflict");
    let message = r.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("said") && message.contains("many") && message.contains("PUT /api/predicates/said"), "{message}");
    assert!(api.all_facts().await.is_empty());
    api.put("/api/predicates/said", &json!({"cardinality": "many"})).await.expect(200);
    record(&api, body).await;
    assert_eq!(facts(&api, "Person:sam", "said").await.len(), 1);
}

#[tokio::test]
async fn a_key_replays_the_answer_and_writes_once() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let post = |key: &'static str, body: Value| {
        let api = api.clone();
        async move { send(api.req(Method::POST, PATH).header("idempotency-key", key).json(&body)).await }
    };
    let body = json!({"turns": [{"speaker": "Sam", "text": "once"}]});
    let first = post("k-1", body.clone()).await;
    first.expect(201);
    assert_eq!(first.header("idempotency-replayed"), None);
    let again = post("k-1", body.clone()).await;
    again.expect(201);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(again.text, first.text);
    assert_eq!(facts(&api, "Person:sam", "said").await.len(), 1, "the retry wrote nothing");
    // A refused request is answered the same way under its key.
    let bad = post("k-2", json!({"turns": []})).await;
    bad.expect_error(400, "SchemaInvalid");
}

#[tokio::test]
async fn conversations_stay_in_the_callers_tenant() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let body = json!({"conversation": "shared-name", "turns": [{"speaker": "Sam", "text": "secret plan"}]});
    Api::new(&server, None).post(PATH, &body).await.expect_hidden();
    Api::new(&server, Some("wrong")).post(PATH, &body).await.expect_hidden();
    record(&nas, body.clone()).await;
    assert!(facts(&acme, "Person:sam", "said").await.is_empty());
    // The same conversation id in another tenant is another conversation.
    let r = record(&acme, body).await;
    assert_eq!(r["facts"][0]["turn"], 0);
    assert_eq!(objects(&nas, "Conversation:shared-name", "turns").await, [json!(1)]);
}

/// A tenant's first conversations, many at once: every call sets (or finds)
/// the shape's cardinalities, none is refused for a cardinality another call
/// just set.
#[tokio::test(flavor = "multi_thread")]
async fn first_calls_at_once_all_store_their_turns() {
    let (_tmp, server) = fresh(&[]);
    let api = std::sync::Arc::new(Api::new(&server, None));
    let calls: Vec<_> = (0..24)
        .map(|i| {
            let api = std::sync::Arc::clone(&api);
            tokio::spawn(async move {
                let body = json!({"conversation": format!("c{i}"), "turns": [{"speaker": "Sam", "text": format!("hello {i}"), "at": 1_000 + i}]});
                let r = api.post("/api/conversations", &body).await;
                (r.status.as_u16(), r.text.clone())
            })
        })
        .collect();
    for c in calls {
        let (status, text) = c.await.unwrap();
        assert_eq!(status, 201, "{text}");
    }
    assert_eq!(facts(&api, "Person:sam", "said").await.len(), 24);
}
