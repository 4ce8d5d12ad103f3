//! One supervised attempt seen from the judge: its supervisor's state (running,
//! settled, finished), its report pipe and the runner's pipes, and the one kill path
//! (`terminate`: SIGTERM, grace, SIGKILL).

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use rustix::process::Signal;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use super::capture::{Lines, Tail, read_into};
use super::control::{Control, StopSignal, reached, stopped};
use super::{PromptSpec, REPORT_WAIT, receiver, sender};
use crate::core::verdict::RunEnd;
use crate::process::os::{kill_tagged, signal_group};
use crate::process::pool::SupervisorPool;
use crate::process::supervisor::{self, Lease, RECORD_BYTES, Report};

/// Who ends an attempt's supervisor.
#[derive(Debug)]
enum Owner {
    /// Forked by this process: ours to reap.
    Forked,
    /// Lent by the daemon's pool: the zygote's child, reaped by the kernel and never
    /// waited for (its pid may be reused); given back once its attempt is over.
    Pooled(Lease),
}

/// An attempt's supervisor as the judge sees it: running the attempt, settled (it
/// reported the end, `Exited` or `SpawnFailed`: the runner's tree is gone), then
/// finished (reaped, given back, or left to exit on its own).
#[derive(Debug)]
enum SupervisorState {
    Running(Owner),
    Settled(Owner),
    Finished,
}

impl SupervisorState {
    /// A supervisor just started: pooled with a lease, else forked here.
    fn new(lease: Option<Lease>) -> Self {
        SupervisorState::Running(lease.map_or(Owner::Forked, Owner::Pooled))
    }

    /// The supervisor reported the attempt's end.
    fn settle(&mut self) {
        *self = match std::mem::replace(self, SupervisorState::Finished) {
            SupervisorState::Running(owner) => SupervisorState::Settled(owner),
            other => other,
        };
    }

    /// Still running its attempt (it may be killed to stop the runner).
    fn is_running(&self) -> bool {
        matches!(self, SupervisorState::Running(_))
    }

    fn is_settled(&self) -> bool {
        matches!(self, SupervisorState::Settled(_))
    }

    fn is_finished(&self) -> bool {
        matches!(self, SupervisorState::Finished)
    }

    /// Forked by us and not yet finished: a reap is still owed.
    fn owes_reap(&self) -> bool {
        matches!(
            self,
            SupervisorState::Running(Owner::Forked) | SupervisorState::Settled(Owner::Forked)
        )
    }

    /// Finished from now on: the owner (for the reap or the give-back) and whether it
    /// had settled; `None` when it already was finished.
    fn finish(&mut self) -> Option<(Owner, bool)> {
        match std::mem::replace(self, SupervisorState::Finished) {
            SupervisorState::Running(owner) => Some((owner, false)),
            SupervisorState::Settled(owner) => Some((owner, true)),
            SupervisorState::Finished => None,
        }
    }
}

/// One supervised runner seen from the judge: the report pipe and the runner's pipes.
pub(super) struct Attempt {
    pub(super) supervisor: i32,
    state: SupervisorState,
    /// Where a pooled supervisor goes back to.
    pool: Option<Arc<SupervisorPool>>,
    pub(super) runner: Option<i32>,
    pub(super) report: pipe::Receiver,
    pub(super) stdin: Option<OwnedFd>,
    pub(super) stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
}

impl Attempt {
    pub(super) fn new(
        started: supervisor::Started,
        pool: Option<Arc<SupervisorPool>>,
    ) -> std::io::Result<Self> {
        let (supervisor, lease) = (started.supervisor, started.lease);
        let report = match receiver(started.report) {
            Ok(report) => report,
            Err(e) => {
                // No way to hear from it. Its report pipe's read end is closed now, so
                // it kills the runner's group, sweeps and ends the attempt (a pooled
                // one then exits: its lease drops here, closing its socket).
                if lease.is_none() {
                    reap_in_background(supervisor);
                }
                return Err(e);
            }
        };
        Ok(Attempt {
            supervisor,
            state: SupervisorState::new(lease),
            pool,
            runner: None,
            report,
            stdin: started.stdin,
            stdout: Some(started.stdout),
            stderr: Some(started.stderr),
        })
    }

