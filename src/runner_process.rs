//! Running one runner process (SPEC section 4): its own process group, stdin from
//! /dev/null or the prompt, capped concurrent reads of stdout and stderr, and the
//! timeout sequence SIGTERM, grace, SIGKILL to the group.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::process_tree::{
    ActiveAttempt, RegisteredRunner, TAG_VAR, kill_tagged, signal_group, sweep_orphans,
};
use crate::verdict::RunEnd;

/// Set in every runner's environment: hooks that see it must not enqueue jobs.
pub const CHILD_VAR: &str = "CATSTACK_LLM_JUDGE_CHILD";
/// How long to wait for pipes to close once the runner and its tree are gone.
const PIPE_DRAIN: Duration = Duration::from_secs(2);
/// How long to wait for a SIGKILLed group leader to be reaped.
const REAP_WAIT: Duration = Duration::from_secs(5);

/// What to run.
pub struct RunSpec<'a> {
    pub argv: &'a [String],
    /// The prompt when it goes on stdin.
    pub stdin: Option<&'a str>,
    pub cwd: &'a Path,
    pub timeout: Duration,
    pub kill_grace: Duration,
    /// Put in the environment as `LLM_JUDGE_TAG` to find escaped descendants.
    pub tag: &'a str,
    /// Bytes of each stream kept (the tail).
    pub output_cap: usize,
}

/// How a runner ended and what it printed (tails, read lossily).
#[derive(Debug)]
pub struct RunOutput {
    pub end: RunEnd,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs one runner to the end. `on_spawn` gets the pid (= process group id).
pub async fn run(spec: &RunSpec<'_>, on_spawn: impl FnOnce(u32)) -> RunOutput {
    let started = Instant::now();
    let quick = |end| RunOutput {
        end,
        stdout: String::new(),
        stderr: String::new(),
        elapsed: started.elapsed(),
    };
    let Some(program) = resolve_program(&spec.argv[0]) else {
        return quick(RunEnd::NotInstalled);
    };
    let _active = ActiveAttempt::start(spec.tag);
    let spawning = crate::process_tree::SPAWN_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let spawned = command(spec, &program).spawn();
    let _registered = spawned
        .as_ref()
        .ok()
        .and_then(|c| c.id())
        .map(RegisteredRunner::new);
    drop(spawning);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return quick(RunEnd::SpawnFailed {
                kind: format!("{:?}", e.kind()),
                message: e.to_string(),
            });
        }
    };
    let pgid = child.id().unwrap_or(0);
    on_spawn(pgid);
    let stdout = Tail::new(spec.output_cap);
    let stderr = Tail::new(spec.output_cap);
    let readers = [
        child
            .stdout
            .take()
            .map(|p| tokio::spawn(read_into(p, stdout.clone()))),
        child
            .stderr
            .take()
            .map(|p| tokio::spawn(read_into(p, stderr.clone()))),
    ];
    let writer = match (child.stdin.take(), spec.stdin) {
        (Some(mut pipe), Some(prompt)) => {
            let bytes = prompt.as_bytes().to_vec();
            // A runner that exits without reading gives EPIPE: not an error of ours.
            Some(tokio::spawn(async move {
                let _ = pipe.write_all(&bytes).await;
            }))
        }
        _ => None,
    };
    let end = wait_or_stop(&mut child, pgid, spec).await;
    // Whatever the runner left behind (background children, setsid'd descendants)
    // goes now, so nothing holds the pipes and nothing outlives the attempt.
    signal_group(pgid, Signal::KILL);
    crate::blocking::blocking(|| {
        kill_tagged(spec.tag);
        sweep_orphans(spec.tag);
    });
    if let Some(w) = writer {
        w.abort();
    }
    for mut reader in readers.into_iter().flatten() {
        if tokio::time::timeout(PIPE_DRAIN, &mut reader).await.is_err() {
            // An escaped holder keeps the pipe open: stop reading, free the descriptor.
            reader.abort();
            tracing::warn!(
                pgid,
                "runner pipes still open after its processes were stopped; output cut"
            );
        }
    }
    RunOutput {
        end,
        stdout: stdout.text(),
        stderr: stderr.text(),
        elapsed: started.elapsed(),
    }
}

