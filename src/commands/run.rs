//! `llm-judge run JOB_FILE`: judge one job file now, as catstack's `judge.py run` did.

use std::path::PathBuf;

use crate::cli::{EXIT_FAILURE, EXIT_OK, open_state, runtime};
use crate::config::Settings;
use crate::job_file::{self, Handled};

/// Judges the job file; exit 0 whatever the outcome (and when someone else has it).
pub fn main(settings: &Settings, job_file: PathBuf) -> i32 {
    crate::process_tree::become_subreaper();
    let result = open_state(settings, false).and_then(|state| {
        let rt = runtime()?;
        let extras = crate::judge::Extras::for_state(settings, &state);
        Ok(rt.block_on(job_file::handle(
            settings,
            &state,
            &job_file,
            &extras,
            job_file::WorkerLink::default(),
        )))
    });
    match result {
        Ok(Handled::Busy { holder_pid }) => {
            let holder =
                holder_pid.map_or("another process".to_string(), |p| format!("process {p}"));
            eprintln!(
                "llm-judge: {} is being judged by {holder}; not judging it twice",
                job_file.display()
            );
            EXIT_OK
        }
        Ok(Handled::Gone) => {
            eprintln!(
                "llm-judge: {} does not exist (already judged?)",
                job_file.display()
            );
            EXIT_OK
        }
        Ok(Handled::Failed(e)) => {
            eprintln!("llm-judge: {}: {e}", job_file.display());
            EXIT_FAILURE
        }
        Ok(_) => EXIT_OK,
        Err(e) => {
            eprintln!("llm-judge: {e}");
            EXIT_FAILURE
        }
    }
}
