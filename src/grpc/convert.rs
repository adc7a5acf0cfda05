//! The protobuf messages to and from the serde types the rest of the agent
//! server speaks: chat messages (`crate::service::chat::wire`) both ways, and the
//! registry's answers (list, function, connectivity) to protobuf.
//!
//! `wire` holds `MimeData.mime_bytes` as base64 text (the JSON mapping of
//! `bytes`); here it is raw bytes.

use super::pb;
use super::structs::{from_struct, to_struct, to_struct_opt};
use crate::service::chat::{AgentNetwork, ConnectivityInfo, FunctionSpec, NetworkInfo};
use crate::service::chat::wire;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;

// ---- chat messages: protobuf -> wire ----------------------------------------

pub fn request_from_pb(r: pb::agent::ChatRequest) -> wire::ChatRequest {
    wire::ChatRequest {
        sly_data: r.sly_data.as_ref().map(from_struct),
        user_message: r.user_message.map(message_from_pb),
        chat_context: r.chat_context.map(context_from_pb),
        chat_filter: r.chat_filter.map(|f| wire::ChatFilter {
            chat_filter_type: wire::FilterType::from_number(i64::from(f.chat_filter_type)),
        }),
    }
}

pub fn message_from_pb(m: pb::chat::ChatMessage) -> wire::ChatMessage {
    wire::ChatMessage {
        kind: wire::MessageType::from_number(i64::from(m.r#type)),
        text: m.text,
        mime_data: m
            .mime_data
            .into_iter()
            .map(|d| wire::MimeData { mime_type: d.mime_type, mime_bytes: STANDARD.encode(&d.mime_bytes) })
            .collect(),
        origin: m.origin.into_iter().map(origin_from_pb).collect(),
        structure: m.structure.as_ref().map(from_struct),
        chat_context: m.chat_context.map(context_from_pb),
        tool_result_origin: m.tool_result_origin.into_iter().map(origin_from_pb).collect(),
        sly_data: m.sly_data.as_ref().map(from_struct),
    }
}

fn context_from_pb(c: pb::chat::ChatContext) -> wire::ChatContext {
    wire::ChatContext {
        chat_histories: c
            .chat_histories
            .into_iter()
            .map(|h| wire::ChatHistory {
                origin: h.origin.into_iter().map(origin_from_pb).collect(),
                messages: h.messages.into_iter().map(message_from_pb).collect(),
            })
            .collect(),
    }
}

fn origin_from_pb(o: pb::chat::Origin) -> wire::Origin {
    wire::Origin { tool: o.tool, instantiation_index: o.instantiation_index }
}

// ---- chat messages: wire -> protobuf ----------------------------------------

pub fn response_to_pb(r: wire::ChatResponse) -> pb::agent::ChatResponse {
    pb::agent::ChatResponse { request: r.request.map(request_to_pb), response: Some(message_to_pb(r.response)) }
}

pub fn request_to_pb(r: wire::ChatRequest) -> pb::agent::ChatRequest {
    pb::agent::ChatRequest {
        sly_data: r.sly_data.as_ref().map(to_struct),
        user_message: r.user_message.map(message_to_pb),
        chat_context: r.chat_context.map(context_to_pb),
        chat_filter: r.chat_filter.map(|f| pb::agent::ChatFilter {
            chat_filter_type: match f.chat_filter_type {
                wire::FilterType::Minimal => pb::agent::ChatFilterType::Minimal,
                wire::FilterType::Maximal => pb::agent::ChatFilterType::Maximal,
            } as i32,
        }),
    }
}

pub fn message_to_pb(m: wire::ChatMessage) -> pb::chat::ChatMessage {
    pb::chat::ChatMessage {
        r#type: m.kind.number(),
        text: m.text,
        mime_data: m
            .mime_data
            .into_iter()
            .map(|d| pb::mime_data::MimeData { mime_type: d.mime_type, mime_bytes: decode_base64(&d.mime_bytes) })
            .collect(),
        origin: m.origin.into_iter().map(origin_to_pb).collect(),
        structure: m.structure.as_ref().map(to_struct),
        chat_context: m.chat_context.map(context_to_pb),
        tool_result_origin: m.tool_result_origin.into_iter().map(origin_to_pb).collect(),
        sly_data: m.sly_data.as_ref().map(to_struct),
    }
}

fn context_to_pb(c: wire::ChatContext) -> pb::chat::ChatContext {
    pb::chat::ChatContext {
        chat_histories: c
            .chat_histories
            .into_iter()
            .map(|h| pb::chat::ChatHistory {
                origin: h.origin.into_iter().map(origin_to_pb).collect(),
                messages: h.messages.into_iter().map(message_to_pb).collect(),
            })
            .collect(),
    }
}

fn origin_to_pb(o: wire::Origin) -> pb::chat::Origin {
    pb::chat::Origin { tool: o.tool, instantiation_index: o.instantiation_index }
}

/// Base64 as the proto3 JSON mapping accepts it: standard or URL-safe,
/// padded or not. Text that is not base64 at all is kept as its bytes
/// rather than lost.
fn decode_base64(s: &str) -> Vec<u8> {
    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD_ANY: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
    const URL_SAFE_ANY: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
    STANDARD_ANY.decode(s).or_else(|_| URL_SAFE_ANY.decode(s)).unwrap_or_else(|_| s.as_bytes().to_vec())
}

// ---- the registry's answers -------------------------------------------------

pub fn list_to_pb(list: Vec<NetworkInfo>) -> pb::concierge::ConciergeResponse {
    pb::concierge::ConciergeResponse {
        agents: list
            .into_iter()
            .map(|n| pb::concierge::AgentInfo { agent_name: n.agent_name, description: n.description, tags: n.tags })
            .collect(),
    }
}

pub fn function_to_pb(f: &FunctionSpec) -> pb::agent::FunctionResponse {
    pb::agent::FunctionResponse {
        function: Some(pb::agent::Function {
            description: f.description.clone(),
            parameters: to_struct_opt(f.parameters.as_ref()),
            sly_data_schema: to_struct_opt(f.sly_data_schema.as_ref()),
            sly_data_output_schema: to_struct_opt(f.sly_data_output_schema.as_ref()),
        }),
    }
}

pub fn connectivity_to_pb(network: &AgentNetwork) -> pb::agent::ConnectivityResponse {
    pb::agent::ConnectivityResponse {
        connectivity_info: network.connectivity().into_iter().map(info_to_pb).collect(),
        metadata: Some(to_struct(&network.metadata.raw)),
    }
}

fn info_to_pb(i: ConnectivityInfo) -> pb::agent::ConnectivityInfo {
    pb::agent::ConnectivityInfo {
        origin: i.origin,
        tools: i.tools,
        display_as: i.display_as,
        metadata: i.metadata.as_ref().map(to_struct),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// A message with every field set, nested contexts included.
    fn full_message(kind: wire::MessageType, text: &str) -> wire::ChatMessage {
        wire::ChatMessage {
            kind,
            text: text.into(),
            mime_data: vec![wire::MimeData {
                mime_type: "image/png".into(),
                mime_bytes: STANDARD.encode([0u8, 1, 254, 255]),
            }],
            origin: vec![wire::Origin::of("memory"), wire::Origin { tool: "remember".into(), instantiation_index: 2 }],
            structure: Some(obj(json!({"answer": [1, 2.5, null, {"ok": true}]}))),
            chat_context: Some(wire::ChatContext {
                chat_histories: vec![wire::ChatHistory {
                    origin: vec![wire::Origin::of("memory")],
                    messages: vec![
                        wire::ChatMessage::new(wire::MessageType::Human, "remember Person:sarah works_at Org:acme"),
                        wire::ChatMessage::new(wire::MessageType::Ai, "Remembered."),
                    ],
                }],
            }),
            tool_result_origin: vec![wire::Origin::of("recall")],
            sly_data: Some(obj(json!({"user_id": 7, "flags": ["a"], "none": null}))),
        }
    }

    #[test]
    fn a_request_converts_to_the_wire_and_back() {
        let mut context_message = full_message(wire::MessageType::AgentFramework, "earlier answer");
        context_message.chat_context = None;
        let req = wire::ChatRequest {
            sly_data: Some(obj(json!({"k": {"nested": [1, "two", false]}}))),
            user_message: Some(wire::ChatMessage::new(wire::MessageType::Human, "what do you know about Person:sarah")),
            chat_context: Some(wire::ChatContext {
                chat_histories: vec![
                    wire::ChatHistory { origin: vec![wire::Origin::of("memory")], messages: vec![context_message] },
                    wire::ChatHistory {
                        origin: vec![wire::Origin::of("memory"), wire::Origin::of("recall")],
                        messages: vec![],
                    },
                ],
            }),
            chat_filter: Some(wire::ChatFilter { chat_filter_type: wire::FilterType::Maximal }),
        };
        let pb = request_to_pb(req.clone());
        assert_eq!(pb.chat_filter.unwrap().chat_filter_type, 2);
        assert_eq!(pb.user_message.as_ref().unwrap().r#type, 2);
        let histories = &pb.chat_context.as_ref().unwrap().chat_histories;
        assert_eq!(histories.len(), 2);
        assert_eq!(histories[0].messages[0].r#type, 101);
        assert_eq!(histories[0].messages[0].mime_data[0].mime_bytes, [0, 1, 254, 255]);
        assert_eq!(request_from_pb(pb), req);
    }

    #[test]
    fn a_protobuf_request_reads_as_the_wire_request() {
        let pb = pb::agent::ChatRequest {
            sly_data: None,
            user_message: Some(pb::chat::ChatMessage {
                r#type: pb::chat::chat_message::ChatMessageType::Human as i32,
                text: "remember Person:sarah works_at Org:acme".into(),
                ..Default::default()
            }),
            chat_context: None,
            chat_filter: None,
        };
        let w = request_from_pb(pb);
        assert_eq!(w.filter(), wire::FilterType::Minimal);
        let m = w.user_message.unwrap();
        assert_eq!((m.kind, m.text.as_str()), (wire::MessageType::Human, "remember Person:sarah works_at Org:acme"));
        assert!(m.structure.is_none() && m.sly_data.is_none() && m.chat_context.is_none());

        // UNKNOWN (0) and MINIMAL (1) are MINIMAL; MAXIMAL (2) is MAXIMAL.
        for (n, want) in
            [(0, wire::FilterType::Minimal), (1, wire::FilterType::Minimal), (2, wire::FilterType::Maximal)]
        {
            let pb = pb::agent::ChatRequest {
                chat_filter: Some(pb::agent::ChatFilter { chat_filter_type: n }),
                ..Default::default()
            };
            assert_eq!(request_from_pb(pb).filter(), want, "filter {n}");
        }
        // An enum number no version defines is UNKNOWN, as protobuf reads open enums.
        let m = message_from_pb(pb::chat::ChatMessage { r#type: 3, ..Default::default() });
        assert_eq!(m.kind, wire::MessageType::Unknown);
    }

    #[test]
    fn a_response_converts_with_every_field() {
        let resp = wire::ChatResponse {
            request: Some(wire::ChatRequest {
                user_message: Some(wire::ChatMessage::new(wire::MessageType::Human, "hi")),
                ..Default::default()
            }),
            response: full_message(wire::MessageType::AgentFramework, "Remembered: Person:sarah works_at Org:acme"),
        };
        let pb = response_to_pb(resp.clone());
        let m = pb.response.as_ref().unwrap();
        assert_eq!(m.r#type, pb::chat::chat_message::ChatMessageType::AgentFramework as i32);
        assert_eq!(m.origin[1].tool, "remember");
        assert_eq!(m.origin[1].instantiation_index, 2);
        assert_eq!(m.tool_result_origin[0].tool, "recall");
        let h = &m.chat_context.as_ref().unwrap().chat_histories[0];
        assert_eq!(h.origin[0].tool, "memory");
        assert_eq!(h.messages[1].text, "Remembered.");
        assert!(m.structure.as_ref().unwrap().fields.contains_key("answer"));
        assert!(m.sly_data.as_ref().unwrap().fields.contains_key("user_id"));
        assert_eq!(pb.request.as_ref().unwrap().user_message.as_ref().unwrap().text, "hi");

        // Back to the wire: the same response (the request without a filter stays without one).
        let back = wire::ChatResponse {
            request: pb.request.clone().map(request_from_pb),
            response: message_from_pb(pb.response.clone().unwrap()),
        };
        assert_eq!(back, resp);
    }

    #[test]
    fn every_message_type_keeps_its_number() {
        for t in wire::MessageType::ALL {
            let pb = message_to_pb(wire::ChatMessage::new(t, "x"));
            assert_eq!(pb.r#type, t.number());
            assert_eq!(message_from_pb(pb).kind, t);
        }
        assert_eq!(pb::chat::chat_message::ChatMessageType::AgentFramework as i32, 101);
        assert_eq!(pb::chat::chat_message::ChatMessageType::AgentProgress as i32, 104);
    }

    #[test]
    fn mime_bytes_read_any_base64_the_json_mapping_allows() {
        assert_eq!(decode_base64("AAH+/w=="), [0, 1, 254, 255]);
        assert_eq!(decode_base64("AAH+/w"), [0, 1, 254, 255]);
        assert_eq!(decode_base64("AAH-_w"), [0, 1, 254, 255]);
        assert_eq!(decode_base64(""), Vec::<u8>::new());
        assert_eq!(decode_base64("not base64!"), b"not base64!");
    }

    #[test]
    fn function_and_connectivity_keep_the_json_shapes() {
        let f = FunctionSpec {
            description: "d".into(),
            parameters: Some(json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})),
            sly_data_schema: None,
            sly_data_output_schema: Some(json!("not an object")),
        };
        let pb = function_to_pb(&f).function.unwrap();
        assert_eq!(pb.description, "d");
        let params = Value::Object(from_struct(pb.parameters.as_ref().unwrap()));
        assert_eq!(params, f.parameters.unwrap());
        assert!(pb.sly_data_schema.is_none() && pb.sly_data_output_schema.is_none());

        let list = list_to_pb(vec![NetworkInfo {
            agent_name: "deep/math_guy".into(),
            description: "math".into(),
            tags: vec!["a".into()],
        }]);
        assert_eq!(list.agents[0].agent_name, "deep/math_guy");
        assert_eq!(list.agents[0].tags, ["a"]);
    }
}
