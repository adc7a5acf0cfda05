//! The architecture rules of the two crates, checked on their source text.
//!
//! The root crate is layered: the wire surfaces (`http`, which serves the
//! REST API, SSE, the console, NeuroSan's HTTP API, the Agent Protocol and
//! MCP; `grpc`; `neurodock`) are thin modules over the service
//! (`src/service/`), and only the service and the store adapters
//! (`src/store/`) talk to the engine crate. The rules are the consts just
//! below; the exceptions left are [`KNOWN_VIOLATIONS`], and the test fails
//! both on a new violation and on an entry of that list that no longer
//! occurs, so the list can only shrink.
//!
//! It reads the files rather than asking the compiler: a small scanner strips
//! comments and literals, then reads `use` trees and inline paths (`crate::`,
//! `super::`, `self::`, a child module's or an imported module's name) and
//! resolves each to the deepest module that has a file. It is std-only so it
//! builds in a second and needs nothing but the source tree.
//!
//! To print the current violations as a ready-to-paste `KNOWN_VIOLATIONS`,
//! each with the lines behind it and a count per rule (the test then passes
//! without comparing):
//! `LAYERING_PRINT=1 cargo test --test it layering:: -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

// ---------------------------------------------------------------------------
// The rules, as data.
// ---------------------------------------------------------------------------

/// The engine crate, as the root crate names it in paths.
const STORAGE_CRATE: &str = "tempora_storage";

/// Rule a: the only top-level modules of `src/` that may name `tempora_storage`.
/// Everything else, the binary entry point (`main`) and `server` included,
/// reaches the engine through them (the store is built by `crate::store`).
const MAY_NAME_STORAGE: &[&str] = &["service", "store"];

/// Rule b: the HTTP surface. Nothing outside `src/http/` may refer to it, but
/// for the modules of [`MAY_NAME_SURFACES`].
const HTTP_SURFACE: &str = "http";

/// Rule c: the wire surfaces (top-level modules of `src/`; some may not exist
/// yet). A file of one surface may not refer to another surface.
const SURFACES: &[&str] = &["http", "grpc", "neurodock"];

/// The exceptions to rules b and c: top-level modules that may refer to any
/// surface. `server` (src/server.rs) starts every listener.
const MAY_NAME_SURFACES: &[&str] = &["server"];

/// Rule e: what a surface may refer to besides itself: the service (its
/// operations, errors and vocabulary) and the JSON body helpers shared by
/// every wire. Everything else (the store, search, recall, the monitor, the
/// agent networks) is reached through the service.
const SURFACES_MAY_USE: &[&str] = &["service", "json"];

/// Rule d: the crates whose module graphs must have no cycles, as (source
/// directory relative to the repository root, the crate's name in paths).
/// The first is the root crate, to which rules a to c apply.
const CRATES: &[(&str, &str)] = &[("src", "tempora"), ("storage/src", "tempora_storage")];

/// Test-only files, left out: a file with this name, or any file under a
/// directory with this name, inside a crate's source directory.
const TEST_ONLY_FILE: &str = "tests.rs";
const TEST_ONLY_DIR: &str = "tests";

/// The violations left; this list only shrinks.
///
/// One entry per offence, in the forms:
/// - `tempora_storage: FILE` (rule a),
/// - `http: FILE -> MODULE` (rule b),
/// - `surface: FILE -> MODULE` (rule c; references to `http` are rule b's),
/// - `below the service: FILE -> MODULE` (rule e),
/// - `cycle: FILE, FILE, ...` (rule d; the files of one cycle, sorted).
///
/// Regenerate with `LAYERING_PRINT=1 cargo test --test it layering:: -- --nocapture`.
const KNOWN_VIOLATIONS: &[&str] = &[
    // The redb backend's one shared state (`Shared`) gets its methods from
    // the file of the thread that runs them (the checkpoint writer, the warm
    // pass), and holds the writer's lock. Splitting the state out of mod.rs
    // is a change to the engine's commit path, left for its own review.
    "cycle: storage/src/kv/redb_backend/mod.rs, storage/src/kv/redb_backend/warm.rs, storage/src/kv/redb_backend/writer.rs",
];

// ---------------------------------------------------------------------------
// The test.
// ---------------------------------------------------------------------------

#[test]
fn layering_rules_hold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crates: Vec<CrateTree> = CRATES.iter().map(|&(dir, name)| CrateTree::load(root, dir, name)).collect();
    // An empty scan would pass as soon as the list is empty: make sure the
    // walk found both crates.
    for (tree, (dir, _)) in crates.iter().zip(CRATES) {
        let lib = format!("{dir}/lib.rs");
        assert!(tree.files.iter().any(|f| f.rel == lib), "layering: {lib} not found under {}", root.display());
    }

    let found = violations(&crates);
    if std::env::var_os("LAYERING_PRINT").is_some() {
        print_known(&found);
        return;
    }
    if let Err(report) = ratchet(&found, KNOWN_VIOLATIONS) {
        panic!("{report}");
    }
}

