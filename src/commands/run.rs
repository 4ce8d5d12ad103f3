//! `llm-judge run JOB_FILE`: judge one job file now, as catstack's `judge.py run` did.

use std::path::{Path, PathBuf};

use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::core::runner::table::RUNNERS_VAR;
use crate::engine::job_run::{JobEnd, JobRun, JobSource};
use crate::store::config_file::{LoadError, Sources};
use crate::store::open_state;
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use crate::support::runtime::runtime;

/// Judges the job file; exit 0 whatever the outcome (and when someone else has it).
/// `state_dir_flag`: `--state-dir` was given.
pub fn main(settings: &Settings, job_file: PathBuf, state_dir_flag: bool) -> i32 {
    let inferred = match holding_state_folder(settings, &job_file, state_dir_flag) {
        Ok(inferred) => inferred,
        Err(why) => {
            say_err!("llm-judge: {why}");
            return EXIT_USAGE;
        }
    };
    let settings = inferred.as_ref().unwrap_or(settings);
    let state = match open_state(settings, false) {
        Ok(state) => state,
        Err(e) => return failed(&e),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return failed(&e),
    };
    let services = crate::engine::attempts::Services::for_state(settings, &state);
    let source = match in_folder(&job_file, &state.jobs()) {
        true => JobSource::Inbox,
        false => JobSource::UsersFile,
    };
    crate::process::pid_ns::warn_if_host_proc();
    let handled = rt.block_on(async {
        // The job's mode is read later; both tables' slim codex share one kept catalog.
        let modes = [Mode::Default, Mode::Investigate];
        crate::engine::codex_catalog::keep_if_missing(settings, &modes).await;
        let run = JobRun {
            source,
            ..JobRun::new(settings, &state, &services)
        };
        run.judge_file(&job_file).await
    });
    report(handled, &job_file, &state.jobs(), source)
}

/// The settings of the state folder that holds `job_file` (`<state>/jobs/<name>`, with
/// `jobs/` a private folder, as the judge and `enqueue` make it) when that is not this
/// judge's own: its verdict then goes where a `drain` of that folder looks. With
/// `--state-dir` naming another folder, an error naming both.
fn holding_state_folder(
    settings: &Settings,
    job_file: &Path,
    state_dir_flag: bool,
) -> Result<Option<Settings>, String> {
    let Some(jobs) = job_file
        .parent()
        .filter(|p| p.file_name() == Some("jobs".as_ref()))
    else {
        return Ok(None);
    };
    let Some(holder) = jobs.parent().map(Path::to_path_buf) else {
        return Ok(None);
    };
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if same(&holder, &settings.state_dir)
        || !crate::store::state_dir::is_private_folder(
            &std::path::absolute(jobs).unwrap_or_else(|_| jobs.to_path_buf()),
        )
    {
        return Ok(None);
    }
    if state_dir_flag {
        return Err(format!(
            "{} is in the state folder {}, but --state-dir names {}: drop --state-dir, or \
             name the folder that holds the job",
            job_file.display(),
            holder.display(),
            settings.state_dir.display()
        ));
    }
    tracing::info!(state_dir = %holder.display(), "judging the job in the state folder that holds it");
    let state_dir = std::path::absolute(&holder).unwrap_or(holder);
    Ok(Some(Settings {
        state_dir,
        ..settings.clone()
    }))
}

/// True when `path`'s folder is `folder` (the same folder, by device and inode, so
/// another spelling or a symlinked parent counts). `path` itself is not followed.
fn in_folder(path: &Path, folder: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (std::fs::metadata(parent), std::fs::metadata(folder)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// A command-level failure: said on stderr, exit 1.
fn failed(e: &dyn std::error::Error) -> i32 {
    say_err!("llm-judge: {e}", e = e.chain());
    EXIT_FAILURE
}

/// Says what became of the job; exit 2 for a path that is not a job, 1 only when
/// judging itself failed.
fn report(handled: JobEnd, job_file: &Path, jobs: &Path, source: JobSource) -> i32 {
    match handled {
        JobEnd::Busy { holder_pid } => {
            let holder =
                holder_pid.map_or("another process".to_string(), |p| format!("process {p}"));
            say_err!(
                "llm-judge: {} is being judged by {holder}; not judging it twice",
                job_file.display()
            );
            EXIT_OK
        }
        // In jobs/ a job that is gone was judged meanwhile; elsewhere it is a wrong path.
        JobEnd::Gone if source.is_users() => {
            say_err!(
                "llm-judge: {} does not exist; give run the path of a job file",
                job_file.display()
            );
            EXIT_USAGE
        }
        JobEnd::Gone => {
            say_err!(
                "llm-judge: {} does not exist (already judged?)",
                job_file.display()
            );
            EXIT_OK
        }
        JobEnd::Failed(e) => {
            say_err!("llm-judge: {}: {e}", job_file.display(), e = e.chain());
            EXIT_FAILURE
        }
        JobEnd::Rejected => {
            say_err!(
                "llm-judge: {} is not a regular job file: moved to rejected/ (see judge.log)",
                job_file.display()
            );
            EXIT_USAGE
        }
        JobEnd::NotAJob { why } => {
            say_err!(
                "llm-judge: {} is not a job file ({why}); nothing was moved. Give run a \
                 regular JSON job file",
                job_file.display()
            );
            EXIT_USAGE
        }
        JobEnd::Refused { why } => {
            say_err!(
                "llm-judge: {} is not a valid job ({why}); it was left as it is and got no \
                 verdict (only a file in {} gets a judge-error verdict). Fix the file, or \
                 publish it with llm-judge enqueue --json",
                job_file.display(),
                jobs.display()
            );
            EXIT_USAGE
        }
        JobEnd::Judged { .. } if source.is_users() => {
            say_err!(
                "llm-judge: judged {}; it is not in {}, so it was left where it is",
                job_file.display(),
                jobs.display()
            );
            EXIT_OK
        }
        _ => EXIT_OK,
    }
}

/// `run` when the config failed to load. A bad `CATSTACK_LLM_JUDGE_RUNNERS` still
/// judges the job, as an `unchecked` judge error naming the variable (docs/reference.md,
/// "Command line"), so a hook's job is never left queued by a typo; any other config error
/// is exit 2.
pub fn config_failed(sources: &Sources, job_file: &Path, error: &LoadError) -> i32 {
    let LoadError::Override(bad) = error else {
        return EXIT_USAGE;
    };
    let without = Sources {
        env: sources
            .env
            .iter()
            .filter(|(k, _)| k != RUNNERS_VAR)
            .cloned()
            .collect(),
        ..sources.clone()
    };
    match crate::store::config_file::load(&without) {
        Ok(settings) => {
            let settings = Settings {
                runner_error: Some(bad.clone()),
                ..settings
            };
            main(
                &settings,
                job_file.to_path_buf(),
                sources.state_dir_flag.is_some(),
            )
        }
        Err(e) => {
            say_err!("llm-judge: {e}", e = e.chain());
            EXIT_USAGE
        }
    }
}
