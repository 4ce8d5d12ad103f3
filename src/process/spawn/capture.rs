//! A runner's output as the judge keeps it: the last `cap` bytes of each stream.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};

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

pub(super) async fn read_into(mut pipe: impl AsyncRead + Unpin, tail: Tail) {
    // Small: two of these are zeroed per attempt, and answers are a line or two.
    let mut chunk = vec![0u8; 16 * 1024];
    while let Ok(n) = pipe.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        tail.push(&chunk[..n]);
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
    fn tail_reads_invalid_utf8_lossily() {
        let t = Tail::new(16);
        t.push(b"ok \xff\xfe end");
        assert_eq!(t.text().0, "ok \u{fffd}\u{fffd} end");
    }
}
