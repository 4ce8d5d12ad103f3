//! What is refused before any job runs: unsafe investigate tables, a bad config
//! file, a bad runner override.

use crate::support::*;

use crate::support::pinned::*;

/// `argv` with the run of items `remove` taken out and `add` put before the final `--`.
fn edited(mut argv: Vec<String>, remove: &[&str], add: &[&str]) -> Vec<String> {
    if !remove.is_empty() {
        let at = argv
            .windows(remove.len())
            .position(|w| w == remove)
            .unwrap_or_else(|| panic!("no {remove:?} in {argv:?}"));
        argv.drain(at..at + remove.len());
    }
    let dashes = argv.iter().position(|a| a == "--").unwrap();
    for (k, a) in add.iter().enumerate() {
        argv.insert(dashes + k, a.to_string());
    }
    argv
}

#[test]
fn unsafe_investigate_tables_in_a_config_file_are_refused_naming_runner_and_flag() {
    let w = World::new();
    let nothing = w.jobs().join("nothing.json");
    let check = |name: &str, argv: Vec<String>| {
        let config = w.config_file(
            &format!("{name}.toml"),
            &runner_toml("investigate", name, &argv),
        );
        let mut cmd = w.cli();
        cmd.arg("--config").arg(&config).arg("run").arg(&nothing);
        (w.run(cmd), config)
    };
    // The shipped table itself passes.
    let (done, _) = check("shipped-claude", investigate_claude("claude"));
    assert_eq!(done.code, Some(0), "{done:?}");
    let (done, _) = check("shipped-codex", investigate_codex("codex"));
    assert_eq!(done.code, Some(0), "{done:?}");

    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        (
            "no-tools",
            edited(
                investigate_claude("claude"),
                &["--tools", "Read", "Grep", "Glob"],
                &[],
            ),
            "flag \"--tools\" is missing",
        ),
        (
            "tools-twice",
            edited(investigate_claude("claude"), &[], &["--tools", "Read"]),
            "flag \"--tools\" is given twice",
        ),
        (
            "extra-tool",
            edited(
                investigate_claude("claude"),
                &["--tools", "Read", "Grep", "Glob"],
                &["--tools", "Read", "Write"],
            ),
            "flag \"--tools\" names tool \"Write\"",
        ),
        (
            "bash-allowed",
            edited(
                investigate_claude("claude"),
                &["--disallowedTools", "Write", "Edit", "NotebookEdit", "Bash"],
                &["--disallowedTools", "Write", "Edit", "NotebookEdit"],
            ),
            "flag \"--disallowedTools\" must name Write, Edit, NotebookEdit and Bash; \"Bash\" is missing",
        ),
        (
            "allowed-bash",
            edited(
                investigate_claude("claude"),
                &["--allowedTools", "Read", "Grep", "Glob"],
                &["--allowedTools", "Read,Bash"],
            ),
            "flag \"--allowedTools\" names tool \"Bash\"",
        ),
        (
            "no-strict-mcp",
            edited(investigate_claude("claude"), &["--strict-mcp-config"], &[]),
            "flag \"--strict-mcp-config\" is missing",
        ),
        (
            "skip-permissions",
            edited(
                investigate_claude("claude"),
                &[],
                &["--dangerously-skip-permissions"],
            ),
            "flag \"--dangerously-skip-permissions\" is not allowed",
        ),
        (
            "codex-no-sandbox",
            edited(investigate_codex("codex"), &["--sandbox", "read-only"], &[]),
            "flag \"--sandbox read-only\" is missing",
        ),
        (
            "codex-writable",
            edited(
                investigate_codex("codex"),
                &["--sandbox", "read-only"],
                &["--sandbox", "workspace-write"],
            ),
            "flag \"--sandbox\" must be \"read-only\"",
        ),
        (
            "codex-user-config",
            edited(investigate_codex("codex"), &["--ignore-user-config"], &[]),
            "flag \"--ignore-user-config\" is missing",
        ),
        (
            "cursor",
            with_program(DEFAULT_CURSOR, "cursor-agent"),
            "program \"cursor-agent\" is not allowed",
        ),
        (
            "python",
            strings(&["/usr/bin/python3", "-c", "print(1)", "--", "{prompt}"]),
            "program \"python3\" is not allowed",
        ),
    ];
    for (name, argv, flag) in cases {
        let (done, config) = check(name, argv);
        assert_eq!(done.code, Some(2), "{name}: {done:?}");
        let runner = format!("investigate runner \"{name}\" is unsafe: ");
        assert!(
            done.stderr.contains(&runner),
            "{name}: {:?} lacks {runner:?}",
            done.stderr
        );
        assert!(
            done.stderr.contains(flag),
            "{name}: {:?} lacks {flag:?}",
            done.stderr
        );
        assert!(
            done.stderr.contains(s(&config)),
            "{name}: {:?} lacks the file",
            done.stderr
        );
        assert_eq!(done.stdout, "");
    }
}

#[test]
fn a_bad_config_file_is_refused_naming_the_problem() {
    let w = World::new();
    let nothing = w.jobs().join("nothing.json");
    let cases = [
        ("unknown-key.toml", Some("wrokers = 2\n"), "wrokers"),
        ("bad-value.toml", Some("workers = 0\n"), "workers"),
        ("not-toml.toml", Some("workers = [\n"), "not-toml.toml"),
        ("missing.toml", None, "missing.toml"),
    ];
    for (name, text, named) in cases {
        let path = match text {
            Some(t) => w.config_file(name, t),
            None => w.root.join(name),
        };
        let mut cmd = w.cli();
        cmd.arg("--config").arg(&path).arg("run").arg(&nothing);
        let done = w.run(cmd);
        assert_eq!(done.code, Some(2), "{name}: {done:?}");
        assert!(done.stderr.contains(named), "{name}: {:?}", done.stderr);
    }
}

#[test]
fn a_bad_runner_override_is_refused_naming_the_variable() {
    let w = World::new();
    let nothing = w.jobs().join("nothing.json");
    for bad in [
        "nope",
        "{}",
        "[1]",
        "[[\"a\"]]",
        "[[\"a\", []]]",
        "[[\"a\", [\"x\", 1]]]",
        "[[1, [\"x\"]]]",
    ] {
        // `run` gives the job a judge-error verdict instead (migration.rs).
        let mut cmd = w.cli();
        cmd.env(RUNNERS_VAR, bad).arg("ask").arg(s(&nothing));
        let done = w.run(cmd);
        assert_eq!(done.code, Some(2), "{bad}: {done:?}");
        assert!(
            done.stderr.contains(RUNNERS_VAR),
            "{bad}: {:?}",
            done.stderr
        );
        assert_eq!(done.stdout, "");
    }
    // Empty means unset.
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, "").arg("run").arg(&nothing);
    assert_eq!(w.run(cmd).code, Some(0));
}
