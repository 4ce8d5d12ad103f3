//! Unit tests of `slots.rs` (a file of their own to keep that one short).

use std::sync::Condvar;
use std::time::Duration;

use super::*;
use crate::core::verdict::{Outcome, RunEnd};
use crate::engine::job_run::RunError;
use crate::engine::spawner::{
    AttemptOutput, AttemptSpec, BoxFuture, OnProgress, Progress, Spawner,
};
use crate::process::spawn::RunOutput;

/// Answers yes once `parties` runners run at once (or after 60 s), recording
/// each one's thread and whether it met the others.
struct Together {
    parties: usize,
    /// Runners arrived so far, and (thread, met) of each.
    seen: Mutex<(usize, Vec<(String, bool)>)>,
    arrived: Condvar,
}

impl Together {
    fn new(parties: usize) -> Self {
        Together {
            parties,
            seen: Mutex::new((0, Vec::new())),
            arrived: Condvar::new(),
        }
    }

    // Blocks the calling slot's thread: only another thread can complete the round.
    fn meet(&self) {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        seen.0 += 1;
        let round_end = seen.0.div_ceil(self.parties) * self.parties;
        self.arrived.notify_all();
        let wait = self
            .arrived
            .wait_timeout_while(seen, Duration::from_secs(60), |s| s.0 < round_end);
        if let Ok((mut seen, timeout)) = wait {
            seen.1.push((thread, !timeout.timed_out()));
        }
    }
}

impl Spawner for Together {
    fn run<'a>(
        &'a self,
        _spec: &'a AttemptSpec<'a>,
        progress: &'a mut OnProgress<'_>,
    ) -> BoxFuture<'a, AttemptOutput> {
        progress(Progress::Spawned { pgid: 0 });
        self.meet();
        Box::pin(std::future::ready(AttemptOutput::Process(RunOutput {
            end: RunEnd::Exited { code: 0 },
            stdout: "{\"ok\": true}".into(),
            stderr: String::new(),
            stdout_cut: None,
            elapsed: Duration::ZERO,
        })))
    }
}

fn context(dir: &std::path::Path, spawner: Arc<dyn Spawner>) -> JobContext {
    let state = StateDir::new(dir.join("state"));
    state.create().expect("create state folder");
    JobContext {
        settings: Arc::new(Settings::for_tests(state.root.clone(), "fake")),
        services: Services {
            spawner,
            ..Services::default()
        },
        state,
        stop: tokio::sync::watch::channel(crate::engine::events::Control::Run).1,
        tally: None,
    }
}

fn job(context: &JobContext, name: &str, age_seconds: u64) -> OsString {
    let path = context.state.jobs().join(name);
    std::fs::write(&path, format!("{{\"prompt\": \"{name}\"}}")).expect("write job");
    let mtime = std::time::SystemTime::now() - Duration::from_secs(age_seconds);
    let file = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open job");
    file.set_modified(mtime).expect("set mtime");
    OsString::from(name)
}

fn board_with(context: &JobContext, open: usize) -> Arc<Board> {
    let board = Board::new(context.clone());
    board.set_gate(open, false, Some(context.clone()));
    board
}

/// A temp state folder, its context (a runner that answers at once) and a board
/// letting `open` jobs hold slots.
fn fixture(open: usize) -> (tempfile::TempDir, JobContext, Arc<Board>) {
    let dir = tempfile::tempdir().expect("temp folder");
    let context = context(dir.path(), Arc::new(Together::new(1)));
    let board = board_with(&context, open);
    (dir, context, board)
}

fn judged() -> JobEnd {
    JobEnd::Judged {
        outcome: Outcome::Clean,
        attempts: Vec::new(),
    }
}

/// True if the loop has been told of a change (consumes the notice).
async fn told(board: &Board) -> bool {
    tokio::select! {
        biased;
        () = board.changed() => true,
        () = std::future::ready(()) => false,
    }
}

#[test]
fn slots_take_the_oldest_job_while_fewer_than_open_hold_one() {
    let (_dir, context, board) = fixture(0);
    let newer = job(&context, "b.json", 10);
    let older = job(&context, "a.json", 20);
    board.offer(newer.clone());
    board.offer(older.clone());
    assert!(board.try_take().is_none(), "closed gate");
    board.set_gate(1, false, Some(context.clone()));
    assert_eq!(board.try_take().map(|t| t.0), Some(older.clone()));
    assert!(
        board.try_take().is_none(),
        "workers = 1 and one job holds a slot"
    );
    board.publishing(&older);
    assert_eq!(board.try_take().map(|t| t.0), Some(newer));
    assert_eq!((board.running(), board.waiting()), (2, 0));
}

