//! No zygote outside Linux (`zygote.rs` relies on `PR_SET_PDEATHSIG`,
//! `MSG_CMSG_CLOEXEC` and `close_range`): supervisors are forked from the judge.

use crate::process::supervisor::{Command, Forked, SupervisorFds};

/// There is no zygote here.
pub fn start() -> Result<(), String> {
    Err("only on Linux".into())
}

/// Always: fork the supervisor in this process.
pub(crate) fn fork_supervisor(_command: &Command, _fds: SupervisorFds) -> Forked {
    Forked::Here { tried: false }
}
