//! Agents that think: an agent with an `llm_config` runs a tool-calling
//! loop against any OpenAI-compatible endpoint. Its tools are the agents it
//! lists: local agents (run the same way, one level deeper), other networks
//! on this server (`/name`, entered through their front man), and the
//! `memory` network's tools, run against the caller's tenant. A tool that
//! fails tells the model why and the loop goes on; the model failing ends
//! the turn.
//!
//! Bounds: [`MAX_ITERATIONS`] model calls per agent per call (or the
//! network's `max_iterations`), [`MAX_DEPTH`]
//! nested agent calls (networks may reference each other in a cycle), and
//! the turn's deadline, enforced by the caller.

use super::emit::Emitter;
use super::frontman;
use super::wire::{ChatMessage, MessageType, Origin};
use crate::agents::{AgentKind, AgentNetwork, AgentSpec, LlmConfig, ToolRef};
use crate::service::Service;
use crate::llm::{LlmError, ModelConfig};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Model calls one agent may make in one call before it must answer,
/// unless its network sets `max_iterations`.
pub const MAX_ITERATIONS: usize = 20;
/// Agents calling agents, counting the front man as 1.
pub const MAX_DEPTH: usize = 6;
/// Most prior messages of a conversation sent to the model.
pub const MAX_PRIOR_MESSAGES: usize = 40;
/// Longest tool result handed back to a model, in bytes.
const MAX_TOOL_RESULT: usize = 32 * 1024;

/// Why a turn could not be answered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Failure {
    #[error("agent {agent}: {error}")]
    Model { agent: String, error: LlmError },
    #[error("agent {agent} did not answer within {calls} model calls")]
    Looping { agent: String, calls: usize },
    #[error("agent {agent} cannot run here: {why}")]
    NotRunnable { agent: String, why: String },
    #[error("{0}")]
    Memory(String),
}

