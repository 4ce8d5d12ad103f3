//! The pure core: job parsing, runner tables, the investigate allowlist, answers,
//! verdicts, config parsing and the codex model choice. No I/O.

pub mod answer;
// Not used until the daemon reads the codex catalog (SPEC 4 "Codex model"); the
// branch that wires it in drops this allow.
#[allow(dead_code)]
pub mod codex_model;
pub mod config;
pub mod digest;
pub mod health;
pub mod job;
pub mod runner_table;
pub mod safety;
pub mod verdict;
