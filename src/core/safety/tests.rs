//! Unit tests of the investigate allowlist (`safety.rs` and `safety/`): the shipped
//! argv pass, and each unsafe form is refused naming its flag. The argv fixtures here
//! are shared with `claude_parser_props.rs`.

use super::*;

fn runner(argv: &[&str]) -> Runner {
    Runner::for_tests("r", argv)
}

fn check(argv: &[&str]) -> Result<(), String> {
    check_investigate_table(&[runner(argv)]).map_err(|e| e.to_string())
}

/// The shipped investigate claude's settings: hooks off, reads confined.
pub(super) static CONFINED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    serde_json::json!({"disableAllHooks": true, "permissions": {
        "blockReadsOutsideWorkingDirectories": true,
        "deny": crate::core::safety::read_scope::SHIPPED_DENY,
    }})
    .to_string()
});

/// `CLAUDE` with its settings placeholder filled with `CONFINED`.
pub(super) fn claude() -> Vec<&'static str> {
    CLAUDE
        .iter()
        .map(|a| if *a == SETTINGS { CONFINED.as_str() } else { a })
        .collect()
}

const SETTINGS: &str = "SETTINGS";
pub(super) const CLAUDE: &[&str] = &[
    "claude",
    "-p",
    "--model",
    "haiku",
    "--settings",
    SETTINGS,
    "--setting-sources",
    "",
    "--no-session-persistence",
    "--tools",
    "Read",
    "Grep",
    "Glob",
    "--allowedTools",
    "Read",
    "Grep",
    "Glob",
    "--disallowedTools",
    "Write",
    "Edit",
    "NotebookEdit",
    "Bash",
    "--strict-mcp-config",
    "--disable-slash-commands",
    "--",
    "{prompt}",
];
const CODEX: &[&str] = &[
    "codex",
    "exec",
    "--skip-git-repo-check",
    "--sandbox",
    "read-only",
    "-c",
    "notify=[]",
    "--ignore-user-config",
    "--ephemeral",
    "--",
    "{prompt}",
];

fn replaced(base: &[&str], from: &str, to: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut done = false;
    for item in base {
        if *item == from && !done {
            out.extend(to.iter().map(|s| s.to_string()));
            done = true;
        } else {
            out.push(item.to_string());
        }
    }
    assert!(done, "{from} not in argv");
    out
}

