//! Starting the judge from a world: the two command lines (a private, cleared
//! environment with the world's config and a runner override, or the test's own
//! environment as a user's shell would pass it), and the guards of what was started:
//! a command run to its end ([`Running`], [`Finished`]), a daemon ([`Daemon`]) and a
//! marked process ([`Proc`]). Every guard kills and reaps on drop; every wait is bounded.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{BIN, MARK_VAR, NO_HANG, PROBE_VAR, World, wait_until};

/// The runner override variable.
pub const RUNNERS_VAR: &str = "CATSTACK_LLM_JUDGE_RUNNERS";

/// Variables that would point a judge started from the test's environment elsewhere
/// (or make it a runner's child, or a fake a probe).
const STEERING: [&str; 7] = [
    "LLM_JUDGE_CONFIG",
    "CATSTACK_LLM_JUDGE_STATE_DIR",
    RUNNERS_VAR,
    "CATSTACK_LLM_JUDGE_CHILD",
    "NOTIFY_SOCKET",
    PROBE_VAR,
    // Runner folders go under it when set (tests of that set their own).
    "XDG_RUNTIME_DIR",
];

impl World {
    /// `llm-judge --state-dir <state> --config <config.toml>` with a cleared
    /// environment (PATH, the world's HOME and XDG_CONFIG_HOME) and `runners` as the
    /// override table.
    pub fn command(&self, runners: &[Value]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env(RUNNERS_VAR, Value::Array(runners.to_vec()).to_string())
            .arg("--state-dir")
            .arg(self.state())
            .arg("--config")
            .arg(self.path("config.toml"))
            .stdin(Stdio::null());
        cmd
    }

    /// `llm-judge hook ARGS` as `hooks install` writes it (`--config-dir`, `--state-dir`),
    /// its runners in a config file: a hook takes none from a variable, so the override
    /// variable set here (a runner answering clean) must change nothing.
    pub fn hook_command(&self, runners: &[Value], args: &[&str]) -> Command {
        let table: String = runners
            .iter()
            .map(|r| {
                let argv: Vec<&str> = r[1]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                super::runner_toml("default", r[0].as_str().unwrap(), &argv)
            })
            .collect();
        let config = self.config_file(
            "hook-config.toml",
            &format!("fsync = false\nkill_grace_seconds = 1\n{table}"),
        );
        let mut cmd = self.command(&[serde_json::json!([
            "clean",
            ["/bin/echo", "{\"unverified\": false}"]
        ])]);
        cmd.arg("hook")
            .args(args)
            .arg("--config-dir")
            .arg(self.xdg.join("llm-judge"))
            .arg("--config")
            .arg(config);
        cmd
    }

    /// `llm-judge --state-dir <state>` as a user's shell starts it: the test's own
    /// environment with the world's HOME, XDG_CONFIG_HOME and TMPDIR, and none of the
    /// variables that would point it elsewhere; it reads the XDG config. The
    /// environment is spelled out in full (cleared, then set), as in [`World::command`].
    pub fn cli(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .envs(std::env::vars_os().filter(|(k, _)| !STEERING.iter().any(|s| k == s)))
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env("TMPDIR", &self.tmp)
            .arg("--state-dir")
            .arg(self.state())
            .stdin(Stdio::null());
        cmd
    }

    /// [`World::cli`] with the fake programs first on PATH.
    pub fn cli_with_fakes_on_path(&self) -> Command {
        let mut cmd = self.cli();
        let mut path = self.bin.clone().into_os_string();
        if let Some(rest) = std::env::var_os("PATH") {
            path.push(":");
            path.push(rest);
        }
        cmd.env("PATH", path);
        cmd
    }

    /// Two fresh files for a started command's stdout and stderr.
    pub fn output_files(&self) -> (PathBuf, PathBuf) {
        let n = self.outputs.fetch_add(1, Ordering::Relaxed);
        let out = self.path(&format!("out/{n}.stdout"));
        let err = self.path(&format!("out/{n}.stderr"));
        fs::File::create(&out).expect("stdout file");
        fs::File::create(&err).expect("stderr file");
        (out, err)
    }

    /// Starts `cmd` with stdout and stderr going to files of this world.
    pub fn spawn(&self, mut cmd: Command) -> Running {
        let (stdout, stderr) = self.output_files();
        cmd.stdout(fs::File::create(&stdout).expect("stdout file"))
            .stderr(fs::File::create(&stderr).expect("stderr file"));
        let child = cmd.spawn().expect("start llm-judge");
        Running {
            pid: child.id(),
            child: Some(child),
            stdout,
            stderr,
            started: Instant::now(),
        }
    }

    /// Runs `cmd` to the end (bounded by [`NO_HANG`]).
    pub fn run(&self, cmd: Command) -> Finished {
        self.spawn(cmd).finish(NO_HANG)
    }

    /// `llm-judge run <job>` from [`World::cli`] with the runner override set to
    /// `runners`, if any.
    pub fn run_file(&self, job: &Path, runners: Option<&str>) -> Finished {
        let mut cmd = self.cli();
        if let Some(r) = runners {
            cmd.env(RUNNERS_VAR, r);
        }
        cmd.arg("run").arg(job);
        self.run(cmd)
    }

    /// `llm-judge --config <config> run <job>` with the override table `runners`.
    pub fn run_file_configured(&self, job: &Path, runners: &str, config: &Path) -> Finished {
        let mut cmd = self.cli();
        cmd.env(RUNNERS_VAR, runners)
            .arg("--config")
            .arg(config)
            .arg("run")
            .arg(job);
        self.run(cmd)
    }

