//! What the log keeps and how stderr shows it: `-v`/`-q` or `RUST_LOG` set the level,
//! judge.log always keeps INFO and above (its lines are the record people tail), and
//! stderr lines carry a syslog priority prefix under journald, a timestamp elsewhere.
//!
//! `RUST_LOG` is read by `tracing_subscriber`'s `Targets` (a bare level, `target=level`,
//! comma-separated), which the `std` feature already builds: no `env-filter` and no
//! regex crate, at the cost of its span and field filters.

use std::sync::OnceLock;

use tracing::Level;
use tracing_subscriber::filter::{LevelFilter, Targets};

/// The level when nothing asks for another.
const DEFAULT_LEVEL: LevelFilter = LevelFilter::INFO;

/// What the command line and environment ask of the log.
#[derive(Debug, Clone)]
pub struct LogChoice {
    /// What reaches stderr.
    pub stderr: Targets,
    /// A level was asked for (`-v`, `-q` or `RUST_LOG`): commands other than the daemon
    /// then write log lines to stderr too.
    pub asked: bool,
    /// Why `RUST_LOG` was not used, logged once the log is open.
    pub warning: Option<String>,
}

impl LogChoice {
    /// The choice of `-v` (count), `-q` (count) and the `RUST_LOG` value; flags win.
    pub fn new(verbose: u8, quiet: u8, rust_log: Option<&str>) -> LogChoice {
        let flagged = match (verbose, quiet) {
            (0, 0) => None,
            (1, _) => Some(LevelFilter::DEBUG),
            (2.., _) => Some(LevelFilter::TRACE),
            (_, 1) => Some(LevelFilter::WARN),
            (_, 2) => Some(LevelFilter::ERROR),
            (_, 3..) => Some(LevelFilter::OFF),
        };
        if let Some(level) = flagged {
            return LogChoice {
                stderr: Targets::new().with_default(level),
                asked: true,
                warning: None,
            };
        }
        let Some(text) = rust_log.map(str::trim).filter(|t| !t.is_empty()) else {
            return LogChoice {
                stderr: Targets::new().with_default(DEFAULT_LEVEL),
                asked: false,
                warning: None,
            };
        };
        match text.parse::<Targets>() {
            Ok(targets) => {
                // Only `target=level` items: every other target keeps the default.
                let stderr = match targets.default_level() {
                    Some(_) => targets,
                    None => targets.with_default(DEFAULT_LEVEL),
                };
                LogChoice {
                    stderr,
                    asked: true,
                    warning: None,
                }
            }
            Err(e) => LogChoice {
                stderr: Targets::new().with_default(DEFAULT_LEVEL),
                asked: false,
                warning: Some(format!(
                    "RUST_LOG={text:?} is not a level list ({e}); logging at info. Give a \
                     level (error, warn, info, debug, trace) or target=level items, e.g. \
                     RUST_LOG=debug or RUST_LOG=llm_judge::engine=trace"
                )),
            },
        }
    }

    /// What judge.log keeps: INFO and above always, and whatever stderr asks beyond it.
    pub fn log_filter(&self) -> Targets {
        let at_least_info = |level: LevelFilter| level.max(LevelFilter::INFO);
        let default = self.stderr.default_level().unwrap_or(DEFAULT_LEVEL);
        Targets::new()
            .with_default(at_least_info(default))
            .with_targets(
                self.stderr
                    .iter()
                    .map(|(target, level)| (target.to_string(), at_least_info(level))),
            )
    }
}

static CHOICE: OnceLock<LogChoice> = OnceLock::new();

/// Sets the process's choice (once, from the command line; later calls are ignored).
pub fn choose(choice: LogChoice) {
    let _ = CHOICE.set(choice);
}

/// True when a command's warnings reach stderr: not under `-qq`, `-qqq` or a
/// `RUST_LOG` quieter than `warn`.
pub fn warnings_shown() -> bool {
    CHOICE
        .get()
        .is_none_or(|c| c.stderr.would_enable("llm_judge", &Level::WARN))
}

/// The process's choice: the default (INFO, nothing asked) when none was made.
pub fn chosen() -> LogChoice {
    CHOICE
        .get()
        .cloned()
        .unwrap_or_else(|| LogChoice::new(0, 0, None))
}

/// How stderr shows a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StderrStyle {
    /// stderr is journald's stream: `<N>` priority prefix, no timestamp (journald
    /// stamps its own), so `journalctl -p warning` works.
    Journal,
    /// A terminal or a file: the judge.log line, timestamp first.
    Plain,
}