#[test]
fn a_publishing_job_is_not_shown_running_but_still_counts_for_a_drain() {
    let (_dir, context, board) = fixture(2);
    board.offer(job(&context, "a.json", 20));
    board.offer(job(&context, "b.json", 10));
    let (a, _) = board.try_take().expect("a job");
    let (b, _) = board.try_take().expect("a job");
    board.publishing(&a);
    board.publishing(OsStr::new("never-taken.json"));
    assert_eq!(
        board.snapshot().running,
        std::slice::from_ref(&b),
        "a only publishes"
    );
    assert_eq!(board.running(), 2, "a drain still waits for a");
    board.finish(a, judged());
    board.finish(b, judged());
    assert!(board.snapshot().running.is_empty());
    assert!(board.lock().publishing.is_empty(), "no name left behind");
}

#[test]
fn lowering_workers_holds_new_jobs_back_until_enough_slots_are_given_back() {
    let (_dir, context, board) = fixture(3);
    for name in ["a.json", "b.json", "c.json", "d.json"] {
        board.offer(job(&context, name, 0));
    }
    let taken: Vec<OsString> = (0..3)
        .filter_map(|_| board.try_take())
        .map(|t| t.0)
        .collect();
    assert_eq!(taken.len(), 3);
    // SIGHUP: workers 3 -> 1 while three jobs hold slots.
    board.set_gate(1, false, Some(context.clone()));
    board.publishing(&taken[0]);
    assert!(board.try_take().is_none(), "two still hold slots");
    board.publishing(&taken[1]);
    assert!(board.try_take().is_none(), "one still holds a slot");
    board.publishing(&taken[2]);
    assert!(board.try_take().is_some(), "any slot may take the next job");
}

#[test]
fn a_newer_file_of_a_judged_name_is_queued_again() {
    let (_dir, context, board) = fixture(2);
    board.offer(job(&context, "a.json", 0));
    let (name, _) = board.try_take().expect("a job");
    board.finish(name.clone(), judged());
    assert_eq!((board.running(), board.waiting()), (0, 1));
    let (name, _) = board.try_take().expect("the newer job");
    let full = RunError::StateDir(std::io::Error::other("disk full"));
    board.finish(name, JobEnd::Failed(JobFailed::Run(Arc::new(full))));
    assert_eq!(
        (board.running(), board.waiting()),
        (0, 0),
        "a failed job waits for a rescan"
    );
}

#[tokio::test]
async fn a_busy_board_wakes_the_loop_once_per_status_write_and_every_time_when_draining() {
    let (_dir, context, board) = fixture(2);
    for name in ["a.json", "b.json", "c.json", "d.json"] {
        board.offer(job(&context, name, 0));
    }
    let (a, _) = board.try_take().expect("a job");
    let (b, _) = board.try_take().expect("a job");
    assert!(told(&board).await);
    std::fs::remove_file(context.state.jobs().join(&a)).expect("judged job removed");
    board.finish(a, judged());
    assert!(!told(&board).await, "told once until the status write");
    let snapshot = board.snapshot();
    assert_eq!((snapshot.waiting, snapshot.running.len()), (2, 1));
    let (c, _) = board.try_take().expect("a job");
    assert!(
        told(&board).await,
        "a change after the status write wakes the loop"
    );
    board.set_gate(0, true, Some(context.clone()));
    for name in [b, c] {
        std::fs::remove_file(context.state.jobs().join(&name)).expect("judged job removed");
        board.finish(name, judged());
        assert!(told(&board).await, "draining: every change");
    }
    assert_eq!(board.running(), 0);
}

#[tokio::test]
async fn an_idle_slot_takes_a_job_offered_after_it_began_to_wait() {
    let (_dir, context, board) = fixture(1);
    let waiting = tokio::spawn({
        let board = board.clone();
        async move { board.next().await.0 }
    });
    tokio::task::yield_now().await;
    board.offer(job(&context, "a.json", 0));
    let taken = tokio::time::timeout(Duration::from_secs(10), waiting).await;
    assert_eq!(
        taken.ok().and_then(Result::ok),
        Some(OsString::from("a.json"))
    );
}