/// Compares the violations found with the known list: `Err` carries the whole
/// report when there is a new violation or a stale entry.
fn ratchet(found: &BTreeMap<String, Vec<String>>, known: &[&str]) -> Result<(), String> {
    let known: BTreeSet<&str> = known.iter().copied().collect();
    let mut new = Vec::new();
    let mut shrunk = Vec::new();
    for (key, details) in found {
        if known.contains(key.as_str()) {
            continue;
        }
        // A cycle that lost members is progress, not a new violation: say
        // which entry to replace.
        let bigger = cycle_members(key)
            .and_then(|members| known.iter().find(|k| cycle_members(k).is_some_and(|m| members.is_subset(&m))));
        match bigger {
            Some(old) => shrunk.push(format!("  {old:?}\n  now {key:?}")),
            None => new.push(format!("  {key}\n{}", indent(details))),
        }
    }
    let stale: Vec<String> = known
        .iter()
        .filter(|k| !found.contains_key(**k))
        .filter(|k| !shrunk.iter().any(|s| s.starts_with(&format!("  {k:?}\n"))))
        .map(|k| format!("  {k:?}"))
        .collect();
    if new.is_empty() && stale.is_empty() && shrunk.is_empty() {
        return Ok(());
    }

    let mut report = String::from("layering rules broken (tests/it/layering.rs)\n");
    if !new.is_empty() {
        report += &format!(
            "\n{} new violation(s); fix the code, do not add them to KNOWN_VIOLATIONS:\n{}\n",
            new.len(),
            new.join("\n")
        );
        report += &format!("\nThe rules:\n{}", RULES_HELP);
    }
    if !shrunk.is_empty() {
        report += &format!(
            "\n{} cycle(s) got smaller; replace the entry in KNOWN_VIOLATIONS:\n{}\n",
            shrunk.len(),
            shrunk.join("\n")
        );
    }
    if !stale.is_empty() {
        report += &format!(
            "\n{} known violation(s) no longer occur; remove it from KNOWN_VIOLATIONS, each line below:\n{}\n",
            stale.len(),
            stale.join("\n")
        );
    }
    report += "\nThe current list: LAYERING_PRINT=1 cargo test --test it layering:: -- --nocapture\n";
    Err(report)
}

/// The rules in words, for the failure message.
const RULES_HELP: &str = concat!(
    "  a) tempora_storage: only src/service/** and src/store/** may name the engine crate;\n",
    "  b) http: nothing outside src/http/ refers to crate::http (but src/server.rs);\n",
    "  c) surface: a surface (http, grpc, neurodock) does not refer to another;\n",
    "  d) cycle: the modules of src/ (one node per file) and of storage/src/ form no import cycle;\n",
    "     a parent's `mod child;` and its `pub use child::...` do not count, anything else does,\n",
    "     inline modules included (`#[cfg(test)] mod tests`, marked \"in mod tests\" above);\n",
    "  e) below the service: a surface refers to nothing but itself, crate::service and crate::json.\n",
);

/// Prints the violations in the form of the `KNOWN_VIOLATIONS` const, then
/// each one's references and a count per rule.
fn print_known(found: &BTreeMap<String, Vec<String>>) {
    println!("// Today's violations, removed as the service layer lands; this list only shrinks.");
    println!("const KNOWN_VIOLATIONS: &[&str] = &[");
    for key in found.keys() {
        println!("    {key:?},");
    }
    println!("];");
    println!();
    for (key, details) in found {
        println!("{key}\n{}", indent(details));
    }
    let mut per_rule: BTreeMap<&str, usize> = BTreeMap::new();
    for key in found.keys() {
        *per_rule.entry(key.split(':').next().unwrap_or("")).or_default() += 1;
    }
    println!("per rule: {per_rule:?}");
}

fn indent(lines: &[String]) -> String {
    lines.iter().map(|l| format!("      {l}\n")).collect::<String>().trim_end().to_string()
}

/// The members of a `cycle: ...` key.
fn cycle_members(key: &str) -> Option<BTreeSet<&str>> {
    key.strip_prefix("cycle: ").map(|rest| rest.split(", ").collect())
}

// ---------------------------------------------------------------------------
// The rules, applied.
// ---------------------------------------------------------------------------

/// At most this many references are listed under one violation.
const MAX_DETAILS: usize = 6;