    /// The next report, or `None` when the pipe closed or `wait` passed.
    pub(super) async fn next_report(&mut self, wait: Duration) -> Option<Report> {
        let mut record = [0u8; RECORD_BYTES];
        let report = match tokio::time::timeout(wait, self.report.read_exact(&mut record)).await {
            Ok(Ok(_)) => Report::decode(record),
            _ => None,
        };
        if matches!(report, Some(Report::SpawnFailed(_) | Report::Exited(_))) {
            self.state.settle();
        }
        report
    }

    pub(super) fn take_reader(
        &mut self,
        stdout: bool,
        tail: Tail,
        lines: Option<Lines>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let fd = if stdout {
            self.stdout.take()
        } else {
            self.stderr.take()
        }?;
        let pipe = receiver(fd).ok()?;
        Some(tokio::spawn(read_into(pipe, tail, lines)))
    }

    pub(super) fn take_stdin(&mut self) -> Option<pipe::Sender> {
        sender(self.stdin.take()?).ok()
    }

    /// Waits for the runner's end within the timeout, or for `final_event` (then
    /// `RunEnd::FinalEvent`, the runner still running). At the timeout, and when the
    /// stop signal fires first, the runner goes the one way out: `terminate` (a final
    /// event after that no longer counts).
    pub(super) async fn wait_or_stop(
        &mut self,
        spec: &PromptSpec<'_>,
        final_event: impl Future<Output = ()>,
    ) -> RunEnd {
        let timed_out = tokio::select! {
            // An exit already reported wins: it carries the status.
            biased;
            end = self.exit_within(spec.timeout) => match end {
                Some(end) => return end,
                None => true,
            },
            () = stopped(spec.stop) => false,
            () = final_event => return RunEnd::FinalEvent,
        };
        self.terminate(spec.kill_grace, spec.stop).await;
        if timed_out {
            RunEnd::TimedOut {
                seconds: spec.timeout.as_secs_f64(),
            }
        } else {
            RunEnd::Stopped
        }
    }

    /// The one kill path: SIGTERM to the runner's group, the grace (cut short by
    /// `Control::StopNow`), SIGKILL. The supervisor then stops whatever else is left of
    /// its tree.
    pub(super) async fn terminate(&mut self, grace: Duration, stop: Option<&StopSignal>) {
        self.signal_runner(Signal::TERM);
        let ended = tokio::select! {
            end = self.exit_within(grace) => end.is_some(),
            () = reached(stop, Control::StopNow) => false,
        };
        if !ended {
            self.signal_runner(Signal::KILL);
            let _ = self.exit_within(REPORT_WAIT).await;
        }
    }

    /// The runner's end if the supervisor reports it within `wait`. A closed pipe
    /// (the supervisor was killed) counts as a SIGKILL death.
    pub(super) async fn exit_within(&mut self, wait: Duration) -> Option<RunEnd> {
        let mut record = [0u8; RECORD_BYTES];
        match tokio::time::timeout(wait, self.report.read_exact(&mut record)).await {
            Err(_) => None,
            Ok(Ok(_)) => match Report::decode(record) {
                Some(Report::Exited(status)) => {
                    // Reaped by the supervisor: its group id may be reused from now on.
                    self.state.settle();
                    self.runner = None;
                    Some(exit_end(status))
                }
                _ => Some(RunEnd::Exited { code: -9 }),
            },
            Ok(Err(_)) => Some(RunEnd::Exited { code: -9 }),
        }
    }

    /// Signals the runner's group; a runner whose pid we could not see (a namespaced
    /// one that was gone at once) is killed with its whole namespace, by killing the
    /// supervisor, its init.
    fn signal_runner(&self, signal: Signal) {
        if let Some(pgid) = self.runner.and_then(|p| u32::try_from(p).ok()) {
            signal_group(pgid, signal);
        } else if signal == Signal::KILL && self.state.is_running() {
            signal_pid(self.supervisor, Signal::KILL);
        }
    }

