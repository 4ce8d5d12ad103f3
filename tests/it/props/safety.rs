//! The investigate safety allowlist under mutated argvs.

use super::*;

use crate::support::pinned::INVESTIGATE_CLAUDE;
use crate::support::{investigate_claude, investigate_codex};
use llm_judge::api::Runner;
use llm_judge::api::check_investigate_table;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

const READ_TOOLS: &[&str] = &["Read", "Grep", "Glob"];
const MUST_DENY: &[&str] = &["Write", "Edit", "NotebookEdit", "Bash"];

/// Flags that give a runner more than reading, for either program (and `-p`, which
/// is codex's `--profile`).
const DANGEROUS_FLAGS: &[&str] = &[
    "--dangerously-skip-permissions",
    "--allow-dangerously-skip-permissions",
    "--dangerously-bypass-approvals-and-sandbox",
    "--yolo",
    "--full-auto",
    "--permission-mode",
    "--permission-prompt-tool",
    "--add-dir",
    "--mcp-config",
    "--plugin-dir",
    "--agents",
    "--config",
    "--profile",
    "--cd",
    "-C",
    "--oss",
    "--resume",
    "--continue",
    "--system-prompt",
    "--append-system-prompt",
];

/// Tokens mutations draw from: allowed flags, dangerous flags, tools, values.
const VOCAB: &[&str] = &[
    "-p",
    "--print",
    "--model",
    "haiku",
    "--settings",
    "{}",
    // Settings that confine nothing (issue 39): hooks off only, an empty deny list, the
    // root folder or a home folder opened to reads.
    "{\"disableAllHooks\": true}",
    "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": true, \"deny\": []}}",
    "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": true, \"additionalDirectories\": [\"/\"], \"deny\": []}}",
    "{\"disableAllHooks\": true, \"permissions\": {\"additionalDirectories\": [\"/\"]}}",
    "--no-session-persistence",
    "--strict-mcp-config",
    "--output-format",
    "text",
    "--tools",
    "--allowedTools",
    "--disallowedTools",
    "Read",
    "Grep",
    "Glob",
    "Write",
    "Edit",
    "NotebookEdit",
    "Bash",
    "WebFetch",
    "WebSearch",
    "Agent",
    "Task",
    "Read,Write",
    "Read,Grep",
    "Bash(ls:*)",
    "bash",
    "",
    "--tools=Read",
    "--tools=Read,Bash",
    "--allowedTools=Write",
    "--disallowedTools=Write,Edit,NotebookEdit,Bash",
    "exec",
    "review",
    "--skip-git-repo-check",
    "-m",
    "-s",
    "--sandbox",
    "read-only",
    "workspace-write",
    "danger-full-access",
    "--sandbox=read-only",
    "--sandbox=workspace-write",
    "-c",
    "notify=[]",
    "mcp_servers={}",
    "--ignore-user-config",
    "--ephemeral",
    "--json",
    "--",
    "{prompt}",
    "--dangerously-skip-permissions",
    "--dangerously-bypass-approvals-and-sandbox",
    "--yolo",
    "--full-auto",
    "--permission-mode",
    "bypassPermissions",
    "--permission-mode=acceptEdits",
    "--add-dir",
    "/",
    "--mcp-config",
    "--config",
    "--config=x",
    "--profile",
    "-C",
    "--cd",
    "--model={prompt}",
    "--settings={prompt}",
    "-s=workspace-write",
    "--print=1",
    // codex's narrowing keys, and what a table could try instead.
    "--disable",
    "--enable",
    "--disable=shell_tool",
    "--disable=sandbox",
    "multi_agent",
    "goals",
    "shell_tool",
    "view_image",
    "hooks",
    "unified_exec",
    "model_instructions_file={instructions}",
    "model_instructions_file=\"/tmp/evil.md\"",
    "model_catalog_json={codex_catalog}",
    "model_catalog_json=\"/tmp/catalog.json\"",
    "project_doc_max_bytes=0",
    "project_doc_max_bytes=65536",
    "skills.include_instructions=false",
    "include_environment_context=false",
    "include_collaboration_mode_instructions=false",
    "web_search=\"disabled\"",
    "web_search=\"live\"",
    "sandbox_mode=\"danger-full-access\"",
    "approval_policy=\"never\"",
];