/// Journal when `JOURNAL_STREAM` names the very stream stderr is (systemd sets it for
/// a service's stdout/stderr; a shell started from such a service inherits it, so the
/// device and inode are compared, as systemd documents).
pub fn stderr_style() -> StderrStyle {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return StderrStyle::Plain;
    };
    let ours = rustix::fs::fstat(std::io::stderr()).ok().map(|st| {
        #[allow(clippy::unnecessary_cast)] // u64 on Linux, narrower on macOS
        (st.st_dev as u64, st.st_ino as u64)
    });
    match (parse_journal_stream(&stream.to_string_lossy()), ours) {
        (Some(named), Some(ours)) if named == ours => StderrStyle::Journal,
        _ => StderrStyle::Plain,
    }
}

/// `JOURNAL_STREAM`'s `<device>:<inode>`.
fn parse_journal_stream(text: &str) -> Option<(u64, u64)> {
    let (dev, ino) = text.trim().split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// The syslog priority prefix journald reads (`sd-daemon.h`).
pub fn priority_prefix(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "<3>",
        Level::WARN => "<4>",
        Level::INFO => "<6>",
        _ => "<7>",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(choice: &Targets, target: &str, level: Level) -> bool {
        choice.would_enable(target, &level)
    }

    #[test]
    fn flags_win_over_rust_log_and_set_the_level() {
        let c = LogChoice::new(1, 0, Some("error"));
        assert!(c.asked && on(&c.stderr, "llm_judge::daemon", Level::DEBUG));
        assert!(!on(&c.stderr, "x", Level::TRACE));
        assert!(on(&LogChoice::new(2, 0, None).stderr, "x", Level::TRACE));
        let q = LogChoice::new(0, 1, None);
        assert!(on(&q.stderr, "x", Level::WARN) && !on(&q.stderr, "x", Level::INFO));
        assert!(!on(&LogChoice::new(0, 3, None).stderr, "x", Level::ERROR));
    }

    #[test]
    fn rust_log_levels_and_targets() {
        let none = LogChoice::new(0, 0, None);
        assert!(!none.asked && on(&none.stderr, "x", Level::INFO));
        assert!(!on(&none.stderr, "x", Level::DEBUG));
        let debug = LogChoice::new(0, 0, Some("DEBUG"));
        assert!(debug.asked && on(&debug.stderr, "llm_judge", Level::DEBUG));
        let one = LogChoice::new(0, 0, Some("llm_judge::engine=trace"));
        assert!(on(&one.stderr, "llm_judge::engine::attempts", Level::TRACE));
        assert!(
            on(&one.stderr, "llm_judge::daemon", Level::INFO),
            "others at info"
        );
        assert!(!on(&one.stderr, "llm_judge::daemon", Level::DEBUG));
        let bad = LogChoice::new(0, 0, Some("loud=["));
        assert!(
            bad.warning
                .as_deref()
                .is_some_and(|w| w.contains("RUST_LOG"))
        );
        assert!(on(&bad.stderr, "x", Level::INFO) && !bad.asked);
        assert!(!LogChoice::new(0, 0, Some("  ")).asked);
    }

    #[test]
    fn judge_log_keeps_info_whatever_stderr_shows() {
        let quiet = LogChoice::new(0, 3, None).log_filter();
        assert!(on(&quiet, "x", Level::INFO) && !on(&quiet, "x", Level::DEBUG));
        let loud = LogChoice::new(0, 0, Some("warn,llm_judge::engine=debug")).log_filter();
        assert!(on(&loud, "llm_judge::engine::x", Level::DEBUG));
        assert!(on(&loud, "llm_judge::daemon", Level::INFO));
        assert!(!on(&loud, "llm_judge::daemon", Level::DEBUG));
    }

    #[test]
    fn journal_stream_and_priorities() {
        assert_eq!(parse_journal_stream("8:12345\n"), Some((8, 12345)));
        assert_eq!(parse_journal_stream("8-1"), None);
        assert_eq!(priority_prefix(&Level::ERROR), "<3>");
        assert_eq!(priority_prefix(&Level::WARN), "<4>");
        assert_eq!(priority_prefix(&Level::INFO), "<6>");
        assert_eq!(priority_prefix(&Level::TRACE), "<7>");
    }
}
