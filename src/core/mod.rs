//! The pure core: job parsing, runner tables, the investigate allowlist, answers,
//! verdicts, config parsing and the codex model choice. No I/O.

pub mod answer;
pub mod codex_model;
pub mod config;
pub mod digest;
pub mod health;
pub mod job;
pub mod runner_table;
pub mod safety;
pub mod verdict;