/// Every violation, keyed by its stable `KNOWN_VIOLATIONS` string, with the
/// references behind it (file lines) for the failure message.
fn violations(crates: &[CrateTree]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // One detail line per source line: a `use` group names several items.
    let mut add = |key: String, line: usize, text: &str| {
        let details = out.entry(key).or_default();
        let prefix = format!("line {line}: ");
        if details.last().is_some_and(|last| last.starts_with(&prefix)) {
            *details.last_mut().expect("checked") += &format!(", {text}");
        } else if details.len() < MAX_DETAILS {
            details.push(format!("{prefix}{text}"));
        } else if details.len() == MAX_DETAILS {
            details.push("...".to_string());
        }
    };

    // Rules a, b, c and e: the root crate only.
    for file in &crates[0].files {
        let top = file.module.first().map(String::as_str).unwrap_or("");
        if !MAY_NAME_STORAGE.contains(&top) {
            for (line, text) in &file.scan.storage {
                add(format!("{STORAGE_CRATE}: {}", file.rel), *line, text);
            }
        }
        if MAY_NAME_SURFACES.contains(&top) {
            continue;
        }
        for r in &file.scan.refs {
            let target_top = r.target.first().map(String::as_str).unwrap_or("");
            if target_top == HTTP_SURFACE && top != HTTP_SURFACE {
                add(format!("{HTTP_SURFACE}: {} -> {}", file.rel, mod_name(&r.target)), r.line, &r.text);
            } else if SURFACES.contains(&top) && SURFACES.contains(&target_top) && target_top != top {
                // (References to http are rule b's, reported once above.)
                add(format!("surface: {} -> {}", file.rel, mod_name(&r.target)), r.line, &r.text);
            } else if SURFACES.contains(&top) && target_top != top && !SURFACES_MAY_USE.contains(&target_top) {
                add(format!("below the service: {} -> {}", file.rel, mod_name(&r.target)), r.line, &r.text);
            }
        }
    }

    // Rule d: every crate.
    for tree in crates {
        let graph = tree.graph();
        for scc in strongly_connected(graph.len(), |n| graph[n].keys().copied().collect()) {
            if scc.len() < 2 {
                continue;
            }
            let mut files: Vec<&str> = scc.iter().map(|&n| tree.files[n].rel.as_str()).collect();
            files.sort_unstable();
            let key = format!("cycle: {}", files.join(", "));
            let members: BTreeSet<usize> = scc.iter().copied().collect();
            // The edges inside the cycle, one reference each: cutting enough of
            // them breaks it.
            let mut details = Vec::new();
            for &from in &members {
                for (to, r) in &graph[from] {
                    if members.contains(to) {
                        details.push(format!(
                            "{} -> {} (line {}: {})",
                            tree.files[from].rel, tree.files[*to].rel, r.line, r.text
                        ));
                    }
                }
            }
            details.sort();
            out.insert(key, details);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The source tree.
// ---------------------------------------------------------------------------

/// A module path inside its crate; empty for the crate root.
type ModPath = Vec<String>;

fn mod_name(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        path.join("::")
    }
}

/// One crate's files, each scanned.
struct CrateTree {
    files: Vec<SourceFile>,
}

struct SourceFile {
    /// Relative to the repository root, with `/`: `src/http/facts.rs`.
    rel: String,
    /// `http::facts`. The binary root `src/main.rs` is `main`, a name no
    /// module of the library has.
    module: ModPath,
    scan: Scan,
}

impl CrateTree {
    /// Reads every `.rs` file under `root/dir` (but the test-only ones) and
    /// the files `#[path]` attributes bring in, then scans each.
    fn load(root: &Path, dir: &str, crate_name: &str) -> CrateTree {
        let src = root.join(dir);
        let mut found: Vec<(PathBuf, ModPath, bool)> = Vec::new();
        walk(&src, &mut |path| {
            let rel = path.strip_prefix(&src).expect("under src");
            let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            let (dirs, name) = parts.split_at(parts.len() - 1);
            if !name[0].ends_with(".rs") || name[0] == TEST_ONLY_FILE || dirs.iter().any(|d| d == TEST_ONLY_DIR) {
                return;
            }
            let stem = name[0].trim_end_matches(".rs");
            let mut module: ModPath = dirs.to_vec();
            let bin = dirs.is_empty() && stem == "main";
            if bin {
                module.push("main".to_string());
            } else if !(stem == "mod" || (dirs.is_empty() && stem == "lib")) {
                module.push(stem.to_string());
            }
            found.push((path.to_path_buf(), module, bin));
        });
        // Modules declared with `#[path = "..."] mod name;` live elsewhere
        // (storage's migrations are under migrations/): follow them.
        let mut i = 0;
        while i < found.len() {
            let (path, module) = (found[i].0.clone(), found[i].1.clone());
            let text = read(&path);
            for (name, target) in path_attributes(&text) {
                let file = normalize(&path.parent().expect("a parent").join(target));
                let mut child = module.clone();
                child.push(name);
                found.push((file, child, false));
            }
            i += 1;
        }

        let modules: BTreeSet<ModPath> = found.iter().filter(|f| !f.2).map(|f| f.1.clone()).collect();
        let mut files: Vec<SourceFile> = found
            .into_iter()
            .map(|(path, module, bin)| {
                let ctx = Ctx { module: &module, modules: &modules, bin_of: bin.then_some(crate_name) };
                let scan = scan(&read(&path), &ctx);
                let rel = path.strip_prefix(root).unwrap_or(&path);
                let rel = rel.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>().join("/");
                SourceFile { rel, module, scan }
            })
            .collect();
        files.sort_by(|a, b| a.rel.cmp(&b.rel));
        CrateTree { files }
    }

    /// The module graph, one node per file (the index in `files`): for each
    /// node, the nodes it refers to, with one reference as the witness.
    /// Re-exports of a file's own descendants (`pub use child::X` in the
    /// parent) are left out: with them every `mod.rs` whose child uses
    /// `super::` would be a cycle.
    fn graph(&self) -> Vec<BTreeMap<usize, &Reference>> {
        let node: BTreeMap<&ModPath, usize> = self.files.iter().enumerate().map(|(i, f)| (&f.module, i)).collect();
        self.files
            .iter()
            .map(|f| {
                let mut edges = BTreeMap::new();
                for r in f.scan.refs.iter().filter(|r| !r.reexport) {
                    if let Some(&to) = node.get(&r.target) {
                        edges.entry(to).or_insert(r);
                    }
                }
                edges
            })
            .collect()
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("layering: reading {}: {e}", path.display()))
}

/// Calls `f` on every file under `dir`, in name order.
fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("layering: listing {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, f);
        } else {
            f(&path);
        }
    }
}

