//! The process layer's errors, each naming the program, path or pid it concerns;
//! callers show them with `Display` (the texts are those logged and tested before).

use std::io;
use std::path::PathBuf;

/// Something the process layer could not do.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// A bounded helper command did not start.
    #[error("cannot run `{} {args}`: {source}", program.display())]
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
    /// Waiting for a bounded helper command (this pid) failed.
    #[error("waiting for `{} {args}`: {source}", program.display())]
    Wait {
        program: PathBuf,
        args: String,
        pid: u32,
        source: io::Error,
    },
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
    }
}
