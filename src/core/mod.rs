//! The pure core: job parsing, runner tables, the investigate allowlist, answers,
//! verdicts, config parsing, the codex model choice, where runners keep their login
//! and `eval`'s cases and statistics. No I/O.

pub mod answer;
pub mod api_protocol;
pub mod api_runner;
pub mod codex_model;
pub mod codex_slim;
pub mod config;
pub mod config_key;
pub mod digest;
pub mod eval;
pub mod eval_cases;
pub mod eval_report;
pub mod health;
pub mod hooks;
pub mod job;
pub mod job_keys;
pub mod job_life;
pub mod job_prefix;
pub mod key_mask;
pub mod login;
pub mod read_scope;
pub mod runner_entry;
pub mod runner_env;
pub mod runner_table;
pub mod safety;
pub mod safety_keys;
pub mod spend;
pub mod usage;
pub mod verdict;
