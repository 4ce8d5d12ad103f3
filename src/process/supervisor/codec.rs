//! The command codec: a `Command` as bytes, and one attempt's request to a pooled
//! supervisor over its socket (the command and the four descriptors of
//! `SupervisorFds`), and the attempt once a pooled supervisor took it. Linux only,
//! like the pool.

use std::ffi::CString;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use super::{Command, Env, Lease, Pipes, Prepared, Started, SupervisorFds};
use crate::process::error::ProcessError;
use crate::process::fd_passing::{recv_with_fds, send_with_fds};

/// Requests larger than this are refused (the prompt goes on stdin past 128 KiB).
const MAX_REQUEST: usize = 64 << 20;

/// As NUL-terminated strings: program, cwd, argc, argv..., env...
pub(crate) fn encode(command: &Command) -> Vec<u8> {
    let argc = CString::new(command.argv.len().to_string()).unwrap_or_default();
    let parts = [&command.program, &command.cwd, &argc]
        .into_iter()
        .chain(&command.argv)
        .chain(command.env.iter());
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(part.as_bytes_with_nul());
    }
    out
}

/// The command `encode` made, or `None` for anything else.
pub(crate) fn decode(body: &[u8]) -> Option<Command> {
    let mut parts = body
        .split_inclusive(|b| *b == 0)
        .map(|p| CString::from_vec_with_nul(p.to_vec()).ok());
    let program = parts.next()??;
    let cwd = parts.next()??;
    let argc: usize = parts.next()??.to_str().ok()?.parse().ok()?;
    let mut argv: Vec<CString> = parts.collect::<Option<_>>()?;
    if argv.len() < argc {
        return None;
    }
    let own = argv.split_off(argc);
    Some(Command {
        program,
        argv,
        env: Env {
            shared: Arc::default(),
            own,
            replacing: 0,
            withheld: Vec::new(),
        },
        cwd,
    })
}

/// One attempt's request to a pooled supervisor: the command's length, then the
/// command, sent as one message (one wake-up of the supervisor).
pub(crate) fn request(command: &Command) -> Vec<u8> {
    let body = encode(command);
    let mut message = Vec::with_capacity(8 + body.len());
    message.extend_from_slice(&(body.len() as u64).to_ne_bytes());
    message.extend_from_slice(&body);
    message
}

/// Sends a `request` to a pooled supervisor with the descriptors in `SupervisorFds`
/// order. An error says whether any of it reached the supervisor.
pub(crate) fn send_request(
    sock: &UnixStream,
    request: &[u8],
    fds: SupervisorFds,
) -> Result<(), (bool, io::Error)> {
    let descriptors = [fds.stdin, fds.stdout, fds.stderr, fds.report];
    send_with_fds(sock, request, &descriptors)
}

impl Prepared {
    /// The runner's command.
    pub(crate) fn command(&self) -> &Command {
        &self.command
    }

    /// The descriptors the supervisor gets.
    pub(crate) fn fds(&self) -> SupervisorFds {
        self.pipes.fds()
    }

    /// The attempt, now in the hands of the pooled supervisor `lease`.
    pub(crate) fn pooled(self, lease: Lease) -> Started {
        self.pipes.started(lease.pid, Some(lease))
    }

    /// The same attempt on fresh pipes: a request may have reached a supervisor that
    /// holds the old ones (that one stops once our ends close).
    pub(crate) fn on_fresh_pipes(self) -> io::Result<Prepared> {
        let pipes = Pipes::new(self.pipes.stdin_w.is_some())?;
        Ok(Prepared { pipes, ..self })
    }
}

/// One request as the pooled supervisor receives it.
pub(crate) struct Received {
    /// `None` when the body does not decode.
    pub command: Option<Command>,
    /// stdin source, stdout, stderr, report: `SupervisorFds` order.
    pub fds: [OwnedFd; 4],
}

/// Reads one request; `None` at EOF.
pub(crate) fn receive_request(mut sock: &UnixStream) -> Result<Option<Received>, ProcessError> {
    let mut header = [0u8; 8];
    let Some(fds) = recv_with_fds(sock, &mut header)? else {
        return Ok(None);
    };
    let len = u64::from_ne_bytes(header) as usize;
    let fds: [OwnedFd; 4] = fds
        .try_into()
        .map_err(|_| ProcessError::RequestWithoutFds)?;
    if len > MAX_REQUEST {
        return Err(ProcessError::RequestTooLarge(len));
    }
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body)?;
    Ok(Some(Received {
        command: decode(&body),
        fds,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_round_trips() {
        let c = |s: &str| CString::new(s).unwrap();
        let command = Command {
            program: c("/bin/sh"),
            argv: vec![c("sh"), c("-c"), c("")],
            env: Env {
                shared: Arc::from([c("A=1"), c("B=old"), c("KEY=k")]),
                own: vec![c("B=")],
                replacing: 1,
                withheld: vec![b"KEY".to_vec()],
            },
            cwd: c("/tmp"),
        };
        let back = decode(&encode(&command)).unwrap();
        assert_eq!(back.program, command.program);
        assert_eq!(back.argv, command.argv);
        assert!(back.env.iter().eq(command.env.iter()));
        assert_eq!(back.cwd, command.cwd);
        assert!(decode(b"/bin/sh\0/tmp\0").is_none(), "no argc");
        assert!(
            decode(b"/bin/sh\0/tmp\x005\0a\0").is_none(),
            "argc past the end"
        );
    }
}
