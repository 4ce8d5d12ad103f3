//! Short bounded runs of an installed runner (`--version`, `codex debug models`), run
//! as a runner is: under its own supervisor (so the deadline, and the end of the run,
//! stop the whole tree, also a child that called `setsid`), in a fresh folder the
//! caller gives, with the runner's environment (`GIT_DIR=/dev/null`, the child marker,
//! its table's `env`, no API key of another runner).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::core::runner::env::RunnerEnv;
use crate::core::runner::output_format::OutputFormat;
use crate::core::verdict::RunEnd;
use crate::process::error::ProcessError;
use crate::process::spawn::{self, Launcher, RunSpec};
use crate::process::tag::new_tag;

/// Bytes of stdout kept; a catalog is a few hundred KiB at most.
const STDOUT_CAP: usize = 16 << 20;
/// SIGTERM to SIGKILL at the deadline: a probe has nothing to save.
const KILL_GRACE: Duration = Duration::from_millis(500);

/// One bounded run: the program (found on `PATH` already) and its arguments.
pub struct ProbeSpec<'a> {
    pub program: &'a Path,
    pub args: &'a [&'a str],
    /// The runner table's own variables.
    pub env: &'a RunnerEnv,
    /// Inherited variables it must not see (the tables' API keys).
    pub withheld: &'a [&'a str],
    /// A fresh folder to run in.
    pub cwd: &'a Path,
    pub timeout: Duration,
}

/// What a bounded run printed and how it ended.
#[derive(Debug)]
pub struct Probe {
    /// Its exit code (minus the signal number for a signal death).
    pub code: i32,
    /// Its stdout, lossily decoded, at most 16 MiB (the tail).
    pub stdout: String,
}

impl Probe {
    /// True for exit 0.
    pub fn success(&self) -> bool {
        self.code == 0
    }
}

/// Runs `spec` with stdin closed; stops its whole tree at the deadline (an error naming
/// the program) and once it has exited.
pub async fn run(spec: &ProbeSpec<'_>) -> Result<Probe, ProcessError> {
    let mut argv = vec![spec.program.to_string_lossy().into_owned()];
    argv.extend(spec.args.iter().map(|a| a.to_string()));
    let tag = new_tag();
    let run = RunSpec {
        argv: &argv,
        env: spec.env,
        withheld: spec.withheld,
        stdin: None,
        cwd: spec.cwd,
        timeout: spec.timeout,
        kill_grace: KILL_GRACE,
        tag: &tag,
        output_cap: STDOUT_CAP,
        stop: None,
        format: OutputFormat::Plain,
    };
    let out = spawn::run(&run, &Launcher::new(None), |_| {}).await.output;
    let program = || spec.program.to_path_buf();
    let args = || spec.args.join(" ");
    match out.end {
        RunEnd::Exited { code } => Ok(Probe {
            code,
            stdout: out.stdout,
        }),
        RunEnd::TimedOut { .. } => Err(ProcessError::TookTooLong {
            program: program(),
            args: args(),
            seconds: spec.timeout.as_secs(),
        }),
        RunEnd::NotInstalled => Err(cannot_run(program(), args(), "not found".into())),
        RunEnd::SpawnFailed { kind, message } => Err(ProcessError::CannotRun {
            program: program(),
            args: args(),
            source: std::io::Error::new(kind, message),
        }),
        other => Err(cannot_run(program(), args(), format!("{other:?}"))),
    }
}

fn cannot_run(program: PathBuf, args: String, why: String) -> ProcessError {
    ProcessError::CannotRun {
        program,
        args,
        source: std::io::Error::other(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn probe(program: &str, args: &[&str], timeout: Duration) -> Result<Probe, ProcessError> {
        let dir = tempfile::tempdir().expect("temp folder");
        let spec = ProbeSpec {
            program: Path::new(program),
            args,
            env: &RunnerEnv::new(),
            withheld: &[],
            cwd: dir.path(),
            timeout,
        };
        crate::support::runtime::runtime()
            .expect("runtime")
            .block_on(run(&spec))
    }

    #[test]
    fn output_status_and_runner_env_of_a_quick_program() {
        let out = probe(
            "/bin/sh",
            &[
                "-c",
                "echo hello $GIT_DIR $CATSTACK_LLM_JUDGE_CHILD; exit 3",
            ],
            Duration::from_secs(20),
        )
        .expect("sh runs");
        assert_eq!(out.stdout, "hello /dev/null 1\n");
        assert_eq!(out.code, 3);
    }

    #[test]
    fn a_slow_program_and_its_children_are_killed_at_the_deadline() {
        let started = Instant::now();
        let err = probe(
            "/bin/sh",
            &["-c", "sleep 30 & sleep 30"],
            Duration::from_millis(200),
        )
        .expect_err("deadline")
        .to_string();
        assert!(err.contains("took over"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(20), "did not hang");
    }

    #[test]
    fn a_child_holding_stdout_open_does_not_keep_the_run_going() {
        let started = Instant::now();
        let out = probe(
            "/bin/sh",
            &["-c", "echo done; setsid sleep 30 &"],
            Duration::from_secs(20),
        )
        .expect("sh runs");
        assert!(out.stdout.starts_with("done"));
        assert!(started.elapsed() < Duration::from_secs(20), "did not hang");
    }

    #[test]
    fn a_missing_program_is_an_error_naming_it() {
        let err = probe(
            "/nonexistent/codex",
            &["debug", "models"],
            Duration::from_secs(1),
        )
        .expect_err("missing")
        .to_string();
        assert!(err.contains("/nonexistent/codex debug models"), "{err}");
    }
}
