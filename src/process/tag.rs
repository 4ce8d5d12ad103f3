//! `LLM_JUDGE_TAG`: the variable every runner process gets, and a fresh value for the
//! processes of one claim or attempt. A supervisor's sweep and the tag search
//! (`process::os::tag_search`) find escaped descendants by it.

use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that tags every process started for one claim.
pub const TAG_VAR: &str = "LLM_JUDGE_TAG";

/// A tag unique to this process and call: the pid, the clock in nanoseconds and a
/// counter (two calls in one nanosecond still differ).
pub fn new_tag() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_differ_and_start_with_the_pid() {
        let (a, b) = (new_tag(), new_tag());
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("{}-", std::process::id())), "{a}");
    }
}
