//! The daemon's pool of supervisors: its zygote (`zygote.rs`) and the idle pooled
//! supervisors. Each pooled supervisor serves attempt after attempt
//! (`supervisor::serve`), so an attempt costs the daemon no fork at all: the daemon
//! sends each attempt's command and pipes straight to an idle supervisor and keeps it
//! idle again once the attempt's report pipe closed. Without a pool (`run`, `ask`,
//! macOS, a zygote that could not start) supervisors are forked from the judge per
//! attempt; a zygote that dies later leaves the pooled ones already made serving.
//! Linux only (`pool_stub.rs` elsewhere).

use std::io;
use std::sync::{Mutex, MutexGuard};

use crate::process::error::ProcessError;
use crate::process::supervisor::codec::{request, send_request};
use crate::process::supervisor::{Lease, Prepared, Started, SupervisorFds};
use crate::process::zygote::{self, Answer, Zygote};
use crate::support::error::Chained;

/// Idle pooled supervisors kept at most (the daemon needs one per running attempt).
const MAX_IDLE: usize = 64;

/// Requests up to this size go to an idle supervisor from an async worker: an idle one
/// reads at once, so the write never waits (unless it was stopped from outside).
const INLINE_REQUEST: usize = 64 << 10;

/// The zygote (`None` once it is gone) and the supervisors waiting for an attempt.
pub struct SupervisorPool {
    zygote: Mutex<Option<Zygote>>,
    idle: Mutex<Vec<Lease>>,
}

/// What the pool (or its zygote) made of a request for a supervisor.
enum Forked {
    /// A pooled supervisor took the attempt.
    Pooled(Lease),
    /// It could not (an errno from its fork).
    Failed(io::Error),
    /// Fork it here. `tried`: the request may have reached a supervisor that holds the
    /// pipes sent, so use fresh ones.
    Here { tried: bool },
}

impl SupervisorPool {
    /// Forks the zygote; an empty pool around it. Call once, from the daemon's main
    /// thread while it is the only thread (before the runtime).
    pub fn start() -> Result<SupervisorPool, ProcessError> {
        Ok(SupervisorPool {
            zygote: Mutex::new(Some(Zygote::start()?)),
            idle: Mutex::default(),
        })
    }

    /// Hands the attempt to an idle pooled supervisor without blocking; gives it back
    /// when none takes it (or the request is large): then call `supervise` off the
    /// async workers.
    pub(crate) fn offer_idle(&self, prepared: Prepared) -> Result<io::Result<Started>, Prepared> {
        // Nothing idle: `supervise` encodes the request, not this one too.
        if self.lock_idle().is_empty() {
            return Err(prepared);
        }
        let request = request(prepared.command());
        if request.len() > INLINE_REQUEST {
            return Err(prepared);
        }
        let forked = self.hand_over(&request, prepared.fds(), false);
        settle(prepared, forked)
    }

    /// Starts the attempt's supervisor: an idle pooled one, else a new one from the
    /// zygote, else one forked here. May block (the zygote's reply, bounded).
    pub(crate) fn supervise(&self, prepared: Prepared) -> io::Result<Started> {
        let forked = self.hand_over(&request(prepared.command()), prepared.fds(), true);
        match settle(prepared, forked) {
            Ok(started) => started,
            Err(prepared) => prepared.fork_here(),
        }
    }

    /// Takes back a supervisor whose attempt is over (see `Lease`).
    pub(crate) fn give_back(&self, lease: Lease) {
        let mut idle = self.lock_idle();
        if idle.len() < MAX_IDLE {
            idle.push(lease);
        }
    }

    /// Sends the attempt to an idle supervisor, or to a new one when `new` allows. A
    /// supervisor that is gone (its socket refuses the request) is dropped and the next
    /// one tried.
    fn hand_over(&self, request: &[u8], fds: SupervisorFds, new: bool) -> Forked {
        // Every idle one may be dead (killed from outside): try each once, then a new one.
        let tries = self.lock_idle().len() + usize::from(new);
        for _ in 0..tries {
            let next = match self.take_idle() {
                Some(lease) => Some(Ok(lease)),
                None if new => self.new_supervisor(),
                None => None,
            };
            let lease = match next {
                Some(Ok(lease)) => lease,
                Some(Err(e)) => return Forked::Failed(e),
                None => return Forked::Here { tried: false },
            };
            match send_request(&lease.sock, request, fds) {
                Ok(()) => {
                    // The request just woke the supervisor: let it start the runner
                    // now. When this thread is back the spawn report is waiting and the
                    // runner's exec is through, so the report and the runner's start
                    // time are read in the same turn instead of after two more sleeps
                    // (bench/results/HISTORY.md, run i).
                    std::thread::yield_now();
                    return Forked::Pooled(lease);
                }
                Err((false, _)) => continue,
                Err((true, e)) => {
                    tracing::warn!(
                        supervisor = lease.pid,
                        "a pooled supervisor did not take a whole request ({e}); starting the attempt again on fresh pipes",
                        e = e.chain()
                    );
                    return Forked::Here { tried: true };
                }
            }
        }
        Forked::Here { tried: false }
    }

    fn lock_idle(&self) -> MutexGuard<'_, Vec<Lease>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take_idle(&self) -> Option<Lease> {
        self.lock_idle().pop()
    }

    /// A new pooled supervisor from the zygote, or the errno of its fork; `None` when
    /// the zygote cannot give one (there is none, or the daemon had no descriptor left
    /// for the new socket): the attempt's supervisor is then forked here, which needs
    /// none. A zygote that stopped answering is killed and dropped for good, with a
    /// log line.
    fn new_supervisor(&self) -> Option<io::Result<Lease>> {
        let mut guard = self.zygote.lock().unwrap_or_else(|e| e.into_inner());
        let helper = guard.as_ref()?;
        let e = match helper.ask() {
            // Dropping a lease whose socket cannot be bounded closes it: that one exits.
            Ok(Answer::Lease(lease)) => return Some(zygote::bound(&lease.sock).map(|()| lease)),
            Ok(Answer::ForkFailed(e)) => return Some(Err(e)),
            Ok(Answer::NoRoom) => {
                tracing::warn!(
                    "no descriptor left for a new supervisor's socket: this attempt's supervisor is \
                     forked by the daemon; raise the daemon's open-file limit (LimitNOFILE=)"
                );
                return None;
            }
            Err(e) => e,
        };
        tracing::warn!(
            zygote = helper.pid(),
            "the supervisor zygote stopped answering ({e}); forking supervisors from the daemon from now on",
            e = e.chain()
        );
        if let Some(helper) = guard.take() {
            helper.kill();
        }
        None
    }
}

/// The attempt as the pool left it: started, failed, or back to be forked here (on
/// fresh pipes if a request may have reached a supervisor).
fn settle(prepared: Prepared, forked: Forked) -> Result<io::Result<Started>, Prepared> {
    match forked {
        Forked::Pooled(lease) => Ok(Ok(prepared.pooled(lease))),
        Forked::Failed(e) => Ok(Err(e)),
        Forked::Here { tried: false } => Err(prepared),
        Forked::Here { tried: true } => match prepared.on_fresh_pipes() {
            Ok(prepared) => Err(prepared),
            Err(e) => Ok(Err(e)),
        },
    }
}
