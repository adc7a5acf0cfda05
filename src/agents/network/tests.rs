use super::*;
use crate::agents::hocon;
use serde_json::json;

fn build(value: Value) -> Result<AgentNetwork, Vec<NetworkError>> {
    AgentNetwork::from_value("net", "registries/net.hocon", None, &value)
}

fn ok(value: Value) -> AgentNetwork {
    match build(value) {
        Ok(n) => n,
        Err(errors) => panic!("unexpected errors: {errors:#?}"),
    }
}

/// The errors as displayed, for matching whole messages.
fn errors(value: Value) -> Vec<String> {
    match build(value) {
        Ok(n) => panic!("expected errors, got {n:#?}"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

fn has(errors: &[String], expected: &str) {
    assert!(errors.iter().any(|e| e == expected), "missing\n  {expected}\nin\n  {}", errors.join("\n  "));
}

fn front(extra: Value) -> Value {
    let mut agent = json!({"name": "front", "function": {"description": "I help."}, "instructions": "Help."});
    if let (Some(a), Value::Object(e)) = (agent.as_object_mut(), extra) {
        a.extend(e);
    }
    agent
}

fn helper(name: &str) -> Value {
    json!({"name": name, "function": {"description": "Helps.", "parameters": {"type": "object",
        "properties": {"q": {"type": "string"}}, "required": ["q"]}}, "instructions": "Help."})
}

#[test]
fn a_complete_network() {
    let n = ok(json!({
        "metadata": {"description": "Helps.", "tags": ["a", "b"], "sample_queries": ["hi"], "rai": {"x": 1}},
        "llm_config": {"class": "openai", "model_name": "gpt-4o", "temperature": 0.5, "max_tokens": 100,
                       "top_p": 0.9, "base_url": "https://llm.example/v1", "api_key_env": "MY_KEY"},
        "tools": [front(json!({"tools": ["helper", "/other/net"], "display_as": "boss"})), helper("helper")]
    }));
    assert_eq!(n.name, "net");
    assert_eq!(n.metadata.tags, ["a", "b"]);
    assert_eq!(n.metadata.sample_queries, ["hi"]);
    assert_eq!(n.metadata.raw["rai"], json!({"x": 1}));
    assert_eq!(n.front_man().name, "front");
    assert_eq!(n.agents[1].name, "helper");
    assert_eq!(n.agents[0].tools, [ToolRef::Local("helper".into()), ToolRef::External("other/net".into())]);
    assert_eq!(n.external_references().into_iter().collect::<Vec<_>>(), ["other/net"]);
    let cfg = n.llm_config.clone().unwrap();
    assert_eq!(cfg.model_name.as_deref(), Some("gpt-4o"));
    assert_eq!(cfg.max_tokens, Some(100));
    assert_eq!(cfg.api_key_env.as_deref(), Some("MY_KEY"));
    assert_eq!(cfg.base_url.as_deref(), Some("https://llm.example/v1"));
    assert!(n.warnings.is_empty(), "{:?}", n.warnings);
    assert_eq!(n.description(), "Helps.");
}

#[test]
fn function_is_the_front_mans_in_neuro_sans_shape() {
    let n = ok(json!({"tools": [front(json!({"function": {"description": "Front.", "parameters": {"type": "object",
        "properties": {"op": {"type": "string"}}}, "sly_data_schema": {"type": "object"}}}))]}));
    assert_eq!(
        serde_json::to_value(n.function()).unwrap(),
        json!({"description": "Front.", "parameters": {"type": "object", "properties": {"op": {"type": "string"}}},
               "sly_data_schema": {"type": "object"}})
    );
}

#[test]
fn connectivity_lists_each_agent_with_its_tools() {
    let n = ok(json!({"tools": [
        front(json!({"tools": ["helper", "/memory"], "metadata": {"k": 1}})),
        json!({"name": "helper", "function": {"description": "Helps."}, "instructions": "x", "tools": ["coded"]}),
        json!({"name": "coded", "function": {"description": "Codes."}, "class": "x.Y"}),
        json!({"name": "box", "function": {"description": "Boxes."}, "toolbox": "requests_get", "display_as": "web"}),
    ]}));
    let c = serde_json::to_value(n.connectivity()).unwrap();
    assert_eq!(
        c,
        json!([
            {"origin": "front", "tools": ["helper", "/memory"], "display_as": "llm_agent", "metadata": {"k": 1}},
            {"origin": "helper", "tools": ["coded"], "display_as": "llm_agent"},
            {"origin": "coded", "tools": [], "display_as": "coded_tool"},
            {"origin": "box", "tools": [], "display_as": "web"},
        ])
    );
    assert!(!n.agent("coded").unwrap().is_runnable());
    assert_eq!(n.agent("box").unwrap().kind, AgentKind::Toolbox { tool: "requests_get".into() });
    // Python tools load with a warning; the unreachable toolbox agent gets one too.
    assert!(n.warnings.iter().any(|w| w.contains("tools[2].class: Python tools cannot run")), "{:?}", n.warnings);
    assert!(n.warnings.iter().any(|w| w.contains("tools[3]: agent 'box' is not reachable")), "{:?}", n.warnings);
}

#[test]
fn agent_llm_config_overrides_the_network_key_by_key() {
    let n = ok(json!({
        "llm_config": {"model_name": "base", "temperature": 0.1, "api_key_env": "K"},
        "tools": [front(json!({"llm_config": {"temperature": 0.9}})), helper("h")]
    }));
    let own = n.effective_llm_config(n.front_man()).unwrap();
    assert_eq!(
        (own.model_name.as_deref(), own.temperature, own.api_key_env.as_deref()),
        (Some("base"), Some(0.9), Some("K"))
    );
    let inherited = n.effective_llm_config(&n.agents[1]).unwrap();
    assert_eq!(inherited.temperature, Some(0.1));
    let none = ok(json!({"tools": [front(json!({}))]}));
    assert_eq!(none.effective_llm_config(none.front_man()), None);
}

#[test]
fn allow_upstream_sly_data_list_and_map_forms() {
    let mut h = helper("h");
    h["allow"] = json!({"to_upstream": {"sly_data": {"x": true, "y": false}}, "to_downstream": {"sly_data": ["z"]}});
    let n =
        ok(json!({"tools": [front(json!({"tools": ["h"], "allow": {"to_upstream": {"sly_data": ["a", "b"]}}})), h]}));
    assert_eq!(n.agents[0].allow_upstream_sly_data, BTreeSet::from(["a".to_string(), "b".to_string()]));
    assert_eq!(n.agents[1].allow_upstream_sly_data, BTreeSet::from(["x".to_string()]));
    assert!(n.warnings.iter().any(|w| w
        .ends_with("tools[1].allow.to_downstream: not used by this server, ignored (only to_upstream.sly_data is)")));
}

#[test]
fn iteration_and_time_bounds_are_read_and_checked() {
    let n = ok(json!({"max_iterations": 5, "max_execution_seconds": 30, "tools": [front(json!({}))]}));
    assert_eq!((n.max_iterations, n.max_execution_seconds), (Some(5), Some(30)));
    let v = json!({"max_iterations": 0, "max_execution_seconds": "soon", "tools": [front(json!({}))]});
    let errors = AgentNetwork::from_value("net", "registries/net.hocon", None, &v).unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(text.contains(&"registries/net.hocon: max_iterations: expected a whole number from 1 to 100, got 0".to_string()), "{text:?}");
    assert!(text.iter().any(|e| e.starts_with("registries/net.hocon: max_execution_seconds: expected a whole number from 1 to 3600")), "{text:?}");
}

#[test]
fn unknown_keys_are_warnings_not_errors() {
    let n = ok(json!({
        "commondefs": {},
        "metadata": {"description": "d", "anything": 1},
        "llm_config": {"model_name": "m", "verbose": true},
        "tools": [front(json!({"structure_formats": "json", "command": "x", "function": {"description": "d",
            "extra": 1}}))]
    }));
    let w = n.warnings.join("\n");
    for expected in [
        "registries/net.hocon: commondefs: not used by this server, ignored",
        "registries/net.hocon: llm_config.verbose: not used by this server, ignored",
        "registries/net.hocon: tools[0].structure_formats: not used by this server, ignored",
        "registries/net.hocon: tools[0].command: deprecated in neuro-san and not used by this server, ignored",
        "registries/net.hocon: tools[0].function.extra: not used by this server, ignored",
    ] {
        assert!(w.contains(expected), "missing {expected} in\n{w}");
    }
    // metadata is free-form: no warning for its extra keys.
    assert!(!w.contains("metadata.anything"), "{w}");
}

#[test]
fn description_falls_back_to_the_front_man() {
    let n = ok(json!({"tools": [front(json!({"function": {"description": "\nFrom the front man.\n"}}))]}));
    assert_eq!(n.description(), "From the front man.");
}

#[test]
fn error_tools_missing_empty_or_not_a_list() {
    has(&errors(json!({"metadata": {}})), "registries/net.hocon: tools: required: the list of agents, front man first");
    has(
        &errors(json!({"tools": []})),
        "registries/net.hocon: tools: must list at least one agent: the first is the front man",
    );
    has(&errors(json!({"tools": {"a": 1}})), "registries/net.hocon: tools: expected an array of agents, got an object");
    has(&errors(json!({"tools": ["x"]})), "registries/net.hocon: tools[0]: expected an object, got a string");
}

#[test]
fn error_names_missing_invalid_duplicate() {
    let e = errors(json!({"tools": [
        front(json!({"tools": ["has space"]})),
        {"function": {"description": "d"}, "instructions": "x"},
        helper("has space"),
        helper("front")
    ]}));
    has(&e, "registries/net.hocon: tools[1].name: required");
    let nameless = json!({"function": {"description": "d"}, "instructions": "x"});
    let two = errors(json!({"tools": [front(json!({})), nameless.clone(), nameless]}));
    assert_eq!(two.len(), 2, "{two:?}");
    assert!(!two.iter().any(|l| l.contains("duplicate agent name ''")), "{two:?}");
    has(
        &e,
        "registries/net.hocon: tools[2].name: invalid agent name 'has space': only letters, digits, '_' and '-' \
        are allowed (it is a tool name for the LLM)",
    );
    has(&e, "registries/net.hocon: tools[3].name: duplicate agent name 'front' (also tools[0])");
    let e = errors(json!({"tools": [front(json!({"name": 7}))]}));
    has(&e, "registries/net.hocon: tools[0].name: expected a string, got a number");
}

#[test]
fn error_front_man_needs_a_function_description_and_must_be_an_llm() {
    let e = errors(json!({"tools": [{"name": "f", "instructions": "x"}]}));
    has(&e, "registries/net.hocon: tools[0].function: required for the front man: its description is what callers see");
    let e = errors(json!({"tools": [{"name": "f", "instructions": "x", "function": {"description": "  "}}]}));
    has(&e, "registries/net.hocon: tools[0].function.description: required for the front man: callers see it");
    let e = errors(json!({"tools": [{"name": "f", "function": {"description": "d"}, "class": "a.B"}]}));
    has(&e, "registries/net.hocon: tools[0].class: the front man must be an LLM agent, not a coded or toolbox tool");
    let e = errors(json!({"tools": [{"name": "f", "function": {"description": "d"}, "toolbox": "t"}]}));
    has(&e, "registries/net.hocon: tools[0].toolbox: the front man must be an LLM agent, not a coded or toolbox tool");
    let e = errors(json!({"tools": [front(json!({"tools": ["c"]})), {"name": "c", "class": "a", "toolbox": "b"}]}));
    has(&e, "registries/net.hocon: tools[1]: an agent has either class or toolbox, not both");
}

#[test]
fn error_llm_agents_need_instructions() {
    let e = errors(json!({"tools": [{"name": "f", "function": {"description": "d"}}]}));
    has(&e, "registries/net.hocon: tools[0].instructions: required for an LLM agent (one without class or toolbox)");
    let e = errors(json!({"tools": [front(json!({"instructions": 3}))]}));
    has(&e, "registries/net.hocon: tools[0].instructions: expected a string, got a number");
    assert_eq!(e.len(), 1, "{e:?}");
}

#[test]
fn error_tool_references() {
    let e = errors(json!({"tools": [front(json!({"tools": ["ghost", "/bad//name", "http://host/agent", {"url": "x"},
            "/../up"]}))]}));
    has(
        &e,
        "registries/net.hocon: tools[0].tools[0]: no agent named 'ghost' in this file (a network on this server \
        is /ghost)",
    );
    has(
        &e,
        "registries/net.hocon: tools[0].tools[1]: invalid network reference '/bad//name': path segments cannot \
        be empty, '.' or '..'",
    );
    has(
        &e,
        "registries/net.hocon: tools[0].tools[2]: 'http://host/agent': remote agents and MCP servers are not \
        supported; name a network on this server as /name",
    );
    has(
        &e,
        "registries/net.hocon: tools[0].tools[3]: expected a string (an agent of this file, or /network), got an \
        object (MCP tool definitions are not supported)",
    );
    has(
        &e,
        "registries/net.hocon: tools[0].tools[4]: invalid network reference '/../up': path segments cannot be \
        empty, '.' or '..'",
    );
    let e = errors(json!({"tools": [front(json!({"tools": "helper"}))]}));
    has(&e, "registries/net.hocon: tools[0].tools: expected an array of agent names, got a string");
}

#[test]
fn error_field_types() {
    let e = errors(json!({
        "metadata": {"description": 1, "tags": "x", "sample_queries": [1]},
        "llm_config": {"temperature": "hot", "max_tokens": -1, "top_p": 2, "base_url": "ftp://x",
            "api_key_env": "1BAD"},
        "tools": [front(json!({"tools": ["h"], "display_as": false, "metadata": [], "allow": []})), {
            "name": "h", "instructions": "x",
            "function": {"description": "d", "parameters": "not an object", "sly_data_schema": {"type": "string"}}
        }]
    }));
    for expected in [
        "registries/net.hocon: metadata.description: expected a string, got a number",
        "registries/net.hocon: metadata.tags: expected an array of strings, got a string",
        "registries/net.hocon: metadata.sample_queries[0]: expected a string, got a number",
        "registries/net.hocon: llm_config.temperature: expected a number, got a string",
        "registries/net.hocon: llm_config.max_tokens: expected a positive integer, got a number",
        "registries/net.hocon: llm_config.top_p: must be between 0 and 1",
        "registries/net.hocon: llm_config.base_url: must start with http:// or https://",
        "registries/net.hocon: llm_config.api_key_env: expected the name of an environment variable \
            ([A-Za-z_][A-Za-z0-9_]*)",
        "registries/net.hocon: tools[0].display_as: expected a string, got a boolean",
        "registries/net.hocon: tools[0].metadata: expected an object, got an array",
        "registries/net.hocon: tools[0].allow: expected an object, got an array",
        "registries/net.hocon: tools[1].function.parameters: expected an object, got a string",
        "registries/net.hocon: tools[1].function.sly_data_schema.type: expected \"object\", got \"string\"",
    ] {
        has(&e, expected);
    }
}

#[test]
fn error_parameters_schema_shape() {
    let e = errors(json!({"tools": [front(json!({"tools": ["h"]})), {"name": "h", "instructions": "x", "function": {
        "description": "d", "parameters": {"type": "object", "properties": {"a": "string"}, "required": ["a",
            "b"]}}}]}));
    has(&e, "registries/net.hocon: tools[1].function.parameters.properties.a: expected an object, got a string");
    has(&e, "registries/net.hocon: tools[1].function.parameters.required[1]: 'b' is not among the properties");
}

#[test]
fn error_allow_sly_data_forms() {
    let e = errors(json!({"tools": [front(json!({"allow": {"to_upstream": {"sly_data": "all"}}}))]}));
    has(
        &e,
        "registries/net.hocon: tools[0].allow.to_upstream.sly_data: expected a list of keys or an object of key \
        = true/false, got a string",
    );
    let e = errors(json!({"tools": [front(json!({"allow": {"to_upstream": {"sly_data": {"k": "yes"}}}}))]}));
    has(&e, "registries/net.hocon: tools[0].allow.to_upstream.sly_data.k: expected a boolean, got a string");
}

#[test]
fn error_secrets_in_llm_config() {
    for key in ["api_key", "openai_api_key", "client_secret", "auth_token"] {
        let e = errors(json!({"llm_config": {key: "s"}, "tools": [front(json!({}))]}));
        has(
            &e,
            &format!(
                "registries/net.hocon: llm_config.{key}: secrets are never read from network files: put the key \
                in an environment variable and name that variable in api_key_env"
            ),
        );
    }
    let e = errors(json!({"tools": [front(json!({"llm_config": {"api_key": "s"}}))]}));
    assert!(e[0].starts_with("registries/net.hocon: tools[0].llm_config.api_key: secrets are never read"), "{e:?}");
}

#[test]
fn error_invalid_network_name() {
    let e = AgentNetwork::from_value("../x", "x.hocon", None, &json!({"tools": [front(json!({}))]})).unwrap_err();
    assert_eq!(e[0].to_string(), "x.hocon: invalid network name '../x': path segments cannot be empty, '.' or '..'");
    assert!(validate_network_name("deep/math_guy").is_ok());
    assert!(validate_network_name("/abs").is_err());
    assert!(validate_network_name("a b").is_err());
}

#[test]
fn all_errors_of_a_file_are_reported_together() {
    let e = errors(json!({"tools": [front(json!({"tools": ["a", "b"]}))]}));
    assert_eq!(e.len(), 2, "{e:?}");
}

#[test]
fn from_hocon_text() {
    let text = r#"
        include "missing-is-not-used.hocon" # never reached: parse_str has no directory
    "#;
    assert!(hocon::parse_str(text, "x", &hocon::Options::default()).is_err());
    let text = r#"
        shared = "Answer in one line."
        tools = [
            {
                name = solo
                function.description = "I answer."
                instructions = """Be brief.""" ${shared}
            }
        ]
    "#;
    let v = hocon::parse_str(text, "solo.hocon", &hocon::Options::default()).unwrap();
    let n = AgentNetwork::from_value("solo", "solo.hocon", None, &v).unwrap();
    assert_eq!(n.front_man().instructions.as_deref(), Some("Be brief. Answer in one line."));
    assert_eq!(n.warnings, ["solo.hocon: shared: not used by this server, ignored"]);
}
