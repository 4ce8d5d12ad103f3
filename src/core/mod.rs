//! The pure core: no files, no processes, no clock reads of its own. Each folder is one
//! part of the judge, each file one idea; every rule here is a plain unit test.

pub mod api;
pub mod calendar;
pub mod codex;
pub mod config;
pub mod digest;
pub mod eval;
pub mod health;
pub mod history;
pub mod hooks;
pub mod install_place;
pub mod job;
pub mod runner;
pub mod safety;
pub mod shell;
pub mod spend;
pub mod text;
pub mod verdict;
