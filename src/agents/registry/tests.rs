use super::*;
use serde_json::json;
use std::fs;

fn fixtures(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents").join(name)
}

/// Errors as displayed, for matching whole messages.
fn shown(report: &ReloadReport) -> Vec<String> {
    report.errors.iter().map(ToString::to_string).collect()
}

fn has(lines: &[String], expected: &str) {
    assert!(lines.iter().any(|l| l == expected), "missing\n  {expected}\nin\n  {}", lines.join("\n  "));
}

fn has_prefix(lines: &[String], prefix: &str) {
    assert!(
        lines.iter().any(|l| l.starts_with(prefix)),
        "nothing starts with\n  {prefix}\nin\n  {}",
        lines.join("\n  ")
    );
}

/// Copies a fixture directory so a test can edit it.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn no_directory_serves_only_memory() {
    let r = Registry::builtin_only();
    assert_eq!(r.snapshot().names().collect::<Vec<_>>(), ["memory"]);
    assert_eq!(r.list().len(), 1);
    assert_eq!(r.list()[0].agent_name, "memory");
    let report = r.reload();
    assert_eq!(report.loaded, ["memory"]);
    assert!(report.errors.is_empty());
}

#[test]
fn the_memory_network() {
    let n = memory_network();
    assert_eq!(n.front_man().name, "memory");
    assert_eq!(n.front_man().kind, AgentKind::Llm);
    let tools: Vec<String> = n.front_man().tools.iter().map(ToString::to_string).collect();
    assert_eq!(tools, ["remember", "recall", "build_context", "history", "whats_changed"]);
    for tool in MemoryTool::ALL {
        let agent = n.agent(tool.name()).unwrap();
        assert_eq!(agent.kind, AgentKind::Memory(tool));
        assert!(!agent.function.description.is_empty(), "{}", tool.name());
        let params = agent.function.parameters.as_ref().unwrap();
        assert_eq!(params["type"], "object", "{}", tool.name());
        // Always the caller's namespace: the argument is not offered.
        assert!(params["properties"].get("namespace").is_none(), "{}", tool.name());
        assert!(params["properties"].as_object().is_some_and(|p| !p.is_empty()), "{}", tool.name());
    }
    assert_eq!(
        n.agent("remember").unwrap().function.parameters.as_ref().unwrap()["required"],
        json!(["subject", "predicate", "object"])
    );
    assert_eq!(n.agent("recall").unwrap().function.parameters.as_ref().unwrap()["required"], json!(["question"]));
    assert_eq!(n.agent("history").unwrap().function.parameters.as_ref().unwrap()["required"], json!(["subject"]));
    // Callable from other networks: it says what to pass.
    assert_eq!(n.function().parameters.as_ref().unwrap()["required"], json!(["inquiry"]));
    assert!(n.unsupported_agents().is_empty());
    let connectivity = n.connectivity();
    assert_eq!(connectivity.len(), 6);
    assert_eq!(connectivity[1].display_as, "coded_tool");
}

#[test]
fn loads_the_good_fixtures() {
    let (r, report) = Registry::load(fixtures("good"));
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.loaded, ["deep/math_guy", "hello", "memory", "music", "passthrough"]);

    // /list: deep/math_guy is served but not public.
    let list = r.list();
    let names: Vec<&str> = list.iter().map(|i| i.agent_name.as_str()).collect();
    assert_eq!(names, ["hello", "memory", "music", "passthrough"]);
    let hello = &list[0];
    assert_eq!(hello.description, "Writes terse announcements.");
    assert_eq!(hello.tags, ["example", "writing"]);
    assert!(r.get("deep/math_guy").is_some());
    assert!(r.get("switched_off").is_none());
}

#[test]
fn hello_reads_as_written() {
    let (r, _) = Registry::load(fixtures("good"));
    let n = r.get("hello").unwrap();
    assert_eq!(n.path.as_deref(), Some(fixtures("good").join("hello.hocon").as_path()));
    assert_eq!(n.function().description, "\nI write terse announcements.\nTell me the audience and the sentiment.\n");
    assert_eq!(n.metadata.sample_queries, ["Announce the launch to the team."]);
    assert_eq!(n.llm_config.as_ref().unwrap().max_tokens, Some(512));
    let synonymizer = n.agent("synonymizer").unwrap();
    assert_eq!(synonymizer.function.parameters.as_ref().unwrap()["required"], json!(["input_string"]));
    assert_eq!(
        serde_json::to_value(n.connectivity()).unwrap(),
        json!([
            {"origin": "announcer", "tools": ["synonymizer"], "display_as": "llm_agent"},
            {"origin": "synonymizer", "tools": [], "display_as": "llm_agent"}
        ])
    );
    assert!(n
        .warnings
        .iter()
        .any(|w| w == "hello.hocon: tools[1].command: deprecated in neuro-san and not used by this server, ignored"));
}

