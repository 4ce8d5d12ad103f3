//! One real-runner test's world: a temp folder with state, HOME, TMPDIR and a PATH
//! folder holding only the CLIs the test wants, the stand-in API, and the daemon
//! (killed and reaped on drop).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::install::clis;
use super::standin::StandIn;
use super::support::with_test_defaults;
use super::support::{BIN, wait_child, wait_until};

/// The marker variable every runner inherits.
pub const MARKER_VAR: &str = "LLM_JUDGE_REAL_LANE";
/// Generous bound for one verdict with a real CLI.
pub const VERDICT_DEADLINE: Duration = Duration::from_secs(120);

/// A real CLI the lane can put on PATH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// Claude Code.
    Claude,
    /// codex.
    Codex,
}

/// One test's lane.
pub struct Lane {
    _dir: tempfile::TempDir,
    /// The temp folder holding everything.
    pub root: PathBuf,
    /// `--state-dir`.
    pub state: PathBuf,
    /// The runners' HOME (empty at start).
    pub home: PathBuf,
    /// TMPDIR of the daemon and runners.
    pub tmp: PathBuf,
    /// The PATH folder with symlinks to the chosen CLIs.
    pub bin: PathBuf,
    /// A folder to use as a job's `cwd` (inside `root/project`).
    pub work: PathBuf,
    /// The config file passed with `--config`.
    pub config: PathBuf,
    /// This lane's unique marker value.
    pub marker: String,
    /// The stand-in model API.
    pub standin: StandIn,
    env: Vec<(String, Option<String>)>,
    daemon: Option<Child>,
}

static LANES: AtomicUsize = AtomicUsize::new(0);

/// `argv` with `-c openai_base_url="<stand-in>/v1"` inserted before `--`: codex 0.171
/// ignores OPENAI_BASE_URL, this is the only way to point it at the stand-in.
pub fn codex_via_standin(argv: &[&str], port: u16) -> Vec<String> {
    let mut out: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let at = out
        .iter()
        .position(|a| a == "--")
        .expect("codex argv has --");
    out.insert(
        at,
        format!("openai_base_url=\"http://127.0.0.1:{port}/v1\""),
    );
    out.insert(at, "-c".to_string());
    out
}

impl Lane {
    /// A lane with only `clis` on PATH and the stand-in's URL and dummy keys in the env.
    pub fn new(with: &[Cli], standin: StandIn) -> Lane {
        let installed = clis();
        let n = LANES.fetch_add(1, Ordering::SeqCst);
        let dir = tempfile::Builder::new()
            .prefix("llm-judge-real-")
            .tempdir()
            .expect("lane temp folder");
        let root = dir.path().canonicalize().expect("canonical lane folder");
        let lane = Lane {
            state: root.join("state"),
            home: root.join("home"),
            tmp: root.join("tmp"),
            bin: root.join("bin"),
            work: root.join("project/work"),
            config: root.join("config.toml"),
            marker: format!("lane-{}-{n}-{}", std::process::id(), root.display()),
            root,
            _dir: dir,
            standin,
            env: Vec::new(),
            daemon: None,
        };
        for d in [&lane.state, &lane.home, &lane.tmp, &lane.bin, &lane.work] {
            fs::create_dir_all(d).expect("lane folder");
            fs::set_permissions(d, fs::Permissions::from_mode(0o700)).expect("chmod lane folder");
        }
        fs::create_dir_all(lane.state.join("jobs")).expect("jobs/");
        fs::set_permissions(lane.state.join("jobs"), fs::Permissions::from_mode(0o700))
            .expect("chmod jobs/");
        for cli in with {
            let (name, target) = match cli {
                Cli::Claude => ("claude", &installed.claude),
                Cli::Codex => ("codex", &installed.codex),
            };
            let real = target.canonicalize().expect("resolve CLI");
            std::os::unix::fs::symlink(real, lane.bin.join(name)).expect("symlink CLI");
        }
        lane.write_config("");
        lane
    }

    /// Writes the config file (fsync, health and cache off unless `extra` sets them).
    pub fn write_config(&self, extra: &str) {
        let mut text = format!("{extra}\n");
        if !extra.contains("fsync") {
            text.insert_str(0, "fsync = false\n");
        }
        fs::write(&self.config, with_test_defaults(&text)).expect("write lane config");
    }

