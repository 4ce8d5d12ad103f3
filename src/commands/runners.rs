//! `llm-judge runners`: a mode's runner table as one JSON line of `[name, [argv...]]`
//! pairs, the form of `CATSTACK_LLM_JUDGE_RUNNERS`. The drop-in's `runners()` and
//! `DEFAULT_RUNNERS` read it, so no table is ever copied into Python by hand.

use serde_json::{Value, json};

use crate::core::config::{Settings, parse_config};
use crate::core::job::Mode;
use crate::core::runner::table::{Runner, RunnerKind};
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, print_stdout};

/// Prints the table `run`, `ask` and the daemon use for `mode` (config file, `--set`,
/// override variable), before the daemon's codex catalog lookup.
pub fn main(settings: &Settings, mode: Mode) -> i32 {
    print_table(settings.table(mode))
}

/// Prints the shipped table of `mode`: the embedded default, no file, flag or variable.
pub fn shipped(mode: Mode) -> i32 {
    match parse_config(None) {
        Ok(config) => print_table(match mode {
            Mode::Default => &config.runners.default,
            Mode::Investigate => &config.runners.investigate,
        }),
        Err(e) => {
            say_err!(
                "llm-judge runners: embedded default config: {e}",
                e = e.chain()
            );
            EXIT_FAILURE
        }
    }
}

/// The table as `[name, argv]` pairs. An API runner has no argv: its pair says what it
/// is instead, `[name, ["api:<protocol>", "<model>", "<base URL>"]]` (never a command:
/// the override variable cannot hold API runners), with a note on stderr.
fn print_table(table: &[Runner]) -> i32 {
    for r in table.iter().filter(|r| !r.is_cli()) {
        say_warn!(
            "llm-judge runners: {:?} is an API runner: its entry names its protocol, model and \
             base URL, not a command ({} cannot hold API runners)",
            r.name,
            crate::core::runner::table::RUNNERS_VAR
        );
    }
    let pairs: Vec<Value> = table
        .iter()
        .map(|r| match r.kind() {
            RunnerKind::Api(api) => json!([
                r.name,
                [
                    format!("api:{}", api.protocol.name()),
                    api.model,
                    api.base_url
                ]
            ]),
            RunnerKind::Cli { argv, .. } => json!([r.name, argv]),
        })
        .collect();
    if print_stdout(&format!("{}\n", Value::Array(pairs))) {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}