#[test]
fn music_uses_includes_and_substitutions() {
    let (r, report) = Registry::load(fixtures("good"));
    let n = r.get("music").unwrap();
    // From common/llm.hocon, included before the root braces.
    let base = n.llm_config.as_ref().unwrap();
    assert_eq!(base.model_name.as_deref(), Some("gpt-4o-mini"));
    assert_eq!(base.api_key_env.as_deref(), Some("TEMPORA_TEST_LLM_KEY"));
    assert_eq!(base.base_url.as_deref(), Some("http://localhost:11434/v1"));
    // A triple-quoted string concatenated with a substitution.
    assert_eq!(
        n.front_man().instructions.as_deref(),
        Some("You are a music expert. \nWhen a question is outside what you know, ask your tools before answering.")
    );
    // A substituted agent name and a substituted function object.
    let historian = n.agent("historian").expect("name from ${expert_name}");
    assert_eq!(historian.function.description, "Answers a question in its field.");
    assert_eq!(historian.function.parameters.as_ref().unwrap()["required"], json!(["question"]));
    assert_eq!(historian.display_as(), "expert");
    let own = n.effective_llm_config(historian).unwrap();
    assert_eq!((own.model_name.as_deref(), own.temperature), (Some("gpt-4o"), Some(0.7)));
    assert_eq!(own.api_key_env.as_deref(), Some("TEMPORA_TEST_LLM_KEY"));
    // A substituted function extended in place, and a three-part concatenation.
    let critic = n.agent("critic").unwrap();
    assert_eq!(critic.function.description, "Reviews albums.");
    assert_eq!(critic.function.parameters.as_ref().unwrap()["required"], json!(["question"]));
    assert_eq!(
        critic.instructions.as_deref(),
        Some(concat!(
            "Be fair. Review the album asked about. \n",
            "When a question is outside what you know, ask your tools before answering."
        ))
    );
    // The map form of allow.to_upstream.sly_data.
    assert_eq!(n.front_man().allow_upstream_sly_data, BTreeSet::from(["running_cost".to_string()]));
    // The coded tool loads, flagged.
    let accountant = n.agent("Accountant").unwrap();
    assert_eq!(accountant.kind, AgentKind::CodedTool { class: "accountant.Accountant".into() });
    assert!(!accountant.is_runnable());
    assert_eq!(n.unsupported_agents(), ["Accountant"]);
    let warnings = report.warnings.join("\n");
    assert!(warnings.contains("music.hocon: tools[3].class: Python tools cannot run on this server"), "{warnings}");
    assert!(
        warnings.contains("music.hocon: tools[0].structure_formats: not used by this server, ignored"),
        "{warnings}"
    );
}

#[test]
fn deep_network_with_relative_include() {
    let (r, _) = Registry::load(fixtures("good"));
    let n = r.get("deep/math_guy").unwrap();
    assert_eq!(n.name, "deep/math_guy");
    assert_eq!(n.llm_config.as_ref().unwrap().class.as_deref(), Some("openai"));
    assert_eq!(n.front_man().allow_upstream_sly_data, BTreeSet::from(["equals".to_string()]));
    assert!(n.function().sly_data_schema.is_some());
    assert_eq!(n.metadata.raw["rai_scores"], json!({"safety": 0.8}));
    assert_eq!(n.connectivity()[0].metadata, Some(json!({"rai_scores": {"safety": 0.9}}).as_object().unwrap().clone()));
}

#[test]
fn passthrough_refers_to_other_networks() {
    let (r, _) = Registry::load(fixtures("good"));
    let n = r.get("passthrough").unwrap();
    assert_eq!(n.front_man().tools, [ToolRef::External("deep/math_guy".into()), ToolRef::External("memory".into())]);
    assert_eq!(n.connectivity()[0].tools, ["/deep/math_guy", "/memory"]);
}

