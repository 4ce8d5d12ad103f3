//! `llm-judge ask`: ask the runners directly, bypassing the queue (and cache and health).

use serde_json::{Value, json};

use crate::cli::{EXIT_FAILURE, EXIT_OK, open_state, runtime};
use crate::config::Settings;
use crate::job::{HitRule, Job, Mode, timeout_of};
use crate::verdict::Outcome;

/// Asks and prints `{"outcome", "runner", "answer", "attempts"}`; exit 0 when answered.
pub fn main(
    settings: &Settings,
    mode: Mode,
    timeout: Option<f64>,
    cwd: Option<String>,
    prompt: String,
) -> i32 {
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
    };
    let verdict = match open_state(settings, false).and_then(|_| runtime()) {
        Ok(rt) => rt.block_on(crate::judge::judge(
            settings,
            &job,
            &crate::claim::new_tag(),
            &crate::judge::Extras::default(),
            |_, _| {},
        )),
        Err(e) => {
            eprintln!("llm-judge: {e}");
            return EXIT_FAILURE;
        }
    };
    let out = json!({
        "outcome": verdict.outcome,
        "runner": verdict.runner,
        "answer": verdict.answer,
        "attempts": verdict.attempts,
    });
    println!("{out}");
    if verdict.outcome == Outcome::Unchecked {
        EXIT_FAILURE
    } else {
        EXIT_OK
    }
}
