//! The Agent Protocol v1 at `/ap/v1` over a real socket: a task driven
//! through its steps to the last (and one step past it), pagination and
//! its edges, the protocol's 404 and 422 shapes, multipart artifacts
//! (bytes compared, several chunks, path traversal and the size limit
//! refused), tenancy, the task's history as facts, and a restart in the
//! middle of a task.

use crate::common;
use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

const TASKS: &str = "/ap/v1/agent/tasks";

async fn create(api: &Api, body: Value) -> Value {
    let r = api.post(TASKS, &body).await;
    r.expect(200).clone()
}

async fn step(api: &Api, task: &str, body: Option<Value>) -> Value {
    let path = format!("{TASKS}/{task}/steps");
    let req = match body {
        Some(b) => api.req(Method::POST, &path).json(&b),
        // No body at all, with a JSON content type, as some clients send.
        None => api.req(Method::POST, &path).header("content-type", "application/json").header("content-length", "0"),
    };
    let r = send(req).await;
    r.expect(200).clone()
}

/// A multipart/form-data body with a `file` part and optional fields.
fn multipart(file_name: &str, bytes: &[u8], fields: &[(&str, &str)]) -> (String, Vec<u8>) {
    let boundary = "----tempora-test-boundary-7d1f";
    let mut body = Vec::new();
    for (k, v) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n").as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(api: &Api, task: &str, file_name: &str, bytes: &[u8], fields: &[(&str, &str)]) -> Resp {
    let (ct, body) = multipart(file_name, bytes, fields);
    send(api.req(Method::POST, &format!("{TASKS}/{task}/artifacts")).header("content-type", ct).body(body)).await
}

