//! A hostile investigated folder, and what investigate claude may read.

use super::*;
use std::fs;

use serde_json::{Value, json};

// 4. A hostile investigated folder (issue 30, item 1).

/// Runs `git args` in `dir` (test setup); panics when it fails.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git (is git installed?)");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Makes `work` a repository whose own files run commands that touch markers in
/// `probe`: a clean filter from `.git/config` (named in `.gitattributes`) and another
/// named only in `.git/info/attributes`, an fsmonitor command, and a
/// post-index-change hook; then changes a tracked file's mtime so `git status` hashes
/// it again (which runs the filters).
fn plant_hostile_repo(work: &std::path::Path, probe: &std::path::Path) {
    git(work, &["init", "-q"]);
    git(work, &["config", "user.email", "t@example.invalid"]);
    git(work, &["config", "user.name", "t"]);
    fs::write(work.join("a.txt"), "hello\n").expect("a.txt");
    fs::write(work.join("b.txt"), "hello\n").expect("b.txt");
    fs::write(work.join(".gitattributes"), "b.txt filter=evil\n").expect(".gitattributes");
    git(work, &["add", "a.txt", "b.txt", ".gitattributes"]);
    git(work, &["commit", "-qm", "plant"]);
    let clean = |name: &str| format!("{}; cat", touch(probe, name));
    git(work, &["config", "filter.evil.clean", &clean("filter")]);
    git(
        work,
        &["config", "filter.info.clean", &clean("filter-info")],
    );
    git(
        work,
        &[
            "config",
            "core.fsmonitor",
            &format!("{}; false", touch(probe, "fsmonitor")),
        ],
    );
    fs::write(work.join(".git/info/attributes"), "a.txt filter=info\n").expect("info/attributes");
    let hook = work.join(".git/hooks/post-index-change");
    fs::write(&hook, format!("#!/bin/sh\n{}\n", touch(probe, "hook"))).expect("hook");
    fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod hook");
    age(work);
}

/// Gives the tracked files an old mtime, so the index's stat of them no longer matches.
fn age(work: &std::path::Path) {
    let out = std::process::Command::new("touch")
        .args(["-d", "2025-01-01", "a.txt", "b.txt"])
        .current_dir(work)
        .output()
        .expect("touch");
    assert!(out.status.success(), "touch -d: {out:?}");
}

#[test]
fn a_hostile_repository_runs_nothing_through_codex_or_claude() {
    let _s = serial();
    let probe = tempfile::tempdir().expect("probe folder");
    let mut lane = Lane::new(&[Cli::Codex, Cli::Claude], StandIn::text(YES));
    plant_hostile_repo(&lane.work, probe.path());
    let codex = codex_via_standin(pinned::INVESTIGATE_CODEX, lane.standin.port);
    codex_by_hand(&lane, &lane.as_judge_starts(&codex, ONE_LINE));
    let fired = markers(probe.path());
    eprintln!("plant fired under codex by hand: {fired:?}");
    // codex runs its `git status` beside the turn and may exit before git reaches the
    // second file: one filter firing proves the plant is live (seen: 1 run in 3).
    assert!(
        fired.iter().any(|m| m.starts_with("filter")),
        "control: codex started by hand did not set off a planted filter ({fired:?}); the plant is dead, so the test would prove nothing"
    );
    for m in &fired {
        let _ = fs::remove_file(probe.path().join(m));
    }
    age(&lane.work);
    lane.override_runners(&[("codex", codex)]);
    let v = lane.judge_once("codex", &investigate_job(&lane, "Is there a README?"));
    assert_hit(&v, "codex");
    assert_eq!(
        markers(probe.path()),
        Vec::<String>::new(),
        "under the daemon's codex"
    );
    lane.remove_env("CATSTACK_LLM_JUDGE_RUNNERS");
    age(&lane.work);
    lane.write_config(&format!(
        "[[runners.investigate]]\nname = \"claude\"\nargv = {}\n",
        serde_json::to_string(pinned::INVESTIGATE_CLAUDE).expect("argv")
    ));
    let v = lane.judge_once("claude", &investigate_job(&lane, "Is there a README?"));
    assert_hit(&v, "claude");
    assert_eq!(
        markers(probe.path()),
        Vec::<String>::new(),
        "under the daemon's claude"
    );
}