/// `a/b/../c` as `a/c`, without touching the disk.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The `#[path = "FILE"] mod NAME;` declarations of a file, as (NAME, FILE).
/// Line-based: the attribute on its own line, the `mod` on the next line
/// that is not another attribute.
fn path_attributes(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending: Option<String> = None;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#[path") {
            pending = rest.split('"').nth(1).map(str::to_string);
        } else if line.starts_with("#[") {
            // Another attribute between #[path] and its mod.
        } else if let Some(file) = pending.take() {
            let decl = line.trim_start_matches("pub ").trim_start_matches("pub(crate) ");
            if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                out.push((name.trim().to_string(), file));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The scanner.
// ---------------------------------------------------------------------------

/// What a file refers to.
#[derive(Debug, Default)]
struct Scan {
    /// References to modules of its own crate, other than its own module.
    refs: Vec<Reference>,
    /// Mentions of the engine crate, as (line, the path that names it).
    storage: Vec<(usize, String)>,
}

#[derive(Debug, Clone, PartialEq)]
struct Reference {
    /// The deepest module with a file that the path names: `http::error` for
    /// `crate::http::error::ApiError`.
    target: ModPath,
    line: usize,
    /// The path as written: `crate::http::error::ApiError`, `super::*`.
    text: String,
    /// A `pub use` (any visibility) of one of the file's own descendants: a
    /// re-export, which rule d does not count.
    reexport: bool,
}

/// Where a file sits, for resolving its relative paths.
struct Ctx<'a> {
    module: &'a [String],
    /// Every module of the crate that has a file.
    modules: &'a BTreeSet<ModPath>,
    /// For a binary's root (`src/main.rs`): the library's name, by which it
    /// reaches the library's modules. Its own `crate::`, `self::` and
    /// `super::` name nothing of the library.
    bin_of: Option<&'a str>,
}

/// A path read from the source, not yet resolved.
#[derive(Debug)]
struct RawPath {
    segs: Vec<String>,
    /// The module the path appears in: the file's module, or an inline `mod`
    /// inside it (`monitor::alerts::tests`), for `self::` and `super::`.
    scope: ModPath,
    line: usize,
    /// From a `use` tree: (the use is `pub` or `pub(...)`, the item is
    /// imported as this name when renamed with `as`).
    from_use: Option<(bool, Option<String>)>,
    glob: bool,
}

