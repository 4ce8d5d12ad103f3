//! No zygote outside Linux (`zygote.rs` relies on `PR_SET_PDEATHSIG`,
//! `MSG_CMSG_CLOEXEC` and `close_range`): supervisors are forked from the judge.

use crate::process::supervisor::{Command, Forked, Lease, SupervisorFds};

/// There is no zygote here.
pub fn start() -> Result<(), String> {
    Err("only on Linux".into())
}

/// No pool here: nothing idle.
pub(crate) fn supervise_idle(_command: &Command, _fds: SupervisorFds) -> Forked {
    Forked::Here { tried: false }
}

/// Always: fork the supervisor in this process.
pub(crate) fn supervise(_command: &Command, _fds: SupervisorFds) -> Forked {
    Forked::Here { tried: false }
}

/// No pool here: a lease is never made, so there is nothing to keep.
pub(crate) fn give_back(_lease: Lease) {}
