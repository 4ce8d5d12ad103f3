//! Integration tests of the judge core through the `llm-judge` binary: `run` and
//! `ask` with fake runners (docs/reference.md).

mod attempts;
mod bad_jobs;
mod refusals;
mod run_and_ask;
mod tables;

use crate::support::*;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::pinned::*;

/// The job timeout of a test where one runner must time out beside runners that must
/// answer: many times what a fake takes to answer (or to say something first) on a
/// loaded machine, so the timeout only ever ends the one that hangs.
const SLOW_TIMEOUT: u64 = 5;

/// The shipped investigate argv after `argv[0]`, with the prompt filled in.
fn investigate_args(program: &str, prompt: &str) -> Vec<String> {
    match program {
        "codex" => args_with_prompt(INVESTIGATE_CODEX, prompt),
        "claude" => args_with_prompt(INVESTIGATE_CLAUDE, prompt),
        other => panic!("no investigate runner {other}"),
    }
}

/// The shipped default argv after `argv[0]`, with the prompt filled in.
fn default_args(program: &str, prompt: &str) -> Vec<String> {
    match program {
        "codex" => args_with_prompt(DEFAULT_CODEX, prompt),
        "claude" => args_with_prompt(DEFAULT_CLAUDE, prompt),
        "cursor-agent" => args_with_prompt(DEFAULT_CURSOR, prompt),
        other => panic!("no default runner {other}"),
    }
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What the shipped codex argv of `mode` is started with by `run` (no daemon has kept
/// a trimmed catalog: that item is dropped), the prompt filled in.
fn codex_as_started(w: &World, mode: &str, prompt: &str) -> Vec<String> {
    let argv = if mode == "investigate" {
        INVESTIGATE_CODEX
    } else {
        DEFAULT_CODEX
    };
    let instructions = w.state().join(format!("codex/instructions-{mode}.md"));
    args_as_started(argv, prompt, s(&instructions), None)
}

/// Asserts the judge's codex instructions file of `mode` is its own, private.
fn assert_instructions_file(w: &World, mode: &str) {
    let path = w.state().join(format!("codex/instructions-{mode}.md"));
    let text = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        text.contains("one line of JSON"),
        "{}: {text:?}",
        path.display()
    );
    let mode_of = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode_of(&path), 0o600, "{}", path.display());
    assert_eq!(mode_of(path.parent().unwrap()), 0o700);
}

/// Asserts a fake was started as `program` with exactly `args` after `argv[0]`.
fn assert_started_as(w: &World, program: &str, args: &[String]) {
    let arg0 = w.recorded(program, "arg0");
    assert_eq!(basename(&arg0), program, "argv[0] {arg0:?}");
    assert_eq!(w.recorded_argv(program), args, "argv of {program}");
}

/// Asserts a runner folder was a fresh, empty temp folder of the judge that is gone now.
fn assert_fresh_temp_folder(w: &World, pwd: &str) {
    let prefix = format!("{}/llm-judge-", s(&w.runner_tmp()));
    assert!(
        pwd.starts_with(&prefix),
        "{pwd:?} is not a fresh temp folder under {prefix:?}"
    );
    assert!(
        !Path::new(pwd).exists(),
        "runner folder {pwd} was not removed"
    );
}