#[tokio::test]
async fn a_job_that_ends_without_giving_its_slot_back_frees_it_for_a_waiting_slot() {
    let (_dir, context, board) = fixture(1);
    board.offer(job(&context, "a.json", 20));
    let (a, _) = board.try_take().expect("a job");
    let waiting = tokio::spawn({
        let board = board.clone();
        async move { board.next().await.0 }
    });
    board.offer(job(&context, "b.json", 10));
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished(), "a still holds the only slot");
    board.finish(a, JobEnd::Failed(JobFailed::WorkerStopped));
    let taken = tokio::time::timeout(Duration::from_secs(10), waiting).await;
    assert_eq!(
        taken.ok().and_then(Result::ok),
        Some(OsString::from("b.json"))
    );
}

#[test]
fn slots_beyond_the_thread_count_share_the_threads() {
    let (_dir, _context, board) = fixture(0);
    let mut slots = Slots::with_threads(2);
    slots.grow(5, &board);
    assert_eq!((slots.slots, slots.runtimes.len()), (5, 2));
    assert!(slots.runtimes.iter().all(Option::is_some));
    slots.grow(3, &board);
    assert_eq!(slots.slots, 5, "a lower count keeps the slots");
    slots.shut_down(Duration::from_secs(10));
}

#[test]
fn two_slots_judge_side_by_side_on_threads_of_their_own() {
    let dir = tempfile::tempdir().expect("temp folder");
    let spawner = Arc::new(Together::new(2));
    let context = context(dir.path(), spawner.clone());
    let board = board_with(&context, 2);
    let rt = crate::support::runtime::runtime().expect("runtime");
    let mut slots = Slots::with_threads(2);
    rt.block_on(async {
        slots.grow(2, &board);
        for i in 0..4 {
            board.offer(job(&context, &format!("j{i}.json"), 0));
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while board.running() + board.waiting() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Joins the slot threads (a drop would leave them to wind down on their own).
    slots.shut_down(Duration::from_secs(10));
    assert_eq!(
        (board.running(), board.waiting()),
        (0, 0),
        "every job judged"
    );
    let verdicts = std::fs::read_dir(
        context
            .state
            .verdicts()
            .join(crate::store::state_dir::transcript_hash("")),
    )
    .map_or(0, |d| d.count());
    assert_eq!(verdicts, 4);
    let seen = spawner.seen.lock().expect("runs").1.clone();
    assert!(
        seen.iter().all(|(_, met)| *met),
        "each runner ran beside another: {seen:?}"
    );
    let mut threads: Vec<String> = seen.into_iter().map(|(t, _)| t).collect();
    threads.sort();
    threads.dedup();
    assert_eq!(threads, ["llm-judge-slot-0", "llm-judge-slot-1"]);
}

/// The loop's event stream driven in-process with no signal handlers of its own (the
/// test runner's signals stay its own): a job file written in jobs/ arrives as an event,
/// and a status write comes when it is due.
#[test]
fn the_event_stream_runs_in_process_with_a_noop_signal_source() {
    use crate::daemon::events::{DaemonEvent, Due, EventSource, Signals, Timers};
    use crate::daemon::inbox::InboxWatcher;
    let dir = tempfile::tempdir().expect("temp folder");
    let context = context(
        dir.path(),
        Arc::new(crate::engine::spawner::RealSpawner::default()),
    );
    let board = board_with(&context, 0);
    let runtime = crate::support::runtime::runtime().expect("runtime");
    runtime.block_on(async {
        let mut watcher = InboxWatcher::new(&context.state.jobs());
        watcher.watch().expect("watch jobs/");
        let (_reads, catalog_reads) = tokio::sync::mpsc::unbounded_channel();
        let timers = Timers {
            rescan_every: Duration::from_secs(3600),
            watchdog_every: None,
        };
        let mut events = EventSource::new(watcher, Signals::Noop, catalog_reads, timers);
        std::fs::write(context.state.jobs().join("a.json"), "{}").expect("write a job");
        let quiet = Due {
            grace_over: None,
            stop_deadline: None,
            status: None,
        };
        let arrived = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                if let DaemonEvent::JobArrived(name) = events.next(&board, quiet).await {
                    return name;
                }
            }
        })
        .await
        .expect("the job's event within 60 s");
        assert_eq!(arrived, "a.json");
        let due = Due {
            status: Some(tokio::time::Instant::now()),
            ..quiet
        };
        let status = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                match events.next(&board, due).await {
                    DaemonEvent::JobArrived(_) | DaemonEvent::BoardChanged => continue,
                    other => return other,
                }
            }
        })
        .await;
        assert!(matches!(status, Ok(DaemonEvent::StatusDue)), "{status:?}");
    });
}
