//! Helpers of the reliability tests (faults, safety, adversarial input, soak), on top
//! of the shared test world in `tests/world/mod.rs` (not edited here).
//!
//! Every command started here gets a private HOME, XDG_CONFIG_HOME and TMPDIR inside
//! the test's temp folder, and a per-test marker variable (`RELIABILITY_MARK`) that
//! every runner and runner descendant inherits, so a test can find *every* process
//! its judge started by scanning `/proc/<pid>/environ`, not only the pids its fakes
//! wrote down. Guards kill and reap whatever is left when a test ends, also on panic.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::world::World;

/// The variable that marks every process a test's judge started.
pub const MARK_VAR: &str = "RELIABILITY_MARK";

/// A unique marker for one test.
pub fn new_mark(test: &str) -> String {
    format!("{test}-{}", llm_judge::api::new_tag())
}

/// Writes the world's config file with exactly `text` plus test defaults: runner
/// health and the answer cache off unless `text` sets them (they would change which
/// runner runs; SPEC section 10 has its own tests).
pub fn write_config(w: &World, text: &str) {
    fs::write(
        w.path("config.toml"),
        super::common::with_test_defaults(text),
    )
    .unwrap();
}

/// `llm-judge --state-dir .. --config ..` with the world's private environment, a
/// TMPDIR inside the world, and the marker. `runners: None` leaves the override
/// variable unset so the config file's tables (and their safety check) apply.
pub fn command(w: &World, runners: Option<&[Value]>, mark: &str) -> Command {
    let mut cmd = w.command(runners.unwrap_or(&[]));
    if runners.is_none() {
        cmd.env_remove("CATSTACK_LLM_JUDGE_RUNNERS");
    }
    let tmp = w.path("tmp");
    fs::create_dir_all(&tmp).unwrap();
    cmd.env("TMPDIR", &tmp).env(MARK_VAR, mark);
    cmd
}

/// A started command whose output goes to files; killed and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub out: PathBuf,
    pub err: PathBuf,
    pub started: Instant,
    /// Set once `finish` reaped it (with wait4, behind `child`'s back): nothing may
    /// signal or wait for its pid after that.
    exit: Option<ExitStatus>,
}

/// Starts `cmd` with `args`, stdout and stderr to files in the world.
pub fn spawn(w: &World, mut cmd: Command, args: &[&str]) -> Proc {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let out = w.path(&format!("proc-{n}.out"));
    let err = w.path(&format!("proc-{n}.err"));
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
        exit: None,
    }
}

impl Proc {
    /// Waits for the exit; panics (after killing it) past `limit` since the start.
    pub fn finish(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let (status, elapsed, _) = self.finish_measured(limit);
        (status, elapsed)
    }

    /// As `finish`, and the largest RSS (KiB) of the process and the descendants it
    /// waited for, from its own `wait4` (not RUSAGE_CHILDREN, which also counts the
    /// test's other children: a vforked child reports the test process's RSS); `None`
    /// when `alive` had already reaped it.
    pub fn finish_measured(&mut self, limit: Duration) -> (ExitStatus, Duration, Option<i64>) {
        use std::os::unix::process::ExitStatusExt;
        let pid = self.child.id() as libc::pid_t;
        let mut ended = None;
        super::wait_until(self.started + limit, || {
            let mut raw = 0;
            // SAFETY: wait4 fills the status and the rusage it is given.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            match unsafe { libc::wait4(pid, &mut raw, libc::WNOHANG, &mut usage) } {
                r if r == pid => ended = Some((ExitStatus::from_raw(raw), Some(usage.ru_maxrss))),
                // Not ours to wait for any more: `alive` reaped it, `child` has the status.
                r if r < 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) =>
                {
                    ended = self.child.try_wait().ok().flatten().map(|s| (s, None))
                }
                _ => {}
            }
            ended.is_some()
        });
        if let Some((status, rss)) = ended {
            self.exit = Some(status);
            return (status, self.started.elapsed(), rss);
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
        self.exit.is_none() && self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exit.is_none() && self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// True while the process exists and is not a zombie.
pub fn running(pid: u32) -> bool {
    super::is_running(pid)
}

/// Live (non-zombie) processes, other than this test process, whose environment
/// holds `RELIABILITY_MARK=<mark>`.
pub fn marked(mark: &str) -> Vec<u32> {
    let needle = format!("{MARK_VAR}={mark}\0").into_bytes();
    let me = std::process::id();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_slice()))
        })
        .filter(|&pid| running(pid))
        .collect()
}