/// The `-c` values an accepted investigate codex may hold, restated independently of
/// the allowlist: each only narrows what codex sends or offers; the two file keys only
/// as the judge's own placeholders.
const CODEX_NARROWING: &[&str] = &[
    "notify=[]",
    "model_instructions_file={instructions}",
    "model_catalog_json={codex_catalog}",
    "project_doc_max_bytes=0",
    "skills.include_instructions=false",
    "tools.experimental_request_user_input.enabled=false",
    "include_permissions_instructions=false",
    "include_environment_context=false",
    "include_collaboration_mode_instructions=false",
    "web_search=\"disabled\"",
];
/// The features an accepted investigate codex may switch off.
const CODEX_OFF: &[&str] = &["multi_agent", "goals", "shell_tool", "view_image", "hooks"];

const PROGRAMS: &[&str] = &[
    "claude",
    "codex",
    "/usr/local/bin/claude",
    "/opt/codex",
    "cursor-agent",
    "sh",
    "/bin/sh",
    "claude-code",
    "",
    "python3",
];

/// The shipped investigate argv that `program` (by its name) stands for.
fn shipped(program: &str) -> Vec<String> {
    if program.ends_with("codex") {
        investigate_codex(program)
    } else {
        investigate_claude(program)
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Insert(usize, &'static str),
    Delete(usize),
    Replace(usize, &'static str),
    Duplicate(usize),
    Swap(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let token = prop::sample::select(VOCAB);
    prop_oneof![
        (any::<usize>(), token.clone()).prop_map(|(i, t)| Mutation::Insert(i, t)),
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), token).prop_map(|(i, t)| Mutation::Replace(i, t)),
        any::<usize>().prop_map(Mutation::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Mutation::Swap(i, j)),
    ]
}

fn mutated_argv() -> impl Strategy<Value = Vec<String>> {
    (
        prop::sample::select(PROGRAMS),
        prop::sample::select(&["claude", "codex"][..]),
        prop::collection::vec(mutation(), 0..4),
    )
        .prop_map(|(program, base, mutations)| {
            let mut argv = shipped(base);
            if program.ends_with("claude") || program.ends_with("codex") {
                argv = shipped(program);
            } else {
                argv[0] = program.to_string();
            }
            for m in mutations {
                let n = argv.len();
                match m {
                    // Index 0 is the program: mutations touch the arguments.
                    Mutation::Insert(i, t) => argv.insert(1 + i % n, t.to_string()),
                    Mutation::Delete(i) if n > 1 => {
                        argv.remove(1 + i % (n - 1));
                    }
                    Mutation::Replace(i, t) if n > 1 => argv[1 + i % (n - 1)] = t.to_string(),
                    Mutation::Duplicate(i) if n > 1 => {
                        let at = 1 + i % (n - 1);
                        argv.insert(at, argv[at].clone());
                    }
                    Mutation::Swap(i, j) if n > 2 => argv.swap(1 + i % (n - 1), 1 + j % (n - 1)),
                    _ => {}
                }
            }
            argv
        })
}

/// Values of a list flag: the words after `flag` up to the next `-` item, and the
/// comma/space separated words of `flag=...`.
fn values_of<'a>(head: &'a [String], flag: &str) -> (bool, Vec<&'a str>) {
    let mut present = false;
    let mut words = Vec::new();
    let eq = format!("{flag}=");
    for (i, item) in head.iter().enumerate() {
        if item == flag {
            present = true;
            words.extend(
                head[i + 1..]
                    .iter()
                    .take_while(|v| !v.starts_with('-'))
                    .flat_map(|v| v.split([',', ' '])),
            );
        } else if let Some(rest) = item.strip_prefix(&eq) {
            present = true;
            words.extend(rest.split([',', ' ']));
        }
    }
    (
        present,
        words.into_iter().filter(|w| !w.is_empty()).collect(),
    )
}

/// An independent statement of the invariant: what an accepted argv must look like.
fn assert_safe(argv: &[String]) {
    let program = argv[0].rsplit('/').next().unwrap();
    assert!(program == "claude" || program == "codex", "{argv:?}");
    let n = argv.len();
    assert!(
        n >= 3 && argv[n - 2] == "--" && argv[n - 1] == "{prompt}",
        "{argv:?}"
    );
    let head = &argv[1..n - 2];
    assert!(
        !head.iter().any(|a| a == "--" || a == "{prompt}"),
        "{argv:?}"
    );
    for item in head {
        let name = if item.starts_with("--") {
            item.split('=').next().unwrap()
        } else {
            item.as_str()
        };
        assert!(!DANGEROUS_FLAGS.contains(&name), "{name} in {argv:?}");
    }
    if program == "claude" {
        let (has_tools, tools) = values_of(head, "--tools");
        assert!(has_tools, "no --tools: {argv:?}");
        let (_, allowed) = values_of(head, "--allowedTools");
        for t in tools.iter().chain(&allowed) {
            assert!(READ_TOOLS.contains(t), "tool {t} granted: {argv:?}");
        }
        let (_, denied) = values_of(head, "--disallowedTools");
        for t in MUST_DENY {
            assert!(denied.contains(t), "{t} not denied: {argv:?}");
        }
        assert!(head.iter().any(|a| a == "--strict-mcp-config"), "{argv:?}");
        if !tools.is_empty() {
            assert_reads_confined(head, argv);
        }
    } else {
        assert_eq!(head.first().map(String::as_str), Some("exec"), "{argv:?}");
        assert!(!head.iter().any(|a| a == "-p"), "codex profile: {argv:?}");
        let mut sandboxes = 0;
        for (i, item) in head.iter().enumerate() {
            let value = match item.as_str() {
                "--sandbox" | "-s" => head.get(i + 1).map(String::as_str),
                s if s.starts_with("--sandbox=") => Some(&s["--sandbox=".len()..]),
                _ => continue,
            };
            assert_eq!(value, Some("read-only"), "{argv:?}");
            sandboxes += 1;
        }
        assert!(sandboxes >= 1, "no sandbox: {argv:?}");
        for (i, item) in head.iter().enumerate() {
            let next = head.get(i + 1).map(String::as_str).unwrap_or_default();
            match item.as_str() {
                "-c" => assert!(CODEX_NARROWING.contains(&next), "-c {next}: {argv:?}"),
                "--disable" => assert!(CODEX_OFF.contains(&next), "--disable {next}: {argv:?}"),
                "--enable" => panic!("--enable in {argv:?}"),
                other => {
                    if let Some(feature) = other.strip_prefix("--disable=") {
                        assert!(CODEX_OFF.contains(&feature), "{argv:?}");
                    }
                    // A file of the table's own never reaches codex's config.
                    assert!(
                        !other.starts_with("model_instructions_file=\"")
                            && !other.starts_with("model_catalog_json=\""),
                        "{argv:?}"
                    );
                }
            }
        }
        assert!(head.iter().any(|a| a == "--ignore-user-config"), "{argv:?}");
    }
}

/// The deny rules of the pinned investigate claude, read from its pinned argv.
fn pinned_deny() -> Vec<Value> {
    let settings = INVESTIGATE_CLAUDE
        .iter()
        .find(|a| a.starts_with("{\""))
        .expect("pinned investigate claude has settings");
    let settings: Value = serde_json::from_str(settings).expect("pinned settings are JSON");
    settings["permissions"]["deny"]
        .as_array()
        .cloned()
        .expect("pinned deny list")
}

/// A claude with read tools keeps reads confined: its `--settings` block reads outside
/// the cwd, keep every pinned deny rule, and never open the root folder.
fn assert_reads_confined(head: &[String], argv: &[String]) {
    let value = head.iter().enumerate().find_map(|(i, a)| match a.as_str() {
        "--settings" => head.get(i + 1).cloned(),
        a => a.strip_prefix("--settings=").map(str::to_string),
    });
    let settings: Value = value
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_else(|| panic!("reads without settings: {argv:?}"));
    let permissions = &settings["permissions"];
    assert_eq!(
        permissions["blockReadsOutsideWorkingDirectories"], true,
        "{argv:?}"
    );
    let denied = permissions["deny"].as_array().cloned().unwrap_or_default();
    for rule in pinned_deny() {
        assert!(denied.contains(&rule), "{rule} dropped: {argv:?}");
    }
    let extra = permissions["additionalDirectories"].as_array();
    assert!(
        !extra.is_some_and(|dirs| dirs.iter().any(|d| d
            .as_str()
            .is_some_and(|d| d.trim_end_matches('/').is_empty()))),
        "the root folder opened: {argv:?}"
    );
}

fn runner(argv: Vec<String>) -> Runner {
    Runner {
        name: "r".into(),
        argv,
        max_concurrent: None,
        prestart: None,
        env: Default::default(),
        api: None,
    }
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn safety_check_survives_arbitrary_argv(
        argv in prop::collection::vec(prop_oneof![any::<String>(), prop::sample::select(VOCAB).prop_map(str::to_string)], 0..12),
    ) {
        if argv.is_empty() {
            // Not a table the config can hold (check_table refuses an empty argv first),
            // but the check must not panic on it either.
            let _ = check_investigate_table(&[runner(argv)]);
            return Ok(());
        }
        if check_investigate_table(&[runner(argv.clone())]).is_ok() {
            assert_safe(&argv);
        }
    }

    #[test]
    fn every_accepted_mutation_of_the_shipped_argv_is_safe(argv in mutated_argv()) {
        match check_investigate_table(&[runner(argv.clone())]) {
            Ok(()) => assert_safe(&argv),
            Err(e) => {
                let e = e.to_string();
                prop_assert!(e.contains("investigate runner \"r\" is unsafe"), "{}", e);
            }
        }
    }
}

/// Every codex key of the vocabulary, added to the shipped investigate codex as a
/// `-c`, `--disable`, `--enable` or `--config` value, at the start and at the end:
/// all of them, not a sample, so a key the allowlist wrongly accepts is always met.
#[test]
fn every_accepted_codex_key_narrows() {
    let mut accepted = 0;
    for flag in ["-c", "--disable", "--enable", "--config"] {
        for value in VOCAB {
            for at_end in [false, true] {
                let mut argv = shipped("codex");
                let at = if at_end { argv.len() - 2 } else { 2 };
                argv.splice(at..at, [flag.to_string(), value.to_string()]);
                if check_investigate_table(&[runner(argv.clone())]).is_ok() {
                    assert_safe(&argv);
                    accepted += 1;
                }
            }
        }
    }
    // The shipped table already holds each narrowing key once: only the features it
    // does not switch off yet can be added (`shell_tool`, as a value or `--disable=`).
    assert!(accepted >= 2, "{accepted} accepted");
}

/// Variable names an investigate runner's `env` draws from: the allowed switches and
/// what loads code, moves the API, or changes where a CLI reads its settings.
const ENV_NAMES: &[&str] = &[
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "DISABLE_AUTOUPDATER",
    "NODE_OPTIONS",
    "LD_PRELOAD",
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "HTTPS_PROXY",
    "BASH_ENV",
    "PATH",
    "GIT_DIR",
    "claude_code_disable_nonessential_traffic",
];
const ENV_VALUES: &[&str] = &[
    "1",
    "0",
    "1024",
    "128001",
    "",
    "true",
    "--require=/tmp/x.js",
    "/tmp",
];

/// An independent statement of what an accepted investigate `env` may hold.
fn assert_safe_env(program: &str, env: &std::collections::BTreeMap<String, String>) {
    for (name, value) in env {
        assert_eq!(program, "claude", "codex takes no env: {env:?}");
        match name.as_str() {
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"
            | "DISABLE_TELEMETRY"
            | "DISABLE_ERROR_REPORTING"
            | "DISABLE_AUTOUPDATER" => assert_eq!(value, "1", "{env:?}"),
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS" => {
                let n: u64 = value.parse().unwrap_or(0);
                assert!((1..=128_000).contains(&n), "{env:?}");
            }
            other => panic!("{other} accepted in {env:?}"),
        }
    }
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn whatever_env_the_check_accepts_only_switches_traffic_and_output_off(
        base in prop::sample::select(&["claude", "codex"][..]),
        pairs in prop::collection::vec(
            (prop::sample::select(ENV_NAMES), prop::sample::select(ENV_VALUES)), 0..4),
    ) {
        let env: std::collections::BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let r = Runner { env: env.clone(), ..runner(shipped(base)) };
        match check_investigate_table(&[r]) {
            Ok(()) => assert_safe_env(base, &env),
            Err(e) => {
                let e = e.to_string();
                prop_assert!(e.contains("environment variable"), "{}", e);
            }
        }
    }
}

