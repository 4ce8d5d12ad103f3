//! `enqueue --wait` without a daemon: the wait writes nothing into the verdict folder
//! while its verdict is not there (no claim folder made and removed on every look,
//! which woke the wait's own watch in a loop), and a verdict published meanwhile is
//! printed and removed.

use crate::support::*;

use std::fs;
use std::path::PathBuf;
use std::process::Child;

use serde_json::{Value, json};

/// The verdict folder of transcript `T`, made as the judge makes it.
fn verdict_folder(w: &World) -> PathBuf {
    let dir = w.verdict_folder("T");
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// `enqueue --id ID --transcript T --wait SECONDS`, stdout and stderr to files.
fn start_wait(w: &World, id: &str, seconds: &str) -> Child {
    w.command(&[])
        .args(["enqueue", "--prompt", "p", "--id", id, "--transcript", "T"])
        .args(["--wait", seconds])
        .stdout(fs::File::create(w.path("wait.out")).unwrap())
        .stderr(fs::File::create(w.path("wait.err")).unwrap())
        .spawn()
        .expect("start llm-judge enqueue")
}

/// Names of the `.draining-*` folders made in `dir` while `run` ran, counted from an
/// inotify watch on `dir` (every creation, also those removed again at once).
#[cfg(target_os = "linux")]
fn claim_folders_made_during(dir: &std::path::Path, run: impl FnOnce()) -> usize {
    use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
    use std::mem::MaybeUninit;
    let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).unwrap();
    // DELETE too: inotify merges an event into an identical one still unread, so
    // creations alone would show a thousand made-and-removed folders as one.
    inotify::add_watch(&fd, dir, WatchFlags::CREATE | WatchFlags::DELETE).unwrap();
    run();
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
    let mut events = inotify::Reader::new(&fd, &mut buf);
    let mut made = 0;
    // Non-blocking: every event of the run is queued by now; AGAIN means all are read.
    while let Ok(event) = events.next() {
        let name = event.file_name().map(|n| n.to_string_lossy().into_owned());
        let created = event.events().contains(inotify::ReadFlags::CREATE);
        if created && name.is_some_and(|n| n.starts_with(".draining-")) {
            made += 1;
        }
    }
    made
}

/// Before, each look for the missing verdict made and removed a claim folder, whose
/// events woke the watch for the next look: about a thousand a second. Now a look
/// only checks whether the verdict is there.
#[cfg(target_os = "linux")]
#[test]
fn a_wait_with_no_verdict_makes_no_claim_folders() {
    let w = World::new();
    let dir = verdict_folder(&w);
    let mut child = None;
    let made = claim_folders_made_during(&dir, || {
        let mut c = start_wait(&w, "w", "1.5");
        let status = crate::support::wait_child(&mut c, NO_HANG);
        child = Some(status);
    });
    let status = child.flatten().expect("enqueue --wait ended");
    assert_eq!(status.code(), Some(124), "{}", w.read("wait.err"));
    assert!(
        made <= 2,
        "the wait made {made} claim folders in 1.5 s with no verdict to claim"
    );
    assert_eq!(w.jobs_left(), ["w.json"], "the job stays queued");
}

#[test]
fn a_verdict_published_during_the_wait_is_printed_and_removed() {
    let w = World::new();
    let dir = verdict_folder(&w);
    let mut child = start_wait(&w, "w", "60");
    // Printed once the watch is set up: a verdict published from now on is seen.
    wait_for("the wait started", NO_HANG, || {
        w.read("wait.err").contains("waiting anyway")
    });
    let verdict = json!({"id": "w", "transcript": "T", "outcome": "hit"});
    fs::write(dir.join(".w.tmp"), verdict.to_string()).unwrap();
    fs::rename(dir.join(".w.tmp"), dir.join("w.json")).unwrap();
    let status = crate::support::wait_child(&mut child, NO_HANG).expect("enqueue --wait ended");
    assert!(status.success(), "{status:?}: {}", w.read("wait.err"));
    let out = w.read("wait.out");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"w"), "{out}");
    let printed: Value = serde_json::from_str(lines.get(1).expect("the verdict line")).unwrap();
    assert_eq!(printed, verdict);
    assert!(
        names(&dir).is_empty(),
        "the verdict and the wait's claim folder are gone: {:?}",
        names(&dir)
    );
}

/// Ctrl-C during `enqueue --wait` says the job stays queued (and how to get its
/// verdict later), and exits 130; it was silent before.
#[test]
fn ctrl_c_during_a_wait_says_the_job_stays_queued() {
    let w = World::new();
    let mut child = start_wait(&w, "c", "60");
    // The "no daemon" line comes once the signal handlers are in place.
    wait_for("the wait started", NO_HANG, || {
        w.read("wait.err").contains("waiting anyway")
    });
    signal(child.id(), libc::SIGINT);
    let status = crate::support::wait_child(&mut child, NO_HANG).expect("enqueue --wait ended");
    assert_eq!(status.code(), Some(130), "{}", w.read("wait.err"));
    let err = w.read("wait.err");
    assert!(
        err.contains("interrupted; job c stays queued") && err.contains("drain --transcript"),
        "{err}"
    );
    assert_eq!(w.jobs_left(), ["c.json"]);
}
