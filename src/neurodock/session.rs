//! One NeuroDock connection: authentication, tool registration, queries
//! (one at a time, in order, as one conversation) and tool calls back to
//! the client.
//!
//! The connection reads packets on its own task; queries run on a second
//! task, so a `TOOL_RESULT` is read while the query that asked for it waits.
//! Everything written goes through one writer task, in order.

use super::error::{code, packet_error};
use super::framing::{self, Decoder, Item};
use super::packets::{self, Packet};
use crate::service::client_tools::{self as tools, CheckedTool, Registration, ToolSpec};
use crate::service::principal::{Credentials, DEFAULT_TENANT};
use crate::service::Service;
use crate::service::chat::turn;
use crate::service::chat::wire::{ChatContext, ChatMessage, ChatRequest, MessageType};
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};

/// Locks one of the sessions' shared maps. Nothing is awaited while a lock
/// is held and every change is one map call, so a panic elsewhere cannot
/// leave a map half-changed: a poisoned lock is taken as it is, where
/// `unwrap` would make every later session panic too.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Most tools one connection may register.
pub const MAX_TOOLS_PER_CONNECTION: usize = 64;
/// Most tools one query may call.
pub const MAX_QUERY_TOOLS: usize = 16;
/// Most queries waiting behind the running one.
pub const MAX_QUEUED_QUERIES: usize = 8;
/// The agent network queries go to.
pub const NETWORK: &str = "memory";

type CallResult = Result<Value, String>;
/// `(tenant, tool)` to the connection serving it and its definition.
type Servers = HashMap<(String, String), (Arc<Conn>, ToolSpec)>;

/// What every connection of a listener shares: the service, and which
/// connection serves each client tool.
pub struct Shared {
    pub st: Service,
    servers: Mutex<Servers>,
    next_conn: AtomicU64,
}

impl Shared {
    pub fn new(st: Service) -> Shared {
        Shared { st, servers: Mutex::new(HashMap::new()), next_conn: AtomicU64::new(1) }
    }

    fn server_of(&self, tenant: &str, tool: &str) -> Option<(Arc<Conn>, ToolSpec)> {
        lock(&self.servers).get(&(tenant.to_string(), tool.to_string())).cloned()
    }

    fn forget(&self, conn: &Conn) {
        lock(&self.servers).retain(|_, (c, _)| c.id != conn.id);
    }
}

/// The writing side of a connection, and its calls in flight.
pub struct Conn {
    id: u64,
    out: mpsc::Sender<Vec<u8>>,
    /// Answers go out compressed when the last packet came compressed.
    gzip: AtomicBool,
    busy: AtomicBool,
    pending: Mutex<HashMap<String, oneshot::Sender<CallResult>>>,
    next_call: AtomicU64,
    tools: Mutex<HashMap<String, ToolSpec>>,
}

impl Conn {
    async fn send(&self, packet: &Value) {
        let _ = self.out.send(framing::encode(packet, self.gzip.load(Ordering::Relaxed))).await;
    }

    /// Calls a client tool on this connection and waits for its result.
    async fn call(&self, spec: &ToolSpec, args: Map<String, Value>) -> Result<Value, (&'static str, String)> {
        let id = format!("call-{}", self.next_call.fetch_add(1, Ordering::Relaxed) + 1);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), tx);
        self.send(&packets::packet(packets::TOOL_CALL, json!({"id": id, "tool": spec.name, "arguments": args}))).await;
        match tokio::time::timeout(Duration::from_millis(spec.timeout_ms), rx).await {
            Ok(Ok(Ok(v))) => {
                if spec.response != "void" && !tools::is_of_type(&spec.response, &v) {
                    return Err((
                        "ToolFailed",
                        format!("tool {} answered {v} where its response type is {}", spec.name, spec.response),
                    ));
                }
                Ok(v)
            }
            Ok(Ok(Err(e))) => Err(("ToolFailed", format!("tool {} failed: {e}", spec.name))),
            Ok(Err(_)) => Err(("ToolFailed", format!("the client serving tool {} went away", spec.name))),
            Err(_) => {
                lock(&self.pending).remove(&id);
                Err(("ToolTimeout", format!("tool {} did not answer within {} ms", spec.name, spec.timeout_ms)))
            }
        }
    }
}