    /// Sets an extra environment variable for the daemon and commands.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.push((key.to_string(), Some(value.to_string())));
    }

    /// Removes a variable (e.g. ANTHROPIC_API_KEY) from the daemon's and commands' env.
    pub fn remove_env(&mut self, key: &str) {
        self.env.push((key.to_string(), None));
    }

    /// Sets `CATSTACK_LLM_JUDGE_RUNNERS` to `[[name, argv], ...]`.
    pub fn override_runners(&mut self, entries: &[(&str, Vec<String>)]) {
        let v: Vec<Value> = entries
            .iter()
            .map(|(n, a)| serde_json::json!([n, a]))
            .collect();
        self.set_env("CATSTACK_LLM_JUDGE_RUNNERS", &Value::Array(v).to_string());
    }

    /// Writes a codex model catalog and HOME/.codex/config.toml naming it (`model_catalog_json`).
    pub fn codex_catalog(&self, catalog: &Value) -> PathBuf {
        let codex = self.home.join(".codex");
        fs::create_dir_all(&codex).expect("HOME/.codex");
        let file = codex.join("catalog.json");
        fs::write(&file, catalog.to_string()).expect("write catalog");
        fs::write(
            codex.join("config.toml"),
            format!("model_catalog_json = {:?}\n", file.display().to_string()),
        )
        .expect("write HOME/.codex/config.toml");
        file
    }

    /// `argv` as the judge would start it, for a CLI started by hand: the instructions
    /// placeholder names a file written here (`text`), and the catalog placeholder a
    /// trimmed copy of what `codex debug models` prints in this lane (the judge's own
    /// trimming: the four tool-adding fields emptied).
    pub fn as_judge_starts(&self, argv: &[String], text: &str) -> Vec<String> {
        let instructions = self.root.join("instructions.md");
        fs::write(&instructions, text).expect("write instructions");
        let catalog = self.root.join("trimmed-catalog.json");
        if argv
            .iter()
            .any(|a| a == "model_catalog_json={codex_catalog}")
        {
            fs::write(&catalog, self.trimmed_catalog().to_string()).expect("write catalog");
        }
        argv.iter()
            .map(|a| match a.as_str() {
                "model_instructions_file={instructions}" => {
                    format!(
                        "model_instructions_file={:?}",
                        instructions.display().to_string()
                    )
                }
                "model_catalog_json={codex_catalog}" => {
                    format!("model_catalog_json={:?}", catalog.display().to_string())
                }
                _ => a.clone(),
            })
            .collect()
    }

    /// `codex debug models` in this lane's environment, trimmed as the judge trims it.
    pub fn trimmed_catalog(&self) -> Value {
        let out = self.root.join("debug-models.json");
        let mut cmd = Command::new(self.bin.join("codex"));
        self.apply_env(&mut cmd);
        let mut child = cmd
            .args(["debug", "models"])
            .stdout(fs::File::create(&out).expect("catalog file"))
            .stderr(Stdio::null())
            .spawn()
            .expect("run codex debug models");
        if wait_child(&mut child, Duration::from_secs(60)).is_none() {
            panic!("codex debug models did not finish in 60 s");
        }
        let mut catalog: Value =
            serde_json::from_str(&fs::read_to_string(&out).unwrap_or_default())
                .expect("codex catalog is JSON");
        for model in catalog["models"].as_array_mut().into_iter().flatten() {
            for field in ["tool_mode", "multi_agent_version", "apply_patch_tool_type"] {
                model[field] = Value::Null;
            }
            model["experimental_supported_tools"] = serde_json::json!([]);
        }
        catalog
    }

    /// Gives `cmd` the lane's environment and nothing else: HOME, PATH with the lane's
    /// CLIs, TMPDIR, the stand-in's URL, dummy keys, the marker, and the test's services.
    pub fn apply_env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("HOME", &self.home)
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", self.bin.display()),
            )
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("TMPDIR", &self.tmp)
            .env("ANTHROPIC_BASE_URL", self.standin.base_url())
            .env("ANTHROPIC_API_KEY", "dummy")
            .env("CODEX_API_KEY", "dummy")
            .env(MARKER_VAR, &self.marker);
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
    }

    /// An `llm-judge` command with the lane's env, `--state-dir` and `--config`, then `args`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        self.apply_env(&mut cmd);
        cmd.args(args)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null());
        cmd
    }

    /// Starts the daemon, judges one job (`stem`, transcript `lane-<stem>`), stops the
    /// daemon and returns the verdict.
    pub fn judge_once(&mut self, stem: &str, job: &Value) -> Value {
        self.start_daemon();
        self.job(stem, job);
        let verdict = self.wait_verdict(stem);
        self.stop_daemon();
        verdict
    }

    /// Starts the daemon (stderr to `root/daemon.err`).
    pub fn start_daemon(&mut self) {
        assert!(self.daemon.is_none(), "daemon already running");
        let err = fs::File::create(self.root.join("daemon.err")).expect("daemon.err");
        let child = self
            .command(&["daemon"])
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("start llm-judge daemon");
        self.daemon = Some(child);
    }

    /// The daemon's pid.
    pub fn daemon_pid(&self) -> u32 {
        self.daemon.as_ref().expect("daemon running").id()
    }

    /// Sends `sig` (e.g. `libc::SIGHUP`) to the daemon.
    pub fn signal(&self, sig: i32) {
        let pid = self.daemon_pid() as i32;
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill daemon with {sig}");
    }

    /// Sends SIGHUP (config reload).
    pub fn sighup(&self) {
        self.signal(libc::SIGHUP);
    }

    /// SIGTERM, then waits (bounded) for the daemon to exit; returns its exit code.
    pub fn stop_daemon(&mut self) -> Option<i32> {
        self.signal(libc::SIGTERM);
        let mut child = self.daemon.take().expect("daemon running");
        let Some(status) = wait_child(&mut child, Duration::from_secs(60)) else {
            panic!(
                "daemon did not stop within 60 s of SIGTERM: {}",
                self.daemon_stderr()
            );
        };
        status.code()
    }

    /// The daemon's stderr so far.
    pub fn daemon_stderr(&self) -> String {
        fs::read_to_string(self.root.join("daemon.err")).unwrap_or_default()
    }

    /// judge.log.
    pub fn log(&self) -> String {
        fs::read_to_string(self.state.join("judge.log")).unwrap_or_default()
    }

    /// `llm-judge status --json`, parsed.
    pub fn status_json(&self) -> Value {
        let out = self.run(&["status", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "status --json is not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// `llm-judge doctor`.
    pub fn doctor(&self) -> Output {
        self.run(&["doctor"])
    }

    /// Runs an `llm-judge` command (bounded by 120 s) and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        let out_path = self
            .root
            .join(format!("cmd-{}.out", LANES.fetch_add(1, Ordering::SeqCst)));
        let err_path = out_path.with_extension("err");
        let mut child = self
            .command(args)
            .stdout(fs::File::create(&out_path).expect("cmd out"))
            .stderr(fs::File::create(&err_path).expect("cmd err"))
            .spawn()
            .expect("run llm-judge");
        let Some(status) = wait_child(&mut child, VERDICT_DEADLINE) else {
            panic!("llm-judge {args:?} did not finish in {VERDICT_DEADLINE:?}");
        };
        Output {
            status,
            stdout: fs::read(&out_path).unwrap_or_default(),
            stderr: fs::read(&err_path).unwrap_or_default(),
        }
    }

    /// Publishes job `stem` (temp name, then rename); its transcript is `lane-<stem>`
    /// unless the job sets one.
    pub fn job(&self, stem: &str, job: &Value) -> Instant {
        let mut job = job.clone();
        if job.get("transcript").is_none() {
            job["transcript"] = Value::String(format!("lane-{stem}"));
        }
        let jobs = self.state.join("jobs");
        let temp = jobs.join(format!(".{stem}.tmp"));
        fs::write(&temp, job.to_string()).expect("write job");
        let at = Instant::now();
        fs::rename(&temp, jobs.join(format!("{stem}.json"))).expect("publish job");
        at
    }

    /// Waits (bounded) for job `stem`'s verdict (transcript `lane-<stem>`) and returns it.
    pub fn wait_verdict(&self, stem: &str) -> Value {
        self.wait_verdict_of(stem, &format!("lane-{stem}"), VERDICT_DEADLINE)
    }

    /// Waits up to `deadline` for the verdict of `stem` whose job had `transcript`.
    pub fn wait_verdict_of(&self, stem: &str, transcript: &str, deadline: Duration) -> Value {
        let path = self
            .state
            .join("verdicts")
            .join(llm_judge::api::transcript_hash(transcript))
            .join(format!("{stem}.json"));
        let mut verdict = None;
        wait_until(Instant::now() + deadline, || {
            verdict = fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok());
            verdict.is_some()
        });
        verdict.unwrap_or_else(|| {
            panic!(
                "no verdict for {stem} within {deadline:?}\njudge.log:\n{}\ndaemon stderr:\n{}",
                self.log(),
                self.daemon_stderr()
            )
        })
    }

    /// Pids of live processes whose environment holds this lane's marker.
    pub fn marker_processes(&self) -> Vec<u32> {
        let needle = format!("{MARKER_VAR}={}", self.marker);
        let mut out = Vec::new();
        let Ok(dir) = fs::read_dir("/proc") else {
            return out;
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            if env.split(|b| *b == 0).any(|v| v == needle.as_bytes())
                && super::support::is_running(pid)
            {
                out.push(pid);
            }
        }
        out
    }

    /// Waits (bounded) until no process carries the marker; returns those still left.
    pub fn wait_no_marker_processes(&self, deadline: Duration) -> Vec<u32> {
        let mut left = Vec::new();
        wait_until(Instant::now() + deadline, || {
            left = self.marker_processes();
            left.is_empty()
        });
        left
    }

    /// Every file under `dir` whose content contains `needle`.
    pub fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = fs::read_dir(&d) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_dir() {
                    stack.push(p);
                } else if ft.is_file()
                    && fs::read(&p)
                        .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
                {
                    found.push(p);
                }
            }
        }
        found
    }
}

impl Drop for Lane {
    /// A test that failed with the daemon running: SIGTERM (so it stops its runners'
    /// groups), a bounded wait, then SIGKILL.
    fn drop(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = wait_child(&mut child, Duration::from_secs(30));
        }
    }
}
