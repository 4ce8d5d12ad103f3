//! The daemon's notify messages (READY, STATUS, WATCHDOG, STOPPING) on a datagram
//! socket in place of systemd's `NOTIFY_SOCKET`.

use super::*;
use std::fs;
use std::io::Read;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{BIN, NO_HANG, NO_TRANSCRIPT, World, wait_for};

/// A daemon started with a fake NOTIFY_SOCKET; killed and reaped on drop.
struct Daemon {
    child: Option<Child>,
}

impl Daemon {
    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits for the exit (bounded).
    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let child = self.child.as_mut().unwrap();
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "daemon did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A notify socket and everything that arrived on it, in order.
struct Notify {
    socket: UnixDatagram,
    seen: Vec<String>,
}

impl Notify {
    fn bind(path: &Path) -> Notify {
        let socket = UnixDatagram::bind(path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        Notify {
            socket,
            seen: Vec::new(),
        }
    }

    /// The next datagram, or `None` once `deadline` passes.
    fn next(&mut self, deadline: Instant) -> Option<String> {
        let mut buf = vec![0u8; 4096];
        loop {
            match self.socket.recv(&mut buf) {
                Ok(n) => {
                    let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                    self.seen.push(message.clone());
                    return Some(message);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if Instant::now() >= deadline {
                        return None;
                    }
                }
                Err(e) => panic!("notify socket: {e}"),
            }
        }
    }

    /// Reads until a message satisfies `want`; panics at the deadline.
    fn until(&mut self, limit: Duration, what: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            match self.next(deadline) {
                Some(m) if want(&m) => return m,
                Some(_) => {}
                None => panic!("no {what} within {limit:?}; got {:?}", self.seen),
            }
        }
    }
}

/// `(waiting, running)` from a `STATUS=<n> waiting, <m> running` line of a message.
fn queue(message: &str) -> Option<(u64, u64)> {
    let status = message.lines().find_map(|l| l.strip_prefix("STATUS="))?;
    let mut numbers = status
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u64>().unwrap());
    let waiting = numbers.next()?;
    let running = numbers.next()?;
    assert!(
        status.contains("waiting") && status.contains("running"),
        "{status}"
    );
    Some((waiting, running))
}

/// The shared world with a config for the notify tests and a socket path for
/// `NOTIFY_SOCKET`.
struct DaemonWorld {
    w: World,
    socket: PathBuf,
}