/// Scans one file's source: every path it writes that names a module of its
/// crate, and every mention of the engine crate.
fn scan(source: &str, ctx: &Ctx) -> Scan {
    let toks = tokenize(&strip(source));
    let raw = raw_paths(&toks, ctx.module);

    // Modules brought into scope by name (`use crate::monitor;`,
    // `use super::alerts as al;`), so that `monitor::alerts::f()` resolves
    // past them. A few rounds, for a use that goes through another.
    let mut aliases: BTreeMap<String, ModPath> = BTreeMap::new();
    for _ in 0..3 {
        for p in raw.iter().filter(|p| !p.glob) {
            let Some((_, rename)) = &p.from_use else { continue };
            let Some(abs) = absolute(&p.segs, &p.scope, ctx, &aliases) else { continue };
            let name = rename.clone().or_else(|| p.segs.last().cloned()).unwrap_or_default();
            if ctx.modules.contains(&abs) && name != "_" && name != "self" && name != "super" && name != "crate" {
                aliases.insert(name, abs);
            }
        }
    }

    let mut out = Scan::default();
    for p in &raw {
        let mut text = if p.glob { format!("{}::*", p.segs.join("::")) } else { p.segs.join("::") };
        // Say when the path is in an inline module (`mod tests`): often a
        // test's import, moved more easily than the code's.
        if p.scope.len() > ctx.module.len() {
            text += &format!(" (in mod {})", p.scope[ctx.module.len()..].join("::"));
        }
        if p.segs.first().map(String::as_str) == Some(STORAGE_CRATE) {
            out.storage.push((p.line, text));
            continue;
        }
        let Some(abs) = absolute(&p.segs, &p.scope, ctx, &aliases) else { continue };
        let target = deepest_module(&abs, ctx.modules);
        if target == ctx.module {
            continue;
        }
        let is_pub = matches!(p.from_use, Some((true, _)));
        let reexport = is_pub && target.len() > ctx.module.len() && target.starts_with(ctx.module);
        out.refs.push(Reference { target, line: p.line, text, reexport });
    }
    out
}

/// A path made absolute (segments from the crate root), or `None` when it
/// does not start in this crate (std, another crate, a local name).
fn absolute(segs: &[String], scope: &[String], ctx: &Ctx, aliases: &BTreeMap<String, ModPath>) -> Option<ModPath> {
    let first = segs.first()?.as_str();
    let (base, rest): (ModPath, &[String]) = match (first, ctx.bin_of) {
        (lib, Some(name)) if lib == name => (Vec::new(), &segs[1..]),
        ("crate" | "self" | "super", Some(_)) => return None,
        ("crate", None) => (Vec::new(), &segs[1..]),
        ("self", None) => (scope.to_vec(), &segs[1..]),
        ("super", None) => {
            let ups = segs.iter().take_while(|s| *s == "super").count();
            let keep = scope.len().checked_sub(ups)?;
            (scope[..keep].to_vec(), &segs[ups..])
        }
        (name, _) => {
            if let Some(module) = aliases.get(name) {
                (module.clone(), &segs[1..])
            } else {
                // A child module of the scope, named bare (`facts::router()`
                // in http/mod.rs). Anything else bare is another crate's or a
                // local item.
                let mut child = scope.to_vec();
                child.push(name.to_string());
                if !ctx.modules.contains(&child) {
                    return None;
                }
                (scope.to_vec(), segs)
            }
        }
    };
    let mut abs = base;
    abs.extend(rest.iter().cloned());
    Some(abs)
}

/// The longest prefix of `abs` that is a module with a file (at worst the
/// crate root).
fn deepest_module(abs: &[String], modules: &BTreeSet<ModPath>) -> ModPath {
    (0..=abs.len()).rev().map(|n| abs[..n].to_vec()).find(|p| modules.contains(p)).unwrap_or_default()
}

