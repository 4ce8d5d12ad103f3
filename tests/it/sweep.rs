//! The daemon's start-up sweep (issue 39 items 6 and 8, and the stalled-read case):
//! it stops only processes of its own user whose environment has a whole
//! `LLM_JUDGE_TAG=prestart-<key>-…` entry, with the state folder's random key; it
//! removes the runner folders no live judge owns (a `run` or `ask` beside it keeps
//! its own); and a `/proc/<pid>/environ` read that stalls is skipped, not waited for.

use crate::support::*;

use std::fs;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// Writes `key` where the daemon reads its state folder's tag key. Each test has its
/// own: the tests of this file run at once, and a daemon sweeps whatever carries its key.
fn plant_key(w: &World, key: &str) {
    let path = w.state().join("tag.key");
    fs::write(&path, format!("{key}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
}

/// A child of the test, killed and reaped when dropped (also when an assertion fails).
struct Reaped(Child);

impl Reaped {
    fn sleeper(env: &[(&str, &str)]) -> Reaped {
        let mut cmd = Command::new("sleep");
        cmd.arg("300").stdin(Stdio::null());
        Reaped::spawn(cmd, env)
    }

    fn spawn(mut cmd: Command, env: &[(&str, &str)]) -> Reaped {
        for (k, v) in env {
            cmd.env(k, v);
        }
        Reaped(cmd.spawn().expect("start a test process"))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// True once it exited (reaped).
    fn ended(&mut self) -> bool {
        self.0.try_wait().ok().flatten().is_some()
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A daemon with no runners, waited for until its start-up sweep is done.
fn start_swept(w: &World, env: &[(&str, &str)]) -> Daemon {
    let mut cmd = w.command(&[]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let daemon = w.start_with(cmd);
    // The status file is written once the sweep and the first scan are done.
    wait_for("the daemon ready", NO_HANG, || {
        w.state().join("status.json").exists()
    });
    daemon
}

/// Issue 39 item 6: a root daemon's sweep killed another user's process that carried
/// the tag, and matched the tag anywhere in the environment. Now: of four processes
/// carrying this folder's tag, only the one of the daemon's own user with a whole
/// `LLM_JUDGE_TAG=` entry is stopped; the one of uid 65534 (root only can start it),
/// the one with the tag inside another variable's value, and the one with the tag a
/// state path used to give (`prestart-<sha1 of the path>-`) all live on.
#[test]
fn the_sweep_stops_only_our_own_processes_tagged_with_the_folders_random_key() {
    let w = World::new();
    let key = "0123456789abcdef0123456789abcdef";
    plant_key(&w, key);
    let tag = format!("prestart-{key}-left-by-a-crash");
    let mut own = Reaped::sleeper(&[("LLM_JUDGE_TAG", &tag)]);
    let mut other_user = {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .args(["sleep", "300"])
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        let mut p = Reaped::spawn(cmd, &[("LLM_JUDGE_TAG", &tag)]);
        // Wait for setpriv to exec sleep as 65534 (or to fail: not root, no setpriv).
        wait_for("setpriv to switch user or fail", NO_HANG, || {
            p.ended() || owner_of(p.pid()) == Some(65534)
        });
        (!p.ended()).then_some(p)
    };
    let embedded = format!("LLM_JUDGE_TAG={tag}");
    let mut inside_value = Reaped::sleeper(&[("NOTE", &embedded)]);
    let path_key = llm_judge::api::transcript_hash(&w.state().to_string_lossy());
    let old_style = format!("prestart-{path_key}-x");
    let mut guessed = Reaped::sleeper(&[("LLM_JUDGE_TAG", &old_style)]);

    let _daemon = start_swept(&w, &[]);
    wait_for("the sweep's log line", NO_HANG, || {
        w.read("state/judge.log").contains("recovery sweep")
    });
    let log = w.read("state/judge.log");
    assert!(log.contains("prestarted_stopped=1"), "{log}");
    wait_for("our tagged process stopped", NO_HANG, || own.ended());
    assert!(
        !inside_value.ended(),
        "a tag inside another variable was matched"
    );
    assert!(!guessed.ended(), "the path-derived key was still swept");
    match other_user.as_mut() {
        Some(p) => assert!(!p.ended(), "another user's process was killed"),
        None => eprintln!("note: cannot start a process as uid 65534 (not root?); skipped"),
    }
}

/// The real uid of `pid`, from `/proc/<pid>/status`.
fn owner_of(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The runner folders in `state/tmp/`.
fn runner_folders(w: &World) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(w.state().join("tmp"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("llm-judge-"))
        })
        .collect();
    found.sort();
    found
}

/// Issue 39 item 8: ten start/SIGKILL cycles left forty empty runner folders, removed
/// only an hour later. Now each start removes what the killed daemon before it left
/// (three cycles: one folder left each time, never piling up), while the folder of
/// an `ask` running beside the daemons all along (it holds its folder's lock) stays,
/// and that `ask` still answers.
#[test]
fn folders_left_by_killed_daemons_go_at_the_next_start_and_a_live_asks_stays() {
    let w = World::new();
    // A stream-json runner kept waiting (`prestart = 1`): it makes a runner folder.
    let script = w.path("bin/waiting.sh");
    fs::write(&script, "read -r line\necho '{\"ok\": true}'\n").unwrap();
    w.config(&format!(
        "[[runners.default]]\nname = \"w\"\nargv = [\"/bin/sh\", {script:?}, \
         \"--input-format\", \"stream-json\"]\nprestart = 1\n"
    ));

    // An `ask` beside the daemons, its runner waiting on a FIFO in its own folder.
    let fifo = w.path("release");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let asked = w.runner(
        "asked",
        &format!("pwd > \"$W/ask.pwd\"\nread -r x < {fifo:?}\necho '{{\"ok\": true}}'"),
    );
    let mut ask = w.command(&[asked]);
    ask.args(["ask", "q"]).stdout(Stdio::piped());
    let mut ask = Reaped(ask.spawn().unwrap());
    wait_for("the ask's runner started", NO_HANG, || {
        w.read("ask.pwd").ends_with('\n')
    });
    let ask_folder = PathBuf::from(w.read("ask.pwd").trim_end());
    // The ask's runner folder is in the ask's home, which the sweep sees.
    let ask_home = ask_folder.parent().expect("a home").to_path_buf();

    let daemon = || {
        let mut cmd = w.command(&[]);
        cmd.env_remove("CATSTACK_LLM_JUDGE_RUNNERS");
        w.start_with(cmd)
    };
    let log = || w.read("state/judge.log");
    let mut left = Vec::new();
    for crash in 1..=3 {
        let mut d = daemon();
        wait_for("a runner pre-started", NO_HANG, || {
            log().matches("runner pre-started").count() >= crash
        });
        d.kill9();
        let mut folders = runner_folders(&w);
        folders.retain(|f| *f != ask_home);
        assert_eq!(folders.len(), 1, "crash {crash}: {folders:?}\n{}", log());
        assert!(
            ask_folder.exists(),
            "crash {crash}: the live ask's folder was removed"
        );
        left = folders;
    }
    assert_eq!(
        log().matches("runner_folders_removed=1").count(),
        2,
        "{}",
        log()
    );
    let _d = daemon();
    wait_for("the last sweep", NO_HANG, || {
        log().matches("runner_folders_removed=1").count() == 3
    });
    assert!(!left[0].exists(), "{:?} left", left[0]);
    assert!(ask_folder.exists(), "the live ask's folder was removed");

    // Nonblocking: with no reader left the write fails instead of waiting forever.
    let mut release = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    std::io::Write::write_all(&mut release, b"go\n").unwrap();
    wait_for("the ask to answer", NO_HANG, || ask.ended());
    let mut out = String::new();
    let stdout = ask.0.stdout.take();
    std::io::Read::read_to_string(&mut stdout.unwrap(), &mut out).unwrap();
    let printed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(printed["answer"], json!({"ok": true}), "{printed}");
}

/// A `/proc/<pid>/environ` read that stalls (a process stuck on a FUSE mapping; here a
/// test failpoint blocks that read for an hour) is skipped after a bound and logged:
/// the daemon starts, the tagged process read after it is still stopped, and the
/// stalled one is left alone.
#[cfg(feature = "failpoints")]
#[test]
fn a_stalled_environ_read_does_not_hang_the_start_up_sweep() {
    let w = World::new();
    let key = "fedcba9876543210fedcba9876543210";
    plant_key(&w, key);
    let mut stalled = Reaped::sleeper(&[]);
    let tag = format!("prestart-{key}-after-the-stall");
    let mut tagged = Reaped::sleeper(&[("LLM_JUDGE_TAG", &tag)]);
    let hang = format!("/proc/{}/environ", stalled.pid());
    let _daemon = start_swept(&w, &[("LLM_JUDGE_HANG_PATH", &hang)]);
    wait_for("the tagged process stopped", NO_HANG, || tagged.ended());
    let log = w.read("state/judge.log");
    assert!(
        log.contains(&format!(
            "reading /proc/{}/environ did not finish",
            stalled.pid()
        )),
        "{log}"
    );
    assert!(
        !stalled.ended(),
        "the stalled process was not read, so not killed"
    );
}