#[test]
fn bad_fixtures_report_each_file_and_serve_the_rest() {
    let (r, report) = Registry::load(fixtures("bad"));
    assert_eq!(report.loaded, ["fine", "memory"]);
    let e = shown(&report);
    // The whole file is missing: no position.
    has_prefix(&e, "missing.hocon: cannot read missing.hocon: ");
    has(&e, "syntax.hocon: line 4, column 34: unterminated string: expected a closing '\"'");
    has(&e, "missing_include.hocon: line 1, column 1: included file \"no_such_fragment.hocon\" not found");
    has(&e, "no_tools.hocon: tools: required: the list of agents, front man first");
    has(&e, "empty_tools.hocon: tools: must list at least one agent: the first is the front man");
    has(&e, "wrong_types.hocon: tools[1].function.parameters: expected an object, got a string");
    has(&e, "wrong_types.hocon: tools[1].instructions: expected a string, got a number");
    has(&e, "duplicate_names.hocon: tools[1].name: duplicate agent name 'twin' (also tools[0])");
    has(
        &e,
        "unknown_local_tool.hocon: tools[0].tools[0]: no agent named 'ghost' in this file (a network on this \
        server is /ghost)",
    );
    has(
        &e,
        "front_man_without_description.hocon: tools[0].function: required for the front man: its description is \
        what callers see",
    );
    has(&e, "coded_front_man.hocon: tools[0].class: the front man must be an LLM agent, not a coded or toolbox tool");
    has(&e, "unknown_network.hocon: tools: /nowhere is not a network served here (not in the manifest, or not loaded)");
    // Refers to a network that exists as a file but failed: refused in turn.
    has(
        &e,
        "calls_unknown_network.hocon: tools: /unknown_network is not a network served here (not in the manifest, \
        or not loaded)",
    );
    has(&e, "memory.hocon: the name 'memory' belongs to the built-in memory network and cannot be replaced");
    has_prefix(&e, "secret_in_file.hocon: llm_config.api_key: secrets are never read from network files");
    assert!(
        e.iter().any(|l| l.starts_with("missing_include.hocon: ")
            && l.contains("included file \"no_such_fragment.hocon\" not found")),
        "{e:#?}"
    );
    assert!(
        e.iter().any(|l| l.starts_with("substitution_cycle.hocon: ") && l.contains("substitution cycle")),
        "{e:#?}"
    );
    has_prefix(&e, "remote_tool.hocon: tools[0].tools[0]: 'http://localhost/deep/math_guy': remote agents");
    has_prefix(&e, "bad_allow.hocon: tools[0].allow.to_upstream.sly_data: expected a list of keys");
    has(&e, "not_hocon.txt: manifest entries are .hocon files");
    has(&e, "../escape.hocon: invalid network name '../escape': path segments cannot be empty, '.' or '..'");
    has(&e, "manifest.hocon: bad_entry.hocon: expected true, false or an object { serve, public }, got \"yes\"");
    // Every entry but fine.hocon is reported: nothing is silently dropped.
    let files: BTreeSet<&str> = report.errors.iter().map(|e| e.file.as_str()).collect();
    assert_eq!(files.len(), 20, "{files:#?}");
    // The snapshot keeps the errors for later inspection.
    assert_eq!(r.snapshot().errors().len(), report.errors.len());
    assert_eq!(r.list().iter().map(|i| i.agent_name.as_str()).collect::<Vec<_>>(), ["fine", "memory"]);
}

#[test]
fn a_missing_directory_or_manifest_still_serves_memory() {
    let d = tempfile::tempdir().unwrap();
    let (r, report) = Registry::load(d.path().join("nope"));
    assert_eq!(report.loaded, ["memory"]);
    assert_eq!(report.errors.len(), 1);
    assert_eq!(report.errors[0].file, "manifest.hocon");
    assert!(report.errors[0].message.contains("cannot read"), "{}", report.errors[0]);
    assert!(r.get("memory").is_some());
}

#[test]
fn reload_swaps_in_the_new_state_atomically() {
    let d = tempfile::tempdir().unwrap();
    copy_dir(&fixtures("good"), d.path());
    let (r, _) = Registry::load(d.path());
    let shared = r.clone();
    let before = r.snapshot();
    assert_eq!(before.get("hello").unwrap().metadata.description, "Writes terse announcements.");

    // Edit one file, add one, and remove one from the manifest.
    let hello = fs::read_to_string(d.path().join("hello.hocon")).unwrap();
    fs::write(d.path().join("hello.hocon"), hello.replace("Writes terse announcements.", "Writes short notes."))
        .unwrap();
    fs::write(
        d.path().join("extra.hocon"),
        "tools = [{ name = extra, function.description = \"Extra.\", instructions = \"Be extra.\" }]",
    )
    .unwrap();
    let manifest = fs::read_to_string(d.path().join("manifest.hocon")).unwrap();
    fs::write(d.path().join("manifest.hocon"), manifest.replace("\"music.hocon\": true,", "\"extra.hocon\": true,"))
        .unwrap();

    let report = shared.reload();
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.loaded, ["deep/math_guy", "extra", "hello", "memory", "passthrough"]);
    // Every clone sees the new set ...
    assert_eq!(r.get("hello").unwrap().metadata.description, "Writes short notes.");
    assert!(r.get("music").is_none());
    assert!(r.get("extra").is_some());
    // ... while a snapshot taken before keeps the old one whole.
    assert_eq!(before.get("hello").unwrap().metadata.description, "Writes terse announcements.");
    assert!(before.get("music").is_some());
    assert!(before.get("extra").is_none());
}

