//! `enqueue --wait`: the job's verdict, waited for through `store::protocol` (a watch,
//! no polling), printed as one line and removed; Ctrl-C stops the wait, a spinner shows
//! it on a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use super::NewJob;
use crate::store::protocol::{self, VerdictWait, Waited};
use crate::store::state_dir::{self, StateDir};
use crate::store::verdict_watch::Stopper;
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_TIMEOUT};

/// Waits for the job's verdict without busy polling: a watch on its verdict folder
/// wakes the wait only for that verdict's own file (`store::verdict_watch`), with a
/// slow re-check in case an event is lost. Looking finds nothing without writing
/// anything (`outbox::take` claims only a verdict that is there), so the wait never
/// wakes itself.
pub(super) fn wait_and_print(state: &StateDir, job: &NewJob, seconds: f64) -> i32 {
    let (id, transcript) = (job.file.id(), &job.file.job().transcript);
    if let Err(e) = state_dir::create_dir(&state.verdict_dir(transcript)) {
        say_err!("llm-judge enqueue: {e}", e = e.chain());
        return EXIT_FAILURE;
    }
    let mut wait = VerdictWait::new(&protocol::verdict_path(state, transcript, id));
    stop_on_signal(wait.stopper());
    if !protocol::daemon_runs(state) {
        say_err!(
            "llm-judge enqueue: no daemon is running for {}; waiting anyway",
            state.root.display()
        );
    }
    let mut spinner = Spinner::new(id);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
    let spin = spinner.on;
    let mut tick = || spinner.tick();
    let ticking: Option<(Duration, &mut dyn FnMut())> =
        spin.then_some((SPIN_EVERY, &mut tick as &mut dyn FnMut()));
    let waited = wait.until(deadline, ticking);
    spinner.clear();
    match waited {
        Waited::Taken(taken) => {
            // Not printed: the verdict is given back (not removed) for a later drain.
            if let Err(e) = writeln!(std::io::stdout().lock(), "{}", taken.line) {
                say_err!(
                    "llm-judge enqueue: cannot print the verdict of {id} (stdout: {e}); it stays for drain"
                );
                let _ = taken.give_back();
                return EXIT_FAILURE;
            }
            let _ = taken.done();
            EXIT_OK
        }
        Waited::TimedOut => {
            say_err!(
                "llm-judge enqueue: no verdict for {id} within {seconds}s; the job stays queued"
            );
            EXIT_TIMEOUT
        }
        Waited::Stopped => {
            say_err!(
                "llm-judge enqueue: interrupted; job {id} stays queued, and its verdict waits for \
                 llm-judge drain --transcript {transcript:?}"
            );
            EXIT_INTERRUPTED
        }
    }
}

/// How often the spinner turns.
const SPIN_EVERY: Duration = Duration::from_millis(120);

/// Exit code after Ctrl-C (128 + SIGINT, as a shell reports it).
const EXIT_INTERRUPTED: i32 = 130;

/// Stops the wait at SIGINT or SIGTERM (on a thread of its own: the wait is not async);
/// returns once the handlers are in place (bounded), so a signal from then on is seen.
fn stop_on_signal(stopper: Stopper) {
    let (ready, installed) = std::sync::mpsc::sync_channel(1);
    std::thread::spawn(move || {
        let Ok(rt) = crate::support::runtime::runtime() else {
            return;
        };
        rt.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            let _ = ready.send(());
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            stopper.stop();
        });
    });
    let _ = installed.recv_timeout(Duration::from_secs(2));
}

/// A one-line spinner on stderr, only when stderr is a terminal.
struct Spinner {
    on: bool,
    frame: usize,
    label: String,
}

impl Spinner {
    fn new(id: &str) -> Self {
        Spinner {
            on: std::io::stderr().is_terminal(),
            frame: 0,
            label: format!("waiting for the verdict of {id}"),
        }
    }

    fn tick(&mut self) {
        if self.on {
            const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
            self.frame = (self.frame + 1) % FRAMES.len();
            eprint!("\r{} {}", FRAMES[self.frame], self.label);
            let _ = std::io::stderr().flush();
        }
    }

    fn clear(&mut self) {
        if self.on {
            eprint!("\r{}\r", " ".repeat(self.label.len() + 2));
            self.on = false;
        }
    }
}
