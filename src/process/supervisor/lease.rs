//! A pooled supervisor lent to one attempt (the pool makes them, Linux only).

use std::os::unix::net::UnixStream;

use libc::pid_t;

/// A pooled supervisor lent to one attempt. Give it back (`SupervisorPool::give_back`)
/// only once its report pipe closed after `Exited` or `SpawnFailed`: its tree is gone
/// and it waits for the next request. Dropped instead, its socket closes and it exits
/// once its attempt is over.
#[derive(Debug)]
pub(crate) struct Lease {
    pub pid: pid_t,
    pub sock: UnixStream,
}
