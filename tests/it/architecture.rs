//! docs/architecture.md as a test: every `crate::` and `super::` path in `src/`
//! (outside unit-test modules) names the module's own layer or one below it, and the
//! modules import each other without a circle; a command uses no other command (the
//! shared argument types of `commands/mod.rs` aside) and not the daemon; `core` does no
//! I/O. And the README's test command is the one `.ci/run` runs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first; `support` is a leaf that uses nothing of the crate.
const LAYERS: [&str; 9] = [
    "support", "core", "process", "store", "engine", "daemon", "service", "commands", "cli",
];

fn rank(layer: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == layer)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a::b::c` for `src/a/b/c.rs` or `src/a/b/c/mod.rs`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// Every `crate::x::y…` path in `text`, as its segments.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let segments: Vec<String> = rest[..end]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        found.push(segments);
    }
    found
}

/// Every `super::…` path in `text` of `module`, resolved to its crate path's segments
/// (`super` of `a::b::c` is `a::b`, whatever file holds it).
fn super_paths(text: &str, module: &str) -> Vec<Vec<String>> {
    let own: Vec<&str> = module.split("::").collect();
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("super::") {
        let before = rest[..i].chars().last();
        rest = &rest[i..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            rest = &rest["super::".len()..];
            continue;
        }
        let mut ups = 0;
        while let Some(after) = rest.strip_prefix("super::") {
            ups += 1;
            rest = after;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let Some(base) = own.len().checked_sub(ups) else {
            continue;
        };
        let segments: Vec<String> = own[..base]
            .iter()
            .map(|s| s.to_string())
            .chain(
                rest[..end]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            )
            .collect();
        found.push(segments);
    }
    found
}

/// `x` for a module `commands::x` or `commands::x::…`.
fn command_of(module: &str) -> Option<String> {
    let mut parts = module.split("::");
    (parts.next() == Some("commands")).then(|| parts.next().map(str::to_string))?
}

/// The I/O a core module's code names: `std::fs`, `std::process`, `std::net` or
/// tokio's I/O, used or imported (a type such as `std::fs::Metadata` taken as a
/// parameter is not I/O).
fn io_in(body: &str) -> Vec<String> {
    const TYPES: [&str; 6] = [
        "std::fs::Metadata",
        "std::fs::FileType",
        "std::net::IpAddr",
        "std::net::Ipv4Addr",
        "std::net::Ipv6Addr",
        "std::process::ExitStatus",
    ];
    let mut found = Vec::new();
    for root in [
        "std::fs",
        "std::process",
        "std::net",
        "tokio::fs",
        "tokio::process",
        "tokio::net",
        "tokio::io",
    ] {
        for (at, _) in body.match_indices(root) {
            let rest = &body[at..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let path = &rest[..end];
            if !TYPES.contains(&path) {
                found.push(path.to_string());
            }
        }
    }
    for line in body
        .lines()
        .filter(|l| l.trim_start().starts_with("use std::{"))
    {
        if ["fs", "process", "net"].iter().any(|m| {
            line.contains(&format!("{m}::"))
                || line.contains(&format!(" {m},"))
                || line.contains(&format!("{{{m},"))
        }) {
            found.push(line.trim().to_string());
        }
    }
    found
}

#[test]
fn modules_use_only_their_layer_and_those_below_without_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeMap<String, PathBuf> = files
        .iter()
        .map(|f| (module_of(&src, f), f.clone()))
        .filter(|(m, _)| m != "lib" && m != "main")
        .collect();
    let mut wrong = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let body = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let layer = module.split("::").next().unwrap_or("");
        let own = rank(layer).unwrap_or_else(|| panic!("{module} is in no layer"));
        for path in crate_paths(body)
            .into_iter()
            .chain(super_paths(body, module))
        {
            let Some(target_layer) = path.first() else {
                continue;
            };
            let Some(target) = rank(target_layer) else {
                continue;
            };
            let up = target > own || (layer == "support" && target_layer != "support");
            if up {
                wrong.push(format!("{module} uses crate::{}", path.join("::")));
            }
            if layer == "commands" && target_layer == "daemon" {
                wrong.push(format!(
                    "command {module} uses the daemon: crate::{}",
                    path.join("::")
                ));
            }
            if let (Some(mine), Some(theirs)) = (command_of(module), command_of(&path.join("::")))
                && mine != theirs
                && modules.contains_key(&format!("commands::{theirs}"))
            {
                wrong.push(format!(
                    "command {module} uses another command: crate::{}",
                    path.join("::")
                ));
            }
            // The longest prefix that is a module is what this one imports.
            let used = (1..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|m| modules.contains_key(m));
            if let Some(used) = used
                && &used != module
                && !module.starts_with(&format!("{used}::"))
            {
                edges.entry(module.clone()).or_default().insert(used);
            }
        }
    }
    // Unit tests kept in a file of their own (`#[path = "x_tests.rs"] mod tests`) may.
    let pure = |m: &&String| m.starts_with("core") && !m.ends_with("_tests");
    for (module, file) in modules.iter().filter(|(m, _)| pure(m)) {
        let text = std::fs::read_to_string(file).unwrap();
        let body = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        for io in io_in(body) {
            wrong.push(format!("{module} does I/O: {io}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "modules reach up a layer, into another command or out of the pure core:\n{}",
        wrong.join("\n")
    );
    // Depth-first search for a circle.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            return Some(path[i..].to_vec());
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in edges.get(m).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for module in modules.keys() {
        let circle = visit(module, &edges, &mut Vec::new(), &mut done);
        assert!(circle.is_none(), "import circle: {circle:?}");
    }
}

/// The README's first block names the test command; `.ci/run` must run exactly it.
#[test]
fn the_readmes_test_command_is_the_one_ci_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let command = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| l.starts_with("cargo test "))
            .map(str::to_string)
            .collect()
    };
    let readme_block: String = readme.split("```").nth(1).unwrap_or_default().to_string();
    let readme_command = command(&readme_block);
    assert_eq!(readme_command.len(), 1, "{readme_command:?}");
    assert_eq!(command(&ci), readme_command, "README.md against .ci/run");
}
