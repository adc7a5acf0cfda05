//! NeuroSan `streaming_chat` over a real socket: JSON lines, MINIMAL and
//! MAXIMAL, continuation through `chat_context` (also on another server),
//! conversations stored as facts in the caller's tenant, the model-free
//! `memory` front man, the tool-calling loop against a local
//! OpenAI-compatible endpoint (tools, other networks, nested agents, a
//! model that fails or loops), `sly_data` upstream rules, clear errors, and
//! cancellation when the client goes away.

use crate::common::fake_llm::FakeLlm;
use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const ALLOW_PRIVATE: (&str, &str) = ("TEMPORA_OUTBOUND_ALLOW_PRIVATE", "true");

/// One turn: the status, the content type and the streamed lines.
struct Streamed {
    status: u16,
    content_type: String,
    lines: Vec<Value>,
}

impl Streamed {
    #[track_caller]
    fn last(&self) -> &Value {
        assert_eq!(self.status, 200, "{:?}", self.lines);
        let last = self.lines.last().unwrap_or_else(|| panic!("no lines"));
        assert_eq!(last["response"]["type"], "AGENT_FRAMEWORK", "{last}");
        &last["response"]
    }
    fn text(&self) -> String {
        self.last()["text"].as_str().unwrap().to_string()
    }
    fn context(&self) -> Value {
        self.last()["chat_context"].clone()
    }
    fn error(&self) -> Option<String> {
        self.last()["structure"]["error"].as_str().map(str::to_string)
    }
}

async fn chat(api: &Api, agent: &str, body: Value) -> Streamed {
    let resp = api
        .req(Method::POST, &format!("/api/v1/{agent}/streaming_chat"))
        .json(&body)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("request sent");
    let status = resp.status().as_u16();
    let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let text = resp.text().await.expect("the stream ends");
    let lines = if status == 200 {
        assert!(text.ends_with('\n'), "every line ends with a newline: {text:?}");
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
    } else {
        vec![serde_json::from_str(&text).unwrap_or(Value::Null)]
    };
    Streamed { status, content_type, lines }
}

fn say(text: &str) -> Value {
    json!({"user_message": {"type": "HUMAN", "text": text}})
}

fn say_in(text: &str, context: &Value, filter: &str) -> Value {
    json!({"user_message": {"type": "HUMAN", "text": text}, "chat_context": context, "chat_filter": {"chat_filter_type": filter}})
}

fn conversation_id(context: &Value) -> String {
    context["chat_histories"][0]["messages"][0]["structure"]["conversation_id"].as_str().unwrap().to_string()
}

/// The `said` facts of conversation `id`, in turn order.
async fn said_in(api: &Api, id: &str) -> Vec<Value> {
    let mut said: Vec<Value> = api
        .list("predicate=said&limit=1000")
        .await
        .into_iter()
        .filter(|f| f["properties"]["conversation"] == id)
        .collect();
    said.sort_by_key(|f| f["properties"]["turn"].as_u64().unwrap());
    said
}

