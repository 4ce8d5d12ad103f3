//! Shared helpers for the integration tests.
//!
//! Every test builds its own [`World`]: a temp folder holding the state folder, a
//! HOME, an XDG_CONFIG_HOME, a TMPDIR for the judge's temp folders, fake runner
//! scripts and what those fakes record. Every `llm-judge` started through a world
//! gets that HOME, XDG_CONFIG_HOME and TMPDIR and loses the variables that would
//! point it elsewhere, so the real home is never touched. Every wait is bounded and
//! every started process is reaped, also when a test fails.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use super::{BIN, NO_HANG, wait_until};
/// The runner override variable.
pub const RUNNERS_VAR: &str = "CATSTACK_LLM_JUDGE_RUNNERS";
/// Set in a fake program's environment to make it exit 0 at once (see [`settle`]).
pub const PROBE_VAR: &str = "LLM_JUDGE_TEST_PROBE";

/// A deadline `d` from now.
pub fn within(d: Duration) -> Instant {
    Instant::now() + d
}

/// First 16 hex digits of SHA-1 of a transcript: its verdict folder's name.
pub use llm_judge::api::transcript_hash;

/// The verdict folder of jobs with no usable transcript (`""`).
pub const NO_TRANSCRIPT: &str = "da39a3ee5e6b4b0d";

