//! `llm-judge ask`: ask the runners directly, bypassing the queue and the answer cache,
//! but using and updating runner health as the daemon does (catstack V4's `ask()`
//! benches a failing runner too: a hook that asks directly should not pay a broken
//! runner's start on every call).

use std::io::{Read, Write};
use std::path::PathBuf;

use serde_json::{Value, json};
use tracing::Instrument;

use crate::core::config::Settings;
use crate::core::job::{HitRule, Job, Mode, timeout_of};
use crate::core::verdict::Outcome;
use crate::engine::attempts::{Judging, Plan, RunMarks, Services, judge};
use crate::store::health_store::HealthStore;
use crate::store::open_state;
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use crate::support::runtime::runtime;

/// What `ask` was asked.
pub struct AskArgs {
    pub mode: Mode,
    pub timeout: Option<f64>,
    pub cwd: Option<String>,
    pub prompt: Option<String>,
    pub prompt_file: Option<PathBuf>,
    /// The caller's clock (Unix seconds) for runner health, instead of this process's.
    pub now: Option<f64>,
}

/// Asks and prints `{"outcome", "runner", "answer", "attempts"}`, outcome `answered` or
/// `unchecked` (catstack's `ask` shape); exit 0 when answered.
pub fn main(settings: &Settings, args: AskArgs) -> i32 {
    let AskArgs {
        mode,
        timeout,
        cwd,
        prompt,
        prompt_file,
        now,
    } = args;
    if let Some(t) = now.filter(|t| !t.is_finite() || *t <= 0.0) {
        say_err!("llm-judge ask: --now {t} is not a time; give Unix seconds above 0");
        return EXIT_USAGE;
    }
    let prompt = match (prompt, prompt_file) {
        (Some(p), _) => p,
        (None, Some(source)) => match read_prompt(&source) {
            Ok(p) => p,
            Err(e) => {
                say_err!("llm-judge ask: {e}", e = e.chain());
                return EXIT_USAGE;
            }
        },
        (None, None) => {
            say_err!("llm-judge ask: give the question as an argument or with --prompt-file");
            return EXIT_USAGE;
        }
    };
    let job = Job {
        id: "ask".into(),
        prompt,
        mode,
        mode_warning: None,
        timeout_seconds: timeout_of(
            timeout.map(Value::from).as_ref(),
            settings.config.timeouts(),
        ),
        cwd: cwd.map(Value::String),
        transcript: String::new(),
        hook: Value::Null,
        on_hit: Value::Null,
        rule_id: None,
        rule: HitRule::AllTrue(Vec::new()),
        typos: Vec::new(),
    };
    let state = match open_state(settings, false) {
        Ok(state) => state,
        Err(e) => {
            say_err!("llm-judge: {e}", e = e.chain());
            return EXIT_FAILURE;
        }
    };
    crate::store::child_key::give_runners(&state);
    // Health only: the answer cache is for queued jobs (a direct question is asked anew).
    let health = HealthStore::open(&state, &settings.config.health, settings.config.fsync);
    let services = Services {
        health: health.map(|h| match now {
            Some(t) => h.at(t),
            None => h,
        }),
        ..Services::default()
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            say_err!("llm-judge: {e}", e = e.chain());
            return EXIT_FAILURE;
        }
    };
    crate::process::pid_ns::warn_if_host_proc();
    let verdict = rt.block_on(async {
        crate::engine::codex_catalog::keep_if_missing(settings, &[job.mode]).await;
        let judged = async {
            let cwd = crate::engine::job_cwd::job_cwd(settings, &job).await;
            let tag = crate::process::tag::new_tag();
            let marks = RunMarks {
                settings,
                tag: &tag,
                stop: None,
            };
            let judging = Judging::new(&services, &job, Plan::new(settings, &job, cwd), marks);
            judge(&judging, &mut |_| {}).await
        };
        judged
            .instrument(crate::store::log_line::job_span(&job.id))
            .await
    });
    // Without a stop signal the runners always end in a verdict.
    let Ok(verdict) = verdict else {
        say_err!("llm-judge ask: stopped before any runner answered");
        return EXIT_FAILURE;
    };
    let answered = verdict.outcome != Outcome::Unchecked;
    let out = json!({
        "outcome": if answered { "answered" } else { "unchecked" },
        "runner": verdict.runner,
        "answer": verdict.answer,
        "attempts": verdict.attempts,
    });
    // A closed stdout is reported, never a panic.
    if let Err(e) = writeln!(std::io::stdout().lock(), "{out}") {
        say_err!("llm-judge ask: cannot write the answer to stdout: {e}");
        return EXIT_FAILURE;
    }
    if answered { EXIT_OK } else { EXIT_FAILURE }
}

/// `--prompt-file` cannot be read; names the file.
#[derive(Debug, thiserror::Error)]
#[error("--prompt-file {}", path.display())]
struct PromptFileError {
    path: PathBuf,
    source: std::io::Error,
}

/// The prompt from FILE, or stdin for `-`.
fn read_prompt(source: &std::path::Path) -> Result<String, PromptFileError> {
    let mut text = String::new();
    let read = if source == std::path::Path::new("-") {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(source).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| PromptFileError {
        path: source.to_path_buf(),
        source: e,
    })?;
    Ok(text)
}