/// One tool a query calls.
#[derive(Debug, Clone)]
struct ToolCall {
    name: String,
    args: Map<String, Value>,
}

#[derive(Debug)]
struct Query {
    tenant: String,
    message: String,
    tools: Vec<ToolCall>,
    id: Option<Value>,
}

enum Flow {
    Go,
    Close,
}

/// Serves one connection until the client leaves, it idles, a fatal packet
/// arrives or the server stops.
pub async fn handle(shared: Arc<Shared>, stream: TcpStream, mut stop: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        while let Some(bytes) = out_rx.recv().await {
            if wr.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = wr.shutdown().await;
    });
    let conn = Arc::new(Conn {
        id: shared.next_conn.fetch_add(1, Ordering::Relaxed),
        out: out_tx,
        gzip: AtomicBool::new(false),
        busy: AtomicBool::new(false),
        pending: Mutex::new(HashMap::new()),
        next_call: AtomicU64::new(0),
        tools: Mutex::new(HashMap::new()),
    });
    let mut tenant: Option<String> = shared.st.is_open().then(|| DEFAULT_TENANT.to_string());
    let (q_tx, q_rx) = mpsc::channel::<Query>(MAX_QUEUED_QUERIES);
    let worker = tokio::spawn(run_queries(Arc::clone(&shared), Arc::clone(&conn), q_rx, stop.clone()));
    let mut decoder = Decoder::default();
    let mut buf = vec![0u8; 16 * 1024];
    // A connection that sends nothing for `idle`, with no query running, is
    // closed; so is one whose packet has begun but not ended within
    // `packet_time`, however slowly its bytes keep coming (a trickle would
    // otherwise hold the connection and its buffer forever).
    let idle = Duration::from_secs(shared.st.limits.tcp_idle_timeout_secs as u64);
    let packet_time = Duration::from_secs(shared.st.limits.tcp_packet_timeout_secs as u64);
    let mut partial_since: Option<Instant> = None;
    'conn: loop {
        let wait = match partial_since {
            Some(t) => packet_time.saturating_sub(t.elapsed()).min(idle),
            None => idle,
        };
        let n = tokio::select! {
            r = tokio::time::timeout(wait, rd.read(&mut buf)) => match r {
                Err(_) if partial_since.is_some_and(|t| t.elapsed() >= packet_time) => {
                    let why = format!("a packet did not complete within {} s", packet_time.as_secs());
                    conn.send(&packets::error("SlowPacket", why, None)).await;
                    break;
                }
                Err(_) if partial_since.is_some() => continue,
                Err(_) if conn.busy.load(Ordering::Relaxed) => continue,
                Err(_) => {
                    let why = format!("no packet for {} s", idle.as_secs());
                    conn.send(&packets::error("Idle", why, None)).await;
                    break;
                }
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => n,
            },
            _ = async { let _ = stop.wait_for(|s| *s).await; } => {
                conn.send(&packets::error("ShuttingDown", "the server is shutting down", None)).await;
                break;
            }
        };
        decoder.push(&buf[..n]);
        let mut ended_one = false;
        while let Some(item) = decoder.next_item() {
            ended_one = true;
            match item {
                Item::Error { message, fatal, gzip } => {
                    conn.gzip.store(gzip, Ordering::Relaxed);
                    let code = if fatal { "BadStream" } else { "BadPacket" };
                    conn.send(&packets::error(code, message, None)).await;
                    if fatal {
                        break 'conn;
                    }
                }
                Item::Packet { value, gzip } => {
                    conn.gzip.store(gzip, Ordering::Relaxed);
                    let flow = match packets::parse(value) {
                        Err(e) => {
                            conn.send(&packets::error("BadPacket", e, None)).await;
                            Flow::Go
                        }
                        Ok(p) => dispatch(&shared, &conn, &mut tenant, &q_tx, p).await,
                    };
                    if let Flow::Close = flow {
                        break 'conn;
                    }
                }
            }
        }
        if !decoder.mid_packet() {
            partial_since = None;
        } else if ended_one || partial_since.is_none() {
            partial_since = Some(Instant::now());
        }
    }
    shared.forget(&conn);
    worker.abort();
    let _ = worker.await;
    // Calls this connection was to answer fail at once.
    lock(&conn.pending).clear();
    drop(q_tx);
    drop(conn);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
}