/// A path as a `&str` (test paths are always UTF-8).
pub fn s(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// True when the process is gone or a zombie (Linux `/proc`).
pub fn process_gone(pid: u32) -> bool {
    !super::is_running(pid)
}

/// A private temp world for one test.
pub struct World {
    _dir: tempfile::TempDir,
    /// The (canonical) temp folder holding everything below.
    pub root: PathBuf,
    /// `--state-dir`.
    pub state: PathBuf,
    pub home: PathBuf,
    pub xdg: PathBuf,
    /// TMPDIR of the judge: its fresh runner folders appear here.
    pub tmp: PathBuf,
    /// Fake programs (first on PATH for tests that use them).
    pub bin: PathBuf,
    /// Fake runner scripts, run as `/bin/sh <script>` (never exec'd themselves).
    pub scripts: PathBuf,
    /// What fakes record, one folder per program (basename of `$0`).
    pub rec: PathBuf,
    /// A plain folder to use as a job's `cwd`.
    pub work: PathBuf,
    outputs: AtomicUsize,
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

/// Turns runner health and the answer cache off unless `text` configures them: tests
/// of other features must not be changed by them (SPEC section 10 has its own tests).
pub fn with_test_defaults(text: &str) -> String {
    let mut out = text.to_string();
    for (table, body) in [
        ("[health]", "enabled = false"),
        ("[cache]", "ttl_seconds = 0"),
    ] {
        if !text.contains(table) {
            out.push_str(&format!("\n{table}\n{body}\n"));
        }
    }
    out
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("llm-judge-test-")
            .tempdir()
            .expect("temp folder");
        let root = dir.path().canonicalize().expect("canonical temp folder");
        let world = World {
            _dir: dir,
            state: root.join("state"),
            home: root.join("home"),
            xdg: root.join("home/.config"),
            tmp: root.join("tmp"),
            bin: root.join("bin"),
            scripts: root.join("scripts"),
            rec: root.join("rec"),
            work: root.join("work"),
            root,
            outputs: AtomicUsize::new(0),
        };
        for dir in [
            &world.xdg,
            &world.tmp,
            &world.bin,
            &world.scripts,
            &world.rec,
            &world.work,
            &world.root.join("out"),
        ] {
            fs::create_dir_all(dir).expect("create test folder");
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(world.jobs())
            .expect("create jobs/");
        // The config read when a test passes no --config.
        fs::create_dir_all(world.xdg.join("llm-judge")).expect("create config folder");
        fs::write(
            world.xdg.join("llm-judge/config.toml"),
            with_test_defaults(""),
        )
        .expect("write default test config");
        world
    }

    pub fn jobs(&self) -> PathBuf {
        self.state.join("jobs")
    }

    pub fn log_path(&self) -> PathBuf {
        self.state.join("judge.log")
    }

    /// `llm-judge --state-dir <state>` with a clean, private environment.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("--state-dir")
            .arg(&self.state)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env("TMPDIR", &self.tmp)
            .env_remove("LLM_JUDGE_CONFIG")
            .env_remove("CATSTACK_LLM_JUDGE_STATE_DIR")
            .env_remove(RUNNERS_VAR)
            .env_remove("CATSTACK_LLM_JUDGE_CHILD")
            .env_remove("NOTIFY_SOCKET")
            .env_remove(PROBE_VAR)
            // Runner folders go under it when set (tests of that set their own).
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null());
        cmd
    }

    /// `command()` with the fake programs first on PATH.
    pub fn command_with_fakes_on_path(&self) -> Command {
        let mut cmd = self.command();
        let mut path = self.bin.clone().into_os_string();
        if let Some(rest) = std::env::var_os("PATH") {
            path.push(":");
            path.push(rest);
        }
        cmd.env("PATH", path);
        cmd
    }

    /// Starts `cmd` with stdout and stderr going to files of this world.
    pub fn start(&self, mut cmd: Command) -> Running {
        let n = self.outputs.fetch_add(1, Ordering::Relaxed);
        let stdout = self.root.join(format!("out/{n}.stdout"));
        let stderr = self.root.join(format!("out/{n}.stderr"));
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
        self.start(cmd).finish(NO_HANG)
    }

    /// `llm-judge run <job>` with the runner override set to `runners`, if any.
    pub fn run_job(&self, job: &Path, runners: Option<&str>) -> Finished {
        let mut cmd = self.command();
        if let Some(r) = runners {
            cmd.env(RUNNERS_VAR, r);
        }
        cmd.arg("run").arg(job);
        self.run(cmd)
    }

    /// `llm-judge --config <config> run <job>` with the override table `runners`.
    pub fn run_job_configured(&self, job: &Path, runners: &str, config: &Path) -> Finished {
        let mut cmd = self.command();
        cmd.env(RUNNERS_VAR, runners)
            .arg("--config")
            .arg(config)
            .arg("run")
            .arg(job);
        self.run(cmd)
    }

    /// Writes `jobs/<stem>.json` holding `job`.
    pub fn job(&self, stem: &str, job: &Value) -> PathBuf {
        self.job_bytes(
            stem,
            serde_json::to_string(job).expect("job JSON").as_bytes(),
        )
    }

    /// Writes `jobs/<stem>.json` holding `bytes`.
    pub fn job_bytes(&self, stem: &str, bytes: &[u8]) -> PathBuf {
        let path = self.jobs().join(format!("{stem}.json"));
        fs::write(&path, bytes).expect("write job");
        path
    }

    /// Writes a config file (with runner health and the answer cache off unless
    /// the text sets them, so repeated prompts and failing runners behave alike in
    /// every test) and returns its path.
    pub fn config(&self, name: &str, text: &str) -> PathBuf {
        let path = self.root.join(name);
        fs::write(&path, with_test_defaults(text)).expect("write config");
        path
    }

    /// Writes `scripts/<name>` (a `/bin/sh` script, not executable).
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.scripts.join(name);
        fs::write(&path, format!("#!/bin/sh\n{}{body}", super::PID_FUNCTIONS))
            .expect("write script");
        path
    }

    /// An override entry running `body` as `/bin/sh <script> {prompt}`.
    pub fn sh_runner(&self, name: &str, body: &str) -> Value {
        let script = self.script(&format!("{name}.sh"), body);
        serde_json::json!([name, ["/bin/sh", s(&script), "{prompt}"]])
    }

    /// Writes an executable fake program `bin/<name>` that exits 0 at once when
    /// [`PROBE_VAR`] is set and otherwise runs `body`. Call [`settle`] on it (after
    /// writing all of them) before anything may exec it.
    pub fn fake_program(&self, name: &str, body: &str) -> PathBuf {
        let path = self.bin.join(name);
        fs::write(
            &path,
            format!("#!/bin/sh\n[ -n \"${PROBE_VAR}\" ] && exit 0\n{body}"),
        )
        .expect("write fake program");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod fake");
        path
    }

    /// Shell lines recording how the script was started, into
    /// `rec/<basename of $0>/`: `arg0`, `argv` (the arguments after `$0`, each
    /// ending in NUL), `pwd`, `ls` (`ls -A` of the working folder), `env` (NUL
    /// separated) and `stdin` (what fd 0 points at).
    pub fn recorder(&self) -> String {
        format!(
            r#"rec='{}'/$(basename "$0")
mkdir -p "$rec"
printf '%s' "$0" > "$rec/arg0"
printf '%s\0' "$@" > "$rec/argv"
pwd > "$rec/pwd"
ls -A > "$rec/ls"
stat -c %a . > "$rec/mode"
read -r hp _ < /proc/self/stat; cat /proc/$hp/environ > "$rec/env"
readlink /proc/self/fd/0 > "$rec/stdin"
"#,
            s(&self.rec)
        )
    }

    /// A file a fake recorded, as text (panics when missing).
    pub fn recorded(&self, program: &str, what: &str) -> String {
        let path = self.rec.join(program).join(what);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The arguments after `$0` a fake recorded.
    pub fn recorded_argv(&self, program: &str) -> Vec<String> {
        nul_list(&self.recorded(program, "argv"))
    }

    /// The environment a fake recorded.
    pub fn recorded_env(&self, program: &str) -> Vec<String> {
        nul_list(&self.recorded(program, "env"))
    }

    /// The path of a verdict.
    pub fn verdict_path(&self, transcript_folder: &str, stem: &str) -> PathBuf {
        self.state
            .join("verdicts")
            .join(transcript_folder)
            .join(format!("{stem}.json"))
    }

    /// The verdict of job `stem` for `transcript`.
    pub fn verdict(&self, transcript: &str, stem: &str) -> Value {
        self.verdict_in(&transcript_hash(transcript), stem)
    }

    /// The verdict of job `stem` in the verdict folder `folder`.
    pub fn verdict_in(&self, folder: &str, stem: &str) -> Value {
        let path = self.verdict_path(folder, stem);
        let text = fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "verdict {}: {e}\nverdicts: {:?}\njudge.log:\n{}",
                path.display(),
                self.all_verdicts(),
                self.log()
            )
        });
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("verdict {}: {e}: {text}", path.display()))
    }

    /// Every published verdict file (hidden temp files excluded).
    pub fn all_verdicts(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let Ok(folders) = fs::read_dir(self.state.join("verdicts")) else {
            return found;
        };
        for folder in folders.flatten() {
            for file in fs::read_dir(folder.path()).into_iter().flatten().flatten() {
                if !file.file_name().to_string_lossy().starts_with('.') {
                    found.push(file.path());
                }
            }
        }
        found.sort();
        found
    }

    /// judge.log ("" when there is none yet).
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// judge.log lines containing `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    /// The one judge.log line ending with `tail` (after the timestamp and level).
    pub fn log_line_ending(&self, tail: &str) -> String {
        let lines: Vec<String> = self
            .log()
            .lines()
            .filter(|l| l.ends_with(tail))
            .map(str::to_string)
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "one line ending with {tail:?} in judge.log:\n{}",
            self.log()
        );
        lines[0].clone()
    }

    /// The private folder of the judge's fresh runner folders (SPEC 4: never a
    /// folder others can write, such as TMPDIR).
    pub fn runner_tmp(&self) -> PathBuf {
        self.state.join("tmp")
    }

    /// The names left in the runner folders' parent (folders that were not removed)
    /// and in TMPDIR (the judge must not put any there).
    pub fn tmp_entries(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.tmp)
            .expect("read TMPDIR")
            .chain(fs::read_dir(self.runner_tmp()).into_iter().flatten())
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