/// The mutation property above is not vacuous: a fair share of mutations pass the
/// check (and are safe), and a fair share are refused.
#[test]
fn mutations_both_pass_and_fail_the_check() {
    let mut runner_ = TestRunner::deterministic();
    let strategy = mutated_argv();
    let (mut passed, mut refused) = (0, 0);
    for _ in 0..3000 {
        let argv = strategy.new_tree(&mut runner_).unwrap().current();
        match check_investigate_table(&[runner(argv.clone())]) {
            Ok(()) => {
                assert_safe(&argv);
                passed += 1;
            }
            Err(_) => refused += 1,
        }
    }
    eprintln!("mutated argv: {passed} accepted (all safe), {refused} refused");
    assert!(passed >= 300, "only {passed} of 3000 passed");
    assert!(refused >= 300, "only {refused} of 3000 refused");
}

/// Two investigate runners: one unsafe runner anywhere refuses the whole table.
#[test]
fn one_unsafe_runner_refuses_the_table() {
    let good = runner(shipped("codex"));
    let mut bad = shipped("claude");
    bad.insert(1, "--dangerously-skip-permissions".into());
    let bad = Runner {
        name: "bad".into(),
        ..runner(bad)
    };
    for table in [vec![good.clone(), bad.clone()], vec![bad, good]] {
        let e = check_investigate_table(&table).unwrap_err().to_string();
        assert!(
            e.contains("\"bad\"") && e.contains("--dangerously-skip-permissions"),
            "{e}"
        );
    }
}

