//! Whether an API runner's failed request is sent again, and after how long
//! (docs/api-runners.md, "Retries"). A model server that refuses or resets a
//! connection, says 429, or fails with a 5xx is often fine a moment later; anything
//! else (a 4xx, a bad reply, a timeout) would fail the same way again. Pure: the
//! engine (`engine::attempts`) waits and tries.

use std::time::Duration;

use crate::core::api::protocol::{CallEnd, Transport};

/// Tries of one runner for one job, the first included.
pub const MAX_TRIES: u32 = 3;
/// The most a runner's waits between tries add up to (less when its timeout is short:
/// `budget`).
pub const MAX_BUDGET: Duration = Duration::from_secs(10);
/// The wait before the second try when the server does not say; it doubles per try.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// True when `end` is a failure that may pass: nothing listened, the connection was
/// reset or dropped, the server is rate limiting (429) or failing (5xx but 501 and
/// 505, which say the server cannot do this request at all).
pub fn is_transient(end: &CallEnd) -> bool {
    match end {
        CallEnd::Refused { .. } => true,
        CallEnd::Transport { kind, .. } => matches!(kind, Transport::Reset | Transport::Dropped),
        CallEnd::Response { status, .. } => {
            *status == 429 || ((500..600).contains(status) && !matches!(status, 501 | 505))
        }
        CallEnd::NoKey { .. }
        | CallEnd::TooLarge { .. }
        | CallEnd::TimedOut { .. }
        | CallEnd::Stopped => false,
    }
}

/// The most a runner's waits add up to: `MAX_BUDGET`, or half its timeout when that
/// is less (a short timeout keeps most of its time for the tries themselves).
pub fn budget(timeout: Duration) -> Duration {
    MAX_BUDGET.min(timeout / 2)
}

/// How a runner's tries went so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tries {
    /// Tries made (1 after the first).
    pub made: u32,
    /// The waits between them, added up.
    pub waited: Duration,
    /// Since the first try started, waits included.
    pub elapsed: Duration,
}

/// What to do after a failed try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Wait `wait`, then try again with `timeout` (what is left of the runner's).
    Retry { wait: Duration, timeout: Duration },
    /// Keep the failure.
    Stop(GiveUp),
}

/// Why a failure is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// Trying again would fail the same way.
    NotTransient,
    /// `MAX_TRIES` were made.
    NoTriesLeft,
    /// The wait the server asks for (or the backoff) would pass the budget.
    OverBudget { wait: Duration },
    /// Less than a quarter of the runner's timeout would be left for the try.
    NoTimeLeft,
}

impl GiveUp {
    /// Words for judge.log; `None` when the failure was never one to retry.
    pub fn describe(self) -> Option<String> {
        match self {
            GiveUp::NotTransient => None,
            GiveUp::NoTriesLeft => Some(format!("no try left ({MAX_TRIES} made)")),
            GiveUp::OverBudget { wait } => Some(format!(
                "waiting {}s more would pass the retry budget",
                crate::core::verdict::human_number(wait.as_secs_f64())
            )),
            GiveUp::NoTimeLeft => Some("too little of the runner's timeout is left".into()),
        }
    }
}

