//! The job engine: one job file from claim to removal (`lifecycle`), the runner
//! attempts in fallback order (`attempts`), single-flight, per-runner limits,
//! recovery of what an interrupted holder left, and the codex catalog lookup.

pub mod attempts;
pub mod codex_catalog;
pub mod events;
pub mod flight;
pub mod job_file;
pub mod lifecycle;
pub mod limits;
pub mod recovery;
pub mod spawner;

#[cfg(test)]
mod lifecycle_tests;