async fn dispatch(
    shared: &Shared,
    conn: &Arc<Conn>,
    tenant: &mut Option<String>,
    queries: &mpsc::Sender<Query>,
    p: Packet,
) -> Flow {
    let kind = p.kind.clone();
    let fail = |code: &str, message: String| packets::error(code, message, Some(&kind));
    if p.kind == packets::AUTH {
        return auth(shared, conn, tenant, p).await;
    }
    let Some(t) = tenant.clone() else {
        let m = "not authenticated: the first packet must be AUTH with a tenant key".to_string();
        conn.send(&fail("Unauthenticated", m)).await;
        return Flow::Close;
    };
    match p.kind.as_str() {
        packets::ADD_TOOL => {
            let reply = match add_tool(shared, conn, &t, &p.data).await {
                Ok(added) => added,
                Err((code, m)) => fail(code, m),
            };
            conn.send(&reply).await;
        }
        packets::QUERY => match read_query(t, p.data) {
            Err(m) => conn.send(&fail("BadRequest", m)).await,
            Ok(q) => {
                if queries.try_send(q).is_err() {
                    let m =
                        format!("more than {MAX_QUEUED_QUERIES} queries are waiting; send the next after a RESPONSE");
                    conn.send(&fail("Busy", m)).await;
                }
            }
        },
        packets::TOOL_RESULT => {
            let id = match p.data.get("id") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    conn.send(&fail("BadRequest", "TOOL_RESULT needs the id of the TOOL_CALL".into())).await;
                    return Flow::Go;
                }
            };
            let result = match (p.data.get("error"), p.data.get("result")) {
                (Some(e), _) if !e.is_null() => Err(e.as_str().map_or_else(|| e.to_string(), String::from)),
                (_, r) => Ok(r.cloned().unwrap_or(Value::Null)),
            };
            let waiting = lock(&conn.pending).remove(&id);
            match waiting {
                Some(tx) => {
                    let _ = tx.send(result);
                }
                None => {
                    conn.send(&fail("UnknownCall", format!("no tool call {id} is waiting (it may have timed out)")))
                        .await
                }
            }
        }
        other => {
            let m = format!(
                "unknown packet type {other:?}: expected {}, {}, {} or {}",
                packets::AUTH,
                packets::ADD_TOOL,
                packets::QUERY,
                packets::TOOL_RESULT
            );
            conn.send(&fail("UnknownType", m)).await;
        }
    }
    Flow::Go
}

async fn auth(shared: &Shared, conn: &Conn, tenant: &mut Option<String>, p: Packet) -> Flow {
    let about = Some(packets::AUTH);
    if let Some(t) = tenant.as_ref() {
        if shared.st.is_open() {
            conn.send(&packets::packet(packets::AUTH_OK, json!({"tenant": t}))).await;
        } else {
            conn.send(&packets::error("BadRequest", "already authenticated", about)).await;
        }
        return Flow::Go;
    }
    let key = p.data.get("key").and_then(Value::as_str).unwrap_or_default();
    // An admin token names the tenant it acts for.
    let named = p.data.get("tenant").and_then(Value::as_str);
    let credentials = Credentials { bearer: Some(key), tenant: named, ..Default::default() };
    let resolved = shared.st.authenticate(&credentials).ok().and_then(|caller| caller.tenant);
    match resolved {
        Some(t) => {
            conn.send(&packets::packet(packets::AUTH_OK, json!({"tenant": t}))).await;
            *tenant = Some(t);
            Flow::Go
        }
        None => {
            conn.send(&packets::error("Unauthenticated", "unknown key", about)).await;
            Flow::Close
        }
    }
}