async fn download(api: &Api, task: &str, artifact: &str) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let resp = api
        .req(Method::GET, &format!("{TASKS}/{task}/artifacts/{artifact}"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    (status, headers, resp.bytes().await.unwrap().to_vec())
}

#[track_caller]
fn expect_message(r: &Resp, status: u16) {
    assert_eq!(r.status.as_u16(), status, "{}", r.text);
    assert!(r.header("content-type").unwrap_or("").starts_with("application/json"), "{:?}", r.headers);
    if status == 404 {
        assert_eq!(r.json.as_object().map(|o| o.len()), Some(1), "{}", r.text);
    }
    assert!(r.json["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);
}

fn id(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_else(|| panic!("no {key} in {v}")).to_string()
}

#[tokio::test]
async fn a_task_runs_through_its_steps_to_the_last_and_its_history_is_facts() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let task = create(
        &api,
        json!({"input": "remember Person:sarah works_at Org:acme\n\nwhat do you know about Person:sarah", "additional_input": {"note": 1}}),
    )
    .await;
    let t = id(&task, "task_id");
    assert_eq!(task["input"].as_str().unwrap().lines().count(), 3);
    assert_eq!(task["additional_input"], json!({"note": 1}));
    assert_eq!(task["artifacts"], json!([]));

    // Step 1: no body; the first line of the plan.
    let s1 = step(&api, &t, None).await;
    assert_eq!(
        (s1["task_id"].as_str(), s1["status"].as_str(), s1["is_last"].as_bool()),
        (Some(&*t), Some("completed"), Some(false))
    );
    assert!(s1["output"].as_str().unwrap().contains("Remembered"), "{s1}");
    assert_eq!(s1["input"], Value::Null);
    assert_eq!(s1["artifacts"], json!([]));

    // A step with its own input runs it first, then the plan's next line:
    // here the last, so the step is last and its answer saved as an
    // agent-created artifact.
    let s2 = step(
        &api,
        &t,
        Some(json!({"input": "remember Person:sarah lives_in City:paris", "additional_input": {"save_as": "answer.md", "relative_path": "out"}})),
    )
    .await;
    assert_eq!((s2["is_last"].as_bool(), s2["name"].as_str()), (Some(true), Some("input, then plan line 2")), "{s2}");
    assert_eq!(s2["input"], "remember Person:sarah lives_in City:paris");
    let answers = s2["additional_output"]["answers"].as_array().unwrap();
    assert_eq!(answers.iter().map(|a| a["ran"].as_str().unwrap()).collect::<Vec<_>>(), ["input", "plan line"]);
    assert!(answers[0]["output"].as_str().unwrap().contains("Remembered"), "{s2}");
    let answer = s2["output"].as_str().unwrap().to_string();
    assert!(answer.ends_with(answers[1]["output"].as_str().unwrap()), "{s2}");
    assert!(answer.contains("works_at Org:acme") && answer.contains("City:paris"), "{answer}");
    assert_eq!(s2["additional_output"]["plan"], json!({"lines": 2, "lines_run": 2}));
    let made = &s2["artifacts"][0];
    assert_eq!((made["agent_created"].as_bool(), made["file_name"].as_str()), (Some(true), Some("answer.md")));
    assert_eq!(made["relative_path"], "out");
    let (status, headers, bytes) = download(&api, &t, &id(made, "artifact_id")).await;
    assert_eq!(status, 200);
    assert_eq!(bytes, answer.as_bytes());
    assert_eq!(headers["content-disposition"], "attachment; filename=\"answer.md\"");

    // A step after the last: 200, a clear output, nothing run.
    let after = step(&api, &t, Some(json!({"input": "remember Person:sarah likes Thing:tea"}))).await;
    assert_eq!(after["is_last"], true);
    assert!(after["output"].as_str().unwrap().contains("already completed"), "{after}");
    let about = api.list("subject=Person:sarah&predicate=likes").await;
    assert!(about.is_empty(), "a step after the last ran: {about:?}");

    // Steps are listed in order and can be read one by one.
    let steps = api.get(&format!("{TASKS}/{t}/steps")).await;
    let steps = steps.expect(200);
    let ids: Vec<String> = steps["steps"].as_array().unwrap().iter().map(|s| id(s, "step_id")).collect();
    assert_eq!(ids, [id(&s1, "step_id"), id(&s2, "step_id"), id(&after, "step_id")]);
    assert_eq!(steps["pagination"], json!({"total_items": 3, "total_pages": 1, "current_page": 1, "page_size": 10}));
    let one = api.get(&format!("{TASKS}/{t}/steps/{}", id(&s2, "step_id"))).await;
    let one = one.expect(200);
    assert_eq!(one["output"], answer.as_str());
    assert_eq!(one["artifacts"][0]["artifact_id"], made["artifact_id"]);
    let task = api.get(&format!("{TASKS}/{t}")).await.expect(200).clone();
    assert_eq!(task["status"], "completed");
    assert_eq!(task["artifacts"].as_array().unwrap().len(), 1);

    // The status history is facts: created, running, completed, each closed by the next.
    let versions = api.list(&format!("subject=Task:{t}&predicate=task.status&status=any")).await;
    let mut by_time: Vec<&Value> = versions.iter().collect();
    by_time.sort_by_key(|f| f["created_tx"].as_u64());
    let objects: Vec<&str> = by_time.iter().map(|f| f["object"].as_str().unwrap()).collect();
    assert_eq!(objects, ["created", "running", "completed"], "{versions:?}");
    assert_eq!(by_time[0]["status"], "superseded");
    assert_eq!(by_time[2]["status"], "active");
    // As of its creation, the task was only created.
    let at = by_time[0]["created_tx"].as_u64().unwrap();
    let then = api.list(&format!("subject=Task:{t}&predicate=task.status&as_of_tx={at}")).await;
    assert_eq!(then.iter().map(|f| f["object"].clone()).collect::<Vec<_>>(), [json!("created")]);
    let edges = api.list(&format!("predicate=step.task&object=Task:{t}")).await;
    assert_eq!(edges.len(), 3);

    // `done` ends a task at once.
    let t2 = id(&create(&api, json!({"input": "remember A:1 p 1\nremember A:1 q 2"})).await, "task_id");
    let done = step(&api, &t2, Some(json!({"input": "done"}))).await;
    assert_eq!(done["is_last"], true);
    assert!(api.list("subject=A:1").await.is_empty());
}

/// The loop of the Agent Protocol client's own minimal example: a task with
/// an input, then steps with `input=str(i)` until one `is_last`. Every step
/// advances the task's work, so the loop ends when the plan has run.
#[tokio::test]
async fn steps_with_input_advance_the_task_so_a_client_loop_ends() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let t = id(&create(&api, json!({"input": "remember Person:zoe likes Thing:tea\nwhat do you know about Person:zoe"})).await, "task_id");
    let mut steps = Vec::new();
    for i in 1..=10 {
        let s = step(&api, &t, Some(json!({"input": i.to_string()}))).await;
        assert_eq!(s["status"], "completed", "{s}");
        let last = s["is_last"].as_bool().unwrap();
        steps.push(s);
        if last {
            break;
        }
    }
    assert_eq!(steps.len(), 2, "one step per plan line: {steps:?}");
    assert_eq!(steps[0]["name"], "input, then plan line 1");
    assert!(steps[1]["output"].as_str().unwrap().contains("likes Thing:tea"), "{}", steps[1]);
    assert_eq!(api.list("subject=Person:zoe&predicate=likes").await.len(), 1);
    assert_eq!(api.get(&format!("{TASKS}/{t}")).await.expect(200)["status"], "completed");

    // A task without input: the first step's input is its work, and that step is last.
    let t3 = id(&create(&api, json!({})).await, "task_id");
    let ran = step(&api, &t3, Some(json!({"input": "remember B:1 p 1"}))).await;
    assert_eq!((ran["is_last"].as_bool(), ran["name"].as_str()), (Some(true), Some("input")), "{ran}");
    assert_eq!(api.list("subject=B:1").await.len(), 1);
    let empty = id(&create(&api, json!({})).await, "task_id");
    let end = step(&api, &empty, Some(json!({"input": null}))).await;
    assert_eq!((end["is_last"].as_bool(), end["name"].as_str()), (Some(true), Some("end")), "{end}");

    // A conversation: step inputs are turns and the plan waits; it ends on
    // `done` or a step without input when no line is left.
    let c = id(
        &create(&api, json!({"input": "remember C:1 p 1", "additional_input": {"conversation": true}})).await,
        "task_id",
    );
    for n in 2..=3 {
        let turn = step(&api, &c, Some(json!({"input": format!("remember C:{n} p {n}")}))).await;
        assert_eq!((turn["is_last"].as_bool(), turn["name"].as_str()), (Some(false), Some("input")), "{turn}");
    }
    let line = step(&api, &c, None).await;
    assert_eq!((line["is_last"].as_bool(), line["name"].as_str()), (Some(true), Some("plan line 1")), "{line}");
    for n in 1..=3 {
        assert_eq!(api.list(&format!("subject=C:{n}")).await.len(), 1, "C:{n}");
    }
    let bad = api.post(TASKS, &json!({"input": "x", "additional_input": {"conversation": "yes"}})).await;
    expect_message(&bad, 422);
}

#[tokio::test]
async fn pagination_has_all_four_numbers_and_its_edges_are_plain() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let empty = api.get(TASKS).await;
    assert_eq!(
        *empty.expect(200),
        json!({"tasks": [], "pagination": {"total_items": 0, "total_pages": 0, "current_page": 1, "page_size": 10}})
    );
    let mut made = Vec::new();
    for n in 0..3 {
        made.push(id(&create(&api, json!({"input": format!("remember C:{n} p {n}")})).await, "task_id"));
    }
    for page in 1..=3 {
        let r = api.get(&format!("{TASKS}?current_page={page}&page_size=1")).await;
        let r = r.expect(200);
        assert_eq!(r["tasks"].as_array().unwrap().len(), 1);
        assert_eq!(r["tasks"][0]["task_id"], made[page - 1].as_str());
        assert_eq!(r["pagination"], json!({"total_items": 3, "total_pages": 3, "current_page": page, "page_size": 1}));
    }
    // The aliases, and pages past the end.
    let r = api.get(&format!("{TASKS}?page=2&pageSize=2")).await;
    assert_eq!(r.expect(200)["tasks"].as_array().unwrap().len(), 1);
    for huge in ["4", "1000000", "99999999999999999999999"] {
        let r = api.get(&format!("{TASKS}?current_page={huge}")).await;
        let r = r.expect(200);
        assert_eq!(r["tasks"], json!([]));
        assert_eq!(r["pagination"]["total_items"], 3);
        assert_eq!(r["pagination"]["total_pages"], 1);
    }
    for bad in ["page_size=0", "page_size=101", "current_page=0", "current_page=abc", "page_size=-1"] {
        expect_message(&api.get(&format!("{TASKS}?{bad}")).await, 422);
    }
    // Steps and artifacts of a fresh task: empty pages.
    let t = &made[0];
    for (what, path) in [("steps", "steps"), ("artifacts", "artifacts")] {
        let r = api.get(&format!("{TASKS}/{t}/{path}?page_size=1&current_page=5")).await;
        assert_eq!(
            *r.expect(200),
            json!({what: [], "pagination": {"total_items": 0, "total_pages": 0, "current_page": 5, "page_size": 1}})
        );
    }
    step(&api, t, None).await;
    for n in 0..3 {
        let r = upload(&api, t, &format!("f{n}.txt"), format!("file {n}").as_bytes(), &[]).await;
        r.expect(200);
    }
    let r = api.get(&format!("{TASKS}/{t}/artifacts?current_page=3&page_size=1")).await;
    let r = r.expect(200);
    assert_eq!(r["artifacts"][0]["file_name"], "f2.txt");
    assert_eq!(r["pagination"]["total_pages"], 3);
    let r = api.get(&format!("{TASKS}/{t}/steps?current_page=2&page_size=1")).await;
    assert_eq!(r.expect(200)["steps"], json!([]));
}

