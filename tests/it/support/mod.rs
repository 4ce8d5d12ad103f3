//! The integration tests' helpers, by purpose; a test module takes them all with
//! `use crate::support::*;` (and `support::pinned` by name).
//!
//! - `world`: the one test world (temp state folder, HOME, config) and reading back
//!   jobs, verdicts and judge.log;
//! - `launch`: starting the judge from a world, and the guards of what was started;
//! - `fakes`: fake runner scripts and fake programs;
//! - `tables`: runner tables for the override variable and config files;
//! - `pinned`: the shipped runner argv, written out independently of the source;
//! - `procs`: processes through `/proc`, per-test marks, and reapers;
//! - `ns_pids`: pids a fake runner wrote from inside its PID namespace, as host pids;
//! - `wait`: the one bounded wait;
//! - `one_job`: one job through `llm-judge run` with one fake runner, within a bound;
//! - `rss`: a judge's peak memory, measured through GNU time;
//! - `rng`: a seeded generator for the randomized tests.
//!
//! The real-CLI lane (`tests/real_runners/main.rs`, its own binary) includes this module too.
#![allow(dead_code, unused_imports)]

mod fakes;
mod launch;
mod ns_pids;
mod one_job;
pub mod pinned;
mod procs;
mod rng;
mod rss;
mod tables;
mod wait;
mod world;

pub use fakes::*;
pub use launch::*;
pub use ns_pids::*;
pub use one_job::*;
pub use procs::*;
pub use rng::*;
pub use rss::*;
pub use tables::*;
pub use wait::*;
pub use world::*;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_llm-judge");
