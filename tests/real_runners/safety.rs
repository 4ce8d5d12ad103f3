//! Claim 2: safety: the stand-in asks for writes; nothing is written.

use super::*;
use std::fs;

use serde_json::json;

// 2. Safety: the stand-in asks for writes; nothing is written.

#[test]
fn claude_investigate_gets_only_read_grep_glob_and_writes_nothing() {
    let _s = serial();
    let probe = tempfile::tempdir().expect("probe folder");
    let mut lane = Lane::new(&[Cli::Claude], StandIn::text(YES));
    let written = lane.work.join("claude-wrote.txt");
    let edited = lane.work.join("notes.txt");
    let bashed = probe.path().join("claude-ran-bash.txt");
    fs::write(&edited, "original\n").expect("write notes.txt");
    let calls = vec![
        (
            "Write".to_string(),
            json!({"file_path": written, "content": "pwned"}),
        ),
        (
            "Edit".to_string(),
            json!({"file_path": edited, "old_string": "original", "new_string": "pwned"}),
        ),
        (
            "Bash".to_string(),
            json!({"command": format!("touch {}", bashed.display())}),
        ),
        (
            "NotebookEdit".to_string(),
            json!({"notebook_path": lane.work.join("n.ipynb"), "new_source": "x"}),
        ),
        ("DeferredToolPlaceholder".to_string(), json!({})),
    ];
    lane.standin = StandIn::start(Reply::ClaudeTools(calls), YES);
    let job = investigate_job(&lane, "Is notes.txt empty?");
    let v = lane.judge_once("attack", &job);
    let reqs = lane.standin.model_requests();
    keep_requests("claude-investigate-attack", &reqs);
    assert_hit(&v, "claude");
    // DeferredToolPlaceholder is Claude Code's inert marker for deferred tool loading
    // ("never call this tool"); the stand-in calls it anyway, below.
    let mut tools = claude_tools(&reqs[0]);
    tools.sort();
    assert_eq!(
        tools,
        ["DeferredToolPlaceholder", "Glob", "Grep", "Read"],
        "investigate claude was offered {tools:?}"
    );
    let results = tool_results_text(&reqs);
    eprintln!("claude tool results: {results}");
    assert!(
        results.matches("No such tool available").count() >= 4,
        "every write tool must be refused; tool results: {results}"
    );
    assert!(!written.exists(), "Write created {}", written.display());
    assert!(!bashed.exists(), "Bash ran: {}", bashed.display());
    assert_eq!(
        fs::read_to_string(&edited).ok().as_deref(),
        Some("original\n"),
        "Edit changed notes.txt"
    );
    assert!(!lane.work.join("n.ipynb").exists(), "NotebookEdit wrote");
}

#[test]
fn codex_investigate_sandbox_refuses_a_shell_write() {
    let _s = serial();
    let probe = tempfile::tempdir().expect("probe folder");
    let mut lane = Lane::new(&[Cli::Codex], StandIn::text(YES));
    let in_work = lane.work.join("codex-wrote.txt");
    let elsewhere = probe.path().join("codex-wrote-outside.txt");
    let patched = lane.work.join("codex-patched.txt");
    let js = format!(
        "const a = await tools.exec_command({{cmd: {a:?}}});\ntext(JSON.stringify(a));\n\
         try {{ text(JSON.stringify(await tools.exec_command({{cmd: {b:?}, sandbox_permissions: \"require_escalated\", justification: \"x\"}}))); }} catch (e) {{ text('escalation threw: ' + e); }}\n\
         try {{ text(JSON.stringify(await tools.apply_patch({p:?}))); }} catch (e) {{ text('apply_patch threw: ' + e); }}\n",
        a = format!(
            "echo pwned > {} ; echo pwned > {}",
            in_work.display(),
            elsewhere.display()
        ),
        b = format!("echo pwned > {}", in_work.display()),
        p = format!(
            "*** Begin Patch\n*** Add File: {}\n+pwned\n*** End Patch\n",
            patched.display()
        ),
    );
    lane.standin = StandIn::start(Reply::CodexExec(js), YES);
    // No trimmed catalog (as for `run` before any daemon kept one): codex's default
    // model then works in code mode, its shell behind a JavaScript `exec` tool. The
    // slim table's own shell (`exec_command`) is `slim::…_investigate_…` below.
    lane.codex_catalog(&json!({"models": "not a catalog"}));
    let argv = codex_via_standin(pinned::INVESTIGATE_CODEX, lane.standin.port);
    lane.override_runners(&[("codex", argv)]);
    let job = investigate_job(&lane, "Is there a README?");
    let v = lane.judge_once("attack", &job);
    let reqs = lane.standin.model_requests();
    keep_requests("codex-investigate-attack", &reqs);
    let results = tool_results_text(&reqs);
    eprintln!("codex tool results: {results}");
    assert!(!in_work.exists(), "codex wrote {}", in_work.display());
    assert!(!elsewhere.exists(), "codex wrote {}", elsewhere.display());
    assert!(
        !patched.exists(),
        "codex apply_patch wrote {}",
        patched.display()
    );
    assert!(
        !results.is_empty(),
        "codex never ran the exec tool call; verdict {v}"
    );
    if results.contains("Read-only file system") {
        eprintln!("codex sandbox: the shell write failed with Read-only file system");
    } else {
        // The file is still absent, but not because of a sandbox we saw work: say so.
        eprintln!(
            "codex sandbox could NOT be shown to run on this machine; tool results: {results}"
        );
    }
    assert_hit(&v, "codex");
}
