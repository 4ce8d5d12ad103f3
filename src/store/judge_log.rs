//! judge.log (docs/reference.md, "judge.log"): one whole line per event, UTC timestamps,
//! rotated by size to judge.log.1 .. judge.log.3 with the total capped. Written
//! synchronously (no lossy background writer): a line logged before a process crash is
//! in the file. Not fsynced: a power cut may lose the last lines, or cut the last one
//! short; a line cut short is ended before the next is appended, so no record is ever
//! glued to a torn one.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing::{Level, Metadata};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::support::log_level::{StderrStyle, priority_prefix};

/// Rotated files kept beside judge.log.
const ROTATIONS: u32 = 3;

/// A size-capped, rotating judge.log shared by all threads of the process.
#[derive(Clone)]
pub struct RotatingLog {
    inner: Arc<Mutex<LogFile>>,
}

struct LogFile {
    path: PathBuf,
    /// Each of the 1 + ROTATIONS files stays under this.
    max_file_bytes: u64,
    /// The open judge.log and its (dev, ino), fixed while it is open.
    file: Option<(File, (u64, u64))>,
}

impl RotatingLog {
    /// A log at `path` whose files total at most about `max_total_bytes`.
    pub fn new(path: &Path, max_total_bytes: u64) -> Self {
        RotatingLog {
            inner: Arc::new(Mutex::new(LogFile {
                path: path.to_path_buf(),
                max_file_bytes: (max_total_bytes / u64::from(ROTATIONS + 1)).max(4096),
                file: None,
            })),
        }
    }

    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        let mut log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        log.write_line(line)
    }
}

impl LogFile {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let size = self.current_size();
        if size.is_some_and(|s| s > 0 && s + line.len() as u64 > self.max_file_bytes) {
            self.rotate();
        }
        if self.file.is_none() || size.is_none() {
            // Readable too: the last byte says whether a crash cut the last line short.
            let file = OpenOptions::new()
                .create(true)
                .read(true)
                .append(true)
                .mode(0o600)
                .custom_flags(crate::store::state_dir::NOFOLLOW)
                .open(&self.path)?;
            // Unknown identity (fstat failed): no inode matches it, so the next line reopens.
            let id = file.metadata().map_or((0, 0), |m| (m.dev(), m.ino()));
            if crate::store::state_dir::ends_cut_short(&file).unwrap_or(false) {
                (&file).write_all(b"\n")?;
            }
            self.file = Some((file, id));
        }
        match self.file.as_mut() {
            Some((file, _)) => file.write_all(line),
            None => Ok(()),
        }
    }

    /// The size of judge.log if our handle still points at it (another process may
    /// have rotated it away); `None` means reopen. One stat per line: the identity of
    /// the open file was taken when it was opened.
    fn current_size(&self) -> Option<u64> {
        let on_disk = std::fs::symlink_metadata(&self.path).ok()?;
        let (_, ours) = self.file.as_ref()?;
        (*ours == (on_disk.dev(), on_disk.ino())).then_some(on_disk.len())
    }

    fn rotate(&mut self) {
        let numbered = |n: u32| {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        for n in (1..ROTATIONS).rev() {
            let _ = std::fs::rename(numbered(n), numbered(n + 1));
        }
        let _ = std::fs::rename(&self.path, numbered(1));
        self.file = None;
    }
}

/// A writer for one event: buffers it and writes it as one whole line on drop, to
/// judge.log and, when its level is shown there, to stderr.
pub struct LineWriter {
    log: RotatingLog,
    /// How stderr shows this event, and its level; `None`: not on stderr.
    stderr: Option<(StderrStyle, Level)>,
    buf: Vec<u8>,
}

impl Write for LineWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let line = one_line(&self.buf);
        // Nowhere left to report a failing log; the event is still in stderr for the daemon.
        let _ = self.log.write_line(&line);
        if let Some((style, level)) = self.stderr {
            let _ = io::stderr()
                .lock()
                .write_all(&for_stderr(&line, style, &level));
        }
    }
}

/// The line as stderr shows it: under journald with its priority prefix and without
/// its timestamp (journald stamps its own), elsewhere whole.
fn for_stderr(line: &[u8], style: StderrStyle, level: &Level) -> Vec<u8> {
    match style {
        StderrStyle::Plain => line.to_vec(),
        StderrStyle::Journal => {
            let body = without_time(line);
            let start = body.iter().position(|b| *b != b' ').unwrap_or(body.len());
            [priority_prefix(level).as_bytes(), &body[start..]].concat()
        }
    }
}