/// The command line of a process, NUL-separated items joined by spaces.
pub fn cmdline(pid: u32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .trim_end_matches('\0')
                .replace('\0', " ")
        })
        .unwrap_or_default()
}

/// Waits (bounded) until no marked process is left other than those in `except`
/// (running daemons) and their supervisor zygotes; returns those still alive at the
/// deadline with their command lines.
pub fn wait_no_marked(mark: &str, except: &[u32], deadline: Duration) -> Vec<(u32, String)> {
    let excepted =
        |p: u32| except.contains(&p) || except.iter().any(|&d| super::is_daemon_helper(p, d));
    let left = || -> Vec<u32> { marked(mark).into_iter().filter(|&p| !excepted(p)).collect() };
    if super::wait_until(Instant::now() + deadline, || left().is_empty()) {
        return Vec::new();
    }
    left().into_iter().map(|p| (p, cmdline(p))).collect()
}

/// Waits (bounded) until every pid is gone or a zombie; returns those still running.
pub fn wait_gone(pids: &[u32], deadline: Duration) -> Vec<u32> {
    super::wait_until(Instant::now() + deadline, || {
        pids.iter().all(|&p| !running(p))
    });
    pids.iter().copied().filter(|&p| running(p)).collect()
}

/// Pids written to a file (one or more per line), in order.
pub fn pids_in_file(path: &Path) -> Vec<u32> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Kills what a test left behind when it ends (panic included): every marked
/// process, and every pid in the listed files whose command line holds `token`
/// (for processes that dropped their environment; the token guards against pid reuse).
pub struct Reaper {
    pub mark: String,
    pub pid_files: Vec<(PathBuf, String)>,
}

impl Reaper {
    pub fn new(mark: &str) -> Self {
        Reaper {
            mark: mark.to_string(),
            pid_files: Vec::new(),
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in marked(&self.mark) {
            unsafe_kill(pid);
        }
        for (file, token) in &self.pid_files {
            for pid in pids_in_file(file) {
                if running(pid) && cmdline(pid).contains(token.as_str()) {
                    unsafe_kill(pid);
                }
            }
        }
    }
}

/// SIGKILL one pid (best effort).
pub fn unsafe_kill(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: kill(2) with a plain pid and signal has no memory effects.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Sends `sig` to a pid.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a plain pid and signal has no memory effects.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

/// Writes an executable fake program and checks it can be exec'd (retrying "Text
/// file busy" while a forked child of another test thread still holds it open).
pub fn install_exe(path: &Path, body: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let temp = path.with_extension("tmp-install");
    fs::write(&temp, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&temp, fs::Permissions::from_mode(0o755)).unwrap();
    fs::rename(&temp, path).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let probe = Command::new(path)
            .env("FAKE_PROBE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match probe {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("cannot run {}: {e}", path.display()),
            Ok(_) => return,
        }
    }
}

/// A small seeded generator (SplitMix64): reproducible from the printed seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (hi exclusive, hi > lo).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }
}