#[tokio::test]
async fn the_memory_front_man_remembers_and_answers_over_two_turns() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);

    let first = chat(&api, "memory", say("Remember that Person:sarah works_at Org:acme.")).await;
    assert!(first.content_type.starts_with("application/json-lines"), "{}", first.content_type);
    assert_eq!(first.lines.len(), 1, "MINIMAL streams the answer only: {:?}", first.lines);
    assert!(first.lines[0].get("request").is_none(), "MINIMAL does not echo the request");
    assert_eq!(first.text(), "Remembered: Person:sarah works_at Org:acme.");
    assert_eq!(first.last()["origin"][0]["tool"], "memory");
    let ctx = first.context();
    let messages = ctx["chat_histories"][0]["messages"].as_array().unwrap().clone();
    let kinds: Vec<&str> = messages.iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["SYSTEM", "HUMAN", "AI"], "{ctx}");
    let facts = api.list("subject=Person:sarah&predicate=works_at").await;
    assert_eq!(facts.len(), 1);
    assert_eq!(facts[0]["object"], "Org:acme");
    assert_eq!(facts[0]["source"], format!("Conversation:{}", conversation_id(&ctx)), "provenance: the conversation");

    // Turn two, continued through chat_context, with MAXIMAL.
    let second = chat(&api, "memory", say_in("what do you know about Person:sarah?", &ctx, "MAXIMAL")).await;
    assert!(second.lines.len() > 1, "MAXIMAL streams every message: {:?}", second.lines);
    for l in &second.lines {
        assert_eq!(l["request"]["user_message"]["text"], "what do you know about Person:sarah?", "{l}");
    }
    let kinds: Vec<&str> = second.lines.iter().map(|l| l["response"]["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["AGENT", "AGENT_TOOL_RESULT", "AI", "AGENT_FRAMEWORK"]);
    // Tool calls name tools of the network, as its connectivity lists them.
    let call = second.lines[0]["response"]["text"].as_str().unwrap();
    assert!(call.starts_with("Invoking recall with "), "{call}");
    assert!(second.text().contains("Person:sarah works_at Org:acme"), "{}", second.text());
    let ctx2 = second.context();
    assert_eq!(conversation_id(&ctx2), conversation_id(&ctx), "the same conversation");
    assert_eq!(ctx2["chat_histories"][0]["messages"].as_array().unwrap().len(), 5, "{ctx2}");

    // Every command of the grammar, and a question answered from recall.
    let r = chat(&api, "memory", say_in("remember Person:sarah works_at Org:globex", &ctx2, "MINIMAL")).await;
    assert!(r.text().contains("replaces 1 earlier fact"), "{}", r.text());
    let r = chat(&api, "memory", say("history of Person:sarah works_at")).await;
    let h = r.text();
    assert!(h.contains("Org:acme [superseded") && h.contains("Org:globex [active"), "{h}");
    let r = chat(&api, "memory", say("what changed since 1h")).await;
    assert!(r.text().contains("asserted Person:sarah works_at Org:globex"), "{}", r.text());
    let r = chat(&api, "memory", say("Where does Sarah work?")).await;
    let answer = r.text();
    let (held, said) = answer.split_once("Said in conversations:").unwrap_or_else(|| panic!("{answer}"));
    assert!(held.starts_with("From memory:") && held.contains("Person:sarah works_at Org:globex"), "{}", r.text());
    assert!(!held.contains(" said ") && said.contains("Person:user said "), "{}", r.text());
    let r = chat(&api, "memory", say("context for meeting Person:sarah")).await;
    assert!(r.text().contains("Org:globex"), "{}", r.text());
    let r = chat(&api, "memory", say("forget Person:sarah works_at")).await;
    assert!(r.text().starts_with("Forgot 1 fact"), "{}", r.text());
    assert!(api.list("subject=Person:sarah&predicate=works_at").await.is_empty());
    let r = chat(&api, "memory", say("remember sarah")).await;
    assert!(r.text().contains("remember <Type:id>") && r.error().is_none(), "usage, not an error: {}", r.text());
}

#[tokio::test]
async fn turns_are_stored_as_conversation_facts_and_recallable() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let first = chat(&api, "memory", say("remember Project:apollo status green")).await;
    let ctx = first.context();
    let id = conversation_id(&ctx);
    chat(&api, "memory", say_in("what do you know about Project:apollo", &ctx, "MINIMAL")).await.last();

    let conv = api.list(&format!("subject=Conversation:{id}&predicate=network")).await;
    assert_eq!(conv.len(), 1, "asserted once, not once a turn: {conv:?}");
    assert_eq!(conv[0]["object"], "memory");
    // Every message is one `said` fact of its speaker.
    let said = said_in(&api, &id).await;
    let expect = [
        (0, "Person:user", "remember Project:apollo status green"),
        (1, "Agent:memory", "Remembered: Project:apollo status green."),
        (2, "Person:user", "what do you know about Project:apollo"),
    ];
    assert_eq!(said.len(), 4, "{said:?}");
    for (n, speaker, text) in expect {
        let f = &said[n];
        assert_eq!(f["subject"], speaker, "{f}");
        assert_eq!(f["predicate"], "said");
        assert_eq!(f["object"], text, "{f}");
        assert_eq!(f["source"], format!("Conversation:{id}"));
        assert_eq!(f["properties"], json!({"conversation": id, "turn": n, "speaker": speaker}), "{f}");
    }
    assert_eq!(said[3]["subject"], "Agent:memory");
    assert!(said[3]["object"].as_str().unwrap().contains("Project:apollo status green"));
    // The human turn is valid from when it was said, the answer not before it.
    let at: Vec<i64> = said.iter().map(|f| f["valid_from"].as_i64().unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "{at:?}");
    // The conversation: its participants and its count; no message entities.
    let mut participants: Vec<String> = api
        .list(&format!("subject=Conversation:{id}&predicate=participant"))
        .await
        .iter()
        .map(|f| f["object"].as_str().unwrap().to_string())
        .collect();
    participants.sort();
    assert_eq!(participants, ["Agent:memory", "Person:user"]);
    let count = api.list(&format!("subject=Conversation:{id}&predicate=turns")).await;
    assert_eq!(count.len(), 1);
    assert_eq!(count[0]["object"], 4);
    assert_eq!(api.get("/api/predicates/said").await.expect(200)["cardinality"], "many");
    let all = api.all_facts().await;
    assert!(!all.iter().any(|f| f["subject"].as_str().unwrap().starts_with("Message:")), "{all:?}");
    let is_said = |f: &Value| f["predicate"] == "said" && f["properties"]["conversation"] == id.as_str();

    // Recallable through search.
    let found = api.get("/api/search?question=apollo%20status").await.expect(200).clone();
    assert!(found["answer_facts"].as_array().unwrap().iter().any(is_said), "{found}");

    // And through MCP's recall.
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "recall", "arguments": {"question": "apollo status"}}});
    let r =
        send(api.req(Method::POST, "/mcp").header("accept", "application/json, text/event-stream").json(&rpc)).await;
    let facts = &r.expect(200)["result"]["structuredContent"]["facts"];
    assert!(facts.as_array().unwrap().iter().any(is_said), "{}", r.text);
}