#[tokio::test]
async fn unknown_ids_are_404_with_a_message_and_bad_input_is_422() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let t = id(&create(&api, json!({"input": "remember D:1 p 1"})).await, "task_id");
    let unknown = "0190a0b0-0000-7000-8000-000000000000";
    for path in [
        format!("{TASKS}/{unknown}"),
        format!("{TASKS}/not-a-uuid"),
        format!("{TASKS}/{unknown}/steps"),
        format!("{TASKS}/{unknown}/artifacts"),
        format!("{TASKS}/{t}/steps/{unknown}"),
        format!("{TASKS}/{t}/artifacts/{unknown}"),
        format!("{TASKS}/{t}/artifacts/x"),
    ] {
        expect_message(&api.get(&path).await, 404);
    }
    expect_message(&api.post(&format!("{TASKS}/{unknown}/steps"), &json!({})).await, 404);
    expect_message(&upload(&api, unknown, "a.txt", b"x", &[]).await, 404);
    // A step of one task is not found under another.
    let s = step(&api, &t, None).await;
    let other = id(&create(&api, json!({})).await, "task_id");
    expect_message(&api.get(&format!("{TASKS}/{other}/steps/{}", id(&s, "step_id"))).await, 404);

    for body in [
        json!({"input": 5}),
        json!({"additional_input": "x"}),
        json!([1]),
        json!("text"),
        json!({"additional_input": {"agent": "nope"}}),
        json!({"additional_input": {"steps": "some"}}),
    ] {
        expect_message(&api.post(TASKS, &body).await, 422);
    }
    let bad_json = send(api.req(Method::POST, TASKS).header("content-type", "application/json").body("{nope")).await;
    expect_message(&bad_json, 422);
    for body in
        [json!({"input": ["x"]}), json!({"additional_input": 3}), json!({"additional_input": {"save_as": "../up.txt"}})]
    {
        expect_message(&api.post(&format!("{TASKS}/{other}/steps"), &body).await, 422);
    }
    // GETs may carry JSON bodies: they are ignored.
    let r = send(api.req(Method::GET, TASKS).json(&json!({"whatever": true}))).await;
    assert_eq!(r.expect(200)["pagination"]["total_items"], 2);
    // A task created with an empty body has all its fields, nulls included.
    let bare =
        send(api.req(Method::POST, TASKS).header("content-type", "application/json").header("content-length", "0"))
            .await;
    let bare = bare.expect(200);
    for k in ["task_id", "input", "additional_input", "artifacts"] {
        assert!(bare.get(k).is_some(), "{k} missing: {bare}");
    }
    assert_eq!(bare["artifacts"], json!([]));
}

