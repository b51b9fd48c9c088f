//! The design's arrows, checked on the source tree: each crate of the
//! workspace depends only on the layers below it (settings ← core ←
//! engines ← admin ← binary, the leaf libraries under all of them), and no
//! top-level module of a crate imports one that imports it back. The
//! compiler holds the first once the `Cargo.toml` files say it; these tests
//! hold the `Cargo.toml` files, and the second, which no compiler checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The leaf libraries: codecs, SQL facts, secrets, tokens.
const LEAVES: &[&str] = &[
    "gatehouse-proto-pg",
    "gatehouse-proto-mysql",
    "gatehouse-sql",
    "gatehouse-secrets",
    "gatehouse-token",
];

/// Which workspace crates each product crate may depend on (normal
/// dependencies), besides the leaf libraries it is listed with.
fn allowed(package: &str) -> Option<Vec<&'static str>> {
    let leaves = LEAVES.to_vec();
    let without = |name: &str| leaves.iter().copied().filter(|l| *l != name).collect::<Vec<_>>();
    Some(match package {
        l if LEAVES.contains(&l) => LEAVES.iter().copied().filter(|x| *x != l).collect(),
        "gatehouse-settings" => leaves,
        "gatehouse-core" => [leaves, vec!["gatehouse-settings"]].concat(),
        "gatehouse-pg" => [
            without("gatehouse-proto-mysql"),
            vec!["gatehouse-settings", "gatehouse-core"],
        ]
        .concat(),
        "gatehouse-mysql" => [
            without("gatehouse-proto-pg"),
            vec!["gatehouse-settings", "gatehouse-core"],
        ]
        .concat(),
        "gatehouse-admin" => [leaves, vec!["gatehouse-settings", "gatehouse-core"]].concat(),
        "gatehouse" => [
            leaves,
            vec![
                "gatehouse-settings",
                "gatehouse-core",
                "gatehouse-pg",
                "gatehouse-mysql",
                "gatehouse-admin",
            ],
        ]
        .concat(),
        _ => return None,
    })
}

/// Every crate of the workspace: (package name, directory, the workspace
/// crates among its normal dependencies).
fn crates() -> Vec<(String, PathBuf, Vec<String>)> {
    let mut out = Vec::new();
    let dir = workspace().join("crates");
    for entry in std::fs::read_dir(&dir).expect("crates/") {
        let path = entry.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(path.join("Cargo.toml")) else {
            continue;
        };
        let manifest: toml::Table = text.parse().expect("Cargo.toml parses");
        let name = manifest["package"]["name"].as_str().expect("package.name").to_owned();
        let deps = manifest
            .get("dependencies")
            .and_then(|d| d.as_table())
            .map(|d| {
                d.iter()
                    .filter(|(_, v)| v.get("path").is_some())
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        out.push((name, path, deps));
    }
    out.sort();
    out
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (name, _, deps) in crates() {
        let Some(allowed) = allowed(&name) else {
            continue; // tools and test harnesses (testkit, loadgen, fuzz-harness)
        };
        checked += 1;
        for d in deps {
            if !allowed.contains(&d.as_str()) {
                wrong.push(format!("{name} depends on {d}"));
            }
        }
    }
    assert!(checked >= 11, "found only {checked} product crates");
    assert!(wrong.is_empty(), "arrows against the layers: {wrong:#?}");
}

/// The text of a source file without comments (line and block) and
/// without the text of string literals, so a path in either is no import.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' && (i == 0 || b[i - 1] != b'\'') {
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push('"');
        } else {
            let ch = text[i..].chars().next().expect("char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The modules a crate's files are in: `src/a.rs` and `src/a/…` are in
/// `a`; the crate root (`lib.rs`) is `""`. With each file's module path.
fn sources(src: &Path) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src").with_extension("");
            let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts == ["main"] {
                continue; // a binary's root is a crate of its own
            }
            if parts == ["lib"] {
                parts.clear();
            }
            out.push((parts, code_of(&std::fs::read_to_string(&path).expect("source"))));
        }
    }
    out
}