#[tokio::test]
async fn a_context_continues_on_another_server() {
    let (_a_tmp, a) = fresh(&[]);
    let (_b_tmp, b) = fresh(&[]);
    let (api_a, api_b) = (Api::new(&a, None), Api::new(&b, None));
    let first = chat(&api_a, "memory", say("remember Person:ada knows Person:alan")).await;
    let ctx = first.context();
    let id = conversation_id(&ctx);
    let second = chat(&api_b, "memory", say_in("what do you know about Person:ada", &ctx, "MINIMAL")).await;
    assert_eq!(conversation_id(&second.context()), id);
    assert_eq!(second.context()["chat_histories"][0]["messages"].as_array().unwrap().len(), 5);
    // B numbers the messages after those the context carried.
    let said = said_in(&api_b, &id).await;
    let turns: Vec<(u64, &str)> =
        said.iter().map(|f| (f["properties"]["turn"].as_u64().unwrap(), f["subject"].as_str().unwrap())).collect();
    assert_eq!(turns, [(2, "Person:user"), (3, "Agent:memory")]);
    assert_eq!(api_b.list(&format!("subject=Conversation:{id}&predicate=turns")).await[0]["object"], 4);
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let post = |path: &str, body: Value| {
        let api = api.clone();
        let path = path.to_string();
        async move { api.post(&path, &body).await }
    };
    post("/api/v1/nobody/streaming_chat", say("hi")).await.expect_error(404, "NotFound");
    post("/api/v1/memory/dance", say("hi")).await.expect_error(404, "NotFound");
    post("/api/v1/memory/function", say("hi")).await.expect_error(404, "NotFound");
    post("/api/v1/memory/streaming_chat", json!({})).await.expect_error(400, "SchemaInvalid");
    post("/api/v1/memory/streaming_chat", say("   ")).await.expect_error(400, "SchemaInvalid");
    let r = post("/api/v1/memory/streaming_chat", json!({"user_message": {"type": "ROBOT", "text": "x"}})).await;
    r.expect_error(400, "SchemaInvalid");
    assert!(r.text.contains("ROBOT"), "{}", r.text);
    let r = post("/api/v1/memory/streaming_chat", json!({"user_message": {"text": "x"}, "chat_context": 7})).await;
    r.expect_error(400, "SchemaInvalid");
    assert!(r.text.contains("chat_context"), "{}", r.text);
    let forged = json!({"chat_histories": [{"origin": [{"tool": "memory"}], "messages": [
        {"type": "SYSTEM", "text": "", "structure": {"conversation_id": "../../etc"}}]}]});
    let r = post("/api/v1/memory/streaming_chat", say_in("hi", &forged, "MINIMAL")).await;
    r.expect_error(400, "SchemaInvalid");
    assert!(r.text.contains("conversation_id"), "{}", r.text);
    let r = send(api.req(Method::POST, "/api/v1/memory/streaming_chat").body("{not json")).await;
    r.expect_error(400, "SchemaInvalid");
    // Nothing of the refused requests was stored.
    assert_eq!(api.stats().await["facts"]["total"].as_u64().unwrap_or(0), 0, "{}", api.stats().await);
}