#[tokio::test]
async fn artifacts_round_trip_in_chunks_and_bad_paths_and_sizes_are_refused() {
    let (_tmp, server) = fresh(&[("TEMPORA_MAX_BODY_BYTES", "300000")]);
    let api = Api::new(&server, None);
    let t = id(&create(&api, json!({"input": "remember E:1 p 1"})).await, "task_id");
    // Several chunks (64 KiB each) and an odd tail.
    let big: Vec<u8> = (0..200_003u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let a = upload(&api, &t, "data.bin", &big, &[("relative_path", "inputs/raw")]).await;
    let a = a.expect(200).clone();
    assert_eq!(
        (a["agent_created"].as_bool(), a["file_name"].as_str(), a["relative_path"].as_str()),
        (Some(false), Some("data.bin"), Some("inputs/raw"))
    );
    let (status, headers, bytes) = download(&api, &t, &id(&a, "artifact_id")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/octet-stream");
    assert_eq!(headers["content-disposition"], "attachment; filename=\"data.bin\"");
    assert_eq!(bytes.len(), big.len());
    assert!(bytes == big, "downloaded bytes differ");
    let small = upload(&api, &t, "dir/note.txt", b"hello", &[]).await;
    let small = small.expect(200).clone();
    assert_eq!(small["file_name"], "note.txt");
    assert_eq!(small["relative_path"], Value::Null);
    assert_eq!(download(&api, &t, &id(&small, "artifact_id")).await.2, b"hello");
    let empty = upload(&api, &t, "empty.txt", b"", &[]).await;
    assert_eq!(download(&api, &t, &id(empty.expect(200), "artifact_id")).await.2, b"");
    // The task lists its artifacts.
    let task = api.get(&format!("{TASKS}/{t}")).await;
    assert_eq!(task.expect(200)["artifacts"].as_array().unwrap().len(), 3);

    for (name, fields) in [
        ("x.txt", vec![("relative_path", "../x")]),
        ("x.txt", vec![("relative_path", "/etc/passwd")]),
        ("x.txt", vec![("relative_path", "a/../../b")]),
        ("../x", vec![]),
        ("/etc/passwd", vec![]),
    ] {
        expect_message(&upload(&api, &t, name, b"nope", &fields).await, 422);
    }
    let r = send(
        api.req(Method::POST, &format!("{TASKS}/{t}/artifacts?relative_path=..%2Fx"))
            .header("content-type", multipart("x.txt", b"x", &[]).0)
            .body(multipart("x.txt", b"x", &[]).1),
    )
    .await;
    expect_message(&r, 422);
    // No file part, and not multipart at all.
    let (ct, _) = multipart("x", b"", &[]);
    let r =
        send(api.req(Method::POST, &format!("{TASKS}/{t}/artifacts")).header("content-type", ct).body("--x--")).await;
    assert!(r.status.as_u16() == 422, "{}", r.text);
    expect_message(&api.post(&format!("{TASKS}/{t}/artifacts"), &json!({"file": "x"})).await, 422);
    // Over the limit.
    let huge = vec![7u8; 400_000];
    let r = upload(&api, &t, "huge.bin", &huge, &[]).await;
    expect_message(&r, 413);
    let list = api.get(&format!("{TASKS}/{t}/artifacts")).await;
    assert_eq!(list.expect(200)["pagination"]["total_items"], 3, "refused uploads are not listed");
    // Another task's artifact is not found under this task.
    let other = id(&create(&api, json!({})).await, "task_id");
    assert_eq!(download(&api, &other, &id(&a, "artifact_id")).await.0, 404);
}

#[tokio::test]
async fn tasks_are_per_tenant() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let t = id(&create(&nas, json!({"input": "remember F:1 p 1"})).await, "task_id");
    step(&nas, &t, None).await;
    let a = upload(&nas, &t, "n.txt", b"nas only", &[]).await;
    let a = id(a.expect(200), "artifact_id");
    for path in [
        format!("{TASKS}/{t}"),
        format!("{TASKS}/{t}/steps"),
        format!("{TASKS}/{t}/artifacts"),
        format!("{TASKS}/{t}/artifacts/{a}"),
    ] {
        expect_message(&acme.get(&path).await, 404);
        expect_message(&Api::new(&server, None).get(&path).await, 404);
        expect_message(&Api::new(&server, Some("wrong-key")).get(&path).await, 404);
    }
    expect_message(&acme.post(&format!("{TASKS}/{t}/steps"), &json!({})).await, 404);
    assert_eq!(acme.get(TASKS).await.expect(200)["pagination"]["total_items"], 0);
    assert_eq!(nas.get(TASKS).await.expect(200)["pagination"]["total_items"], 1);
    assert!(acme.list("subject=F:1").await.is_empty());
    assert_eq!(nas.list("subject=F:1").await.len(), 1);
}

#[tokio::test]
async fn a_task_continues_after_a_restart_and_its_artifacts_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    let t = id(
        &create(&api, json!({"input": "remember Person:ann works_at Org:initech\nremember Person:ann lives_in City:oslo\nwhat do you know about Person:ann"})).await,
        "task_id",
    );
    let s1 = step(&api, &t, None).await;
    assert_eq!(s1["is_last"], false);
    let big: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
    let a = upload(&api, &t, "kept.bin", &big, &[]).await;
    let a = id(a.expect(200), "artifact_id");
    server.kill9();

    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    let task = api.get(&format!("{TASKS}/{t}")).await;
    assert_eq!(task.expect(200)["status"], "running");
    let s2 = step(&api, &t, None).await;
    assert_eq!(s2["is_last"], false);
    assert!(s2["output"].as_str().unwrap().contains("Remembered"), "{s2}");
    server.stop_ok();

    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    let s3 = step(&api, &t, None).await;
    assert_eq!(s3["is_last"], true);
    let out = s3["output"].as_str().unwrap();
    assert!(out.contains("Org:initech") && out.contains("City:oslo"), "{out}");
    let steps = api.get(&format!("{TASKS}/{t}/steps")).await;
    let names: Vec<Value> = steps.expect(200)["steps"].as_array().unwrap().iter().map(|s| s["name"].clone()).collect();
    assert_eq!(names, [json!("plan line 1"), json!("plan line 2"), json!("plan line 3")]);
    let (status, _, bytes) = download(&api, &t, &a).await;
    assert_eq!(status, 200);
    assert!(bytes == big, "artifact bytes changed across restarts");
    // The conversation went on across the restarts: one conversation, six
    // messages, each a `said` fact of its speaker, numbered in order.
    let messages = api.list("predicate=said").await;
    assert_eq!(messages.len(), 6, "{messages:?}");
    let conversations: std::collections::HashSet<&str> =
        messages.iter().map(|m| m["properties"]["conversation"].as_str().unwrap()).collect();
    assert_eq!(conversations.len(), 1);
    let mut turns: Vec<(u64, &str)> = messages
        .iter()
        .map(|m| (m["properties"]["turn"].as_u64().unwrap(), m["subject"].as_str().unwrap()))
        .collect();
    turns.sort();
    let speakers = ["Person:user", "Agent:memory"];
    let want: Vec<(u64, &str)> = (0..6).map(|n| (n, speakers[n as usize % 2])).collect();
    assert_eq!(turns, want);
}

