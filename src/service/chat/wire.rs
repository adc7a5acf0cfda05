//! neuro-san's chat messages as they travel: the JSON of the HTTP API
//! (`specs/neuro-san.openapi.json`), which is the proto3 JSON mapping of
//! `chat.proto` and `agent.proto`. The gRPC surface converts its protobuf
//! messages to and from these, so a turn is run once for both.
//!
//! Reading is lenient where clients differ (a message type as its name or
//! its number, fields absent or null); writing is what neuro-san's own
//! clients read (type names as strings, empty fields left out).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// `ChatMessage.ChatMessageType`. The numbers are the proto's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MessageType {
    #[default]
    Unknown,
    System,
    Human,
    Ai,
    Agent,
    AgentFramework,
    AgentToolResult,
    AgentProgress,
}

impl MessageType {
    pub const ALL: [MessageType; 8] = [
        MessageType::Unknown,
        MessageType::System,
        MessageType::Human,
        MessageType::Ai,
        MessageType::Agent,
        MessageType::AgentFramework,
        MessageType::AgentToolResult,
        MessageType::AgentProgress,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MessageType::Unknown => "UNKNOWN",
            MessageType::System => "SYSTEM",
            MessageType::Human => "HUMAN",
            MessageType::Ai => "AI",
            MessageType::Agent => "AGENT",
            MessageType::AgentFramework => "AGENT_FRAMEWORK",
            MessageType::AgentToolResult => "AGENT_TOOL_RESULT",
            MessageType::AgentProgress => "AGENT_PROGRESS",
        }
    }

    pub fn number(self) -> i32 {
        match self {
            MessageType::Unknown => 0,
            MessageType::System => 1,
            MessageType::Human => 2,
            MessageType::Ai => 4,
            MessageType::Agent => 100,
            MessageType::AgentFramework => 101,
            MessageType::AgentToolResult => 103,
            MessageType::AgentProgress => 104,
        }
    }

    /// A number no version of the proto defines reads as `Unknown`, as
    /// protobuf does with open enums.
    pub fn from_number(n: i64) -> MessageType {
        MessageType::ALL.into_iter().find(|t| i64::from(t.number()) == n).unwrap_or_default()
    }

    pub fn from_name(s: &str) -> Option<MessageType> {
        MessageType::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(s))
    }
}

impl Serialize for MessageType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for MessageType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(MessageType::Unknown),
            Value::Number(n) => Ok(n.as_i64().map(MessageType::from_number).unwrap_or_default()),
            Value::String(s) => MessageType::from_name(&s).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown message type {s:?}: expected one of {}",
                    MessageType::ALL.map(MessageType::name).join(", ")
                ))
            }),
            other => Err(serde::de::Error::custom(format!(
                "a message type is a name or a number, got {}",
                crate::json::kind_name(&other)
            ))),
        }
    }
}

/// `ChatFilterType`: what a turn streams back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FilterType {
    /// Only the final answer (also for UNKNOWN and anything unrecognised).
    #[default]
    Minimal,
    /// Every message, each response echoing the request.
    Maximal,
}

impl FilterType {
    pub fn from_number(n: i64) -> FilterType {
        if n == 2 {
            FilterType::Maximal
        } else {
            FilterType::Minimal
        }
    }
}

impl<'de> Deserialize<'de> for FilterType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) if s.eq_ignore_ascii_case("MAXIMAL") => FilterType::Maximal,
            Value::Number(n) => n.as_i64().map(FilterType::from_number).unwrap_or_default(),
            _ => FilterType::Minimal,
        })
    }
}

impl Serialize for FilterType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            FilterType::Minimal => "MINIMAL",
            FilterType::Maximal => "MAXIMAL",
        })
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatFilter {
    #[serde(default, deserialize_with = "null_default")]
    pub chat_filter_type: FilterType,
}

/// Which agent a message came from; a nested call adds an entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    #[serde(default, deserialize_with = "null_default")]
    pub tool: String,
    #[serde(default, deserialize_with = "null_default")]
    pub instantiation_index: i32,
}

