//! A runner's output as the judge keeps it: the last `cap` bytes of each stream.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;

use crate::core::verdict::usage::FinalWatch;

/// The last `cap` bytes of a stream, shared so a cut-off reader still leaves its data.
#[derive(Clone)]
pub(super) struct Tail {
    inner: Arc<Mutex<Kept>>,
    cap: usize,
}

/// The bytes kept so far, and whether earlier ones were dropped.
#[derive(Default)]
struct Kept {
    buf: Vec<u8>,
    dropped: bool,
}

impl Tail {
    pub(super) fn new(cap: usize) -> Self {
        Tail {
            inner: Arc::new(Mutex::new(Kept::default())),
            cap,
        }
    }

    pub(super) fn push(&self, chunk: &[u8]) {
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        kept.buf.extend_from_slice(chunk);
        // Trim only at twice the cap so the cost stays linear in the bytes read.
        if kept.buf.len() > self.cap.saturating_mul(2) {
            let excess = kept.buf.len() - self.cap;
            kept.buf.drain(..excess);
            kept.dropped = true;
        }
    }

    /// The kept text, and true when the cap dropped its start.
    pub(super) fn text(&self) -> (String, bool) {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let start = kept.buf.len().saturating_sub(self.cap);
        let text = String::from_utf8_lossy(&kept.buf[start..]).into_owned();
        (text, kept.dropped || start > 0)
    }
}

/// Reads a stream into `tail` until its end; `lines`, when given, watches its whole
/// lines for the final event.
pub(super) async fn read_into(
    mut pipe: impl AsyncRead + Unpin,
    tail: Tail,
    mut lines: Option<Lines>,
) {
    // Small: two of these are zeroed per attempt, and answers are a line or two.
    let mut chunk = vec![0u8; 16 * 1024];
    while let Ok(n) = pipe.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        // Kept first: whoever hears of the final event reads it from the tail.
        tail.push(&chunk[..n]);
        if let Some(lines) = &mut lines {
            lines.feed(&chunk[..n]);
        }
    }
}

/// A stream's whole lines, as they come, given to a `FinalWatch`; the first final
/// event is told once on `seen`. A line longer than the output cap is never read as
/// one: the tail could not hold it whole either.
pub(super) struct Lines {
    watch: FinalWatch,
    line: Vec<u8>,
    /// The current line outgrew `cap`.
    overlong: bool,
    cap: usize,
    /// Taken once the final event is told.
    seen: Option<oneshot::Sender<()>>,
}

impl Lines {
    pub(super) fn new(watch: FinalWatch, cap: usize, seen: oneshot::Sender<()>) -> Self {
        Lines {
            watch,
            line: Vec::new(),
            overlong: false,
            cap,
            seen: Some(seen),
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            if self.seen.is_none() {
                return;
            }
            let (body, ends) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            if !self.overlong && self.line.len() + body.len() > self.cap {
                self.overlong = true;
                self.line = Vec::new();
            }
            if !self.overlong {
                self.line.extend_from_slice(body);
            }
            if ends {
                let text = String::from_utf8_lossy(&self.line);
                if !self.overlong
                    && self.watch.is_final(&text)
                    && let Some(seen) = self.seen.take()
                {
                    let _ = seen.send(());
                }
                self.line.clear();
                self.overlong = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes() {
        let t = Tail::new(4);
        for chunk in [b"abc".as_slice(), b"defgh", b"ij"] {
            t.push(chunk);
        }
        assert_eq!(t.text(), ("ghij".to_string(), true));
        let whole = Tail::new(4);
        whole.push(b"abcd");
        assert_eq!(whole.text(), ("abcd".to_string(), false), "nothing dropped");
    }

    #[test]
    fn the_final_event_is_told_once_its_line_is_whole() {
        let (tx, mut rx) = oneshot::channel();
        let mut lines = Lines::new(FinalWatch, 200, tx);
        let event = br#"{"type":"result","subtype":"success","is_error":false,"result":"{}","session_id":"s"}"#;
        lines.feed(b"{\"type\":\"system\",\"session_id\":\"s\"}\n");
        lines.feed(&event[..20]);
        assert!(rx.try_recv().is_err(), "not before its line is read");
        lines.feed(&event[20..]);
        assert!(rx.try_recv().is_err(), "not before its newline");
        lines.feed(b"\n");
        assert!(rx.try_recv().is_ok());
    }

    #[test]
    fn a_line_longer_than_the_cap_is_never_the_final_event() {
        let (tx, mut rx) = oneshot::channel();
        let mut lines = Lines::new(FinalWatch, 40, tx);
        let event = br#"{"type":"result","subtype":"success","is_error":false,"result":"{}","session_id":"s"}"#;
        lines.feed(event);
        lines.feed(b"\n");
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn tail_reads_invalid_utf8_lossily() {
        let t = Tail::new(16);
        t.push(b"ok \xff\xfe end");
        assert_eq!(t.text().0, "ok \u{fffd}\u{fffd} end");
    }
}