/// Splits NUL-terminated items.
pub fn nul_list(text: &str) -> Vec<String> {
    let mut items: Vec<String> = text.split('\0').map(str::to_string).collect();
    if items.last().is_some_and(String::is_empty) {
        items.pop();
    }
    items
}

/// Runs a freshly written executable until exec no longer fails with "Text file
/// busy" (ETXTBSY): another test thread may have forked while the file was open
/// for writing, and its child holds the write handle until it execs. Once one exec
/// gets past that check no process holds such a handle any more. Any other result
/// (the probe ran, or exec failed otherwise) ends the wait.
pub fn settle(path: &Path) {
    for _ in 0..500 {
        let spawned = Command::new(path)
            .env(PROBE_VAR, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(_) => return,
            Ok(child) => {
                let mut probe = Running {
                    pid: child.id(),
                    child: Some(child),
                    stdout: PathBuf::new(),
                    stderr: PathBuf::new(),
                    started: Instant::now(),
                };
                probe.wait_status(NO_HANG);
                return;
            }
        }
    }
    panic!("{} stayed busy (ETXTBSY) for 500 tries", path.display());
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
    /// Exit code (`None` for a signal death).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// From start to exit (measured by polling, so a little late at most).
    pub elapsed: Duration,
}

impl Finished {
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

/// SIGKILLs the processes whose pids the files name, on drop, unless disarmed:
/// cleanup for runner processes a failing test might leave behind.
pub struct KillPidsOnDrop {
    pub files: Vec<PathBuf>,
    pub armed: bool,
}

impl KillPidsOnDrop {
    pub fn new(files: &[&Path]) -> Self {
        KillPidsOnDrop {
            files: files.iter().map(|p| p.to_path_buf()).collect(),
            armed: true,
        }
    }
}

impl Drop for KillPidsOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        for file in &self.files {
            let pid = fs::read_to_string(file)
                .ok()
                .and_then(|t| t.trim().parse::<i32>().ok());
            if let Some(pid) = pid.filter(|&p| p > 1)
                && !process_gone(pid as u32)
            {
                // SAFETY: kill(2) with a pid read from the test's own pid file.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Reads a pid file a runner wrote (bounded wait for it to appear).
pub fn read_pid(file: &Path) -> u32 {
    let mut pid = None;
    let found = wait_until(within(NO_HANG), || {
        pid = fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        pid.is_some()
    });
    assert!(found, "pid file {} never appeared", file.display());
    pid.expect("pid")
}

/// `(runner, ok, reason)` of each attempt of a verdict (or `ask` output).
pub fn attempts(verdict: &Value) -> Vec<(String, bool, String)> {
    verdict["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("attempts is not a list: {verdict}"))
        .iter()
        .map(|a| {
            (
                a["runner"].as_str().expect("runner").to_string(),
                a["ok"].as_bool().expect("ok"),
                a["reason"].as_str().expect("reason").to_string(),
            )
        })
        .collect()
}

/// Owned `(runner, ok, reason)` triples from borrowed ones, for comparisons.
pub fn expected(items: &[(&str, bool, &str)]) -> Vec<(String, bool, String)> {
    items
        .iter()
        .map(|(r, ok, why)| (r.to_string(), *ok, why.to_string()))
        .collect()
}

/// An override table (`CATSTACK_LLM_JUDGE_RUNNERS` value) from its entries.
pub fn table(entries: &[Value]) -> String {
    serde_json::to_string(entries).expect("runner table JSON")
}