/// What follows the failed try that ended `end`, after `tries`, for a runner whose
/// timeout is `timeout`; `now_unix` reads a `retry-after` date.
pub fn next(end: &CallEnd, tries: Tries, timeout: Duration, now_unix: f64) -> Next {
    if !is_transient(end) {
        return Next::Stop(GiveUp::NotTransient);
    }
    if tries.made >= MAX_TRIES {
        return Next::Stop(GiveUp::NoTriesLeft);
    }
    let asked = match end {
        CallEnd::Response {
            retry_after: Some(value),
            ..
        } => retry_after(value, now_unix),
        _ => None,
    };
    let wait = asked.unwrap_or_else(|| backoff(tries.made));
    if tries.waited.saturating_add(wait) > budget(timeout) {
        return Next::Stop(GiveUp::OverBudget { wait });
    }
    let left = timeout.saturating_sub(tries.elapsed).saturating_sub(wait);
    if left < timeout / 4 || left.is_zero() {
        return Next::Stop(GiveUp::NoTimeLeft);
    }
    // Whole milliseconds: a reason's "timed out after 54.5s" stays readable.
    let timeout = Duration::from_millis(u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
    Next::Retry { wait, timeout }
}

/// The wait after try `made` when the server does not say: 0.5 s, then 1 s, doubling.
fn backoff(made: u32) -> Duration {
    FIRST_BACKOFF.saturating_mul(1 << made.saturating_sub(1).min(16))
}

/// A `retry-after` value as a wait: delay seconds (`7`), or an HTTP date
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) counted from `now_unix` (a date past is no wait).
/// `None` for anything else.
pub fn retry_after(value: &str, now_unix: f64) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = http_date(value)?;
    let wait = (at as f64 - now_unix).max(0.0);
    Duration::try_from_secs_f64(wait).ok()
}