impl Origin {
    pub fn of(tool: &str) -> Origin {
        Origin { tool: tool.to_string(), instantiation_index: 1 }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MimeData {
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "String::is_empty")]
    pub mime_type: String,
    /// Base64, as the proto3 JSON mapping writes `bytes`.
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "String::is_empty")]
    pub mime_bytes: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    #[serde(rename = "type", default)]
    pub kind: MessageType,
    #[serde(default, deserialize_with = "null_default")]
    pub text: String,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub mime_data: Vec<MimeData>,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub origin: Vec<Origin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structure: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_context: Option<ChatContext>,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub tool_result_origin: Vec<Origin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sly_data: Option<Map<String, Value>>,
}

impl ChatMessage {
    pub fn new(kind: MessageType, text: impl Into<String>) -> ChatMessage {
        ChatMessage { kind, text: text.into(), ..Default::default() }
    }
}

/// The messages one agent saw, so a later request can continue them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatHistory {
    #[serde(default, deserialize_with = "null_default")]
    pub origin: Vec<Origin>,
    #[serde(default, deserialize_with = "null_default")]
    pub messages: Vec<ChatMessage>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatContext {
    #[serde(default, deserialize_with = "null_default")]
    pub chat_histories: Vec<ChatHistory>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sly_data: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_message: Option<ChatMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_context: Option<ChatContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_filter: Option<ChatFilter>,
}

impl ChatRequest {
    pub fn filter(&self) -> FilterType {
        self.chat_filter.as_ref().map(|f| f.chat_filter_type).unwrap_or_default()
    }
}

/// One streamed line (HTTP) or message (gRPC).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The request echoed, with MAXIMAL only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<ChatRequest>,
    pub response: ChatMessage,
}

/// Null reads as the default, as in proto3 JSON.
fn null_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_client_request_reads_with_names_numbers_and_nulls() {
        let r: ChatRequest = serde_json::from_value(json!({
            "user_message": {"type": "HUMAN", "text": "hi", "origin": null},
            "chat_filter": {"chat_filter_type": "MAXIMAL"},
            "sly_data": {"k": 1},
            "chat_context": {"chat_histories": [{"origin": [{"tool": "memory"}], "messages": [{"type": 101, "text": "a"}]}]}
        }))
        .unwrap();
        assert_eq!(r.user_message.as_ref().unwrap().kind, MessageType::Human);
        assert_eq!(r.filter(), FilterType::Maximal);
        let h = &r.chat_context.as_ref().unwrap().chat_histories[0];
        assert_eq!(h.messages[0].kind, MessageType::AgentFramework);
        assert_eq!(h.origin[0].instantiation_index, 0);

        for f in [
            json!({}),
            json!({"chat_filter_type": "UNKNOWN"}),
            json!({"chat_filter_type": "SOMETHING"}),
            json!({"chat_filter_type": 1}),
        ] {
            let r: ChatRequest = serde_json::from_value(json!({"chat_filter": f})).unwrap();
            assert_eq!(r.filter(), FilterType::Minimal);
        }
        let r: ChatRequest = serde_json::from_value(json!({"chat_filter": {"chat_filter_type": 2}})).unwrap();
        assert_eq!(r.filter(), FilterType::Maximal);
        let bad = serde_json::from_value::<ChatRequest>(json!({"user_message": {"type": "ROBOT"}})).unwrap_err();
        assert!(bad.to_string().contains("unknown message type \"ROBOT\""), "{bad}");
        // Unknown numbers are UNKNOWN, as protobuf reads open enums.
        let m: ChatMessage = serde_json::from_value(json!({"type": 3, "text": "x"})).unwrap();
        assert_eq!(m.kind, MessageType::Unknown);
    }

    #[test]
    fn a_response_writes_type_names_and_leaves_out_empty_fields() {
        let mut m = ChatMessage::new(MessageType::AgentFramework, "answer");
        m.origin = vec![Origin::of("memory")];
        let line = serde_json::to_value(ChatResponse { request: None, response: m }).unwrap();
        assert_eq!(
            line,
            json!({"response": {"type": "AGENT_FRAMEWORK", "text": "answer", "origin": [{"tool": "memory", "instantiation_index": 1}]}})
        );
    }
}