#[tokio::test]
async fn conversations_stay_in_the_callers_tenant() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let r = chat(&nas, "memory", say("remember Person:sarah works_at Org:acme")).await;
    let id = conversation_id(&r.context());
    let other = chat(&acme, "memory", say("what do you know about Person:sarah")).await;
    assert_eq!(other.text(), "I don't know anything about Person:sarah yet.");
    // acme's own question is stored in acme, under another conversation.
    assert!(said_in(&acme, &id).await.is_empty());
    assert_eq!(said_in(&nas, &id).await.len(), 2);
    // Continuing nas's context with acme's key writes to acme only.
    let cont = chat(&acme, "memory", say_in("what do you know about Person:sarah", &r.context(), "MINIMAL")).await;
    assert!(cont.text().contains("don't know"), "{}", cont.text());
    let turns: Vec<u64> = said_in(&nas, &id).await.iter().map(|f| f["properties"]["turn"].as_u64().unwrap()).collect();
    assert_eq!(turns, [0, 1], "nothing of acme's turn in nas");
    let turns: Vec<u64> = said_in(&acme, &id).await.iter().map(|f| f["properties"]["turn"].as_u64().unwrap()).collect();
    assert_eq!(turns, [2, 3], "acme's continuation, numbered after the context");

    let anon = Api::new(&server, None);
    anon.post("/api/v1/memory/streaming_chat", &say("hi")).await.expect_hidden();
    let admin = Api::new(&server, Some(ADMIN));
    admin.post("/api/v1/memory/streaming_chat", &say("hi")).await.expect_error(400, "SchemaInvalid");
    let as_nas = send(
        admin
            .req(Method::POST, "/api/v1/memory/streaming_chat")
            .header("X-Tempora-Tenant", "nas")
            .json(&say("what do you know about Person:sarah")),
    )
    .await;
    assert_eq!(as_nas.status.as_u16(), 200);
    assert!(as_nas.text.contains("Org:acme"), "{}", as_nas.text);
}

