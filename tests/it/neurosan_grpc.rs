//! neuro-san's gRPC API over a real socket, with tonic clients:
//! `ConciergeService/List`, the agent service routed by name
//! (`/{agent}.AgentService/...`, names with `/` included) giving the same
//! answers as the HTTP routes, UNIMPLEMENTED for unknown agents and
//! methods, health, reflection, keyed mode, the message-size limit, and
//! `StreamingChat` with the built-in `memory` network (MINIMAL and MAXIMAL,
//! a conversation continued through its chat_context).
//!
//! The tests run on a multi-threaded runtime: stopping the server blocks
//! the test's thread, and HTTP/2's graceful close needs the client's
//! connection tasks to keep running meanwhile.

use crate::common;
use crate::common::grpc::{self, channel, expect_code, request};
use crate::common::*;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::time::Duration;
use tempora::grpc::pb;
use tempora::grpc::structs::from_struct;
use tonic::transport::Channel;
use tonic::{Code, Status};

const LIST: &str = "/dev.cognizant_ai.neuro_san.api.grpc.concierge.ConciergeService/List";
const CONCIERGE: &str = "dev.cognizant_ai.neuro_san.api.grpc.concierge.ConciergeService";
const AGENT_SERVICE: &str = "dev.cognizant_ai.neuro_san.api.grpc.agent.AgentService";
const HUMAN: i32 = 2;
const AGENT_FRAMEWORK: i32 = 101;
const MINIMAL: i32 = 1;
const MAXIMAL: i32 = 2;

fn fixtures(which: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents").join(which)
}

/// A server with the gRPC listener; `agents` loads the good fixtures.
fn start(agents: bool, env: &[(&str, &str)]) -> (tempfile::TempDir, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let mut env: Vec<(&str, &str)> = env.to_vec();
    let dir = tmp.path().join("networks");
    let dir_s = dir.to_str().unwrap().to_string();
    if agents {
        copy_dir(&fixtures("good"), &dir);
        env.push(("TEMPORA_AGENTS_DIR", &dir_s));
    }
    let server = Server::start_with_grpc(&tmp.path().join("data"), &env);
    (tmp, server)
}

/// A unary call on any path, without a tenant header.
async fn unary<Req, Resp>(ch: &Channel, path: &str, msg: Req, key: Option<&str>) -> Result<Resp, Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    grpc::unary(ch, path, msg, key, None).await
}

async fn function(ch: &Channel, agent: &str, key: Option<&str>) -> Result<pb::agent::FunctionResponse, Status> {
    unary(ch, &format!("/{agent}.AgentService/Function"), pb::agent::FunctionRequest {}, key).await
}

async fn connectivity(ch: &Channel, agent: &str, key: Option<&str>) -> Result<pb::agent::ConnectivityResponse, Status> {
    unary(ch, &format!("/{agent}.AgentService/Connectivity"), pb::agent::ConnectivityRequest {}, key).await
}

async fn list(ch: &Channel, key: Option<&str>) -> Result<pb::concierge::ConciergeResponse, Status> {
    let mut client = pb::concierge::concierge_service_client::ConciergeServiceClient::new(ch.clone());
    client.list(request(pb::concierge::ConciergeRequest {}, key, None)).await.map(tonic::Response::into_inner)
}

/// One `StreamingChat` call, read to its end.
async fn chat(
    ch: &Channel,
    agent: &str,
    req: pb::agent::ChatRequest,
    key: Option<&str>,
    tenant: Option<&str>,
) -> Result<Vec<pb::agent::ChatResponse>, Status> {
    grpc::streaming(ch, &format!("/{agent}.AgentService/StreamingChat"), req, key, tenant).await
}