/// What one turn shares across its agents.
pub struct Turn<'a> {
    pub st: &'a Service,
    pub tenant: &'a str,
    /// Stamped on what the turn remembers: its conversation.
    pub source: &'a str,
    pub emit: &'a Emitter,
    /// Unix ms at the start of the turn (relative times in commands).
    pub now: i64,
    pub tokens_in: AtomicU64,
    pub tokens_out: AtomicU64,
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl<'a> Turn<'a> {
    /// Runs `network`'s front man on `input`, after `prior` (the
    /// conversation so far, oldest first). Returns the answer.
    pub fn front_man<'b>(
        &'b self,
        network: Arc<AgentNetwork>,
        prior: &'b [ChatMessage],
        input: String,
        origin: Vec<Origin>,
        depth: usize,
    ) -> Boxed<'b, Result<String, Failure>> {
        Box::pin(async move {
            let front = network.front_man();
            let is_memory = network.name == crate::agents::registry::MEMORY_NETWORK;
            let model = network
                .effective_llm_config(front)
                .or_else(|| is_memory.then(|| self.st.memory_llm.as_deref().cloned()).flatten());
            match (&front.kind, model) {
                (AgentKind::Llm, Some(cfg)) => self.llm_agent(&network, front, &cfg, prior, input, origin, depth).await,
                // The built-in memory network answers without a model.
                _ if is_memory => {
                    let answer = frontman::answer(self.st, self.tenant, &input, self.now, self.source)
                        .await
                        .map_err(|e| Failure::Memory(e.message()))?;
                    for step in &answer.steps {
                        self.emit.tool_call(&origin, step.tool, &step.args).await;
                        self.emit.tool_result(&origin, step.tool, &step.result).await;
                    }
                    Ok(answer.text)
                }
                _ => Err(not_runnable(front)),
            }
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn llm_agent<'b>(
        &'b self,
        network: &'b Arc<AgentNetwork>,
        agent: &'b AgentSpec,
        cfg: &'b LlmConfig,
        prior: &'b [ChatMessage],
        input: String,
        origin: Vec<Origin>,
        depth: usize,
    ) -> Boxed<'b, Result<String, Failure>> {
        Box::pin(async move {
            let model = model_config(cfg).map_err(|why| Failure::NotRunnable { agent: agent.name.clone(), why })?;
            let (tools, by_name) = self.tools_of(network, agent);
            let mut messages = Vec::new();
            if let Some(i) = agent.instructions.as_deref().filter(|i| !i.trim().is_empty()) {
                messages.push(json!({"role": "system", "content": i}));
            }
            let skip = prior.len().saturating_sub(MAX_PRIOR_MESSAGES);
            for m in &prior[skip..] {
                let role = if m.kind == MessageType::Human { "user" } else { "assistant" };
                messages.push(json!({"role": role, "content": m.text}));
            }
            messages.push(json!({"role": "user", "content": input}));
            let calls = network.max_iterations.map_or(MAX_ITERATIONS, |n| n as usize);
            for _ in 0..calls {
                let reply = self
                    .st
                    .llm
                    .complete(&model, &messages, &tools)
                    .await
                    .map_err(|error| Failure::Model { agent: agent.name.clone(), error })?;
                self.tokens_in.fetch_add(reply.tokens_in, Ordering::Relaxed);
                self.tokens_out.fetch_add(reply.tokens_out, Ordering::Relaxed);
                if reply.tool_calls.is_empty() {
                    return Ok(reply.content.unwrap_or_default());
                }
                if let Some(text) = reply.content.as_deref().filter(|t| !t.trim().is_empty()) {
                    self.emit
                        .intermediate(ChatMessage { origin: origin.clone(), ..ChatMessage::new(MessageType::Ai, text) })
                        .await;
                }
                let calls: Vec<Value> = reply
                    .tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                messages.push(json!({"role": "assistant", "content": reply.content, "tool_calls": calls}));
                for call in &reply.tool_calls {
                    let args = serde_json::from_str::<Value>(&call.arguments).unwrap_or_else(|_| json!({}));
                    self.emit.tool_call(&origin, &call.name, &args).await;
                    let result = match by_name.get(&call.name) {
                        None => json!({"error": format!("there is no tool named {:?}", call.name)}),
                        Some(_) if serde_json::from_str::<Value>(&call.arguments).is_err() => {
                            json!({"error": "the arguments are not valid JSON"})
                        }
                        Some(tool) => self.call_tool(network, tool, args, &origin, depth).await,
                    };
                    self.emit.tool_result(&origin, &call.name, &result).await;
                    messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": clip(&result)}));
                }
            }
            Err(Failure::Looping { agent: agent.name.clone(), calls })
        })
    }

    /// The tools `agent` may call, as OpenAI function tools, and what each
    /// of their names refers to.
    fn tools_of(&self, network: &AgentNetwork, agent: &AgentSpec) -> (Vec<Value>, HashMap<String, ToolRef>) {
        let mut tools = Vec::new();
        let mut by_name = HashMap::new();
        for t in &agent.tools {
            let function = match t {
                ToolRef::Local(name) => network.agent(name).map(|a| a.function.clone()),
                ToolRef::External(name) => self.st.agents.get(name).map(|n| n.function().clone()),
            };
            let Some(function) = function else { continue };
            let name = tool_name(t);
            let parameters = function.parameters.unwrap_or_else(
                || json!({"type": "object", "properties": {"inquiry": {"type": "string"}}, "required": ["inquiry"]}),
            );
            tools.push(json!({
                "type": "function",
                "function": {"name": name, "description": function.description, "parameters": parameters}
            }));
            by_name.insert(name, t.clone());
        }
        (tools, by_name)
    }

    /// Runs one tool for a model; failures become the result, for the model
    /// to read.
    async fn call_tool(
        &self,
        network: &Arc<AgentNetwork>,
        tool: &ToolRef,
        args: Value,
        origin: &[Origin],
        depth: usize,
    ) -> Value {
        if depth >= MAX_DEPTH {
            return json!({"error": format!("agents may call each other at most {MAX_DEPTH} deep")});
        }
        let result = match tool {
            ToolRef::Local(name) => {
                let Some(agent) = network.agent(name) else {
                    return json!({"error": format!("no agent {name}")});
                };
                let origin = with(origin, name);
                match &agent.kind {
                    AgentKind::Memory(t) => {
                        let args = args.as_object().cloned().unwrap_or_default();
                        return match super::tools::run(self.st, self.tenant, *t, args, Some(self.source)).await {
                            Ok(v) => v,
                            Err(e) => json!({"error": e.message()}),
                        };
                    }
                    AgentKind::Llm => match network.effective_llm_config(agent) {
                        Some(cfg) => self.llm_agent(network, agent, &cfg, &[], inquiry(&args), origin, depth + 1).await,
                        None => Err(not_runnable(agent)),
                    },
                    _ => Err(not_runnable(agent)),
                }
            }
            ToolRef::External(name) => match self.st.agents.get(name) {
                Some(other) => self.front_man(other, &[], inquiry(&args), with(origin, name), depth + 1).await,
                None => return json!({"error": format!("no agent network {name} on this server")}),
            },
        };
        match result {
            Ok(answer) => json!({"answer": answer}),
            Err(e) => json!({"error": e.to_string()}),
        }
    }
}

