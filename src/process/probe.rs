//! Short bounded runs of an installed runner (`--version`, `codex debug models`): in a
//! process group of their own, so the deadline, and the end of the run, stop the whole
//! tree (codex's Node wrapper starts a native child that could hold the pipes open).

use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::process::error::ProcessError;
use crate::process::os::signal_group;
use crate::process::spawn::CHILD_VAR;

/// Bytes of stdout kept; a catalog is a few hundred KiB at most.
const STDOUT_CAP: u64 = 16 << 20;
/// How long the pipes may stay open after the program ended (a setsid'd grandchild).
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// What a bounded run printed and how it ended.
#[derive(Debug)]
pub struct Probe {
    /// The program's exit status.
    pub status: ExitStatus,
    /// Its stdout, lossily decoded, at most 16 MiB.
    pub stdout: String,
}

/// Runs `program args` with stdin closed and stderr dropped; kills its process group at
/// `timeout` (an error naming the program) and once it has exited.
pub fn run(program: &Path, args: &[&str], timeout: Duration) -> Result<Probe, ProcessError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env(CHILD_VAR, "1")
        .process_group(0)
        .spawn()
        .map_err(|source| ProcessError::CannotRun {
            program: program.to_path_buf(),
            args: args.join(" "),
            source,
        })?;
    let pgid = child.id();
    let stdout = read_in_background(child.stdout.take());
    let status = wait_within(&mut child, timeout).map_err(|e| match e {
        None => ProcessError::TookTooLong {
            program: program.to_path_buf(),
            args: args.join(" "),
            seconds: timeout.as_secs(),
        },
        Some(source) => ProcessError::Wait {
            program: program.to_path_buf(),
            args: args.join(" "),
            pid: pgid,
            source,
        },
    })?;
    signal_group(pgid, Signal::KILL);
    let stdout = stdout.recv_timeout(PIPE_GRACE).unwrap_or_default();
    Ok(Probe { status, stdout })
}

/// The child's exit status by `timeout`; else its group is killed and it is reaped,
/// and the error is `None` (the deadline) or the failed wait's.
fn wait_within(child: &mut Child, timeout: Duration) -> Result<ExitStatus, Option<io::Error>> {
    let deadline = Instant::now() + timeout;
    let error = loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    signal_group(child.id(), Signal::KILL);
    let _ = child.wait();
    Err(error)
}

/// Reads a pipe to its end on a thread; the text arrives on the returned channel.
fn read_in_background(pipe: Option<std::process::ChildStdout>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(pipe) = pipe {
            let _ = pipe.take(STDOUT_CAP).read_to_end(&mut bytes);
        }
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_status_of_a_quick_program() {
        let probe = run(
            Path::new("/bin/sh"),
            &["-c", "echo hello; exit 3"],
            Duration::from_secs(20),
        )
        .expect("sh runs");
        assert_eq!(probe.stdout, "hello\n");
        assert_eq!(probe.status.code(), Some(3));
    }

    #[test]
    fn a_slow_program_and_its_children_are_killed_at_the_deadline() {
        let started = Instant::now();
        let err = run(
            Path::new("/bin/sh"),
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
        let probe = run(
            Path::new("/bin/sh"),
            &["-c", "echo done; sleep 30 &"],
            Duration::from_secs(20),
        )
        .expect("sh runs");
        assert!(probe.stdout.starts_with("done"));
        assert!(started.elapsed() < Duration::from_secs(20), "did not hang");
    }

    #[test]
    fn a_missing_program_is_an_error_naming_it() {
        let err = run(
            Path::new("/nonexistent/codex"),
            &["debug", "models"],
            Duration::from_secs(1),
        )
        .expect_err("missing")
        .to_string();
        assert!(err.contains("/nonexistent/codex debug models"), "{err}");
    }
}