impl DaemonWorld {
    fn new() -> DaemonWorld {
        let w = World::new();
        // No rescans during the test: a job that arrives later is found by the watch.
        fs::write(
            w.path("config.toml"),
            "fsync = false\nrescan_seconds = 3600\n",
        )
        .unwrap();
        let socket = w.path("notify.sock");
        DaemonWorld { w, socket }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.w.home)
            .env("XDG_CONFIG_HOME", &self.w.xdg)
            .env("TMPDIR", &self.w.tmp)
            .env(
                "CATSTACK_LLM_JUDGE_RUNNERS",
                r#"[["fake", ["/bin/echo", "{\"ok\": true}"]]]"#,
            )
            .arg("daemon")
            .arg("--state-dir")
            .arg(self.w.state())
            .arg("--config")
            .arg(self.w.path("config.toml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        cmd
    }

    fn start(&self, watchdog_pid: Option<&str>) -> Daemon {
        let mut cmd = self.command();
        cmd.env("NOTIFY_SOCKET", &self.socket)
            .env("WATCHDOG_USEC", "200000")
            .stderr(fs::File::create(self.w.path("daemon.stderr")).unwrap());
        if let Some(pid) = watchdog_pid {
            cmd.env("WATCHDOG_PID", pid);
        }
        Daemon {
            child: Some(cmd.spawn().unwrap()),
        }
    }

    /// Publishes a job the way producers do (hidden temp file, then rename).
    fn job(&self, stem: &str) {
        self.w.job(
            stem,
            &json!({"prompt": "Reply with {\"ok\": true}", "hit_if_all_true": ["ok"]}),
        );
    }

    fn verdict(&self, stem: &str) -> PathBuf {
        self.w.verdict_path(NO_TRANSCRIPT, stem)
    }

    fn log(&self) -> String {
        self.w.log()
    }
}

#[test]
fn notify_ready_after_lock_scan_and_watch_then_status_watchdog_and_stopping() {
    let d = DaemonWorld::new();
    // A job already waiting: the first scan must have seen it before READY=1.
    d.job("before");
    let mut notify = Notify::bind(&d.socket);
    let mut daemon = d.start(None);

    let ready = notify.until(NO_HANG, "READY=1", |m| m.lines().any(|l| l == "READY=1"));
    // Before READY=1 only STATUS= may come (the watchdog starts with the loop).
    let before: Vec<&String> = notify.seen.iter().take(notify.seen.len() - 1).collect();
    assert!(
        before
            .iter()
            .all(|m| queue(m).is_some() && m.lines().count() == 1),
        "{before:?}"
    );
    let (waiting, running) = queue(&ready).expect("READY=1 comes with STATUS=");
    assert_eq!(
        waiting + running,
        1,
        "READY=1 before the first scan saw the waiting job: {ready:?}"
    );
    // The lock is held by now: a second daemon on the same state folder refuses at once.
    let log = d.log();
    assert!(log.contains("daemon start"), "{log}");
    let mut second = d.command();
    second.stderr(Stdio::piped());
    let out = run(second, NO_HANG);
    let (_, stderr) = text(&out);
    assert_ne!(
        out.status.code(),
        Some(0),
        "a second daemon started: {stderr}"
    );
    assert!(
        stderr.contains(&format!("pid {}", daemon.pid()))
            || d.log().contains(&format!("pid {}", daemon.pid())),
        "the second daemon does not name the first: {stderr}"
    );

    // It is watching: a job arriving now is judged without a rescan (rescans are hourly).
    d.job("after");
    wait_for("verdicts for both jobs", NO_HANG, || {
        d.verdict("before").exists() && d.verdict("after").exists()
    });

    // The watchdog is pinged from the loop, repeatedly (every WATCHDOG_USEC/2 = 100 ms).
    for _ in 0..3 {
        notify.until(NO_HANG, "WATCHDOG=1", |m| m == "WATCHDOG=1");
    }
    // STATUS= follows the queue: it ends at nothing waiting and nothing running.
    notify.until(NO_HANG, "STATUS=0 waiting, 0 running", |m| {
        queue(m) == Some((0, 0))
    });
    assert!(
        notify.seen.iter().filter(|m| m.contains("READY=1")).count() == 1,
        "READY=1 twice: {:?}",
        notify.seen
    );
    assert!(
        notify.seen.iter().all(|m| !m.contains("STOPPING=1")),
        "{:?}",
        notify.seen
    );

    // SIGTERM: STOPPING=1, then a clean exit.
    // SAFETY: kill(2) on our own, not yet reaped child.
    assert_eq!(unsafe { libc::kill(daemon.pid() as i32, libc::SIGTERM) }, 0);
    notify.until(NO_HANG, "STOPPING=1", |m| {
        m.lines().any(|l| l == "STOPPING=1")
    });
    let status = daemon.wait(NO_HANG);
    assert_eq!(
        status.code(),
        Some(0),
        "{status:?} (signal {:?})",
        status.signal()
    );

    let mut stderr = String::new();
    fs::File::open(d.w.root.join("daemon.stderr"))
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("daemon start"),
        "the daemon logs to stderr for journald: {stderr}"
    );
}

#[test]
fn no_watchdog_pings_when_the_watchdog_is_meant_for_another_process() {
    let d = DaemonWorld::new();
    let mut notify = Notify::bind(&d.socket);
    let mut daemon = d.start(Some("1"));
    notify.until(NO_HANG, "READY=1", |m| m.lines().any(|l| l == "READY=1"));
    // At 100 ms a ping, a second would bring about ten of them.
    let deadline = Instant::now() + Duration::from_secs(1);
    while notify.next(deadline).is_some() {}
    assert!(
        notify.seen.iter().all(|m| m != "WATCHDOG=1"),
        "{:?}",
        notify.seen
    );
    // SAFETY: kill(2) on our own, not yet reaped child.
    assert_eq!(unsafe { libc::kill(daemon.pid() as i32, libc::SIGTERM) }, 0);
    assert_eq!(daemon.wait(NO_HANG).code(), Some(0));
}
