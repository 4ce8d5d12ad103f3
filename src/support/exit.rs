//! Exit codes (docs/reference.md, "Exit codes") and writing a command's output to stdout.

/// `eprintln!` that never panics: a closed stderr loses the line, not the process.
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `say_err!` for a warning: said unless `-qq` (or a quieter level) asked for errors only.
macro_rules! say_warn {
    ($($arg:tt)*) => {{
        if $crate::support::log_level::warnings_shown() {
            say_err!($($arg)*);
        }
    }};
}

/// `println!` for lines whose loss is harmless (service plans, notes): a closed stdout
/// loses the line instead of panicking. Output callers rely on uses `print_stdout`.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Exit code: the command worked.
pub const EXIT_OK: i32 = 0;
/// Exit code: the command failed.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code: bad usage or invalid input (config, environment, job).
pub const EXIT_USAGE: i32 = 2;
/// Exit code: `--wait` ran out of time.
pub const EXIT_TIMEOUT: i32 = 124;

/// Writes `text` to stdout; a closed or full stdout is reported on stderr, never a
/// panic (`println!` panics). False when it could not be written.
pub fn print_stdout(text: &str) -> bool {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => true,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "llm-judge: cannot write to stdout: {e}");
            false
        }
    }
}
