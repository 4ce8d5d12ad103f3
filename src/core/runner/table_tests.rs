//! Unit tests of `core::runner::table`.

use super::*;

fn v(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn prompt_fills_the_slot() {
    let inv = build_invocation(&v(&["x", "--", "{prompt}"]), "--version");
    assert_eq!(inv.argv, v(&["x", "--", "--version"]));
    assert_eq!(inv.stdin, None);
}

#[test]
fn no_slot_means_stdin() {
    let inv = build_invocation(&v(&["x", "-p"]), "hi");
    assert_eq!(inv.argv, v(&["x", "-p"]));
    assert_eq!(inv.stdin.as_deref(), Some("hi"));
}

#[test]
fn long_prompt_goes_to_stdin_without_the_dashes() {
    let fits = "a".repeat(MAX_ARG_BYTES);
    assert_eq!(
        build_invocation(&v(&["x", "--", "{prompt}"]), &fits).stdin,
        None
    );
    let long = "a".repeat(MAX_ARG_BYTES + 1);
    let inv = build_invocation(&v(&["x", "-p", "--", "{prompt}"]), &long);
    assert_eq!(inv.argv, v(&["x", "-p"]));
    assert_eq!(inv.stdin.as_deref(), Some(long.as_str()));
}

#[test]
fn nul_prompt_goes_to_stdin() {
    let inv = build_invocation(&v(&["x", "{prompt}"]), "a\0b");
    assert_eq!(inv.argv, v(&["x"]));
    assert_eq!(inv.stdin.as_deref(), Some("a\0b"));
}

#[test]
fn override_parses_pairs() {
    let r = parse_override(r#"[["a", ["/bin/a", "{prompt}"]], ["b", ["b", ""]]]"#).unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r[1].argv, v(&["b", ""]));
    assert_eq!(parse_override("[]").unwrap(), vec![]);
}

#[test]
fn bad_override_names_the_variable() {
    for bad in [
        "nope",
        "{}",
        "[1]",
        r#"[["a"]]"#,
        r#"[["a", []]]"#,
        r#"[["a", ["x", 1]]]"#,
        r#"[[1, ["x"]]]"#,
        r#"[["a", ["{prompt}"]]]"#,
        r#"[["a", ["bin/fake", "{prompt}"]]]"#,
        r#"[["a", ["./fake"]]]"#,
    ] {
        let e = parse_override(bad).unwrap_err().to_string();
        assert!(e.starts_with(RUNNERS_VAR), "{bad}: {e}");
    }
}

#[test]
fn table_check_names_the_problem() {
    let r = |name: &str, argv: &[&str], mc| Runner {
        max_concurrent: mc,
        ..Runner::for_tests(name, argv)
    };
    assert!(check_table("default", &[r("a", &["x"], Some(2))]).is_ok());
    assert!(
        check_table("default", &[r("", &["x"], None)])
            .unwrap_err()
            .to_string()
            .contains("name")
    );
    assert!(
        check_table("default", &[r("a", &[], None)])
            .unwrap_err()
            .to_string()
            .contains("argv")
    );
    assert!(
        check_table("default", &[r("a", &["x"], Some(0))])
            .unwrap_err()
            .to_string()
            .contains("max_concurrent")
    );
    for (argv, words) in [
        (&["{prompt}"][..], "the first item must be the program"),
        (&["--", "{prompt}"][..], "empty once a long prompt"),
        (&["bin/claude", "{prompt}"][..], "relative path"),
        (&["./claude"][..], "relative path"),
    ] {
        let e = check_table("default", &[r("a", argv, None)]).unwrap_err();
        assert_eq!(e.to_string(), "runners.default[0] (\"a\")", "the entry");
        let e = crate::support::error::chain(&e);
        assert!(e.contains(words), "{argv:?}: {e}");
    }
    assert!(check_table("default", &[r("a", &["/bin/x", "--", "{prompt}"], None)]).is_ok());
}

#[test]
fn prestart_is_for_default_runners_with_the_prompt_on_stdin() {
    let r = |argv: &[&str], prestart| Runner {
        prestart,
        ..Runner::for_tests("c", argv)
    };
    assert!(check_table("default", &[r(&["/bin/c", "-p"], Some(2))]).is_ok());
    assert!(check_table("investigate", &[r(&["/bin/c", "--", "{prompt}"], Some(0))]).is_ok());
    let e = check_table("investigate", &[r(&["/bin/c"], Some(1))]).unwrap_err();
    assert!(e.to_string().contains("only for the default table"), "{e}");
    let e = check_table("default", &[r(&["/bin/c", "--", "{prompt}"], Some(1))]).unwrap_err();
    assert!(e.to_string().contains("needs the prompt on stdin"), "{e}");
    let codex = r(
        &["/opt/bin/codex", "exec", "--json", "--", "{prompt}"],
        Some(1),
    );
    assert!(check_table("default", &[codex]).is_ok());
    for argv in [
        &["codex", "exec", "--", "{prompt}", "--json"][..],
        &["codex", "--", "{prompt}"],
        &["codex", "exec", "{prompt}", "--", "{prompt}"],
        &["codexx", "exec", "--", "{prompt}"],
    ] {
        assert!(
            check_table("default", &[r(argv, Some(1))]).is_err(),
            "{argv:?}"
        );
    }
}

#[test]
fn a_waiting_copy_runs_the_argv_without_its_prompt() {
    let claude = v(&["claude", "-p", "--input-format", "stream-json"]);
    assert_eq!(waiting_argv(&claude), Some(claude.clone()));
    let codex = v(&["codex", "exec", "--json", "--", "{prompt}"]);
    let waiting = waiting_argv(&codex).unwrap();
    assert_eq!(waiting, v(&["codex", "exec", "--json", "--", "-"]));
    assert_eq!(
        stdin_payload(&waiting, "is \"x\" right?"),
        "is \"x\" right?",
        "the prompt as it is"
    );
    assert_eq!(
        waiting_argv(&v(&["cursor-agent", "-p", "--", "{prompt}"])),
        None
    );
}

#[test]
fn an_api_runner_is_refused_in_the_investigate_table() {
    let api: Runner = toml::from_str("name = \"h\"\napi = \"anthropic\"\nmodel = \"m\"\n").unwrap();
    assert!(check_table("default", std::slice::from_ref(&api)).is_ok());
    let e = check_table("investigate", &[api]).unwrap_err().to_string();
    assert!(e.contains("runners.investigate[0] (\"h\")"), "{e}");
    assert!(e.contains("cannot read, search or open files"), "{e}");
}

#[test]
fn a_stream_json_runner_gets_the_prompt_as_one_user_message() {
    for argv in [
        v(&["claude", "-p", "--input-format", "stream-json"]),
        v(&["claude", "-p", "--input-format=stream-json"]),
    ] {
        let inv = build_invocation(&argv, "is \"x\"\nright?");
        assert_eq!(inv.argv, argv);
        let line = inv.stdin.unwrap();
        assert!(
            line.ends_with('\n') && line.matches('\n').count() == 1,
            "{line:?}"
        );
        let message: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            message,
            serde_json::json!({"type": "user", "message": {"role": "user", "content": "is \"x\"\nright?"}})
        );
    }
    let plain = v(&["claude", "-p", "--input-format", "text"]);
    assert_eq!(build_invocation(&plain, "q").stdin.as_deref(), Some("q"));
    let long = "x".repeat(MAX_ARG_BYTES + 1);
    let slotted = v(&["claude", "--input-format", "stream-json", "--", "{prompt}"]);
    let inv = build_invocation(&slotted, &long);
    assert_eq!(inv.argv, v(&["claude", "--input-format", "stream-json"]));
    let message: Value = serde_json::from_str(&inv.stdin.unwrap()).unwrap();
    assert_eq!(message["message"]["content"], long.as_str());
}