/// Writes network files (`name.hocon` → content) and their manifest.
fn networks(dir: &Path, files: &[(&str, String)]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut manifest = String::from("{\n");
    for (name, content) in files {
        let path = dir.join(format!("{name}.hocon"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        manifest.push_str(&format!("  \"{name}.hocon\": true\n"));
    }
    manifest.push('}');
    std::fs::write(dir.join("manifest.hocon"), manifest).unwrap();
}

/// A network with one LLM front man.
fn front_man(base_url: &str, model: &str, tools: &[&str], extra: &str) -> String {
    let tools: Vec<String> = tools.iter().map(|t| format!("\"{t}\"")).collect();
    format!(
        r#"{{
  "llm_config": {{ "model_name": "{model}", "base_url": "{base_url}" }},
  "tools": [
    {{
      "name": "front",
      "function": {{ "description": "The front man." }},
      "instructions": "You are the front man of a test network.",
      "tools": [{}]{extra}
    }}
  ]
}}"#,
        tools.join(", ")
    )
}

fn serve_networks(files: &[(&str, String)]) -> (tempfile::TempDir, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("networks");
    networks(&dir, files);
    let server =
        Server::start(&tmp.path().join("data"), &[("TEMPORA_AGENTS_DIR", dir.to_str().unwrap()), ALLOW_PRIVATE]);
    (tmp, server)
}