pub(super) fn check_owned(argv: Vec<String>) -> Result<(), String> {
    check(&argv.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn shipped_investigate_argv_pass() {
    check(&claude()).unwrap();
    check(CODEX).unwrap();
}

#[test]
fn equals_forms_and_commas_count_the_same() {
    let settings = format!("--settings={}", *CONFINED);
    check(&[
        "/usr/bin/claude",
        "--print",
        "--tools=Read,Grep",
        "--disallowedTools=Write,Edit,NotebookEdit,Bash",
        "--strict-mcp-config",
        "--setting-sources=",
        &settings,
        "--",
        "{prompt}",
    ])
    .unwrap();
    check(&[
        "codex",
        "exec",
        "-s",
        "read-only",
        "--ignore-user-config",
        "-m",
        "o4",
        "--",
        "{prompt}",
    ])
    .unwrap();
    check(&[
        "codex",
        "exec",
        "--sandbox=read-only",
        "--ignore-user-config",
        "--",
        "{prompt}",
    ])
    .unwrap();
}

#[test]
fn unsafe_claude_tables_are_refused_naming_the_flag() {
    let cases: Vec<(Vec<String>, &str)> = vec![
        (replaced(&claude(), "Glob", &["Glob", "Write"]), "\"Write\""),
        (replaced(&claude(), "Glob", &["Glob,Bash"]), "\"Bash\""),
        (replaced(&claude(), "Bash", &[]), "\"Bash\" is missing"),
        (
            replaced(&claude(), "--strict-mcp-config", &[]),
            "--strict-mcp-config",
        ),
        (
            replaced(&claude(), "-p", &["-p", "--dangerously-skip-permissions"]),
            "--dangerously-skip-permissions",
        ),
        (
            replaced(&claude(), "-p", &["-p", "--permission-mode", "acceptEdits"]),
            "--permission-mode",
        ),
        (replaced(&claude(), "-p", &["-p", "--print"]), "twice"),
        (
            replaced(&claude(), "--model", &["--model", "x", "--model"]),
            "twice",
        ),
        (replaced(&claude(), "--", &[]), "must end with"),
        (
            replaced(&claude(), "haiku", &["{prompt}"]),
            "before the final",
        ),
        (
            replaced(&claude(), "{prompt}", &["{prompt}", "extra"]),
            "must end with",
        ),
    ];
    for (argv, words) in cases {
        let e = check_owned(argv.clone()).unwrap_err();
        assert!(e.contains(words), "{argv:?}: {e}");
        assert!(e.contains("investigate runner \"r\""), "{e}");
    }
    // With --tools gone, the list words that followed are stray words: still refused.
    let no_tools: Vec<String> = claude()
        .iter()
        .enumerate()
        .filter(|(i, _)| !(9..=12).contains(i))
        .map(|(_, s)| s.to_string())
        .collect();
    assert!(
        check_owned(no_tools)
            .unwrap_err()
            .contains("\"--tools\" is missing")
    );
}

#[test]
fn unsafe_codex_tables_are_refused_naming_the_flag() {
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            replaced(CODEX, "read-only", &["workspace-write"]),
            "read-only",
        ),
        (
            CODEX
                .iter()
                .filter(|a| !["--sandbox", "read-only"].contains(a))
                .map(|s| s.to_string())
                .collect(),
            "--sandbox read-only\" is missing",
        ),
        (
            replaced(CODEX, "--ignore-user-config", &[]),
            "--ignore-user-config",
        ),
        (replaced(CODEX, "notify=[]", &["mcp_servers={}"]), "-c"),
        (
            replaced(
                CODEX,
                "--ephemeral",
                &["--ephemeral", "--dangerously-bypass-approvals-and-sandbox"],
            ),
            "--dangerously",
        ),
        (
            replaced(CODEX, "--ephemeral", &["--ephemeral", "--full-auto"]),
            "--full-auto",
        ),
        (replaced(CODEX, "exec", &["review"]), "codex exec"),
        (
            replaced(CODEX, "--ephemeral", &["--ephemeral", "-s", "read-only"]),
            "twice",
        ),
    ];
    for (argv, words) in cases {
        let e = check_owned(argv.clone()).unwrap_err();
        assert!(e.contains(words), "{argv:?}: {e}");
    }
}

#[test]
fn other_programs_are_refused() {
    for program in [
        "cursor-agent",
        "sh",
        "/bin/bash",
        "python3",
        "claude-wrapper",
    ] {
        let e = check(&[program, "--", "{prompt}"]).unwrap_err();
        assert!(e.contains("is not allowed"), "{program}: {e}");
    }
}

#[test]
fn a_flag_value_that_begins_with_a_dash_is_refused() {
    let bypass = &[
        "claude",
        "-p",
        "--setting-sources",
        "",
        "--tools",
        "--disallowedTools",
        "Write",
        "Edit",
        "NotebookEdit",
        "Bash",
        "--strict-mcp-config",
        "--",
        "{prompt}",
    ];
    let e = check(bypass).unwrap_err();
    assert!(
        e.contains("\"--tools\"") && e.contains("begins with '-'"),
        "{e}"
    );
    let drops_tools = replaced(&claude(), "--allowedTools", &["--allowedTools", "--tools"]);
    assert!(check_owned(drops_tools).is_err());
    let prompt_as_option: Vec<String> = claude()
        .iter()
        .take_while(|a| **a != "--allowedTools")
        .chain(["--allowedTools", "--", "{prompt}"].iter())
        .map(|s| s.to_string())
        .collect();
    assert!(check_owned(prompt_as_option).is_err());
    for flag in ["--model", "--system-prompt", "--output-format"] {
        let e = check_owned(replaced(&claude(), "-p", &["-p", flag, "--print"])).unwrap_err();
        assert!(e.contains(flag), "{flag}: {e}");
    }
    let e = check_owned(replaced(&claude(), "haiku", &[""])).unwrap_err();
    assert!(e.contains("empty value"), "{e}");
    let e = check_owned(replaced(CODEX, "read-only", &["-x"])).unwrap_err();
    assert!(e.contains("begins with '-'"), "{e}");
}