/// Top-level module → the top-level modules it names, with the files
/// that do. Paths are `crate::x`, `crate::{x, …}` and `super::` chains
/// resolved against the file's module; a name the crate root defines
/// (not one it re-exports) is an edge to the root, `""`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let files = sources(src);
    let top = |p: &[String]| p.first().cloned().unwrap_or_default();
    let modules: BTreeSet<String> = files.iter().map(|(p, _)| top(p)).collect();
    let root_defines: BTreeSet<String> = files
        .iter()
        .filter(|(p, _)| p.is_empty())
        .flat_map(|(_, code)| {
            let re = regex::Regex::new(r"\b(?:fn|struct|enum|const|static|type|trait)\s+([A-Za-z_][A-Za-z0-9_]*)")
                .expect("regex");
            re.captures_iter(code).map(|c| c[1].to_owned()).collect::<Vec<_>>()
        })
        .collect();
    let target = |name: &str| -> Option<String> {
        if !name.is_empty() && modules.contains(name) {
            Some(name.to_owned())
        } else if root_defines.contains(name) {
            Some(String::new())
        } else {
            None
        }
    };
    let crate_path = regex::Regex::new(r"\bcrate::(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*))").expect("regex");
    let super_path = regex::Regex::new(r"\b((?:super::)+)(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*))").expect("regex");
    let root_child = regex::Regex::new(r"(?:^|[^:\w])([a-z_][a-z0-9_]*)::").expect("regex");
    let mut graph: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (path, code) in &files {
        let from = top(path);
        let file = if path.is_empty() {
            "lib".to_owned()
        } else {
            path.join("/")
        };
        let mut add = |to: String| {
            if to != from {
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(file.clone());
            }
        };
        let names = |group: Option<regex::Match>, one: Option<regex::Match>| -> Vec<String> {
            match (group, one) {
                (Some(g), _) => g
                    .as_str()
                    .split(',')
                    .filter_map(|s| s.trim().split("::").next().map(str::to_owned))
                    .collect(),
                (None, Some(o)) => vec![o.as_str().to_owned()],
                _ => Vec::new(),
            }
        };
        for c in crate_path.captures_iter(code) {
            for n in names(c.get(1), c.get(2)) {
                if let Some(t) = target(&n) {
                    add(t);
                }
            }
        }
        for c in super_path.captures_iter(code) {
            let ups = c[1].matches("super::").count();
            if ups > path.len() {
                continue;
            }
            let base = &path[..path.len() - ups];
            for n in names(c.get(2), c.get(3)) {
                let resolved = if base.is_empty() { target(&n) } else { Some(top(base)) };
                if let Some(t) = resolved {
                    add(t);
                }
            }
        }
        if path.is_empty() {
            for c in root_child.captures_iter(code) {
                if modules.contains(&c[1]) {
                    add(c[1].to_owned());
                }
            }
        }
    }
    graph
}

/// The strongly connected components of more than one module.
fn cycles(graph: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = graph.keys().chain(graph.values().flat_map(|m| m.keys())).collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for next in graph.get(&n).into_iter().flat_map(|m| m.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for n in &nodes {
        if !reaches[n].contains(*n) {
            continue;
        }
        let mut scc: Vec<String> = nodes
            .iter()
            .filter(|m| reaches[n].contains(**m) && reaches[*m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        scc.sort();
        if !out.contains(&scc) {
            out.push(scc);
        }
    }
    out
}

#[test]
fn no_module_of_a_crate_imports_one_that_imports_it_back() {
    let mut found = Vec::new();
    let mut checked = 0;
    for (name, dir, _) in crates() {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        let graph = module_graph(&src);
        for scc in cycles(&graph) {
            let shown = |m: &String| if m.is_empty() { "(root)".to_owned() } else { m.clone() };
            let edges: Vec<String> = scc
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|(b, _)| scc.contains(b))
                        .map(move |(b, files)| format!("{} -> {} in {files:?}", shown(a), shown(b)))
                })
                .collect();
            found.push(format!(
                "{name}: {:?}\n  {}",
                scc.iter().map(shown).collect::<Vec<_>>(),
                edges.join("\n  ")
            ));
        }
    }
    assert!(checked >= 14, "found only {checked} crates");
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

/// The checker sees a cycle where there is one: two modules naming each
/// other through `crate::` and `super::` paths, and one through the root.
#[test]
fn the_cycle_check_finds_a_cycle() {
    let dir = std::env::temp_dir().join(format!("gatehouse-layers-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("b")).expect("dir");
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\nmod c;\npub struct Shared;\n").expect("write");
    std::fs::write(
        dir.join("a.rs"),
        "use crate::b::Thing; // crate::c::Nope in a comment\n",
    )
    .expect("write");
    std::fs::write(dir.join("b/mod.rs"), "mod inner;\npub struct Thing;\n").expect("write");
    std::fs::write(
        dir.join("b/inner.rs"),
        "use super::super::a;\nconst X: &str = \"crate::c\";\n",
    )
    .expect("write");
    std::fs::write(dir.join("c.rs"), "fn f() -> crate::Shared { super::Shared }\n").expect("write");
    let graph = module_graph(&dir);
    let found = cycles(&graph);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        found.contains(&vec!["a".to_owned(), "b".to_owned()]),
        "{found:?} in {graph:?}"
    );
    // `c` names the root's `Shared`, and the root declares `c`, but a
    // `mod` line is no path: no cycle with the root.
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        !graph.get("a").is_some_and(|m| m.contains_key("c")),
        "a comment counted: {graph:?}"
    );
    assert!(
        !graph.get("b").is_some_and(|m| m.contains_key("c")),
        "a string counted: {graph:?}"
    );
}
