//! llm-judge: judges hook questions with model CLIs. The folders are the layers,
//! and a module only uses the layers below its own (docs/architecture.md):
//! `cli` and `commands`, then `service`, then `daemon`, then `engine`, then `store`, then
//! `process`, then the pure `core`; `support` is a leaf any layer may use.

#[macro_use]
pub(crate) mod support;
pub(crate) mod cli;
pub(crate) mod commands;
pub(crate) mod core;
pub(crate) mod daemon;
pub(crate) mod engine;
pub(crate) mod process;
pub(crate) mod service;
pub(crate) mod store;

/// What this library offers beyond the binary: the pure rules the property tests
/// check, and the two names the integration tests compute. Everything else is
/// `pub(crate)`, so the compiler reports what nothing uses.
pub mod api {
    pub use crate::core::job::{
        HitRule, Job, JobError, Mode, TimeoutRules, check_id, parse_job, timeout_of,
    };
    pub use crate::core::runner::output_format::OutputFormat;
    pub use crate::core::runner::table::Runner;
    pub use crate::core::safety::check_investigate_table;
    pub use crate::core::verdict::answer::last_json_object;
    pub use crate::core::verdict::{
        Attempt, Output, REASON_MAX_CHARS, RunEnd, clip, judge_attempt,
    };
    pub use crate::process::tag::new_tag;
    pub use crate::store::state_dir::transcript_hash;
}

/// Runs the command line; returns the exit code (the `llm-judge` binary).
pub use cli::main;