/// Registers a client's tool and answers `TOOL_ADDED`. A built-in tool
/// declared with its own shape is acknowledged but neither stored nor
/// routed to the client: the server keeps running it.
async fn add_tool(
    shared: &Shared,
    conn: &Arc<Conn>,
    tenant: &str,
    data: &Map<String, Value>,
) -> Result<Value, (&'static str, String)> {
    let checked = tools::check_tool(data).map_err(packet_error)?;
    warn_ignored(tenant, &checked);
    let spec = match checked.registration {
        Registration::Builtin(b) => {
            return Ok(packets::tool_added(b.name, b.definition(), Some(b.note()), &checked.ignored))
        }
        Registration::Client(spec) => spec,
    };
    {
        let mine = lock(&conn.tools);
        if mine.len() >= MAX_TOOLS_PER_CONNECTION && !mine.contains_key(&spec.name) {
            return Err(("TooManyTools", format!("a connection registers at most {MAX_TOOLS_PER_CONNECTION} tools")));
        }
    }
    shared
        .st
        .register_client_tool(tenant, &spec)
        .await
        .map_err(|e| (code(&e), format!("the tool could not be stored: {e}")))?;
    lock(&conn.tools).insert(spec.name.clone(), spec.clone());
    lock(&shared.servers).insert((tenant.to_string(), spec.name.clone()), (Arc::clone(conn), spec.clone()));
    Ok(packets::tool_added(&spec.name, json!(spec), None, &checked.ignored))
}

/// Most ignored field names one log line shows, and the most of each name.
const LOGGED_FIELDS: usize = 16;
const LOGGED_FIELD_CHARS: usize = 64;

/// Logs the fields an `ADD_TOOL` carried that the server does not read, so
/// an operator sees a client expecting more than it gets. Names only (a
/// value may be anything the client holds), and bounded: the names are the
/// client's, of any number and length.
fn warn_ignored(tenant: &str, checked: &CheckedTool) {
    if checked.ignored.is_empty() {
        return;
    }
    let fields: Vec<String> = checked
        .ignored
        .iter()
        .take(LOGGED_FIELDS)
        .map(|f| f.chars().take(LOGGED_FIELD_CHARS).collect())
        .collect();
    let tool: String = checked.name().chars().take(tools::MAX_TOOL_NAME).collect();
    tracing::warn!(tenant, tool, ?fields, count = checked.ignored.len(), "ADD_TOOL fields ignored");
}

fn read_query(tenant: String, mut data: Map<String, Value>) -> Result<Query, String> {
    let message = match data.remove("message") {
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        _ => return Err("message must be a non-empty string".into()),
    };
    let mut tools = Vec::new();
    match data.remove("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.len() <= MAX_QUERY_TOOLS => {
            for t in a {
                tools.push(match t {
                    Value::String(name) => ToolCall { name, args: Map::new() },
                    Value::Object(mut o) => {
                        let name = match o.remove("name") {
                            Some(Value::String(n)) => n,
                            _ => return Err("a tools entry is a name or {\"name\", \"arguments\"}".into()),
                        };
                        let args = match o.remove("arguments") {
                            None | Some(Value::Null) => Map::new(),
                            Some(Value::Object(m)) => m,
                            _ => return Err(format!("arguments of tool {name} must be an object")),
                        };
                        ToolCall { name, args }
                    }
                    _ => return Err("a tools entry is a name or {\"name\", \"arguments\"}".into()),
                });
            }
        }
        Some(_) => return Err(format!("tools must be an array of at most {MAX_QUERY_TOOLS}")),
    }
    let id = data.remove("id");
    Ok(Query { tenant, message, tools, id })
}

