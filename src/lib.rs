//! llm-judge: judges hook questions with model CLIs. The pure core (job, runners,
//! safety, answer, verdict, config) has no I/O; the rest are thin edges around it.

pub mod answer;
pub mod blocking;
pub mod cache;
pub mod claim;
pub mod cli;
pub mod codex_catalog;
pub mod codex_model;
pub mod commands;
pub mod config;
pub mod daemon;
pub mod failpoint;
pub mod flight;
pub mod health;
pub mod inbox;
pub mod job;
pub mod job_file;
pub mod judge;
pub mod limits;
pub mod lock;
pub mod logging;
pub mod outbox;
pub mod permissions;
pub mod process_tree;
pub mod recovery;
pub mod runner_process;
pub mod runners;
pub mod safety;
pub mod sd_notify;
pub mod spool;
pub mod status;
pub mod supervisor;
pub mod verdict;
