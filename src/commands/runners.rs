//! `llm-judge runners`: a mode's runner table as one JSON line of `[name, [argv...]]`
//! pairs, the form of `CATSTACK_LLM_JUDGE_RUNNERS`. The drop-in's `runners()` and
//! `DEFAULT_RUNNERS` read it, so no table is ever copied into Python by hand.

use serde_json::{Value, json};

use crate::core::config::{Settings, parse_config};
use crate::core::job::Mode;
use crate::core::runner_table::Runner;
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
                e = crate::support::error::Chain(&e)
            );
            EXIT_FAILURE
        }
    }
}

/// API runners have no argv, so the override form cannot hold them: they are left out,
/// with a note on stderr.
fn print_table(table: &[Runner]) -> i32 {
    for r in table.iter().filter(|r| !r.is_cli()) {
        say_err!(
            "llm-judge runners: {:?} is an API runner, left out (this list holds CLI runners only)",
            r.name
        );
    }
    let pairs: Vec<Value> = table
        .iter()
        .filter(|r| r.is_cli())
        .map(|r| json!([r.name, r.argv]))
        .collect();
    if print_stdout(&format!("{}\n", Value::Array(pairs))) {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}