/// Settings made from the pinned investigate claude's: one deny rule dropped or none,
/// an extra one added or not, `blockReadsOutsideWorkingDirectories` true, false or
/// gone, and a few `additionalDirectories` (the root folder written several ways among
/// them); with whether they keep the whole shipped confinement, stated independently.
fn varied_settings() -> impl Strategy<Value = (Value, bool)> {
    let rules = pinned_deny();
    let dirs = prop::sample::subsequence(
        vec![
            "/var/log/app",
            "/",
            "//",
            "/tmp/..",
            "/srv/./repo",
            "/.",
            "/srv/../srv",
        ],
        0..3,
    );
    (
        prop::option::of(0..rules.len()),
        any::<bool>(),
        prop::sample::select(vec![Some(true), Some(true), Some(false), None]),
        dirs,
    )
        .prop_map(move |(drop, extra, block, dirs)| {
            let mut deny: Vec<Value> = rules.clone();
            if let Some(i) = drop {
                deny.remove(i);
            }
            if extra {
                deny.push(json!("Read(/srv/secrets/**)"));
            }
            let mut permissions = json!({"deny": deny, "additionalDirectories": dirs});
            if let Some(block) = block {
                permissions["blockReadsOutsideWorkingDirectories"] = json!(block);
            }
            let confined =
                drop.is_none() && block == Some(true) && !dirs.iter().any(|d| is_root(d));
            (
                json!({"disableAllHooks": true, "permissions": permissions}),
                confined,
            )
        })
}

/// True when the absolute path `dir` names the root folder (`.` and `..` resolved).
fn is_root(dir: &str) -> bool {
    let mut depth: Vec<&str> = Vec::new();
    for part in dir.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                depth.pop();
            }
            name => depth.push(name),
        }
    }
    depth.is_empty()
}

proptest! {
    #![proptest_config(config(512))]

    /// A claude with read tools passes only with the whole shipped read confinement
    /// (issue 39: `"deny": []` and `additionalDirectories: ["/"]` were accepted).
    #[test]
    fn an_investigate_claude_keeps_the_whole_shipped_read_confinement(
        (settings, confined) in varied_settings(),
    ) {
        let argv: Vec<String> = INVESTIGATE_CLAUDE
            .iter()
            .map(|a| if a.starts_with("{\"") { settings.to_string() } else { a.to_string() })
            .collect();
        let checked = check_investigate_table(&[runner(argv)]);
        prop_assert_eq!(checked.is_ok(), confined, "{} {:?}", settings, checked);
    }
}