/// The seed from `var` if set, else from the clock.
pub fn seed_from_env(var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

/// Every file name (lossy) in a folder, sorted; empty when it does not exist.
pub fn entries(dir: &Path) -> Vec<String> {
    super::world::names(dir)
}

/// Every (folder, file name) under `verdicts/`, hidden ones included.
pub fn verdict_entries(state: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(folders) = fs::read_dir(state.join("verdicts")) else {
        return out;
    };
    for folder in folders.flatten() {
        let fname = folder.file_name().to_string_lossy().into_owned();
        for file in fs::read_dir(folder.path()).into_iter().flatten().flatten() {
            out.push((
                fname.clone(),
                file.file_name().to_string_lossy().into_owned(),
            ));
        }
    }
    out.sort();
    out
}

/// NUL-separated items of a file written with `printf '%s\0' "$@"`.
pub fn nul_items(bytes: &[u8]) -> Vec<String> {
    let mut items: Vec<String> = bytes
        .split(|&b| b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    if items.last().is_some_and(String::is_empty) {
        items.pop();
    }
    items
}

/// The kill grace the fault tests configure, and their generous no-hang margin.
pub const GRACE: f64 = 1.0;
pub const MARGIN: f64 = 12.0;

/// Judges `jobs/<name>.json` with one fake runner (`body`) through `llm-judge run` and
/// checks it exits 0 within timeout + `GRACE` + `MARGIN`; returns how long it took.
pub fn run_one_job(w: &World, mark: &str, name: &str, body: &str, timeout: f64) -> Duration {
    run_one_job_measured(w, mark, name, body, timeout).0
}

/// Judges `jobs/<name>.json` with one fake runner (`body`) through `llm-judge run`, with
/// a timeout long enough never to come: once the fake has written `$W/<ready>` (every
/// process it means to start is up), the test sends its process group the SIGTERM a
/// timeout would, so the stop never races the fake's start-up however loaded the
/// machine. Checks `run` exits 0 and returns how long it took.
pub fn run_one_job_stopped_when_ready(
    w: &World,
    mark: &str,
    name: &str,
    body: &str,
    ready: &str,
) -> Duration {
    write_config(w, &format!("fsync = false\nkill_grace_seconds = {GRACE}\n"));
    let runner = w.runner(name, body);
    w.job(
        name,
        &serde_json::json!({"prompt": "p", "timeout_seconds": 600, "transcript": "T", "hit_if_all_true": ["ok"]}),
    );
    let job = w.state().join(format!("jobs/{name}.json"));
    let mut p = spawn(
        w,
        command(w, Some(&[runner]), mark),
        &["run", job.to_str().unwrap()],
    );
    let up = super::wait_until(Instant::now() + super::NO_HANG, || {
        w.path(ready).exists() || !p.alive()
    });
    assert!(
        up && w.path(ready).exists(),
        "{name}: the fake never got ready; stderr: {}",
        p.stderr()
    );
    // The runner is the first pid the fake writes down, and leads its process group.
    let group = pids_in_file(&w.path("pids"))[0];
    // SAFETY: kill(2) with a process group and a signal has no memory effects.
    let rc = unsafe { libc::kill(-(group as i32), libc::SIGTERM) };
    assert_eq!(rc, 0, "{name}: kill(-{group}, SIGTERM)");
    let (status, elapsed) = p.finish(super::NO_HANG);
    assert!(
        status.success(),
        "{name}: {status:?}; stderr: {}",
        p.stderr()
    );
    elapsed
}

/// As `run_one_job`, and the largest RSS (KiB) of the judge's process tree.
pub fn run_one_job_measured(
    w: &World,
    mark: &str,
    name: &str,
    body: &str,
    timeout: f64,
) -> (Duration, i64) {
    write_config(w, &format!("fsync = false\nkill_grace_seconds = {GRACE}\n"));
    let runner = w.runner(name, body);
    w.job(
        name,
        &serde_json::json!({"prompt": "p", "timeout_seconds": timeout, "transcript": "T", "hit_if_all_true": ["ok"]}),
    );
    let job = w.state().join(format!("jobs/{name}.json"));
    let mut p = spawn(
        w,
        command(w, Some(&[runner]), mark),
        &["run", job.to_str().unwrap()],
    );
    let bound = timeout + GRACE + MARGIN;
    let (status, elapsed, rss) = p.finish_measured(Duration::from_secs_f64(bound + 30.0));
    let rss = rss.expect("reaped by finish_measured, with its rusage");
    assert!(
        status.success(),
        "{name}: {status:?}; stderr: {}",
        p.stderr()
    );
    assert!(
        elapsed.as_secs_f64() <= bound,
        "{name}: took {elapsed:?}, over timeout {timeout} + grace {GRACE} + margin {MARGIN}"
    );
    (elapsed, rss)
}
