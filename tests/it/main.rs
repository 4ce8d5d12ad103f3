//! The integration tests: one test binary (each binary links the whole crate), one
//! module per area, and the helpers they share in `support/`.
//!
//! `cargo test --test it` runs them; `cargo test --test it daemon::` one area. The
//! real-CLI lane stays its own binary (`tests/real_runners/main.rs`): its tests run one at
//! a time so the start-up and request figures they record are not skewed, which only
//! a binary of its own can promise.

mod support;

mod adversarial;
mod api_runner;
mod architecture;
mod beyond;
mod codex_files;
mod commands;
mod core;
#[cfg(feature = "failpoints")]
mod crash;
mod daemon;
mod diskfull;
mod doors;
mod enqueue_wait;
mod escapees;
mod eval;
mod faults;
mod faults_memory;
mod history;
mod hook_attacks;
mod hooks;
mod install_place;
mod local_model;
mod migration;
mod operator;
mod prestart;
mod props;
mod read_scope;
mod runner_proc;
mod safety_invariant;
mod security;
mod service;
mod soak;
mod spend;
mod sweep;