#[test]
fn reload_drops_a_file_that_broke_and_keeps_the_rest() {
    let d = tempfile::tempdir().unwrap();
    copy_dir(&fixtures("good"), d.path());
    let (r, _) = Registry::load(d.path());
    fs::write(d.path().join("deep/math_guy.hocon"), "tools = [").unwrap();
    let report = r.reload();
    let e = shown(&report);
    has_prefix(&e, "deep/math_guy.hocon: ");
    // passthrough calls /deep/math_guy, so it cannot be served either.
    has(
        &e,
        "passthrough.hocon: tools: /deep/math_guy is not a network served here (not in the manifest, or not loaded)",
    );
    assert_eq!(report.loaded, ["hello", "memory", "music"]);
    assert!(r.get("deep/math_guy").is_none());
}

#[test]
fn reload_with_an_unreadable_manifest_keeps_the_current_networks() {
    let d = tempfile::tempdir().unwrap();
    copy_dir(&fixtures("good"), d.path());
    let (r, _) = Registry::load(d.path());
    fs::write(d.path().join("manifest.hocon"), "{ \"hello.hocon\": tru").unwrap();
    let report = r.reload();
    assert_eq!(report.errors[0].file, "manifest.hocon");
    assert!(report.errors[0].message.starts_with("line 1, column "), "{}", report.errors[0]);
    assert_eq!(report.loaded, ["deep/math_guy", "hello", "memory", "music", "passthrough"]);
    assert!(r.get("music").is_some());
}

#[test]
fn concurrent_readers_during_reloads_see_whole_snapshots() {
    let d = tempfile::tempdir().unwrap();
    copy_dir(&fixtures("good"), d.path());
    let (r, _) = Registry::load(d.path());
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let r = r.clone();
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let s = r.snapshot();
                    // passthrough is only ever served together with what it calls.
                    if s.get("passthrough").is_some() {
                        assert!(s.get("deep/math_guy").is_some());
                    }
                    assert!(s.get("memory").is_some());
                }
            })
        })
        .collect();
    for i in 0..20 {
        let text =
            if i % 2 == 0 { "tools = [" } else { "tools = [{ name = m, function.description = d, instructions = i }]" };
        fs::write(d.path().join("deep/math_guy.hocon"), text).unwrap();
        r.reload();
    }
    for reader in readers {
        reader.join().unwrap();
    }
}

/// The worked example of docs/agents.md loads as the page says.
#[test]
fn the_documented_example_loads() {
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/agents.md")).unwrap();
    let d = tempfile::tempdir().unwrap();
    let mut lines = doc.lines();
    let mut written = Vec::new();
    while let Some(line) = lines.next() {
        // A file is a line "`registries/<file>`..." followed by a ```hocon block.
        let Some(rest) = line.strip_prefix("`registries/") else { continue };
        let Some((file, _)) = rest.split_once('`') else { continue };
        assert_eq!(lines.next(), Some(""));
        assert_eq!(lines.next(), Some("```hocon"));
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        fs::write(d.path().join(file), body.join("\n")).unwrap();
        written.push(file.to_string());
    }
    assert_eq!(written, ["manifest.hocon", "llm.hocon", "support.hocon"]);
    let (r, report) = Registry::load(d.path());
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    let n = r.get("support").unwrap();
    assert_eq!(n.front_man().tools, [ToolRef::Local("order_desk".into()), ToolRef::External("memory".into())]);
    assert_eq!(n.front_man().allow_upstream_sly_data, BTreeSet::from(["ticket_id".to_string()]));
    let desk = n.agent("order_desk").unwrap();
    assert_eq!(desk.function.parameters.as_ref().unwrap()["required"], json!(["question"]));
    let cfg = n.effective_llm_config(desk).unwrap();
    assert_eq!((cfg.model_name.as_deref(), cfg.temperature), (Some("gpt-4o-mini"), Some(0.0)));
    assert_eq!(cfg.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    // The fragment kept for substitution is the only warning.
    assert_eq!(report.warnings, ["support.hocon: lookup_call: not used by this server, ignored"]);
}
