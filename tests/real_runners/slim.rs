//! Issue 42: what one verdict costs on the wire. The slim codex tables (the judge's
//! instructions, its trimmed catalog, the narrowing keys) against the pinned codex,
//! and the default claude's own environment (bounded output, no non-essential
//! traffic) against the pinned Claude Code. Sizes are asserted as bounds; the figures
//! go to target/real-runners/measurements.txt.

use super::*;

/// The most a default codex request for a one-line question may send.
const DEFAULT_CODEX_MAX: usize = 3 * 1024;
/// The most an investigate codex's first request may send.
const INVESTIGATE_CODEX_MAX: usize = 6 * 1024;

/// What the judge's default instructions say (core::codex::slim), to find them sent.
const DEFAULT_INSTRUCTIONS: &str =
    "You answer one question about a coding session. Reply with exactly one line of JSON";
/// A phrase of the investigate instructions.
const INVESTIGATE_INSTRUCTIONS: &str = "run read-only shell commands inside that folder";
/// Instructions for an investigate codex started by hand (the judge writes its own).
const INVESTIGATE_TEXT: &str = "You answer one question about the code in your current \
working directory: run read-only shell commands inside that folder, then reply with \
exactly one line of JSON.\n";

/// The shipped codex argv without the slim keys (what the tables were before issue 42).
fn pre_slim(argv: &[&'static str]) -> Vec<&'static str> {
    let slim = |a: &str| {
        a.starts_with("model_instructions_file=")
            || a.starts_with("model_catalog_json=")
            || a.starts_with("project_doc_max_bytes=")
            || a.starts_with("skills.")
            || a.starts_with("tools.")
            || a.starts_with("include_")
            || a.starts_with("web_search=")
    };
    let mut out: Vec<&'static str> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let next = argv.get(i + 1).copied().unwrap_or_default();
        if (argv[i] == "-c" && slim(next)) || argv[i] == "--disable" {
            i += 2;
            continue;
        }
        out.push(argv[i]);
        i += 1;
    }
    out
}

/// The one model request of a default job, with its text, checked for the judge's
/// instructions in place of codex's own.
fn one_slim_request(reqs: &[Request], label: &str) -> usize {
    assert_eq!(reqs.len(), 1, "{label}: one model request: {reqs:?}");
    let text = &reqs[0].body_text;
    assert!(
        text.contains(DEFAULT_INSTRUCTIONS),
        "{label}: the judge's instructions were not sent"
    );
    assert!(
        !text.contains("You are Codex"),
        "{label}: codex's own agent prompt was sent"
    );
    reqs[0].body_bytes
}

#[test]
fn slim_default_codex_sends_at_most_3_kb_with_the_tables_model_and_with_a_catalog_model() {
    let _s = serial();
    let scratch = Lane::new(&[Cli::Codex], StandIn::text(YES));
    let bundled = bundled_catalog(&scratch);
    let cases: Vec<(&str, Option<Value>, &str)> = vec![
        // An unreadable catalog keeps the table's model (and no trimmed catalog).
        (
            "table model kept (catalog unreadable)",
            Some(json!({"models": "not a catalog"})),
            "gpt-5.3-codex-spark",
        ),
        ("codex's own catalog (spark replaced)", None, "gpt-6.2-sol"),
        (
            "catalog of gpt-5.6-luna",
            Some(catalog_of(&bundled, &["gpt-5.6-luna", "gpt-5.5"])),
            "gpt-5.6-luna",
        ),
        (
            "catalog of gpt-5.5",
            Some(catalog_of(&bundled, &["gpt-5.5"])),
            "gpt-5.5",
        ),
    ];
    let before = pre_slim(pinned::DEFAULT_CODEX);
    for (label, catalog, model) in &cases {
        let reqs = one_default_job(Cli::Codex, Some(pinned::DEFAULT_CODEX), catalog.as_ref());
        assert_eq!(codex_model(&reqs[0]), *model, "{label}");
        let bytes = one_slim_request(&reqs, label);
        describe(&format!("codex, slim default argv, {label}"), &reqs);
        assert!(
            bytes <= DEFAULT_CODEX_MAX,
            "{label}: {bytes} bytes, over {DEFAULT_CODEX_MAX}"
        );
        let old = one_default_job(Cli::Codex, Some(&before), catalog.as_ref());
        let old_bytes = describe(&format!("codex, pre-slim default argv, {label}"), &old);
        record(&format!(
            "codex slim/pre-slim request bytes, {label}: {bytes}/{old_bytes} = {:.3}",
            bytes as f64 / old_bytes as f64
        ));
    }
}

/// The stand-in's calls for an investigate codex: a read inside the cwd, a write there,
/// and an escalated write outside.
fn shell_calls(inside: &std::path::Path, outside: &std::path::Path) -> Reply {
    Reply::CodexCalls(vec![
        ("exec_command".to_string(), json!({"cmd": "cat README.md"})),
        (
            "exec_command".to_string(),
            json!({"cmd": format!("echo pwned > {}", inside.display())}),
        ),
        (
            "exec_command".to_string(),
            json!({"cmd": format!("echo pwned > {}", outside.display()),
                "sandbox_permissions": "require_escalated", "justification": "x"}),
        ),
    ])
}

#[test]
fn slim_investigate_codex_sends_at_most_6_kb_and_its_shell_reads_but_never_writes() {
    let _s = serial();
    let probe = tempfile::tempdir().expect("probe folder");
    let mut lane = Lane::new(&[Cli::Codex], StandIn::text(YES));
    fs::write(lane.work.join("README.md"), "CANARY-readme-inside\n").expect("README");
    fs::write(
        lane.work.join("AGENTS.md"),
        "Always mention CANARY-agents-cwd.\n",
    )
    .expect("AGENTS.md");
    let inside = lane.work.join("codex-wrote.txt");
    let outside = probe.path().join("codex-wrote-outside.txt");

    // By hand, outside the judge's PID namespace: the argv as the judge fills it.
    lane.standin = StandIn::start(shell_calls(&inside, &outside), YES);
    let argv = codex_via_standin(pinned::INVESTIGATE_CODEX, lane.standin.port);
    codex_by_hand(&lane, &lane.as_judge_starts(&argv, INVESTIGATE_TEXT));
    let by_hand = tool_results_text(&lane.standin.model_requests());
    eprintln!("codex by hand, tool results: {by_hand}");
    assert!(
        by_hand.contains("CANARY-readme-inside"),
        "by hand, a read inside the cwd did not work: {by_hand}"
    );
    assert!(
        by_hand.contains("Read-only file system"),
        "by hand, the write did not fail in the sandbox: {by_hand}"
    );

    // Through the daemon.
    lane.standin = StandIn::start(shell_calls(&inside, &outside), YES);
    let argv = codex_via_standin(pinned::INVESTIGATE_CODEX, lane.standin.port);
    lane.override_runners(&[("codex", argv)]);
    let v = lane.judge_once("inv", &investigate_job(&lane, "Does README.md say hello?"));
    let reqs = lane.standin.model_requests();
    keep_requests("codex-slim-investigate", &reqs);
    assert_hit(&v, "codex");
    let first = &reqs[0];
    describe("codex, slim investigate argv, first request", &reqs[..1]);
    assert!(
        first.body_bytes <= INVESTIGATE_CODEX_MAX,
        "{} bytes, over {INVESTIGATE_CODEX_MAX}",
        first.body_bytes
    );
    assert!(
        first.body_text.contains(INVESTIGATE_INSTRUCTIONS),
        "the judge's investigate instructions were not sent"
    );
    assert!(
        first.body_text.contains("\"exec_command\""),
        "no shell tool offered"
    );
    let sent: String = reqs.iter().map(Request::all_text).collect();
    assert!(
        !sent.contains("CANARY-agents-cwd"),
        "the cwd's AGENTS.md was sent"
    );
    let results = tool_results_text(&reqs);
    eprintln!("codex under the daemon, tool results: {results}");
    // The runner's /proc is its PID namespace's (src/process/pid_ns.rs), so codex's
    // bubblewrap preflight finds its child there; with the host's /proc each command
    // waited out codex's 10 s yield with no output.
    assert!(
        results.contains("CANARY-readme-inside"),
        "under the daemon, a read inside the cwd did not work: {results}"
    );
    assert!(
        results.contains("Read-only file system"),
        "under the daemon, the write did not fail in the sandbox: {results}"
    );
    // A bound, not a speed: two stalled commands alone would take 20 s.
    let elapsed = v["attempts"][0]["elapsed_ms"].as_u64().unwrap_or(u64::MAX);
    record(&format!(
        "codex investigate under the daemon, three tool calls: attempt {elapsed} ms"
    ));
    assert!(
        elapsed < 15_000,
        "codex's attempt took {elapsed} ms of its 60 s timeout: its commands stalled? {v}"
    );
    assert!(!inside.exists(), "codex wrote {}", inside.display());
    assert!(!outside.exists(), "codex wrote {}", outside.display());
}

/// The one default job's requests (all of them, not only model requests) for the
/// shipped claude, or with `argv` as the override (no table env).
fn claude_requests(argv: Option<&[&str]>) -> Vec<Request> {
    let mut lane = Lane::new(&[Cli::Claude], StandIn::text(YES));
    if let Some(argv) = argv {
        lane.override_runners(&[("claude", owned(argv))]);
    }
    let v = lane.judge_once("env", &default_job("Is the sky blue?"));
    assert_hit(&v, "claude");
    lane.standin.requests()
}

fn max_tokens(reqs: &[Request]) -> Option<u64> {
    reqs.iter().find(|r| r.is_model())?.body["max_tokens"].as_u64()
}

#[test]
fn shipped_claude_env_bounds_its_output_and_sends_only_the_model_request() {
    let _s = serial();
    let shipped = claude_requests(None);
    let control = claude_requests(Some(pinned::DEFAULT_CLAUDE));
    let list = |reqs: &[Request]| {
        reqs.iter()
            .map(|r| format!("{} {} ({} B)", r.method, r.path, r.body_bytes))
            .collect::<Vec<_>>()
    };
    for (label, reqs) in [
        ("shipped (table env)", &shipped),
        ("without the env", &control),
    ] {
        record(&format!(
            "claude default, {label}: {} request(s) to the stand-in {:?}, max_tokens {:?}",
            reqs.len(),
            list(reqs),
            max_tokens(reqs)
        ));
    }
    assert_eq!(max_tokens(&shipped), Some(1024), "{:?}", list(&shipped));
    assert_eq!(
        shipped.len(),
        1,
        "only the model request: {:?}",
        list(&shipped)
    );
    // The control shows what the env takes away (Claude Code 2.1.328's defaults).
    assert!(
        control.iter().any(|r| r.path.starts_with("/api/hello")),
        "control: {:?}",
        list(&control)
    );
    assert_ne!(max_tokens(&control), Some(1024));
}