/// Issue 30: the shipped investigate claude keeps reads inside the job's folder
/// (`permissions.blockReadsOutsideWorkingDirectories`, and deny rules for the user's
/// keys and tool logins). The stand-in asks claude to Read a file in the cwd and
/// `~/.ssh/id_rsa`; the tool results carry the first and not the second. Control: the
/// argv with the earlier `--settings` (hooks off only) reads the key.
#[test]
fn investigate_claude_reads_inside_its_cwd_and_not_the_users_keys() {
    let _s = serial();
    let mut lane = Lane::new(&[Cli::Claude], StandIn::text(YES));
    let inside = lane.work.join("inside.txt");
    fs::write(&inside, "INSIDE-CONTENT-7731\n").expect("inside.txt");
    let ssh = lane.home.join(".ssh");
    fs::create_dir_all(&ssh).expect("~/.ssh");
    fs::write(ssh.join("id_rsa"), "SECRET-KEY-5519\n").expect("id_rsa");
    let calls = vec![
        ("Read".to_string(), json!({"file_path": inside})),
        ("Read".to_string(), json!({"file_path": ssh.join("id_rsa")})),
    ];
    let hooks_off_only = pinned::INVESTIGATE_CLAUDE
        .iter()
        .map(|a| {
            if a.starts_with("{\"disableAllHooks\"") {
                "{\"disableAllHooks\": true}"
            } else {
                a
            }
        })
        .collect::<Vec<_>>();
    for (label, argv, key_readable) in [
        ("control", hooks_off_only, true),
        ("shipped", pinned::INVESTIGATE_CLAUDE.to_vec(), false),
    ] {
        lane.standin = StandIn::start(Reply::ClaudeTools(calls.clone()), YES);
        // The override: the allowlist now refuses the control's settings in a table.
        lane.override_runners(&[("claude", owned(&argv))]);
        let v = lane.judge_once(label, &investigate_job(&lane, "What does inside.txt say?"));
        let reqs = lane.standin.model_requests();
        keep_requests(&format!("claude-read-confinement-{label}"), &reqs);
        let results = tool_results_text(&reqs);
        eprintln!("{label}: claude tool results: {results}");
        assert_hit(&v, "claude");
        assert!(
            results.contains("INSIDE-CONTENT-7731"),
            "{label}: a read inside the cwd must work: {results}"
        );
        assert_eq!(
            results.contains("SECRET-KEY-5519"),
            key_readable,
            "{label}: ~/.ssh/id_rsa readable? tool results: {results}"
        );
    }
}

/// Secrets planted in the runner's HOME, beside the keys of issue 30: (path under HOME,
/// a marker in its content that must never reach a tool result).
const HOME_SECRETS: [(&str, &str); 5] = [
    (".netrc", "NETRC-SECRET-4471"),
    (".git-credentials", "GITCRED-SECRET-8812"),
    (".gnupg/private-keys-v1.d/k.key", "GNUPG-SECRET-3390"),
    (".bash_history", "HISTORY-SECRET-6203"),
    (".kube/config", "KUBE-SECRET-1187"),
];

/// Plants `HOME_SECRETS` and returns the stand-in's tool calls reading each of them
/// (a Read per file, a Grep of ~/.gnupg).
fn plant_home_secrets(lane: &Lane) -> Vec<(String, Value)> {
    let mut calls = Vec::new();
    for (rel, marker) in HOME_SECRETS {
        let path = lane.home.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("secret folder");
        fs::write(&path, format!("password {marker}\n")).expect("plant secret");
        calls.push(("Read".to_string(), json!({"file_path": path})));
    }
    calls.push((
        "Grep".to_string(),
        json!({"pattern": "SECRET", "path": lane.home.join(".gnupg"), "output_mode": "content"}),
    ));
    calls
}

