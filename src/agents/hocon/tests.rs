use super::*;
use serde_json::json;

fn parse(text: &str) -> Value {
    match parse_str(text, "test.hocon", &Options::default()) {
        Ok(v) => v,
        Err(e) => panic!("unexpected error: {e}\n--- input ---\n{text}"),
    }
}

fn fail(text: &str) -> HoconError {
    match parse_str(text, "test.hocon", &Options::default()) {
        Ok(v) => panic!("expected an error, got {v}\n--- input ---\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn comments_of_both_kinds() {
    let v = parse("# top\n// also\na = 1 # trailing\nb = 2 // trailing\n");
    assert_eq!(v, json!({"a": 1, "b": 2}));
}

#[test]
fn root_braces_are_optional() {
    assert_eq!(parse("{ a = 1 }"), json!({"a": 1}));
    assert_eq!(parse("a = 1"), json!({"a": 1}));
    assert_eq!(parse(""), json!({}));
    assert_eq!(parse("# only a comment\n"), json!({}));
}

#[test]
fn separators_and_quoted_keys() {
    let v = parse("a = 1\nb: 2\n\"c d\" = 3\nobj { x = 1 }\n\"q\": { y: 2 }");
    assert_eq!(v, json!({"a": 1, "b": 2, "c d": 3, "obj": {"x": 1}, "q": {"y": 2}}));
}

#[test]
fn json_is_hocon() {
    let text = r#"{"a": {"b": [1, 2.5, -3, true, false, null, "s"]}, "c": "x\ny\u00e9\ud83d\ude00"}"#;
    assert_eq!(parse(text), serde_json::from_str::<Value>(text).unwrap());
}

#[test]
fn dotted_paths_build_objects_and_quoted_dots_do_not() {
    let v = parse("a.b.c = 1\na.b.d = 2\n\"x.y\" = 3\n");
    assert_eq!(v, json!({"a": {"b": {"c": 1, "d": 2}}, "x.y": 3}));
}

#[test]
fn repeated_keys_merge_objects_and_later_scalars_win() {
    let v = parse("a { x = 1, y = 1 }\na { y = 2, z = 3 }\nb = 1\nb = 2\nc = { k = 1 }\nc = 5\n");
    assert_eq!(v, json!({"a": {"x": 1, "y": 2, "z": 3}, "b": 2, "c": 5}));
}

#[test]
fn arrays_by_comma_or_newline_with_trailing_commas() {
    let v = parse("a = [1, 2, 3,]\nb = [\n  \"x\"\n  \"y\",\n  # comment\n  \"z\"\n]\nc = []\nd = [[1], {k = v}]");
    assert_eq!(v, json!({"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [], "d": [[1], {"k": "v"}]}));
}

#[test]
fn objects_separated_by_commas_or_newlines_with_trailing_commas() {
    let v = parse("o { a = 1, b = 2, }\np {\n a = 1\n\n b = 2\n}\n");
    assert_eq!(v, json!({"o": {"a": 1, "b": 2}, "p": {"a": 1, "b": 2}}));
}

#[test]
fn strings_quoted_unquoted_and_escapes() {
    let v = parse("a = \"x\\ty\\\"z\\\\\"\nb = hello world  \nc = gpt-4.1\nd = some/path.txt\ne = \"\"");
    assert_eq!(v, json!({"a": "x\ty\"z\\", "b": "hello world", "c": "gpt-4.1", "d": "some/path.txt", "e": ""}));
}

#[test]
fn triple_quoted_strings_are_verbatim_and_multiline() {
    let v = parse("a = \"\"\"\nline \"one\"\n  \\n not an escape\n\"\"\"\nb = \"\"\"x\"\"\"\"\n");
    assert_eq!(v, json!({"a": "\nline \"one\"\n  \\n not an escape\n", "b": "x\""}));
}

#[test]
fn numbers_booleans_null() {
    let v = parse("i = 42\nn = -7\nf = 0.25\ne = 1e3\nt = true\nff = false\nz = null\nnotnum = 1_000\ninf = inf");
    assert_eq!(
        v,
        json!({"i": 42, "n": -7, "f": 0.25, "e": 1000.0, "t": true, "ff": false, "z": null, "notnum": "1_000",
            "inf": "inf"})
    );
    // A quoted number stays a string.
    assert_eq!(parse("a = \"42\""), json!({"a": "42"}));
}

#[test]
fn concatenation_on_one_line() {
    let v = parse("a = foo \"bar\"  baz\nb = \"x\" 1 true\n");
    assert_eq!(v, json!({"a": "foo bar  baz", "b": "x 1 true"}));
}

#[test]
fn substitutions_resolve_against_the_whole_document() {
    let v = parse("a = ${b.c}\nb { c = 5 }\nd = ${b}\ne = ${?missing}\nf = [1, ${?missing}, 2]\n");
    assert_eq!(v, json!({"a": 5, "b": {"c": 5}, "d": {"c": 5}, "f": [1, 2]}));
}

#[test]
fn substitutions_in_strings_and_concatenations() {
    let v = parse(
        "name = world\ngreeting = \"hello \"${name}\ntwo = ${name} ${name}\ntriple = \"\"\"\nDo it.\n\"\"\" ${name}\n",
    );
    assert_eq!(v["greeting"], json!("hello world"));
    assert_eq!(v["two"], json!("world world"));
    assert_eq!(v["triple"], json!("\nDo it.\n world"));
}

#[test]
fn optional_substitution_in_a_string_adds_nothing_but_keeps_the_spaces() {
    assert_eq!(parse("a = \"x\" ${?nope} \"y\""), json!({"a": "x  y"}));
    // Only optional pieces, all missing: the field is gone.
    assert_eq!(parse("a = ${?nope} ${?nope}\nb = 1"), json!({"b": 1}));
}

#[test]
fn substitution_of_objects_and_arrays_concatenates() {
    let v = parse("base { a = 1 }\nmore { b = 2 }\nboth = ${base} ${more}\nxs = [1]\nys = ${xs} [2]\n");
    assert_eq!(v["both"], json!({"a": 1, "b": 2}));
    assert_eq!(v["ys"], json!([1, 2]));
}

#[test]
fn substituted_object_extended_in_place() {
    // neuro-san files write `"function": ${aaosa_call}{ "description": ... }`.
    let v = parse("call { description = generic, parameters { type = object } }\nf = ${call}{ description = own }\n");
    assert_eq!(v["f"], json!({"description": "own", "parameters": {"type": "object"}}));
}

#[test]
fn substitution_through_a_substituted_prefix() {
    let v = parse("a = ${b}\nb { c { d = 1 } }\ne = ${a.c.d}\n");
    assert_eq!(v["e"], json!(1));
}

#[test]
fn substitution_chain_and_reuse() {
    let v = parse("a = ${b}\nb = ${c}\nc = end\nd = [${a}, ${a}]\n");
    assert_eq!(v["d"], json!(["end", "end"]));
}

#[test]
fn error_substitution_missing() {
    let e = fail("a = 1\nb = ${nope.x}\n");
    assert_eq!((e.line, e.column), (2, 5));
    assert!(e.message.contains("${nope.x} not found"), "{e}");
    assert!(e.to_string().starts_with("test.hocon:2:5: "), "{e}");
}

#[test]
fn error_substitution_cycle() {
    let e = fail("a = ${b}\nb = ${c}\nc = ${a}\n");
    assert!(e.message.contains("substitution cycle"), "{e}");
    let e = fail("a { b = ${a} }\n");
    assert!(e.message.contains("cycle"), "{e}");
}

#[test]
fn error_concatenating_object_and_string() {
    let e = fail("o { a = 1 }\nb = ${o} text\n");
    assert!(e.message.contains("cannot concatenate an object"), "{e}");
}

#[test]
fn error_unterminated_strings() {
    let e = fail("a = \"abc\nb = 1");
    assert_eq!((e.line, e.column), (1, 5));
    assert!(e.message.contains("unterminated string"), "{e}");
    let e = fail("a = \"\"\"abc\n");
    assert!(e.message.contains("unterminated triple-quoted"), "{e}");
}

#[test]
fn error_bad_escape() {
    let e = fail(r#"a = "\q""#);
    assert!(e.message.contains("invalid escape"), "{e}");
    let e = fail(r#"a = "\u12""#);
    assert!(e.message.contains("four hex digits"), "{e}");
}

#[test]
fn error_unclosed_object_and_array() {
    let e = fail("a { b = 1\n");
    assert!(e.message.contains("expected '}'"), "{e}");
    let e = fail("a = [1, 2\n");
    assert!(e.message.contains("expected ']'"), "{e}");
}

#[test]
fn error_missing_separator_and_value() {
    let e = fail("a 1\n");
    assert!(e.message.contains("expected '=', ':' or '{'"), "{e}");
    let e = fail("a = \n}");
    assert!(e.message.contains("expected a value"), "{e}");
    let e = fail("a = [1,,2]");
    assert!(e.message.contains("expected a value in the array"), "{e}");
}

#[test]
fn error_two_fields_on_one_line_and_stray_characters() {
    let e = fail("a = 1 b = 2\n");
    assert!(e.message.contains("unexpected '='"), "{e}");
    let e = fail("a = x?y\n");
    assert!(e.message.contains("unexpected '?'"), "{e}");
}

#[test]
fn error_unsupported_append_and_root_array() {
    assert!(fail("a += 1").message.contains("'+=' is not supported"));
    assert!(fail("[1, 2]").message.contains("expected an object at the root"));
}

#[test]
fn error_input_size_limit() {
    let options = Options { limits: Limits { max_bytes: 10, ..Limits::default() }, ..Options::default() };
    let e = parse_str("a = 12345678901234567890", "big.hocon", &options).unwrap_err();
    assert!(e.message.contains("larger than the limit"), "{e}");
}

#[test]
fn error_nesting_depth_limit() {
    let deep = format!("a = {}1{}", "[".repeat(100), "]".repeat(100));
    assert!(fail(&deep).message.contains("nesting deeper than the limit"));
    let deep = format!("{}{}", "a {".repeat(100), "}".repeat(100));
    assert!(fail(&deep).message.contains("nesting deeper than the limit"));
}

#[test]
fn error_resolved_size_limit() {
    // Each level doubles the previous one: without a bound this is 2^40 values.
    let mut text = String::from("l0 = [\"xxxxxxxxxxxxxxxx\", \"xxxxxxxxxxxxxxxx\"]\n");
    for i in 1..40 {
        text.push_str(&format!("l{i} = [${{l{}}}, ${{l{}}}]\n", i - 1, i - 1));
    }
    let e = fail(&text);
    assert!(e.message.contains("resolved document is larger than the limit"), "{e}");
}

#[test]
fn error_positions_count_lines_and_columns() {
    let e = fail("a = 1\nb {\n  c = [1\n  2 3 }\n");
    assert_eq!(e.line, 4);
    assert!(e.message.contains("expected ',' or ']'"), "{e}");
}

mod includes {
    use super::*;
    use std::fs;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().expect("temp dir")
    }

    #[test]
    fn include_relative_to_the_including_file_and_merge() {
        let d = dir();
        fs::create_dir(d.path().join("sub")).unwrap();
        fs::write(d.path().join("sub/frag.hocon"), "shared { a = 1, b = 1 }\ntext = \"\"\"from frag\"\"\"\n").unwrap();
        fs::write(
            d.path().join("main.hocon"),
            "include \"sub/frag.hocon\"\n{\n  shared { b = 2 }\n  use = ${text}\n}\n",
        )
        .unwrap();
        let v = parse_file(&d.path().join("main.hocon"), &Options::default()).unwrap();
        assert_eq!(v, json!({"shared": {"a": 1, "b": 2}, "text": "from frag", "use": "from frag"}));
    }

    #[test]
    fn root_include_with_a_comma_before_the_braces() {
        let d = dir();
        fs::write(d.path().join("frag.hocon"), "{ shared = \"text\" }").unwrap();
        fs::write(d.path().join("main.hocon"), "include \"frag.hocon\",\n{ a = ${shared} }").unwrap();
        let v = parse_file(&d.path().join("main.hocon"), &Options::default()).unwrap();
        assert_eq!(v, json!({"shared": "text", "a": "text"}));
    }

    #[test]
    fn include_forms_file_and_required_with_comma() {
        let d = dir();
        fs::write(d.path().join("a.hocon"), "x = 1").unwrap();
        fs::write(d.path().join("b.hocon"), "y = 2").unwrap();
        fs::write(d.path().join("c.hocon"), "z = 3").unwrap();
        fs::write(
            d.path().join("main.hocon"),
            "{\n include file(\"a.hocon\"),\n include required(\"b.hocon\")\n include required(file(\"c.hocon\"))\n}",
        )
        .unwrap();
        let v = parse_file(&d.path().join("main.hocon"), &Options::default()).unwrap();
        assert_eq!(v, json!({"x": 1, "y": 2, "z": 3}));
    }

    #[test]
    fn include_found_in_extra_include_dirs() {
        let d = dir();
        fs::create_dir(d.path().join("registries")).unwrap();
        fs::write(d.path().join("registries/frag.hocon"), "x = 1").unwrap();
        fs::write(d.path().join("registries/main.hocon"), "include \"registries/frag.hocon\"\ny = ${x}").unwrap();
        let options = Options { include_dirs: vec![d.path().to_path_buf()], ..Options::default() };
        let v = parse_file(&d.path().join("registries/main.hocon"), &options).unwrap();
        assert_eq!(v, json!({"x": 1, "y": 1}));
    }

    #[test]
    fn error_missing_include_names_the_including_file() {
        let d = dir();
        fs::write(d.path().join("main.hocon"), "a = 1\ninclude \"nope.hocon\"\n").unwrap();
        let e = parse_file(&d.path().join("main.hocon"), &Options::default()).unwrap_err();
        assert!(e.file.ends_with("main.hocon"), "{e}");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("\"nope.hocon\" not found"), "{e}");
    }

    #[test]
    fn error_in_included_file_names_that_file() {
        let d = dir();
        fs::write(d.path().join("bad.hocon"), "x = [1\n").unwrap();
        fs::write(d.path().join("main.hocon"), "include \"bad.hocon\"\n").unwrap();
        let e = parse_file(&d.path().join("main.hocon"), &Options::default()).unwrap_err();
        assert!(e.file.ends_with("bad.hocon"), "{e}");
    }

    #[test]
    fn error_include_depth_limit_catches_self_include() {
        let d = dir();
        fs::write(d.path().join("loop.hocon"), "include \"loop.hocon\"\n").unwrap();
        let e = parse_file(&d.path().join("loop.hocon"), &Options::default()).unwrap_err();
        assert!(e.message.contains("includes nested deeper than the limit"), "{e}");
    }

    #[test]
    fn error_unsupported_include_kinds() {
        let e = fail("include url(\"http://example.com/x.conf\")");
        assert!(e.message.contains("not supported"), "{e}");
        let e = fail("include nope");
        assert!(e.message.contains("expected a quoted file name"), "{e}");
    }

    #[test]
    fn error_file_size_limit() {
        let d = dir();
        fs::write(d.path().join("big.hocon"), "a = \"".to_string() + &"x".repeat(100) + "\"").unwrap();
        let options = Options { limits: Limits { max_bytes: 50, ..Limits::default() }, ..Options::default() };
        let e = parse_file(&d.path().join("big.hocon"), &options).unwrap_err();
        assert!(e.message.contains("larger than the limit"), "{e}");
    }
}