/// The line without its leading timestamp.
fn without_time(line: &[u8]) -> &[u8] {
    match line.iter().position(|&b| b == b' ') {
        Some(end) if line.first().is_some_and(u8::is_ascii_digit) => &line[end + 1..],
        _ => line,
    }
}

/// One event as exactly one line: every control character inside it (a job id or a
/// file name holding a newline, runner output) is escaped, so no value can forge a
/// line (docs/reference.md, "judge.log"). Only the final newline stays.
pub fn one_line(event: &[u8]) -> Vec<u8> {
    // `from_utf8` checks a valid line a word at a time; the lossy pass goes byte by byte.
    let text = match std::str::from_utf8(event) {
        Ok(valid) => std::borrow::Cow::Borrowed(valid),
        Err(_) => String::from_utf8_lossy(event),
    };
    let body = text.strip_suffix('\n').unwrap_or(&text);
    let mut out = String::with_capacity(body.len() + 1);
    push_escaped(&mut out, body);
    out.push('\n');
    out.into_bytes()
}

/// `text` with its control characters (and U+2028/2029) escaped as judge.log writes
/// them (`\n`, `\r`, `\t`, `\u001b`): for any other place that shows job-supplied
/// text to a person, such as `status` on a terminal.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    push_escaped(&mut out, text);
    out
}

/// Copies the runs between escapes whole: a log line is mostly printable ASCII, and a
/// char-by-char copy of every line cost the daemon about a fifth of its instructions
/// per job (bench/callgrind.py).
fn push_escaped(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(at) = first_escape(rest.as_bytes()) {
        // `at` starts a char: the bytes looked for are ASCII or UTF-8 lead bytes.
        out.push_str(&rest[..at]);
        let Some(c) = rest[at..].chars().next() else {
            return;
        };
        push_char_escaped(out, c);
        rest = &rest[at + c.len_utf8()..];
    }
    out.push_str(rest);
}

/// Where the first byte that may start an escape is: sixteen bytes at a time (a check
/// without an early exit, which the compiler turns into a few vector instructions),
/// then byte by byte in the sixteen that hold it.
fn first_escape(bytes: &[u8]) -> Option<usize> {
    const LANES: usize = 16;
    let mut chunks = bytes.chunks_exact(LANES);
    let mut start = 0;
    for chunk in &mut chunks {
        if chunk
            .iter()
            .fold(false, |any, &b| any | may_start_escape(b))
        {
            return chunk
                .iter()
                .position(|&b| may_start_escape(b))
                .map(|i| start + i);
        }
        start += LANES;
    }
    let tail = chunks.remainder();
    tail.iter()
        .position(|&b| may_start_escape(b))
        .map(|i| start + i)
}

/// True for a byte that may start a char `push_char_escaped` escapes: an ASCII
/// control, or the lead byte of a C1 control (U+0080-U+009F, `C2 80`-`C2 9F`) or of
/// U+2028/U+2029 (`E2 80 A8`, `E2 80 A9`).
fn may_start_escape(b: u8) -> bool {
    b < 0x20 || b == 0x7f || b == 0xc2 || b == 0xe2
}

fn push_char_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        }
        c => out.push(c),
    }
}

/// judge.log's timestamps: UTC to the microsecond (`2026-12-05T00:57:03.063426Z`),
/// exactly as tracing's `SystemTime` timer writes them, without its formatting
/// machinery (a sixth of a line's instructions). A clock before 1970 or past 9999
/// goes to that timer.
struct UtcMicros;