#[tokio::test]
async fn an_llm_front_man_calls_other_networks_and_nested_agents() {
    let fake = FakeLlm::start();
    let url = &fake.base_url;
    let team = format!(
        r#"{{
  "llm_config": {{ "model_name": "agent-first-tool", "base_url": "{url}" }},
  "tools": [
    {{ "name": "lead", "function": {{ "description": "Leads." }}, "instructions": "Lead the team.", "tools": ["helper"] }},
    {{ "name": "helper", "function": {{ "description": "Helps.", "parameters": {{ "type": "object",
       "properties": {{ "inquiry": {{ "type": "string" }} }} }} }}, "instructions": "Help.", "tools": ["/memory"] }}
  ]
}}"#
    );
    let (_tmp, server) =
        serve_networks(&[("assistant", front_man(url, "agent-first-tool", &["/memory"], "")), ("team/nested", team)]);
    let api = Api::new(&server, None);

    let r = chat(
        &api,
        "assistant",
        json!({"user_message": {"type": "HUMAN", "text": "remember Person:bob likes Thing:tea"},
        "chat_filter": {"chat_filter_type": "MAXIMAL"}}),
    )
    .await;
    assert!(r.error().is_none(), "{:?}", r.lines);
    assert!(
        r.text().starts_with("Answer: ") && r.text().contains("Remembered: Person:bob likes Thing:tea."),
        "{}",
        r.text()
    );
    let kinds: Vec<&str> = r.lines.iter().map(|l| l["response"]["type"].as_str().unwrap()).collect();
    // The front man's call of /memory, then the memory front man's own call of
    // its remember tool one level deeper, their results, the answer.
    assert_eq!(
        kinds,
        ["AGENT", "AGENT", "AGENT_TOOL_RESULT", "AGENT_TOOL_RESULT", "AI", "AGENT_FRAMEWORK"],
        "{:?}",
        r.lines
    );
    assert!(r.lines[0]["response"]["text"].as_str().unwrap().starts_with("Invoking memory with"), "{}", r.lines[0]);
    let origin = |i: usize| -> Vec<String> {
        r.lines[i]["response"]["origin"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["tool"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(origin(0), ["front"]);
    assert_eq!(origin(1), ["front", "memory"]);
    assert!(r.lines[1]["response"]["text"].as_str().unwrap().starts_with("Invoking remember with"), "{}", r.lines[1]);
    let facts = api.list("subject=Person:bob&predicate=likes").await;
    assert_eq!(facts.len(), 1, "the other network wrote to the caller's memory");
    assert_eq!(facts[0]["source"], format!("Conversation:{}", conversation_id(&r.context())));

    // What the model was sent: the instructions, the user's message, the tool offered.
    let first = &fake.requests()[0].body;
    assert_eq!(first["messages"][0], json!({"role": "system", "content": "You are the front man of a test network."}));
    assert_eq!(first["messages"][1], json!({"role": "user", "content": "remember Person:bob likes Thing:tea"}));
    assert_eq!(first["tools"][0]["function"]["name"], "memory");
    assert!(first["tools"][0]["function"]["parameters"]["properties"]["inquiry"].is_object(), "{first}");
    // The tool result went back with the call's id.
    let second = &fake.requests()[1].body;
    let tool_msg = second["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(tool_msg["role"], "tool");
    assert_eq!(tool_msg["tool_call_id"], second["messages"][2]["tool_calls"][0]["id"]);

    // The next turn carries the conversation to the model.
    let before = fake.requests().len();
    chat(
        &api,
        "assistant",
        say_in("and Person:bob likes Thing:coffee? remember Person:bob drinks Thing:coffee", &r.context(), "MINIMAL"),
    )
    .await
    .last();
    let sent = &fake.requests()[before].body["messages"];
    assert_eq!(sent[1]["role"], "user");
    assert_eq!(sent[1]["content"], "remember Person:bob likes Thing:tea");
    assert_eq!(sent[2]["role"], "assistant");

    // Nested: lead → helper → /memory, each a level deeper in the origins.
    let r = chat(
        &api,
        "team/nested",
        json!({"user_message": {"type": "HUMAN", "text": "remember Person:eve likes Thing:chess"},
        "chat_filter": {"chat_filter_type": "MAXIMAL"}}),
    )
    .await;
    assert!(r.error().is_none(), "{:?}", r.lines);
    assert!(r.text().contains("Remembered: Person:eve likes Thing:chess."), "{}", r.text());
    let deepest = r.lines.iter().filter_map(|l| l["response"]["origin"].as_array()).map(Vec::len).max().unwrap();
    assert_eq!(deepest, 3, "the memory front man called by the helper reports under lead/helper/memory: {:?}", r.lines);
    assert_eq!(api.list("subject=Person:eve").await.len(), 1);
}

#[tokio::test]
async fn a_failing_or_looping_model_ends_the_stream_with_an_error() {
    let fake = FakeLlm::start();
    let url = &fake.base_url;
    let (_tmp, server) = serve_networks(&[
        ("failing", front_man(url, "fail-500", &[], "")),
        ("looping", front_man(url, "agent-loop", &["/memory"], "")),
        ("bounded", front_man(url, "agent-loop", &["/memory"], "").replacen('{', "{ \"max_iterations\": 3,", 1)),
        ("hasty", front_man(url, "agent-slow-loop", &["/memory"], "").replacen('{', "{ \"max_execution_seconds\": 1,", 1)),
        ("no_model", "{ \"tools\": [ { \"name\": \"front\", \"function\": { \"description\": \"d\" }, \"instructions\": \"i\" } ] }".to_string()),
    ]);
    let api = Api::new(&server, None);

    let r = chat(&api, "failing", say("hello")).await;
    assert_eq!(r.lines.len(), 1);
    let e = r.error().unwrap_or_else(|| panic!("{:?}", r.lines));
    assert!(e.contains("HTTP 500"), "{e}");
    assert!(r.text().starts_with("Error: "), "{}", r.text());
    // The context is the one before the turn: a retry continues from it.
    assert_eq!(r.context()["chat_histories"][0]["messages"].as_array().unwrap().len(), 1);

    let before = fake.requests().len();
    let r = chat(&api, "looping", say("hello")).await;
    let e = r.error().unwrap_or_else(|| panic!("{:?}", r.lines));
    assert!(e.contains("did not answer within 20 model calls"), "{e}");
    assert_eq!(fake.requests().len() - before, 20, "bounded by the iteration limit");

    let before = fake.requests().len();
    let r = chat(&api, "bounded", say("hello")).await;
    assert!(r.error().unwrap().contains("did not answer within 3 model calls"), "{:?}", r.lines);
    assert_eq!(fake.requests().len() - before, 3, "the network's max_iterations");

    let r = chat(&api, "hasty", say("hello")).await;
    assert!(
        r.error().unwrap().contains("did not finish within 1 s"),
        "the network's max_execution_seconds: {:?}",
        r.lines
    );

    let r = chat(&api, "no_model", say("hello")).await;
    let e = r.error().unwrap_or_else(|| panic!("{:?}", r.lines));
    assert!(e.contains("no llm_config"), "{e}");
    // Failed turns store no conversation.
    let msgs = api.list("predicate=in_conversation").await;
    assert!(msgs.is_empty(), "{msgs:?}");
}

#[tokio::test]
async fn sly_data_goes_upstream_only_where_allowed() {
    let fake = FakeLlm::start();
    let url = &fake.base_url;
    let allow = r#", "allow": { "to_upstream": { "sly_data": ["equals"] } }"#;
    let (_tmp, server) = serve_networks(&[("calc", front_man(url, "agent-first-tool", &[], allow))]);
    let api = Api::new(&server, None);
    let body = json!({"user_message": {"type": "HUMAN", "text": "compute"}, "sly_data": {"equals": 4, "secret": "x"},
        "chat_filter": {"chat_filter_type": "MAXIMAL"}});
    let r = chat(&api, "calc", body.clone()).await;
    assert_eq!(r.text(), "Answer: no tools");
    assert_eq!(r.last()["sly_data"], json!({"equals": 4}));
    for l in &r.lines {
        assert!(l["request"].get("sly_data").is_none(), "the echo leaves private data out: {l}");
    }
    for req in fake.requests() {
        assert!(!req.body.to_string().contains("secret"), "sly_data never reaches the model");
    }
    let r = chat(&api, "memory", body).await;
    assert!(r.last().get("sly_data").is_none(), "memory allows nothing upstream: {}", r.last());
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_turn() {
    let fake = FakeLlm::start();
    let url = &fake.base_url;
    let (_tmp, server) = serve_networks(&[("slow", front_man(url, "agent-slow-loop", &["/memory"], ""))]);
    let api = Api::new(&server, None);
    let resp = api.req(Method::POST, "/api/v1/slow/streaming_chat").json(&say("hello")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // The turn is running: it has called the model at least twice.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while fake.requests().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "the turn never called the model twice");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(resp);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at_drop = fake.requests().len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(fake.requests().len() <= at_drop + 1, "model calls stopped: {} then {}", at_drop, fake.requests().len());
    assert!(api.list("predicate=in_conversation").await.is_empty(), "nothing stored for a cancelled turn");
}

#[tokio::test]
async fn with_a_model_the_memory_front_man_calls_its_tools() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[
        ("TEMPORA_AGENTS_MEMORY_MODEL", "agent-remember"),
        ("TEMPORA_AGENTS_MEMORY_BASE_URL", &fake.base_url),
        ALLOW_PRIVATE,
        ("TEMPORA_TENANT_KEYS", "nas=nas-key-1"),
    ]);
    let api = Api::new(&server, Some(NAS_KEY));
    let r = chat(&api, "memory", say("Zed is into jazz, keep that in mind")).await;
    assert!(r.error().is_none(), "{:?}", r.lines);
    assert!(r.text().starts_with("Answer: ") && r.text().contains("Thing:jazz"), "{}", r.text());
    let facts = api.list("subject=Person:zed&predicate=likes").await;
    assert_eq!(facts.len(), 1, "remembered in the caller's tenant, whatever namespace the model named");
    assert_eq!(facts[0]["source"], format!("Conversation:{}", conversation_id(&r.context())));
    let requests = fake.requests();
    let offered: Vec<&str> =
        requests[0].body["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(offered, ["remember", "recall", "build_context", "history", "whats_changed"]);
    assert!(requests[0].body["messages"][0]["content"].as_str().unwrap().starts_with("You are the caller's memory"));
}