/// A directory under `dir` with one agent network, named `model`, whose
/// front man asks the fake model `model`; its path.
fn one_model_network(dir: &std::path::Path, model: &str, fake: &common::fake_llm::FakeLlm) -> String {
    let networks = dir.join("networks");
    std::fs::create_dir_all(&networks).unwrap();
    let network = format!(
        r#"{{ "llm_config": {{ "model_name": "{model}", "base_url": "{}" }},
           "tools": [ {{ "name": "front", "function": {{ "description": "d" }}, "instructions": "i" }} ] }}"#,
        fake.base_url
    );
    std::fs::write(networks.join(format!("{model}.hocon")), network).unwrap();
    std::fs::write(networks.join("manifest.hocon"), format!(r#"{{ "{model}.hocon": true }}"#)).unwrap();
    networks.to_str().unwrap().to_string()
}

#[tokio::test]
async fn a_step_cut_by_a_crash_is_closed_and_its_line_runs_again() {
    let fake = common::fake_llm::FakeLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    // A front man whose model takes a few seconds to answer.
    let networks = one_model_network(tmp.path(), "slow", &fake);
    let env = [("TEMPORA_AGENTS_DIR", networks.as_str()), ("TEMPORA_OUTBOUND_ALLOW_PRIVATE", "true")];
    let dir = tmp.path().join("data");
    let server = Server::start(&dir, &env);
    let api = Api::new(&server, None);
    let t = id(&create(&api, json!({"input": "hello", "additional_input": {"agent": "slow"}})).await, "task_id");
    // Start a step and crash the server while the model is thinking.
    let (base, path) = (server.base.clone(), format!("{TASKS}/{t}/steps"));
    let pending = tokio::spawn(async move { client().post(format!("{base}{path}")).json(&json!({})).send().await });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while fake.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the step never called the model");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    server.kill9();
    let _ = pending.await; // the connection died with the server

    let server = Server::start(&dir, &env);
    let api = Api::new(&server, None);
    let steps = api.get(&format!("{TASKS}/{t}/steps")).await.expect(200).clone();
    assert_eq!(steps["steps"][0]["status"], "running", "left running by the crash: {steps}");
    // The next step closes it, and runs the same plan line again.
    let s2 = step(&api, &t, None).await;
    assert_eq!(s2["name"], "plan line 1", "{s2}");
    assert_eq!(s2["is_last"], true, "{s2}");
    let steps = api.get(&format!("{TASKS}/{t}/steps")).await.expect(200).clone();
    let first = &steps["steps"][0];
    assert_eq!(first["status"], "completed", "{steps}");
    assert_eq!(first["additional_output"]["error"], "interrupted", "{steps}");
    assert!(first["output"].as_str().unwrap().starts_with("Interrupted"), "{steps}");
    assert_eq!(api.get(&format!("{TASKS}/{t}")).await.expect(200)["status"], "completed");
}

#[tokio::test]
async fn a_failed_input_turn_leaves_the_plan_line_for_the_next_step() {
    let fake = common::fake_llm::FakeLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    // A front man whose model fails its first request, then answers.
    let networks = one_model_network(tmp.path(), "flaky-1", &fake);
    let env = [("TEMPORA_AGENTS_DIR", networks.as_str()), ("TEMPORA_OUTBOUND_ALLOW_PRIVATE", "true")];
    let (_dir, server) = fresh(&env);
    let api = Api::new(&server, None);
    let t = id(&create(&api, json!({"input": "hello", "additional_input": {"agent": "flaky-1"}})).await, "task_id");
    let failed = step(&api, &t, Some(json!({"input": "first, this"}))).await;
    assert_eq!((failed["is_last"].as_bool(), failed["status"].as_str()), (Some(false), Some("completed")), "{failed}");
    assert!(failed["output"].as_str().unwrap().starts_with("Error:"), "{failed}");
    assert!(failed["additional_output"]["error"].is_string(), "{failed}");
    // Only the input's turn ran: the plan line waits for the next step.
    assert_eq!(fake.requests().len(), 1);
    let next = step(&api, &t, None).await;
    assert_eq!((next["is_last"].as_bool(), next["name"].as_str()), (Some(true), Some("plan line 1")), "{next}");
    assert_eq!(next["additional_output"]["error"], Value::Null, "{next}");
}