/// Runs the connection's queries one after another, keeping the
/// conversation's context between them.
async fn run_queries(shared: Arc<Shared>, conn: Arc<Conn>, mut rx: mpsc::Receiver<Query>, stop: watch::Receiver<bool>) {
    let mut ctx: Option<ChatContext> = None;
    while let Some(q) = rx.recv().await {
        conn.busy.store(true, Ordering::Relaxed);
        let mut reply = match run_query(&shared, &conn, &q, &mut ctx, stop.clone()).await {
            Ok(v) => v,
            Err((code, m)) => packets::error(code, m, Some(packets::QUERY)),
        };
        if let Some(id) = q.id {
            reply["data"]["id"] = id;
        }
        conn.send(&reply).await;
        conn.busy.store(false, Ordering::Relaxed);
    }
}

fn conversation_id(ctx: &ChatContext) -> Option<String> {
    ctx.chat_histories.iter().flat_map(|h| &h.messages).find_map(|m| {
        (m.kind == MessageType::System)
            .then(|| m.structure.as_ref()?.get("conversation_id")?.as_str().map(String::from))
            .flatten()
    })
}

async fn run_query(
    shared: &Shared,
    conn: &Arc<Conn>,
    q: &Query,
    ctx: &mut Option<ChatContext>,
    stop: watch::Receiver<bool>,
) -> Result<Value, (&'static str, String)> {
    let source = ctx.as_ref().and_then(conversation_id).map(|id| crate::service::chat::conversation::source(&id));
    let mut results = Vec::new();
    for call in &q.tools {
        let result = call_tool(shared, conn, &q.tenant, call, source.as_deref()).await?;
        results.push(json!({"result": result, "tool": call.name}));
    }
    let text = packets::compose(&q.message, &results);
    let req = ChatRequest {
        user_message: Some(ChatMessage::new(MessageType::Human, text.clone())),
        chat_context: ctx.clone(),
        ..Default::default()
    };
    let turn = turn::start(&shared.st, q.tenant.clone(), NETWORK, req).map_err(|e| ("QueryFailed", e.to_string()))?;
    let mut stream = std::pin::pin!(turn.until(stop));
    let mut last = None;
    while let Some(r) = stream.next().await {
        last = Some(r);
    }
    let m = last.ok_or(("Internal", "the agent ended without an answer".to_string()))?.response;
    if let Some(e) = m.structure.as_ref().and_then(|s| s.get("error")) {
        return Err(("QueryFailed", e.as_str().map_or_else(|| e.to_string(), String::from)));
    }
    if m.chat_context.is_some() {
        *ctx = m.chat_context.clone();
    }
    let conversation = ctx.as_ref().and_then(conversation_id);
    Ok(packets::packet(
        packets::RESPONSE,
        json!({"message": m.text, "query": text, "tools": results, "conversation": conversation}),
    ))
}

async fn call_tool(
    shared: &Shared,
    conn: &Arc<Conn>,
    tenant: &str,
    call: &ToolCall,
    source: Option<&str>,
) -> Result<Value, (&'static str, String)> {
    if tools::is_builtin(&call.name) {
        return tools::run_builtin(&shared.st, tenant, &call.name, call.args.clone(), source)
            .await
            .map_err(|e| ("ToolFailed", format!("tool {}: {}: {e}", call.name, e.code())));
    }
    let own = lock(&conn.tools).get(&call.name).cloned();
    let (target, spec) = match own {
        Some(spec) => (Arc::clone(conn), spec),
        None => match shared.server_of(tenant, &call.name) {
            Some(found) => found,
            None => {
                // A stored tool nobody serves now is called on this connection.
                let spec = shared
                    .st
                    .client_tool(tenant, &call.name)
                    .await
                    .map_err(|e| (code(&e), format!("tools could not be read: {e}")))?
                    .ok_or_else(|| {
                        let builtins = tools::builtin_names();
                        ("UnknownTool", format!("no tool named {} (the built-in ones are {builtins})", call.name))
                    })?;
                (Arc::clone(conn), spec)
            }
        },
    };
    tools::check_args(&spec, &call.args).map_err(packet_error)?;
    target.call(&spec, call.args.clone()).await
}
