//! The process layer's errors, each naming the program, path or pid it concerns, with
//! the OS error as its source; callers show them with `support::error::Chain`.

use std::io;
use std::path::PathBuf;

/// Something the process layer could not do.
// The zygote's and the pooled supervisors' variants are built on Linux only.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The zygote is forked only while the daemon has one thread.
    #[error("the daemon already runs several threads")]
    NotSingleThreaded,
    /// No zygote on this platform.
    #[cfg(not(target_os = "linux"))]
    #[error("only on Linux")]
    NoZygoteHere,
    /// The zygote's socket pair could not be made.
    #[error("socketpair")]
    SocketPair(#[source] io::Error),
    /// Forking the zygote failed.
    #[error("fork")]
    Fork(#[source] io::Error),
    /// The zygote's socket could not be bounded in time; the zygote (this pid) was
    /// killed.
    #[error("socket timeouts")]
    SocketTimeouts { pid: i32, source: io::Error },
    /// A bounded helper command did not start.
    #[error("cannot run `{} {args}`", program.display())]
    CannotRun {
        program: PathBuf,
        args: String,
        source: io::Error,
    },
    /// A bounded helper command ran past its deadline and was killed.
    #[error("`{} {args}` took over {seconds} s", program.display())]
    TookTooLong {
        program: PathBuf,
        args: String,
        seconds: u64,
    },
    /// A runner's argument, program or folder cannot be a C string.
    #[error("{0:?} holds a NUL byte")]
    NulByte(String),
    /// One of our own runner variables cannot be a C string.
    #[error("the runner variable {0} holds a NUL byte: a bug in llm-judge, please report it")]
    NulInOwnVariable(&'static str),
    /// A pooled supervisor's request came without its four descriptors.
    #[error("a supervisor request needs four descriptors")]
    RequestWithoutFds,
    /// A pooled supervisor's request was larger than it accepts (this many bytes).
    #[error("supervisor request too large")]
    RequestTooLarge(usize),
    /// A system call on the way (pipes, fork, the pool's socket) failed.
    #[error(transparent)]
    Os(#[from] io::Error),
}

impl ProcessError {
    /// The kind an attempt's reason names (`InvalidInput: ...` for bad input), as the
    /// OS error's kind would.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            ProcessError::NulByte(_) | ProcessError::NulInOwnVariable(_) => {
                io::ErrorKind::InvalidInput
            }
            ProcessError::SocketPair(e)
            | ProcessError::Fork(e)
            | ProcessError::SocketTimeouts { source: e, .. }
            | ProcessError::CannotRun { source: e, .. }
            | ProcessError::Os(e) => e.kind(),
            _ => io::ErrorKind::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_they_concern() {
        let e = ProcessError::TookTooLong {
            program: "/usr/bin/codex".into(),
            args: "debug models".into(),
            seconds: 15,
        };
        assert_eq!(
            e.to_string(),
            "`/usr/bin/codex debug models` took over 15 s"
        );
        let e = ProcessError::NulByte("a\0b".into());
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), r#""a\0b" holds a NUL byte"#);
    }
}