    /// Reaps the supervisor, or gives a pooled one back once its attempt is settled.
    /// One that does not finish in time is killed; its runner's tree is then searched
    /// by tag, the only trace left.
    pub(super) async fn finish(&mut self, tag: &str) {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(REPORT_WAIT, self.report.read_to_end(&mut rest)).await;
        let closed = matches!(read, Ok(Ok(_)));
        match (closed, self.state.is_settled()) {
            (true, true) => {}
            (true, false) => {
                // The supervisor died before it reported the end (killed from outside):
                // its sweep did not run, so the runner's tree is found by its tag.
                let killed = crate::support::runtime::blocking(|| kill_tagged(tag));
                tracing::warn!(
                    supervisor = self.supervisor,
                    killed,
                    "a runner's supervisor ended without reporting; stopped its runner's processes by tag"
                );
            }
            (false, _) => {
                self.signal_runner(Signal::KILL);
                signal_pid(self.supervisor, Signal::KILL);
                crate::support::runtime::blocking(|| kill_tagged(tag));
                tracing::warn!(
                    supervisor = self.supervisor,
                    "a runner's supervisor did not finish in time; killed it"
                );
            }
        }
        match self.state.finish() {
            Some((Owner::Pooled(lease), true)) if closed => {
                if let Some(pool) = &self.pool {
                    pool.give_back(lease);
                }
            }
            Some((Owner::Forked, _)) => {
                let supervisor = self.supervisor;
                crate::support::runtime::blocking(|| supervisor::reap(supervisor));
            }
            // A lease not given back closes its socket here: that supervisor exits.
            Some((Owner::Pooled(_), _)) | None => {}
        }
    }
}

impl Drop for Attempt {
    /// Only a net: an attempt dropped mid-flight (the daemon exiting past its stop
    /// wait, a panic) kills its runner at once; the supervisor sweeps the rest and is
    /// reaped off the async threads. Shutdown normally goes through `terminate`.
    fn drop(&mut self) {
        if self.state.is_finished() {
            return;
        }
        self.signal_runner(Signal::KILL);
        if self.state.owes_reap() {
            reap_in_background(self.supervisor);
        }
    }
}

/// Reaps a supervisor we forked on a thread of its own (it exits once its sweep is
/// done); if no thread can be had, kills it so the reap cannot wait on its sweep.
fn reap_in_background(supervisor: i32) {
    let reaper = std::thread::Builder::new()
        .name("llm-judge-reap".into())
        .spawn(move || supervisor::reap(supervisor));
    if reaper.is_err() {
        signal_pid(supervisor, Signal::KILL);
    }
}

/// The pid we see of a namespaced supervisor's runner (`inner` inside).
pub(super) fn outer_pid(supervisor: i32, inner: i32) -> Option<i32> {
    if crate::support::failpoint::pid_lookup_off() {
        return None;
    }
    let (supervisor, inner) = (u32::try_from(supervisor).ok()?, u32::try_from(inner).ok()?);
    let outer = crate::process::os::outer_pid_of_child(supervisor, inner)?;
    i32::try_from(outer).ok()
}

fn signal_pid(pid: i32, signal: Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, signal);
    }
}

/// The end of a raw wait status: an exit code, or `-<signal>` for a signal death.
fn exit_end(status: i32) -> RunEnd {
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        -libc::WTERMSIG(status)
    } else {
        -1
    };
    RunEnd::Exited { code }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        let (sock, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        Lease { pid: 4242, sock }
    }

    #[test]
    fn a_forked_supervisor_is_reaped_settled_or_not_and_only_once() {
        let mut state = SupervisorState::new(None);
        assert!(state.is_running() && state.owes_reap() && !state.is_settled());
        state.settle();
        assert!(state.is_settled() && !state.is_running() && state.owes_reap());
        state.settle();
        assert!(state.is_settled(), "settling twice changes nothing");
        assert!(matches!(state.finish(), Some((Owner::Forked, true))));
        assert!(state.is_finished() && !state.owes_reap() && !state.is_running());
        assert!(state.finish().is_none(), "finished once");
        state.settle();
        assert!(state.is_finished(), "no way back from finished");

        let mut unsettled = SupervisorState::new(None);
        assert!(matches!(unsettled.finish(), Some((Owner::Forked, false))));
    }

    #[test]
    fn a_pooled_supervisor_hands_its_lease_back_and_is_never_reaped() {
        let mut state = SupervisorState::new(Some(lease()));
        assert!(state.is_running() && !state.owes_reap());
        state.settle();
        assert!(state.is_settled() && !state.owes_reap());
        match state.finish() {
            Some((Owner::Pooled(lease), true)) => assert_eq!(lease.pid, 4242),
            other => panic!("{other:?}"),
        }
        assert!(state.is_finished());
    }
}