fn command(spec: &RunSpec<'_>, program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg0(&spec.argv[0])
        .args(&spec.argv[1..])
        .current_dir(spec.cwd)
        .process_group(0)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env(CHILD_VAR, "1")
        .env(TAG_VAR, spec.tag)
        .kill_on_drop(false);
    for (key, _) in std::env::vars_os() {
        let supervisor = key.to_str().is_some_and(|k| {
            matches!(k, "NOTIFY_SOCKET" | "WATCHDOG_PID" | "WATCHDOG_USEC")
                || k.starts_with("LISTEN_")
        });
        if supervisor {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Waits for exit within the timeout; else SIGTERM the group, grace, SIGKILL the group.
async fn wait_or_stop(child: &mut Child, pgid: u32, spec: &RunSpec<'_>) -> RunEnd {
    if let Ok(status) = tokio::time::timeout(spec.timeout, child.wait()).await {
        return exit_end(status);
    }
    signal_group(pgid, Signal::TERM);
    if tokio::time::timeout(spec.kill_grace, child.wait())
        .await
        .is_err()
    {
        signal_group(pgid, Signal::KILL);
        let _ = tokio::time::timeout(REAP_WAIT, child.wait()).await;
    }
    RunEnd::TimedOut {
        seconds: spec.timeout.as_secs_f64(),
    }
}

fn exit_end(status: std::io::Result<ExitStatus>) -> RunEnd {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => RunEnd::Exited {
            code: s
                .code()
                .or_else(|| s.signal().map(|sig| -sig))
                .unwrap_or(-1),
        },
        Err(e) => RunEnd::SpawnFailed {
            kind: format!("{:?}", e.kind()),
            message: format!("waiting for the runner failed: {e}"),
        },
    }
}

/// The program to start, or `None` when it is not installed.
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The last `cap` bytes of a stream, shared so a cut-off reader still leaves its data.
#[derive(Clone)]
struct Tail {
    inner: Arc<Mutex<Vec<u8>>>,
    cap: usize,
}

impl Tail {
    fn new(cap: usize) -> Self {
        Tail {
            inner: Arc::new(Mutex::new(Vec::new())),
            cap,
        }
    }

    fn push(&self, chunk: &[u8]) {
        let mut buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        buf.extend_from_slice(chunk);
        // Trim only at twice the cap so the cost stays linear in the bytes read.
        if buf.len() > self.cap.saturating_mul(2) {
            let excess = buf.len() - self.cap;
            buf.drain(..excess);
        }
    }

    fn text(&self) -> String {
        let buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let start = buf.len().saturating_sub(self.cap);
        String::from_utf8_lossy(&buf[start..]).into_owned()
    }
}

async fn read_into(mut pipe: impl AsyncRead + Unpin, tail: Tail) {
    let mut chunk = vec![0u8; 64 * 1024];
    while let Ok(n) = pipe.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        tail.push(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes() {
        let t = Tail::new(4);
        for chunk in [b"abc".as_slice(), b"defgh", b"ij"] {
            t.push(chunk);
        }
        assert_eq!(t.text(), "ghij");
    }

    #[test]
    fn tail_reads_invalid_utf8_lossily() {
        let t = Tail::new(16);
        t.push(b"ok \xff\xfe end");
        assert_eq!(t.text(), "ok \u{fffd}\u{fffd} end");
    }

    #[test]
    fn programs_resolve_by_path_or_not_at_all() {
        assert!(resolve_program("sh").is_some());
        assert!(resolve_program("/bin/sh").is_some());
        assert!(resolve_program("no-such-program-77").is_none());
        assert!(resolve_program("/no/such/program").is_none());
        let plain = tempfile::NamedTempFile::new().unwrap();
        assert!(
            resolve_program(plain.path().to_str().unwrap()).is_none(),
            "not executable"
        );
    }
}
