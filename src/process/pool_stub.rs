//! No pool outside Linux (`zygote.rs` relies on `PR_SET_PDEATHSIG`,
//! `MSG_CMSG_CLOEXEC` and `close_range`): supervisors are forked from the judge.

use std::io;

use crate::process::error::ProcessError;
use crate::process::supervisor::{Lease, Prepared, Started};

/// Never made here: `start` always fails, so callers hold `None`.
pub struct SupervisorPool(());

impl SupervisorPool {
    /// There is no zygote here.
    pub fn start() -> Result<SupervisorPool, ProcessError> {
        Err(ProcessError::NoZygoteHere)
    }

    /// Nothing idle: the attempt comes back.
    pub(crate) fn offer_idle(&self, prepared: Prepared) -> Result<io::Result<Started>, Prepared> {
        Err(prepared)
    }

    /// Always forks the supervisor in this process.
    pub(crate) fn supervise(&self, prepared: Prepared) -> io::Result<Started> {
        prepared.fork_here()
    }

    /// A lease is never made here: nothing to keep.
    pub(crate) fn give_back(&self, _lease: Lease) {}
}