/// The paths of a token stream: `use` trees item by item, and inline paths of
/// two or more segments (or naming the engine crate), each with the module
/// scope it appears in.
fn raw_paths(toks: &[Tok], module: &[String]) -> Vec<RawPath> {
    let text = |i: usize| toks.get(i).map(|t| t.text.as_str()).unwrap_or("");
    let mut out = Vec::new();
    // Inline `mod name { ... }` blocks: (their module path, the brace depth
    // outside them).
    let mut scopes: Vec<(ModPath, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let scope = scopes.last().map(|s| s.0.clone()).unwrap_or_else(|| module.to_vec());
        match text(i) {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if scopes.last().is_some_and(|s| s.1 == depth) {
                    scopes.pop();
                }
            }
            "mod" if is_ident(text(i + 1)) && text(i + 2) == "{" => {
                let mut inner = scope.clone();
                inner.push(text(i + 1).to_string());
                scopes.push((inner, depth));
                i += 2;
                continue;
            }
            // `use` statements; not `use<'a>` (precise capturing) nor a
            // path segment.
            "use" if text(i + 1) != "<" && text(i.wrapping_sub(1)) != "::" => {
                let is_pub = is_pub_before(toks, i);
                let mut items = Vec::new();
                let mut j = i + 1;
                parse_use_tree(toks, &mut j, Vec::new(), &mut items);
                for item in items {
                    out.push(RawPath {
                        segs: item.segs,
                        scope: scope.clone(),
                        line: item.line,
                        from_use: Some((is_pub, item.rename)),
                        glob: item.glob,
                    });
                }
                // On to the end of the statement.
                while j < toks.len() && text(j) != ";" {
                    j += 1;
                }
                i = j + 1;
                continue;
            }
            t if is_ident(t) && starts_path(toks, i) => {
                let mut segs = vec![t.to_string()];
                let mut j = i;
                while text(j + 1) == "::" && is_ident(text(j + 2)) {
                    segs.push(text(j + 2).to_string());
                    j += 2;
                }
                if segs.len() > 1 || t == STORAGE_CRATE {
                    out.push(RawPath { segs, scope, line: toks[i].line, from_use: None, glob: false });
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Whether the identifier at `i` starts a path: it does not follow `::`, or
/// follows a leading `::` (`::tempora_storage::X`), or `$` (`$crate::`).
fn starts_path(toks: &[Tok], i: usize) -> bool {
    if i == 0 || toks[i - 1].text != "::" {
        return true;
    }
    // A leading `::`: the token before it ends no path.
    i < 2 || !(is_ident(&toks[i - 2].text) || toks[i - 2].text == ">")
}

/// Whether the `use` at `i` is `pub use` or `pub(...) use`.
fn is_pub_before(toks: &[Tok], i: usize) -> bool {
    match i.checked_sub(1).map(|p| toks[p].text.as_str()) {
        Some("pub") => true,
        Some(")") => {
            // Back to the matching `(`; `pub` must come right before it.
            let mut k = i - 1;
            let mut level = 0;
            loop {
                match toks[k].text.as_str() {
                    ")" => level += 1,
                    "(" => {
                        level -= 1;
                        if level == 0 {
                            return k > 0 && toks[k - 1].text == "pub";
                        }
                    }
                    _ => {}
                }
                if k == 0 {
                    return false;
                }
                k -= 1;
            }
        }
        _ => false,
    }
}

/// One imported item of a `use` tree.
#[derive(Debug, PartialEq)]
struct UseItem {
    segs: Vec<String>,
    line: usize,
    glob: bool,
    rename: Option<String>,
}

/// Reads one use tree from `*i` (`a::b`, `a::{b, c::*}`, `a as b`,
/// `{self, x}`), pushing each leaf with its full path; stops before the `,`,
/// `}` or `;` that ends it.
fn parse_use_tree(toks: &[Tok], i: &mut usize, prefix: Vec<String>, out: &mut Vec<UseItem>) {
    let text = |i: usize| toks.get(i).map(|t| t.text.as_str()).unwrap_or("");
    let mut path = prefix;
    loop {
        let Some(tok) = toks.get(*i) else { return };
        match tok.text.as_str() {
            // A separator, or the `$` of `$crate` in a macro.
            "::" | "$" => *i += 1,
            "{" => {
                *i += 1;
                loop {
                    match text(*i) {
                        "" => return,
                        "}" => {
                            *i += 1;
                            return;
                        }
                        "," => *i += 1,
                        _ => {
                            let before = *i;
                            parse_use_tree(toks, i, path.clone(), out);
                            if *i == before {
                                *i += 1; // Something this reader does not know: skip it.
                            }
                        }
                    }
                }
            }
            "*" => {
                *i += 1;
                out.push(UseItem { segs: path, line: tok.line, glob: true, rename: None });
                return;
            }
            name if is_ident(name) => {
                // `self` inside a group is the group's own path.
                if name != "self" || path.is_empty() {
                    path.push(name.to_string());
                }
                *i += 1;
                match text(*i) {
                    "::" => *i += 1,
                    "as" => {
                        let rename = Some(text(*i + 1).to_string());
                        *i += 2;
                        out.push(UseItem { segs: path, line: tok.line, glob: false, rename });
                        return;
                    }
                    _ => {
                        out.push(UseItem { segs: path, line: tok.line, glob: false, rename: None });
                        return;
                    }
                }
            }
            _ => return,
        }
    }
}

// ---------------------------------------------------------------------------
// Lexing.
// ---------------------------------------------------------------------------

/// The source with comments (line, block, nested block, doc) and literals
/// (strings, byte and C strings, raw strings, chars) blanked out. Newlines
/// are kept, so lines still count right; a literal leaves its quotes.
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let is_ident_char = |ch: char| ch == '_' || ch.is_alphanumeric();
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && is_ident_char(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            // Block comments nest in Rust.
            let mut level = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    level += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    level -= 1;
                    out.push_str("  ");
                    i += 2;
                    if level == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&c, i).filter(|_| !prev_ident) {
            // r"...", r#"..."#, br#"..."#, cr"...": no escapes; ends at a
            // quote followed by as many hashes as it opened with.
            let open = c[i..].iter().position(|&ch| ch == '"').expect("a quote") + i;
            out.extend(std::iter::repeat_n(' ', open - i));
            out.push('"');
            i = open + 1;
            while i < c.len()
                && !(c[i] == '"' && c[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes)
            {
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push('"');
            out.extend(std::iter::repeat_n(' ', hashes));
            i += 1 + hashes;
        } else if c[i] == '"' {
            // "...", b"...", c"...": the prefix letter stays, harmless.
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' && (c.get(i + 1) == Some(&'\\') || c.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\'', '\u{1F600}'); a lone quote
            // is a lifetime or a label, kept as it is.
            out.push('\'');
            i += 1;
            if c[i] == '\\' {
                out.push(' ');
                i += 1;
            }
            // The first char may itself be a quote ('\'').
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '\'' {
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// If a raw string starts at `i` (`r`, `br` or `cr`, hashes, a quote): the
/// number of hashes. `r#ident` (a raw identifier) is not one.
fn raw_string_start(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(c.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = c[j..].iter().take_while(|&&h| h == '#').count();
    (c.get(j + hashes) == Some(&'"')).then_some(hashes)
}

#[derive(Debug)]
struct Tok {
    text: String,
    line: usize,
}

/// Identifiers (raw ones without their `r#`), `::`, and single punctuation
/// characters, with their line numbers. Numbers become `0`.
fn tokenize(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let is_ident_char = |ch: char| ch == '_' || ch.is_alphanumeric();
    let mut toks = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == 'r' && c.get(i + 1) == Some(&'#') && c.get(i + 2).is_some_and(|&n| is_ident_char(n)) {
            i += 2; // r#type: the identifier `type`.
        } else if ch.is_ascii_digit() {
            while i < c.len() && (is_ident_char(c[i]) || c[i] == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit))
            {
                i += 1;
            }
            toks.push(Tok { text: "0".to_string(), line });
        } else if is_ident_char(ch) {
            let start = i;
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
            toks.push(Tok { text: c[start..i].iter().collect(), line });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            toks.push(Tok { text: "::".to_string(), line });
            i += 2;
        } else {
            toks.push(Tok { text: ch.to_string(), line });
            i += 1;
        }
    }
    toks
}

fn is_ident(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c == '_' || c.is_alphabetic())
}

// ---------------------------------------------------------------------------
// Cycles.
// ---------------------------------------------------------------------------

/// Tarjan's strongly connected components of the graph on nodes `0..n`, each
/// sorted, in a deterministic order.
fn strongly_connected(n: usize, edges: impl Fn(usize) -> Vec<usize>) -> Vec<Vec<usize>> {
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, s: &mut State, edges: &dyn Fn(usize) -> Vec<usize>) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for w in edges(v) {
            match s.index[w] {
                None => {
                    visit(w, s, edges);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = s.stack.pop().expect("v is on the stack");
                s.on_stack[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            scc.sort_unstable();
            s.out.push(scc);
        }
    }
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, &mut s, &edges);
        }
    }
    s.out.sort();
    s.out
}

// ---------------------------------------------------------------------------
// The scanner's own tests, on small sources.
// ---------------------------------------------------------------------------

/// A module set from `::`-joined names ("" is the root).
fn module_set(names: &[&str]) -> BTreeSet<ModPath> {
    names.iter().map(|n| n.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect()).collect()
}

/// The targets a source refers to, as `::`-joined names, in order.
fn targets_of(source: &str, module: &str, names: &[&str]) -> Vec<String> {
    let modules = module_set(names);
    let module: ModPath = module.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
    let ctx = Ctx { module: &module, modules: &modules, bin_of: None };
    scan(source, &ctx).refs.iter().map(|r| mod_name(&r.target)).collect()
}

const TEST_MODULES: &[&str] =
    &["", "a", "a::b", "a::b::c", "a::x", "http", "http::error", "monitor", "monitor::alerts"];

#[test]
fn scanner_reads_grouped_and_nested_use_trees() {
    let src = "use crate::a::{b, x::Thing, b::{c::Deep, self as bee}, self};";
    assert_eq!(targets_of(src, "http", TEST_MODULES), ["a::b", "a::x", "a::b::c", "a::b", "a"]);
}

#[test]
fn scanner_reads_multi_line_and_pub_uses() {
    let src = "pub(crate) use crate::http::{\n    error::ApiError,\n    Shared,\n};\npub use crate::monitor as m;\n";
    let modules = module_set(TEST_MODULES);
    let module = vec!["a".to_string()];
    let refs = scan(src, &Ctx { module: &module, modules: &modules, bin_of: None }).refs;
    let got: Vec<(String, usize)> = refs.iter().map(|r| (mod_name(&r.target), r.line)).collect();
    assert_eq!(got, [("http::error".to_string(), 2), ("http".to_string(), 3), ("monitor".to_string(), 5)]);
    assert!(refs.iter().all(|r| !r.reexport), "none of them is a descendant of `a`");
}

#[test]
fn scanner_ignores_paths_in_comments_and_literals() {
    let src = r##"
        // crate::a::x in a comment
        /// crate::a::x in a doc comment
        /* crate::a::x /* nested crate::a::x */ still crate::a::x */
        const S: &str = "crate::a::x \" crate::a::x";
        const R: &str = r#"crate::a::x "quoted" crate::a::x"#;
        const B: &[u8] = br"crate::a::x";
        const Q: char = '"';
        const E: char = '\'';
        fn f<'a>(x: &'a str) -> &'a str { let r#type = 1; crate::a::b::f(); x }
    "##;
    assert_eq!(targets_of(src, "http", TEST_MODULES), ["a::b"]);
}

#[test]
fn scanner_resolves_super_self_and_inline_modules() {
    let src = "
        use super::super::x::Y;
        fn f() { super::Z::new(); self::c::g(); }
        mod tests {
            use super::*;
            use super::super::super::super::http::error::E;
        }
        fn after() { super::super::b::h(); }
    ";
    // In a::b::c: `super::super` is `a`; in its inline `mod tests`, `super`
    // is `a::b::c` itself (no reference) and four supers reach the root.
    assert_eq!(targets_of(src, "a::b::c", TEST_MODULES), ["a::x", "a::b", "http::error", "a::b"]);
}

#[test]
fn scanner_resolves_bare_child_and_imported_module_names() {
    let src = "
        mod alerts;
        pub use alerts::Alert;
        use crate::http;
        fn f() { alerts::evaluate(); http::error::ApiError::new(); error::X; }
    ";
    let modules = module_set(TEST_MODULES);
    let module = vec!["monitor".to_string()];
    let refs = scan(src, &Ctx { module: &module, modules: &modules, bin_of: None }).refs;
    let got: Vec<(String, bool)> = refs.iter().map(|r| (mod_name(&r.target), r.reexport)).collect();
    // The re-export of the child is marked (rule d skips it), the call is not;
    // `error::X` is no child of `monitor`, so another crate's.
    assert_eq!(
        got,
        [
            ("monitor::alerts".to_string(), true),
            ("http".to_string(), false),
            ("monitor::alerts".to_string(), false),
            ("http::error".to_string(), false)
        ]
    );
}

#[test]
fn scanner_finds_the_engine_crate_and_the_binary_root_paths() {
    let src = "
        use tempora_storage::{Engine, model::Fact};
        use tempora::config::Config;
        fn f() { let e = ::tempora_storage::open(); tempora::http::router(); crate::a::f(); }
        // tempora_storage::Engine
    ";
    let modules = module_set(TEST_MODULES);
    let module = vec!["main".to_string()];
    let s = scan(src, &Ctx { module: &module, modules: &modules, bin_of: Some("tempora") });
    let storage: Vec<&str> = s.storage.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(storage, ["tempora_storage::Engine", "tempora_storage::model::Fact", "tempora_storage::open"]);
    // `tempora::` is the library; the binary's own `crate::` is not.
    let targets: Vec<String> = s.refs.iter().map(|r| mod_name(&r.target)).collect();
    assert_eq!(targets, ["crate", "http"]);
}

#[test]
fn tarjan_finds_the_cycles() {
    // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5 alone.
    let edges = |v: usize| match v {
        0 => vec![1],
        1 => vec![2],
        2 => vec![0, 3],
        3 => vec![4],
        4 => vec![3],
        _ => vec![],
    };
    assert_eq!(strongly_connected(6, edges), [vec![0, 1, 2], vec![3, 4], vec![5]]);
}

#[test]
fn ratchet_reports_new_stale_and_shrunk() {
    let found: BTreeMap<String, Vec<String>> = [
        ("http: src/mcp/tools.rs -> http::error", "line 3: crate::http::error::ApiError"),
        ("cycle: src/a.rs, src/b.rs", "src/a.rs -> src/b.rs (line 1: crate::b::f)"),
    ]
    .iter()
    .map(|(k, d)| (k.to_string(), vec![d.to_string()]))
    .collect();
    assert!(ratchet(&found, &["cycle: src/a.rs, src/b.rs", "http: src/mcp/tools.rs -> http::error"]).is_ok());

    let report = ratchet(&found, &["cycle: src/a.rs, src/b.rs, src/c.rs", "tempora_storage: src/x.rs"]).unwrap_err();
    assert!(
        report.contains("1 new violation(s)") && report.contains("line 3: crate::http::error::ApiError"),
        "{report}"
    );
    assert!(report.contains("1 cycle(s) got smaller"), "{report}");
    assert!(report.contains("each line below:\n  \"tempora_storage: src/x.rs\""), "{report}");
}