    /// Publishes job `name` and judges it with `llm-judge run` from
    /// [`World::command`]; returns its verdict.
    pub fn run_job(&self, runners: &[Value], name: &str, job: &Value) -> Value {
        let path = self.job(name, job);
        let out = self.command(runners).arg("run").arg(path).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.verdict(name)
    }

    /// `llm-judge daemon` from [`World::command`].
    pub fn start(&self, runners: &[Value]) -> Daemon {
        self.start_with(self.command(runners))
    }

    /// `cmd daemon`, its stderr to a file of the world.
    pub fn start_with(&self, cmd: Command) -> Daemon {
        let (_, err) = self.output_files();
        self.start_logging_to(cmd, &err)
    }

    /// Starts the daemon with its stderr appended to `err`, an existing file.
    pub fn start_logging_to(&self, mut cmd: Command, err: &Path) -> Daemon {
        let file = fs::OpenOptions::new().append(true).open(err).unwrap();
        let child = cmd
            .arg("daemon")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start daemon");
        Daemon {
            child,
            err: err.to_path_buf(),
        }
    }
}

/// [`World::command`] with a TMPDIR inside the world and the test's `mark`, which
/// every process the judge starts inherits. `runners: None` leaves the override
/// variable unset so the config file's tables (and their safety check) apply.
pub fn command(w: &World, runners: Option<&[Value]>, mark: &str) -> Command {
    let mut cmd = w.command(runners.unwrap_or(&[]));
    if runners.is_none() {
        cmd.env_remove(RUNNERS_VAR);
    }
    cmd.env("TMPDIR", &w.tmp).env(MARK_VAR, mark);
    cmd
}

/// A started process; killed and reaped on drop if it is still running.
pub struct Running {
    child: Option<Child>,
    pub pid: u32,
    stdout: PathBuf,
    stderr: PathBuf,
    started: Instant,
}

/// How a command ended.
#[derive(Debug)]
pub struct Finished {
    /// Exit code (minus the signal for a signal death).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// From start to exit (measured by polling, so a little late at most).
    pub elapsed: Duration,
}

impl Finished {
    /// Asserts the exit code is `code` and stderr holds `needle`.
    pub fn assert_exit(&self, code: i32, needle: &str) {
        assert_eq!(self.code, Some(code), "{self:?}");
        assert!(self.stderr.contains(needle), "{}", self.stderr);
    }

    /// stdout parsed as one JSON value.
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

impl Running {
    /// True once the process has exited (it is then reaped).
    pub fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|child| child.try_wait().expect("try_wait").is_some())
    }

    /// Waits at most `limit` from the start for the exit; on timeout the drop
    /// kills and reaps the process.
    fn wait_status(&mut self, limit: Duration) -> ExitStatus {
        let pid = self.pid;
        let stderr = self.stderr.clone();
        let child = self.child.as_mut().expect("still running");
        let mut status = None;
        let done = wait_until(self.started + limit, || {
            status = child.try_wait().expect("try_wait");
            status.is_some()
        });
        assert!(
            done,
            "process {pid} did not finish within {limit:?}; stderr so far:\n{}",
            fs::read_to_string(&stderr).unwrap_or_default()
        );
        self.child = None;
        status.expect("exit status")
    }

    /// Waits (at most `limit` from the start) for exit and collects the output.
    pub fn finish(mut self, limit: Duration) -> Finished {
        let status = self.wait_status(limit);
        let elapsed = self.started.elapsed();
        Finished {
            code: status.code().or_else(|| status.signal().map(|s| -s)),
            stdout: fs::read_to_string(&self.stdout).expect("read stdout"),
            stderr: fs::read_to_string(&self.stderr).expect("read stderr"),
            elapsed,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A running daemon, killed and reaped when dropped.
pub struct Daemon {
    pub child: Child,
    err: PathBuf,
}

impl Daemon {
    /// Sends `sig` (a name: `TERM`, `HUP`) with kill(1).
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{sig}");
    }

    pub fn wait_exit(&mut self, deadline: Duration) -> ExitStatus {
        let mut status = None;
        wait_until(Instant::now() + deadline, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        match status {
            Some(status) => status,
            None => panic!("daemon did not exit; stderr: {}", self.stderr()),
        }
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A started command whose output goes to files; killed and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub out: PathBuf,
    pub err: PathBuf,
    pub started: Instant,
}

/// Starts `cmd` with `args`, stdout and stderr to files in the world.
pub fn spawn(w: &World, mut cmd: Command, args: &[&str]) -> Proc {
    let (out, err) = w.output_files();
    let child = cmd
        .args(args)
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .spawn()
        .expect("start llm-judge");
    Proc {
        child,
        out,
        err,
        started: Instant::now(),
    }
}

impl Proc {
    /// Waits for the exit; panics (after killing it) past `limit` since the start.
    pub fn finish(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let mut ended = None;
        wait_until(self.started + limit, || {
            ended = self.child.try_wait().ok().flatten();
            ended.is_some()
        });
        if let Some(status) = ended {
            return (status, self.started.elapsed());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!(
            "llm-judge did not finish within {limit:?}; stderr: {}",
            self.stderr()
        );
    }

    pub fn stdout(&self) -> String {
        fs::read_to_string(&self.out).unwrap_or_default()
    }

    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `program` run with `args` and the same environment as `cmd`, which must spell its
/// environment out in full (cleared, then set: as every world command does).
pub fn with_env_of(cmd: &Command, program: impl AsRef<OsStr>) -> Command {
    let mut out = Command::new(program);
    out.env_clear();
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            out.env(key, value);
        }
    }
    out.stdin(Stdio::null());
    out
}
