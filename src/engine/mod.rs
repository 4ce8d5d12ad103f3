//! The job engine: one job file's run from claim to removal (`job_run`), the runner
//! attempts in fallback order (`attempts`, each through the one seam, `spawner`; an
//! API runner's reply judged in `api_attempt`), single-flight, per-runner limits,
//! recovery of what an interrupted holder left, the codex catalog lookup and the
//! judge's files a codex argv names, runners
//! started ahead of their jobs (`prestart`) and the folders runners work in.

pub mod api_attempt;
pub mod attempts;
pub mod codex_argv;
pub mod codex_catalog;
pub mod events;
pub mod exiting;
pub mod flight;
pub mod job_cwd;
pub mod job_file;
pub mod job_run;
pub mod limits;
pub mod prestart;
pub mod prestart_rules;
pub mod recovery;
pub mod runner_folder;
pub mod spawner;
pub mod table_warning;

#[cfg(test)]
mod prestart_tests;
#[cfg(test)]
mod scripted;