impl tracing_subscriber::fmt::time::FormatTime for UtcMicros {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        match now
            .ok()
            .and_then(|d| utc_micros(d.as_secs(), d.subsec_micros()))
        {
            Some(stamp) => w.write_str(std::str::from_utf8(&stamp).map_err(|_| std::fmt::Error)?),
            None => tracing_subscriber::fmt::time::SystemTime.format_time(w),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.uuuuuuZ` for `secs` after the Unix epoch (years up to 9999).
fn utc_micros(secs: u64, micros: u32) -> Option<[u8; 27]> {
    const YEAR_10000: u64 = 253_402_300_800;
    if secs >= YEAR_10000 || micros >= 1_000_000 {
        return None;
    }
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = crate::core::calendar::civil_from_days(days);
    let mut out = *b"0000-00-00T00:00:00.000000Z";
    let mut put = |at: usize, width: usize, mut value: u64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, month);
    put(8, 2, day);
    put(11, 2, rest / 3600);
    put(14, 2, rest / 60 % 60);
    put(17, 2, rest % 60);
    put(20, 6, u64::from(micros));
    Some(out)
}

/// Where formatted events go: judge.log (every event the layer lets through), and
/// stderr for the events its filter shows.
#[derive(Clone)]
struct EventSinks {
    log: RotatingLog,
    stderr: Option<(Targets, StderrStyle)>,
}

impl<'a> MakeWriter<'a> for EventSinks {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            log: self.log.clone(),
            stderr: None,
            buf: Vec::with_capacity(256),
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        let stderr = self.stderr.as_ref().and_then(|(shown, style)| {
            shown
                .would_enable(meta.target(), meta.level())
                .then_some((*style, *meta.level()))
        });
        let mut writer = self.make_writer();
        writer.stderr = stderr;
        writer
    }
}

/// Sends tracing events to judge.log (INFO and above, and more when `-v` or
/// `RUST_LOG` asks), and to stderr at the level asked when `also_stderr` (the daemon)
/// or when a level was asked for.
pub fn init(log_path: &Path, max_total_bytes: u64, also_stderr: bool) {
    let choice = crate::support::log_level::chosen();
    // LLM_JUDGE_STDERR_LOG=off keeps log lines off stderr: the launchd agent sets it,
    // because judge.log is rotated and launchd's own log file is not.
    let stderr_on = (also_stderr || choice.asked)
        && std::env::var_os("LLM_JUDGE_STDERR_LOG").is_none_or(|v| v != "off");
    init_with(log_path, max_total_bytes, stderr_on);
}

/// `init` with nothing on stderr, whatever was asked: a hook's stderr is the harness's
/// (shown to the user, or read as a block's reason).
pub fn init_log_only(log_path: &Path, max_total_bytes: u64) {
    init_with(log_path, max_total_bytes, false);
}

fn init_with(log_path: &Path, max_total_bytes: u64, stderr_on: bool) {
    let choice = crate::support::log_level::chosen();
    // One layer formats each event once for both places.
    let sinks = EventSinks {
        log: RotatingLog::new(log_path, max_total_bytes),
        stderr: stderr_on.then(|| {
            (
                choice.stderr.clone(),
                crate::support::log_level::stderr_style(),
            )
        }),
    };
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .event_format(crate::store::log_line::LineFormat { timer: UtcMicros })
        .with_writer(sinks)
        .with_filter(choice.log_filter());
    // A second init (tests) keeps the first subscriber.
    if tracing_subscriber::registry()
        .with(layer)
        .try_init()
        .is_ok()
        && let Some(warning) = &choice.warning
    {
        tracing::warn!("{warning}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_by_size_and_caps_the_total() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("judge.log");
        let sinks = EventSinks {
            log: RotatingLog::new(&path, 4 * 4096),
            stderr: None,
        };
        let line = vec![b'x'; 1000];
        for _ in 0..100 {
            let mut w = sinks.make_writer();
            w.write_all(&line).unwrap();
        }
        let mut total = 0;
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let len = entry.unwrap().metadata().unwrap().len();
            assert!(len <= 4096, "{len}");
            total += len;
        }
        assert!(total <= 4 * 4096);
        assert!(path.with_extension("log.3").exists());
        assert!(!path.with_extension("log.4").exists());
    }

    /// A last line a power cut left short is ended before the next line: no record
    /// is glued to a torn one.
    #[test]
    fn a_line_cut_short_by_a_crash_is_ended_before_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("judge.log");
        std::fs::write(&path, b"2026-12-06T18:47:05.607494Z  INFO job fin").unwrap();
        let log = RotatingLog::new(&path, 1 << 20);
        log.write_line(b"2026-12-06T18:48:00.000000Z  INFO daemon start\n")
            .unwrap();
        log.write_line(b"2026-12-06T18:48:00.000001Z  INFO ready\n")
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "2026-12-06T18:47:05.607494Z  INFO job fin\n\
             2026-12-06T18:48:00.000000Z  INFO daemon start\n\
             2026-12-06T18:48:00.000001Z  INFO ready\n"
        );
    }

    #[test]
    fn an_event_is_always_one_line() {
        let forged = b"job id=a\n2026-01-01T00:00:00Z  INFO forged\r\x1b[31m\tx\xc2\x85\n";
        let line = String::from_utf8(one_line(forged)).unwrap();
        assert_eq!(
            line,
            "job id=a\\n2026-01-01T00:00:00Z  INFO forged\\r\\u001b[31m\\tx\\u0085\n"
        );
        assert_eq!(line.matches('\n').count(), 1);
        assert_eq!(one_line(b"plain"), b"plain\n");
    }

    /// The run-copying escape gives what escaping char by char gives, for every char
    /// up to U+3000 (all controls, U+2028/2029, and the lead bytes the fast path looks
    /// for followed by chars it must not escape) alone and between printable text.
    #[test]
    fn escaping_runs_matches_escaping_char_by_char() {
        let by_char = |text: &str| {
            let mut out = String::new();
            text.chars().for_each(|c| push_char_escaped(&mut out, c));
            out
        };
        for c in (0..=0x3000).filter_map(char::from_u32) {
            for text in [c.to_string(), format!("ab{c}cd{c}{c}é\u{2029}")] {
                assert_eq!(escape_controls(&text), by_char(&text), "{:?}", text);
            }
        }
    }

    /// The timestamps tracing's own timer writes, for instants around leap days,
    /// century years and the end of the range.
    #[test]
    fn timestamps_match_rfc3339_to_the_microsecond() {
        let cases = [
            (0, 0, "1970-01-01T00:00:00.000000Z"),
            (951_782_400, 7, "2000-02-29T00:00:00.000007Z"),
            (951_868_799, 999_999, "2000-02-29T23:59:59.999999Z"),
            (1_796_546_101, 523_922, "2026-12-06T08:35:01.523922Z"),
            (1_709_251_199, 1, "2024-02-29T23:59:59.000001Z"),
            (4_107_542_400, 0, "2100-03-01T00:00:00.000000Z"),
            (4_107_456_000, 0, "2100-02-28T00:00:00.000000Z"),
            (253_402_300_799, 999_999, "9999-12-31T23:59:59.999999Z"),
        ];
        for (secs, micros, want) in cases {
            let got = utc_micros(secs, micros).unwrap();
            assert_eq!(std::str::from_utf8(&got).unwrap(), want, "{secs}");
        }
        assert!(utc_micros(253_402_300_800, 0).is_none());
        // Day by day over four centuries: each date follows the one before it.
        let civil_from_days = crate::core::calendar::civil_from_days;
        let mut prev = civil_from_days(0);
        for days in 1..146_097 * 2 {
            let (y, m, d) = civil_from_days(days);
            let next_day = (y, m, d) == (prev.0, prev.1, prev.2 + 1);
            let next_month = (y, m, d) == (prev.0, prev.1 + 1, 1);
            let next_year = (y, m, d) == (prev.0 + 1, 1, 1) && prev.1 == 12 && prev.2 == 31;
            assert!(
                next_day || next_month || next_year,
                "{prev:?} -> {:?}",
                (y, m, d)
            );
            prev = (y, m, d);
        }
    }

    #[test]
    fn journald_gets_a_priority_and_no_timestamp_a_terminal_the_whole_line() {
        let line = b"2026-12-05T00:57:03.063426Z  WARN runner benched\n";
        assert_eq!(
            for_stderr(line, StderrStyle::Journal, &Level::WARN),
            b"<4>WARN runner benched\n"
        );
        assert_eq!(for_stderr(line, StderrStyle::Plain, &Level::WARN), line);
    }

    #[test]
    fn stderr_gets_the_line_without_its_timestamp() {
        let line = b"2026-12-05T00:57:03.063426Z  INFO job finished id=a\n";
        assert_eq!(without_time(line), b" INFO job finished id=a\n");
        // No time to strip (the timer failed): the whole line.
        assert_eq!(
            without_time(b"<unknown time>  INFO x\n"),
            b"<unknown time>  INFO x\n"
        );
    }

    #[test]
    fn reopens_after_another_process_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("judge.log");
        let log = RotatingLog::new(&path, 1 << 20);
        log.write_line(b"one\n").unwrap();
        std::fs::rename(&path, dir.path().join("judge.log.1")).unwrap();
        log.write_line(b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    }
}
