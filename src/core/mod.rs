//! The pure core: job parsing, runner tables, the investigate allowlist, answers,
//! verdicts, config parsing, the codex model choice and where runners keep their
//! login. No I/O.

pub mod answer;
pub mod codex_model;
pub mod config;
pub mod digest;
pub mod health;
pub mod job;
pub mod job_life;
pub mod login;
pub mod runner_table;
pub mod safety;
pub mod spend;
pub mod usage;
pub mod verdict;