/// The planted secrets found in `results`.
fn leaked(results: &str) -> Vec<&'static str> {
    HOME_SECRETS
        .iter()
        .map(|(_, marker)| *marker)
        .filter(|marker| results.contains(marker))
        .collect()
}

/// Issue 39 item 3: an investigate job whose cwd is the runner's HOME (a hook sends it
/// whenever a session runs from there). The job's cwd is refused, so the real claude
/// works in a fresh folder, and its Reads of `~/.netrc`, `~/.git-credentials`,
/// `~/.kube/config`, `~/.bash_history` and a Grep of `~/.gnupg` return nothing of
/// them. Then the new deny rules alone: the shipped argv with HOME opened through
/// `additionalDirectories` (only the override variable can run that) reads none of
/// them either, while the same argv with the six earlier rules reads them (control).
#[test]
fn investigate_claude_with_home_as_cwd_reads_none_of_the_users_secrets() {
    let _s = serial();
    let mut lane = Lane::new(&[Cli::Claude], StandIn::text(YES));
    let calls = plant_home_secrets(&lane);
    lane.standin = StandIn::start(Reply::ClaudeTools(calls.clone()), YES);
    let mut job = investigate_job(&lane, "Which hosts are in my netrc?");
    job["cwd"] = json!(lane.home);
    let v = lane.judge_once("home-cwd", &job);
    let reqs = lane.standin.model_requests();
    keep_requests("claude-home-cwd", &reqs);
    let results = tool_results_text(&reqs);
    eprintln!("home as cwd: claude tool results: {results}");
    assert_hit(&v, "claude");
    assert!(
        results.lines().count() >= calls.len(),
        "every tool call got a result: {results}"
    );
    assert_eq!(leaked(&results), Vec::<&str>::new(), "{results}");
    let attempt = v["attempts"].as_array().and_then(|a| a.last()).cloned();
    let note = attempt
        .map(|a| a["cwd_refused"].clone())
        .unwrap_or_default();
    assert!(
        note.as_str()
            .is_some_and(|n| n.contains("is the home folder")),
        "the attempt says why: {v}"
    );
    assert!(lane.log().contains("cwd refused"), "{}", lane.log());

    let shipped = pinned::INVESTIGATE_CLAUDE;
    let settings = |deny: Value| {
        let mut s: Value = serde_json::from_str(
            shipped
                .iter()
                .find(|a| a.starts_with('{'))
                .expect("settings"),
        )
        .expect("pinned settings");
        s["permissions"]["additionalDirectories"] = json!([lane.home]);
        if !deny.is_null() {
            s["permissions"]["deny"] = deny;
        }
        s.to_string()
    };
    let earlier = json!([
        "Read(~/.ssh/**)",
        "Read(~/.aws/**)",
        "Read(~/.config/**)",
        "Read(~/.claude/**)",
        "Read(~/.claude.json)",
        "Read(~/.codex/**)"
    ]);
    for (label, settings, readable) in [
        ("earlier-rules", settings(earlier), true),
        ("shipped-rules", settings(Value::Null), false),
    ] {
        let argv: Vec<String> = shipped
            .iter()
            .map(|a| {
                if a.starts_with('{') {
                    settings.clone()
                } else {
                    a.to_string()
                }
            })
            .collect();
        lane.override_runners(&[("claude", argv)]);
        lane.standin = StandIn::start(Reply::ClaudeTools(calls.clone()), YES);
        let v = lane.judge_once(
            label,
            &investigate_job(&lane, "Which hosts are in my netrc?"),
        );
        let reqs = lane.standin.model_requests();
        keep_requests(&format!("claude-home-deny-{label}"), &reqs);
        let results = tool_results_text(&reqs);
        eprintln!("{label}: claude tool results: {results}");
        assert_hit(&v, "claude");
        let found = leaked(&results);
        record(&format!(
            "home secrets read with HOME opened, {label}: {found:?}"
        ));
        if readable {
            assert!(found.contains(&"NETRC-SECRET-4471"), "control: {results}");
        } else {
            assert_eq!(found, Vec::<&str>::new(), "{label}: {results}");
        }
    }
}