fn not_runnable(agent: &AgentSpec) -> Failure {
    let why = match &agent.kind {
        AgentKind::CodedTool { class } => format!("it is Python code (class {class}), which this server does not run"),
        AgentKind::Toolbox { tool } => format!("it is a Python toolbox tool ({tool}), which this server does not run"),
        _ => "it has no llm_config with a model_name (set one on the agent or the network)".to_string(),
    };
    Failure::NotRunnable { agent: agent.name.clone(), why }
}

fn with(origin: &[Origin], tool: &str) -> Vec<Origin> {
    let mut o = origin.to_vec();
    o.push(Origin::of(tool));
    o
}

/// What a calling model passed, as the called agent's user message: the
/// `inquiry` when that is all there is, the JSON otherwise.
fn inquiry(args: &Value) -> String {
    match args.as_object() {
        Some(m) if m.len() == 1 => match m.values().next() {
            Some(Value::String(s)) => s.clone(),
            _ => args.to_string(),
        },
        _ => args.to_string(),
    }
}

/// An OpenAI function name for a tool: `[A-Za-z0-9_-]{1,64}`; a network's
/// `/` becomes `__`.
fn tool_name(t: &ToolRef) -> String {
    let raw = match t {
        ToolRef::Local(n) => n.clone(),
        ToolRef::External(n) => n.replace('/', "__"),
    };
    let mut s: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    s.truncate(64);
    s
}

fn clip(v: &Value) -> String {
    let mut s = v.to_string();
    if s.len() > MAX_TOOL_RESULT {
        let mut end = MAX_TOOL_RESULT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...(cut)");
    }
    s
}

/// The model call an agent's `llm_config` describes. Only OpenAI-compatible
/// endpoints are spoken; other providers need a `base_url` of an
/// OpenAI-compatible gateway. The key is read from the environment
/// variable `api_key_env` names (`OPENAI_API_KEY` for the OpenAI default).
fn model_config(cfg: &LlmConfig) -> Result<ModelConfig, String> {
    let model = cfg.model_name.clone().filter(|m| !m.trim().is_empty()).ok_or("its llm_config names no model_name")?;
    let class = cfg.class.as_deref().unwrap_or("openai");
    let base_url = match (&cfg.base_url, class) {
        (Some(u), _) => Some(u.clone()),
        (None, "openai") => None,
        (None, other) => {
            return Err(format!(
                "llm_config class {other:?} has no base_url: this server speaks to OpenAI-compatible endpoints only"
            ))
        }
    };
    let key_env = cfg.api_key_env.clone().or_else(|| (cfg.base_url.is_none()).then(|| "OPENAI_API_KEY".to_string()));
    let api_key = key_env.and_then(|k| std::env::var(k).ok()).filter(|k| !k.is_empty());
    Ok(ModelConfig {
        base_url,
        api_key,
        model,
        temperature: cfg.temperature,
        max_tokens: cfg.max_tokens.map(|m| m.min(u32::MAX as u64) as u32),
        timeout_ms: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_what_openai_accepts() {
        assert_eq!(tool_name(&ToolRef::Local("remember".into())), "remember");
        assert_eq!(tool_name(&ToolRef::External("deep/math guy".into())), "deep__math_guy");
        assert_eq!(tool_name(&ToolRef::Local("x".repeat(80))).len(), 64);
    }

    #[test]
    fn an_inquiry_alone_is_the_message() {
        assert_eq!(inquiry(&json!({"inquiry": "where?"})), "where?");
        assert_eq!(inquiry(&json!({"a": 1, "b": 2})), r#"{"a":1,"b":2}"#);
    }

    #[test]
    fn model_configs_need_a_model_and_an_openai_compatible_endpoint() {
        let ok = LlmConfig {
            model_name: Some("m".into()),
            base_url: Some("http://127.0.0.1:1/v1".into()),
            ..Default::default()
        };
        assert_eq!(model_config(&ok).unwrap().model, "m");
        assert!(model_config(&LlmConfig::default()).unwrap_err().contains("model_name"));
        let anthropic =
            LlmConfig { class: Some("anthropic".into()), model_name: Some("c".into()), ..Default::default() };
        assert!(model_config(&anthropic).unwrap_err().contains("OpenAI-compatible"));
    }
}