/// Unix seconds of an IMF-fixdate, the one form of HTTP date senders must use.
fn http_date(value: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let parts: Vec<&str> = value.split_whitespace().collect();
    let [weekday, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    if !weekday.ends_with(',') {
        return None;
    }
    let number = |text: &str, len: usize| -> Option<i64> {
        (text.len() == len && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| text.parse().ok())
            .flatten()
    };
    let day = number(day, 2).filter(|d| (1..=31).contains(d))?;
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    let year = number(year, 4)?;
    let mut clock = time.split(':');
    let (Some(h), Some(m), Some(s), None) =
        (clock.next(), clock.next(), clock.next(), clock.next())
    else {
        return None;
    };
    let (h, m, s) = (number(h, 2)?, number(m, 2)?, number(s, 2)?);
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(crate::core::calendar::days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, retry_after: Option<&str>) -> CallEnd {
        CallEnd::Response {
            status,
            retry_after: retry_after.map(str::to_string),
            body: Vec::new(),
        }
    }

    fn transport(kind: Transport) -> CallEnd {
        CallEnd::Transport {
            kind,
            detail: String::new(),
        }
    }

    const SECOND: Duration = Duration::from_secs(1);

    fn first(made: u32, waited: Duration) -> Tries {
        Tries {
            made,
            waited,
            elapsed: waited,
        }
    }

    #[test]
    fn refused_reset_dropped_429_and_5xx_are_transient_and_nothing_else() {
        let refused = CallEnd::Refused {
            address: "http://127.0.0.1:9/v1".into(),
        };
        for end in [
            refused,
            transport(Transport::Reset),
            transport(Transport::Dropped),
            status(429, None),
            status(500, None),
            status(502, None),
            status(503, Some("2")),
            status(504, None),
            status(529, None),
        ] {
            assert!(is_transient(&end), "{end:?}");
        }
        for end in [
            status(200, None),
            status(400, None),
            status(401, None),
            status(404, None),
            status(501, None),
            status(505, None),
            status(302, None),
            transport(Transport::CannotConnect),
            transport(Transport::NotConfigured),
            transport(Transport::NoClient),
            CallEnd::TimedOut { seconds: 1.0 },
            CallEnd::TooLarge {
                status: 200,
                cap: 1,
            },
            CallEnd::NoKey { var: "K".into() },
            CallEnd::Stopped,
        ] {
            assert!(!is_transient(&end), "{end:?}");
        }
    }

    #[test]
    fn the_budget_is_ten_seconds_or_half_the_timeout() {
        assert_eq!(budget(Duration::from_secs(60)), MAX_BUDGET);
        assert_eq!(budget(Duration::from_secs(8)), Duration::from_secs(4));
        assert_eq!(budget(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn without_retry_after_the_waits_double_from_half_a_second() {
        let t = Duration::from_secs(60);
        let end = status(503, None);
        let retry = |made, waited| match next(&end, first(made, waited), t, 0.0) {
            Next::Retry { wait, .. } => Some(wait),
            Next::Stop(_) => None,
        };
        assert_eq!(retry(1, Duration::ZERO), Some(Duration::from_millis(500)));
        assert_eq!(
            retry(2, Duration::from_millis(500)),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            next(&end, first(3, Duration::from_millis(1500)), t, 0.0),
            Next::Stop(GiveUp::NoTriesLeft),
            "three tries at most"
        );
    }

    #[test]
    fn retry_after_is_honoured_within_the_budget_only() {
        let t = Duration::from_secs(60);
        assert_eq!(
            next(&status(429, Some("7")), first(1, Duration::ZERO), t, 0.0),
            Next::Retry {
                wait: 7 * SECOND,
                timeout: 53 * SECOND
            }
        );
        assert_eq!(
            next(&status(429, Some("30")), first(1, Duration::ZERO), t, 0.0),
            Next::Stop(GiveUp::OverBudget { wait: 30 * SECOND }),
            "a wait past the budget is not made"
        );
        // 4 s waited, 7 more would make 11 > 10.
        assert_eq!(
            next(&status(503, Some("7")), first(2, 4 * SECOND), t, 0.0),
            Next::Stop(GiveUp::OverBudget { wait: 7 * SECOND })
        );
        // A short timeout: the budget is half of it.
        assert_eq!(
            next(
                &status(503, Some("3")),
                first(2, 3 * SECOND),
                10 * SECOND,
                0.0
            ),
            Next::Stop(GiveUp::OverBudget { wait: 3 * SECOND })
        );
        assert_eq!(
            next(&status(503, Some("0")), first(1, Duration::ZERO), t, 0.0),
            Next::Retry {
                wait: Duration::ZERO,
                timeout: t
            }
        );
    }

    #[test]
    fn a_retry_gets_what_is_left_of_the_timeout_and_needs_a_quarter_of_it() {
        let t = Duration::from_secs(60);
        let slow = Tries {
            made: 1,
            waited: Duration::ZERO,
            elapsed: Duration::from_millis(20_250),
        };
        assert_eq!(
            next(&status(500, None), slow, t, 0.0),
            Next::Retry {
                wait: Duration::from_millis(500),
                timeout: Duration::from_millis(39_250)
            }
        );
        let slower = Tries {
            elapsed: 45 * SECOND,
            ..slow
        };
        assert_eq!(
            next(&status(500, None), slower, t, 0.0),
            Next::Stop(GiveUp::NoTimeLeft)
        );
    }

    #[test]
    fn other_failures_are_kept_at_once() {
        for end in [status(400, None), status(401, Some("1"))] {
            assert_eq!(
                next(&end, first(1, Duration::ZERO), Duration::from_secs(60), 0.0),
                Next::Stop(GiveUp::NotTransient)
            );
        }
        assert_eq!(GiveUp::NotTransient.describe(), None);
        assert!(GiveUp::NoTriesLeft.describe().is_some());
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        // 1994-11-06 08:49:37 UTC.
        let at = 784_111_777.0;
        assert_eq!(retry_after(" 12 ", at), Some(12 * SECOND));
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:47 GMT", at),
            Some(10 * SECOND)
        );
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", at + 5.0),
            Some(Duration::ZERO),
            "a date past is no wait"
        );
        assert_eq!(
            retry_after("Thu, 01 Jan 1970 00:00:00 GMT", 0.0),
            Some(Duration::ZERO)
        );
        assert_eq!(
            http_date("Sat, 29 Feb 2020 23:59:59 GMT"),
            Some(1_583_020_799)
        );
        for bad in [
            "",
            "-1",
            "1.5",
            "soon",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
        ] {
            assert_eq!(retry_after(bad, at), None, "{bad:?}");
        }
    }
}