fn say(text: &str, context: Option<pb::chat::ChatContext>, filter: Option<i32>) -> pb::agent::ChatRequest {
    pb::agent::ChatRequest {
        sly_data: None,
        user_message: Some(pb::chat::ChatMessage { r#type: HUMAN, text: text.into(), ..Default::default() }),
        chat_context: context,
        chat_filter: filter.map(|f| pb::agent::ChatFilter { chat_filter_type: f }),
    }
}

fn struct_json(s: &Option<prost_types::Struct>) -> Value {
    s.as_ref().map(|s| Value::Object(from_struct(s))).unwrap_or(Value::Null)
}

/// The gRPC Function answer as the HTTP route's JSON (absent schemas left out).
fn function_json(f: &pb::agent::FunctionResponse) -> Value {
    let f = f.function.as_ref().expect("function set");
    let mut m = Map::new();
    m.insert("description".into(), json!(f.description));
    for (k, v) in [
        ("parameters", &f.parameters),
        ("sly_data_schema", &f.sly_data_schema),
        ("sly_data_output_schema", &f.sly_data_output_schema),
    ] {
        if v.is_some() {
            m.insert(k.into(), struct_json(v));
        }
    }
    json!({ "function": m })
}

fn connectivity_json(c: &pb::agent::ConnectivityResponse) -> Value {
    let info: Vec<Value> = c
        .connectivity_info
        .iter()
        .map(|i| {
            let mut m = json!({"origin": i.origin, "tools": i.tools, "display_as": i.display_as});
            if i.metadata.is_some() {
                m["metadata"] = struct_json(&i.metadata);
            }
            m
        })
        .collect();
    json!({"connectivity_info": info, "metadata": struct_json(&c.metadata)})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_function_and_connectivity_answer_as_over_http() {
    let (_tmp, server) = start(true, &[]);
    let ch = channel(&server).await;
    let api = Api::new(&server, None);

    let listed = list(&ch, None).await.unwrap();
    let mut names: Vec<&str> = listed.agents.iter().map(|a| a.agent_name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["hello", "memory", "music", "passthrough"], "deep/math_guy is served but not listed");
    let http_list = api.get("/api/v1/list").await.expect(200).clone();
    let as_json: Vec<Value> = listed
        .agents
        .iter()
        .map(|a| json!({"agent_name": a.agent_name, "description": a.description, "tags": a.tags}))
        .collect();
    assert_eq!(json!({ "agents": as_json }), http_list);
    let memory = listed.agents.iter().find(|a| a.agent_name == "memory").unwrap();
    assert!(!memory.description.is_empty());

    for agent in ["memory", "deep/math_guy", "passthrough", "music"] {
        let f = function(&ch, agent, None).await.unwrap_or_else(|s| panic!("{agent}: {s:?}"));
        assert!(!f.function.as_ref().unwrap().description.is_empty(), "{agent}");
        let http = api.get(&format!("/api/v1/{agent}/function")).await.expect(200).clone();
        assert_eq!(function_json(&f), http, "{agent}: the same function as over HTTP");

        let c = connectivity(&ch, agent, None).await.unwrap_or_else(|s| panic!("{agent}: {s:?}"));
        let http = api.get(&format!("/api/v1/{agent}/connectivity")).await.expect(200).clone();
        assert_eq!(connectivity_json(&c), http, "{agent}: the same connectivity as over HTTP");
    }

    let c = connectivity(&ch, "memory", None).await.unwrap();
    let front = c.connectivity_info.iter().find(|i| i.origin == "memory").expect("the front man");
    for t in ["remember", "recall", "build_context", "history", "whats_changed"] {
        assert!(front.tools.iter().any(|x| x == t), "{t} in {:?}", front.tools);
    }
    let c = connectivity(&ch, "passthrough", None).await.unwrap();
    assert!(c.connectivity_info.iter().flat_map(|i| &i.tools).any(|t| t == "/deep/math_guy"), "{c:?}");
    let f = function(&ch, "memory", None).await.unwrap();
    assert!(f.function.unwrap().parameters.is_some(), "memory takes parameters");

    drop(ch);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_agents_and_methods_are_unimplemented() {
    let (_tmp, server) = start(false, &[]);
    let ch = channel(&server).await;
    for agent in ["nobody", "deep/nobody", "dev.cognizant_ai.neuro_san.api.grpc.agent"] {
        expect_code(function(&ch, agent, None).await, Code::Unimplemented);
        expect_code(connectivity(&ch, agent, None).await, Code::Unimplemented);
        expect_code(chat(&ch, agent, say("hi", None, None), None, None).await, Code::Unimplemented);
    }
    let r: Result<pb::agent::FunctionResponse, _> =
        unary(&ch, "/memory.AgentService/Dance", pb::agent::FunctionRequest {}, None).await;
    expect_code(r, Code::Unimplemented);
    let r: Result<pb::agent::FunctionResponse, _> =
        unary(&ch, "/memory/Function", pb::agent::FunctionRequest {}, None).await;
    expect_code(r, Code::Unimplemented);
    let r: Result<pb::concierge::ConciergeResponse, _> = unary(
        &ch,
        "/dev.cognizant_ai.neuro_san.api.grpc.concierge.ConciergeService/Other",
        pb::concierge::ConciergeRequest {},
        None,
    )
    .await;
    expect_code(r, Code::Unimplemented);
    // The known ones still answer on the same connection.
    function(&ch, "memory", None).await.unwrap();
    let listed: pb::concierge::ConciergeResponse =
        unary(&ch, LIST, pb::concierge::ConciergeRequest {}, None).await.unwrap();
    assert_eq!(listed.agents.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reports_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    let (_tmp, server) = start(false, &keyed());
    let mut health = HealthClient::new(channel(&server).await);
    // No key needed, even in keyed mode.
    for service in ["", CONCIERGE, AGENT_SERVICE] {
        let r = health.check(HealthCheckRequest { service: service.into() }).await.unwrap().into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "{service:?}");
    }
    let unknown = health.check(HealthCheckRequest { service: "no.such.Service".into() }).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_and_describes_the_services() {
    use prost::Message;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;

    let (_tmp, server) = start(false, &[]);
    let mut client = ServerReflectionClient::new(channel(&server).await);
    let ask = |m: MessageRequest| ServerReflectionRequest { host: String::new(), message_request: Some(m) };
    let requests = vec![
        ask(MessageRequest::ListServices(String::new())),
        ask(MessageRequest::FileContainingSymbol(AGENT_SERVICE.into())),
    ];
    let mut answers = client.server_reflection_info(futures_util::stream::iter(requests)).await.unwrap().into_inner();

    let Some(MessageResponse::ListServicesResponse(listed)) =
        answers.message().await.unwrap().unwrap().message_response
    else {
        panic!("not a service list")
    };
    let names: Vec<&str> = listed.service.iter().map(|s| s.name.as_str()).collect();
    for want in [CONCIERGE, AGENT_SERVICE, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }

    let Some(MessageResponse::FileDescriptorResponse(files)) =
        answers.message().await.unwrap().unwrap().message_response
    else {
        panic!("not a file descriptor")
    };
    let files: Vec<prost_types::FileDescriptorProto> =
        files.file_descriptor_proto.iter().map(|b| prost_types::FileDescriptorProto::decode(&b[..]).unwrap()).collect();
    let agent = files.iter().find(|f| f.package() == "dev.cognizant_ai.neuro_san.api.grpc.agent").expect("agent.proto");
    let service = agent.service.iter().find(|s| s.name() == "AgentService").unwrap();
    let mut methods: Vec<&str> = service.method.iter().map(|m| m.name()).collect();
    methods.sort();
    assert_eq!(methods, ["Connectivity", "Function", "StreamingChat"]);
    let streaming = service.method.iter().find(|m| m.name() == "StreamingChat").unwrap();
    assert!(streaming.server_streaming() && !streaming.client_streaming());
    let chat_request = agent.message_type.iter().find(|m| m.name() == "ChatRequest").unwrap();
    let numbers: Vec<(&str, i32)> = chat_request.field.iter().map(|f| (f.name(), f.number())).collect();
    assert_eq!(numbers, [("sly_data", 3), ("user_message", 4), ("chat_context", 5), ("chat_filter", 6)]);

    // v1alpha too, for older tools.
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient as AlphaClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest as AlphaRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse as AlphaResponse;
    let mut alpha = AlphaClient::new(channel(&server).await);
    let req = tonic_reflection::pb::v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(AlphaRequest::ListServices(String::new())),
    };
    let mut answers = alpha.server_reflection_info(futures_util::stream::iter(vec![req])).await.unwrap().into_inner();
    let Some(AlphaResponse::ListServicesResponse(listed)) = answers.message().await.unwrap().unwrap().message_response
    else {
        panic!("not a service list")
    };
    assert!(listed.service.iter().any(|s| s.name == CONCIERGE), "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_mode_needs_a_key_in_the_metadata() {
    let (_tmp, server) = start(true, &keyed());
    let ch = channel(&server).await;
    for key in [None, Some("wrong-key")] {
        expect_code(list(&ch, key).await, Code::Unauthenticated);
        expect_code(function(&ch, "memory", key).await, Code::Unauthenticated);
        expect_code(connectivity(&ch, "deep/math_guy", key).await, Code::Unauthenticated);
        // Even an unknown agent: without a key nothing about the networks shows.
        expect_code(function(&ch, "nobody", key).await, Code::Unauthenticated);
        expect_code(chat(&ch, "memory", say("hi", None, None), key, None).await, Code::Unauthenticated);
    }
    let listed = list(&ch, Some(NAS_KEY)).await.unwrap();
    assert!(listed.agents.iter().any(|a| a.agent_name == "memory"), "{listed:?}");
    function(&ch, "memory", Some(NAS_KEY)).await.unwrap();
    connectivity(&ch, "deep/math_guy", Some(ACME_KEY)).await.unwrap();
    expect_code(function(&ch, "nobody", Some(NAS_KEY)).await, Code::Unimplemented);
    function(&ch, "memory", Some(ADMIN)).await.unwrap();

    // A chat is about one tenant: an admin must name it, and only a configured one.
    expect_code(chat(&ch, "memory", say("hi", None, None), Some(ADMIN), None).await, Code::InvalidArgument);
    expect_code(
        chat(&ch, "memory", say("hi", None, None), Some(ADMIN), Some("no-such-tenant")).await,
        Code::Unauthenticated,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_body_limit_is_refused() {
    let (_tmp, server) = start(false, &[("TEMPORA_MAX_BODY_BYTES", "4096")]);
    let ch = channel(&server).await;
    let big = "x".repeat(8192);
    let err = chat(&ch, "memory", say(&big, None, None), None, None).await.unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
}

/// The last response, asserted to be the final AGENT_FRAMEWORK answer with a
/// chat_context; its text and context.
#[track_caller]
fn final_answer(responses: &[pb::agent::ChatResponse]) -> (String, pb::chat::ChatContext) {
    let last = responses.last().expect("at least one response").response.as_ref().expect("response set");
    assert_eq!(last.r#type, AGENT_FRAMEWORK, "{last:?}");
    let context = last.chat_context.clone().expect("the final message carries the chat_context");
    assert!(!context.chat_histories.is_empty(), "{context:?}");
    (last.text.clone(), context)
}

// Needs `neurosan::turn::start` (the memory front man's turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_chat_remembers_and_continues_through_the_chat_context() {
    let (_tmp, server) = start(false, &[]);
    let ch = channel(&server).await;

    // MINIMAL, also when the filter is absent or UNKNOWN: only the final answer.
    for (i, filter) in [None, Some(0), Some(MINIMAL)].into_iter().enumerate() {
        let fact = format!("remember Person:sarah{i} works_at Org:acme");
        let responses = chat(&ch, "memory", say(&fact, None, filter), None, None).await.unwrap();
        assert_eq!(responses.len(), 1, "filter {filter:?}: {responses:?}");
        let (text, _) = final_answer(&responses);
        assert!(text.contains(&format!("Person:sarah{i} works_at Org:acme")), "{text}");
        assert!(responses[0].request.is_none(), "MINIMAL does not echo the request");
    }

    let first = chat(&ch, "memory", say("remember Person:sarah works_at Org:acme", None, Some(MINIMAL)), None, None)
        .await
        .unwrap();
    assert_eq!(first.len(), 1, "{first:?}");
    let (text, context) = final_answer(&first);
    assert!(text.contains("Person:sarah works_at Org:acme"), "{text}");

    // The context sent back unchanged continues the conversation.
    let second =
        chat(&ch, "memory", say("what do you know about Person:sarah", Some(context), None), None, None).await.unwrap();
    assert_eq!(second.len(), 1, "{second:?}");
    let (text, context) = final_answer(&second);
    assert!(text.contains("Org:acme"), "{text}");
    assert!(!context.chat_histories.is_empty());

    // MAXIMAL: every message, each echoing the request, the answer last.
    let all =
        chat(&ch, "memory", say("what do you know about Person:sarah", None, Some(MAXIMAL)), None, None).await.unwrap();
    assert!(all.len() > 1, "MAXIMAL streams more than the answer: {all:?}");
    for r in &all {
        let echoed = r.request.as_ref().unwrap_or_else(|| panic!("request echoed: {r:?}"));
        assert_eq!(echoed.user_message.as_ref().unwrap().text, "what do you know about Person:sarah");
    }
    let (text, _) = final_answer(&all);
    assert!(text.contains("Org:acme"), "{text}");
}

// Needs `neurosan::turn::start` (the memory front man's turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_chat_runs_for_the_callers_tenant() {
    let (_tmp, server) = start(false, &keyed());
    let ch = channel(&server).await;
    let remembered =
        chat(&ch, "memory", say("remember Person:sarah works_at Org:acme", None, None), Some(NAS_KEY), None)
            .await
            .unwrap();
    let (text, _) = final_answer(&remembered);
    assert!(text.contains("Person:sarah works_at Org:acme"), "{text}");

    let ask = || say("what do you know about Person:sarah", None, None);
    let (text, _) = final_answer(&chat(&ch, "memory", ask(), Some(NAS_KEY), None).await.unwrap());
    assert!(text.contains("Org:acme"), "the key's tenant knows: {text}");
    let (text, _) = final_answer(&chat(&ch, "memory", ask(), Some(ADMIN), Some("nas")).await.unwrap());
    assert!(text.contains("Org:acme"), "an admin naming the tenant knows: {text}");
    let (text, _) = final_answer(&chat(&ch, "memory", ask(), Some(ACME_KEY), None).await.unwrap());
    assert!(!text.contains("Org:acme"), "another tenant does not: {text}");
}

/// A server with one network whose front man is a model of the fake
/// endpoint that never finishes (`agent-slow-loop`: a tool call every 0.5 s).
fn start_slow_network(fake: &common::fake_llm::FakeLlm) -> (tempfile::TempDir, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("networks");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("manifest.hocon"), "{ \"slow.hocon\": true }").unwrap();
    let network = format!(
        r#"{{
  "llm_config": {{ "model_name": "agent-slow-loop", "base_url": "{}" }},
  "tools": [
    {{
      "name": "front",
      "function": {{ "description": "Never done." }},
      "instructions": "You are the front man of a test network.",
      "tools": ["/memory"]
    }}
  ]
}}"#,
        fake.base_url
    );
    std::fs::write(dir.join("slow.hocon"), network).unwrap();
    let env = [("TEMPORA_AGENTS_DIR", dir.to_str().unwrap()), ("TEMPORA_OUTBOUND_ALLOW_PRIVATE", "true")];
    let server = Server::start_with_grpc(&tmp.path().join("data"), &env);
    (tmp, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_cancels_the_turn() {
    let fake = common::fake_llm::FakeLlm::start();
    let (_tmp, server) = start_slow_network(&fake);
    let ch = channel(&server).await;
    let call = tokio::spawn({
        let ch = ch.clone();
        async move { chat(&ch, "slow", say("hello", None, None), None, None).await }
    });
    tokio::time::sleep(Duration::from_millis(1200)).await;
    call.abort();
    let _ = call.await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at_cancel = fake.requests().len();
    assert!(at_cancel >= 2, "the turn was running: {at_cancel} model calls");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = fake.requests().len();
    assert!(later <= at_cancel + 1, "model calls stopped: {at_cancel} then {later}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_ends_an_open_chat_with_an_error_message() {
    let fake = common::fake_llm::FakeLlm::start();
    let (_tmp, mut server) = start_slow_network(&fake);
    let ch = channel(&server).await;
    let call = tokio::spawn({
        let ch = ch.clone();
        async move { chat(&ch, "slow", say("hello", None, None), None, None).await }
    });
    tokio::time::sleep(Duration::from_millis(1000)).await;
    server.sigterm();
    let responses = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the stream ends soon after SIGTERM")
        .unwrap()
        .expect("the call ends normally");
    let last = responses.last().expect("a last message").response.clone().unwrap();
    assert_eq!(last.r#type, AGENT_FRAMEWORK, "{last:?}");
    assert!(last.text.contains("shutting down"), "{last:?}");
    drop(ch);
    let status = tokio::task::spawn_blocking(move || server.wait_exit(Duration::from_secs(10))).await.unwrap();
    assert!(status.is_some_and(|s| s.success()), "exited cleanly: {status:?}");
}
