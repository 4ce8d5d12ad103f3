//! llm-judge: judges hook questions with model CLIs. The folders are the layers,
//! and a module only uses the layers below its own (docs/architecture.md):
//! `cli` and `commands`, then `daemon`, then `engine`, then `store`, then
//! `process`, then the pure `core`; `support` is a leaf any layer may use.

pub mod cli;
pub mod commands;
pub mod core;
pub mod daemon;
pub mod engine;
pub mod process;
pub mod store;
pub mod support;