#[test]
fn settings_sources_must_be_empty_and_settings_may_only_disable_hooks() {
    let without: Vec<String> = claude()
        .iter()
        .enumerate()
        .filter(|(i, _)| !(6..=7).contains(i))
        .map(|(_, s)| s.to_string())
        .collect();
    let e = check_owned(without).unwrap_err();
    assert!(e.contains("--setting-sources"), "{e}");
    let mut project = replaced(&claude(), "--setting-sources", &["--setting-sources"]);
    project[7] = "project".into();
    assert!(
        check_owned(project)
            .unwrap_err()
            .contains("--setting-sources")
    );
    for settings in [
        "/home/u/settings.json",
        "{\"disableAllHooks\": true, \"apiKeyHelper\": \"touch /tmp/x\"}",
        "{\"disableAllHooks\": false}",
        "{\"env\": {\"A\": \"1\"}}",
        "{\"hooks\": {}}",
        "{\"disableAllHooks\": true, \"permissions\": {\"allow\": [\"Bash\"]}}",
        "{\"disableAllHooks\": true, \"permissions\": {\"defaultMode\": \"bypassPermissions\"}}",
        "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": false}}",
        "{\"disableAllHooks\": true, \"permissions\": {\"additionalDirectories\": [\"logs\"]}}",
        "{\"disableAllHooks\": true, \"permissions\": {\"deny\": \"Read(~/.ssh/**)\"}}",
        "{\"disableAllHooks\": true, \"permissions\": []}",
        // Issue 39: confines nothing.
        "{\"disableAllHooks\": true}",
        "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": true, \"deny\": []}}",
        "{\"disableAllHooks\": true, \"permissions\": {\"blockReadsOutsideWorkingDirectories\": true, \"deny\": [\"Read(~/.ssh/**)\"]}}",
    ] {
        let argv = replaced(&claude(), &CONFINED, &[settings]);
        let e = check_owned(argv).unwrap_err();
        assert!(e.contains("--settings"), "{settings}: {e}");
    }
    let with = |extra: serde_json::Value| {
        let mut settings: serde_json::Value = serde_json::from_str(&CONFINED).unwrap();
        settings["permissions"]
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        replaced(&claude(), &CONFINED, &[&settings.to_string()])
    };
    check_owned(with(
        serde_json::json!({"additionalDirectories": ["/var/log/app"]}),
    ))
    .unwrap();
    let mut more = crate::core::safety::read_scope::SHIPPED_DENY.to_vec();
    more.push("Read(/srv/secrets/**)");
    check_owned(with(serde_json::json!({"deny": more}))).unwrap();
    let e = check_owned(with(serde_json::json!({"additionalDirectories": ["/"]}))).unwrap_err();
    assert!(e.contains("the root folder"), "{e}");
    // Read tools with no settings at all: nothing confines them.
    let e = check_owned(
        replaced(&claude(), "--settings", &[])
            .into_iter()
            .filter(|a| *a != *CONFINED)
            .collect(),
    )
    .unwrap_err();
    assert!(e.contains("\"--settings\" is missing"), "{e}");
    // No read tools: no settings needed, and hooks off is enough.
    let no_reads = |settings: Option<&str>| {
        let mut argv = vec!["claude", "-p", "--setting-sources", "", "--tools", ""];
        argv.extend(["--disallowedTools", "Write", "Edit", "NotebookEdit", "Bash"]);
        argv.extend(["--strict-mcp-config"]);
        argv.extend(settings.map(|s| ["--settings", s]).into_iter().flatten());
        argv.extend(["--", "{prompt}"]);
        check(&argv)
    };
    no_reads(None).unwrap();
    no_reads(Some("{\"disableAllHooks\": true}")).unwrap();
}

#[test]
fn home_and_folders_above_it_are_refused_as_additional_directories() {
    let table = |dir: &str| {
        let mut settings: serde_json::Value = serde_json::from_str(&CONFINED).unwrap();
        settings["permissions"]["additionalDirectories"] = serde_json::json!([dir]);
        let argv = replaced(&claude(), &CONFINED, &[&settings.to_string()]);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        vec![runner(&argv)]
    };
    let home = Path::new("/home/u");
    for dir in ["/home/u", "/home", "/home/u/../u/"] {
        let t = table(dir);
        check_investigate_table(&t).unwrap();
        let e = check_investigate_home(&t, home).unwrap_err().to_string();
        assert!(
            e.contains("the home folder (/home/u)") && e.contains("\"r\""),
            "{e}"
        );
    }
    check_investigate_home(&table("/home/u/project"), home).unwrap();
    check_investigate_home(&[runner(CODEX)], home).unwrap();
}
