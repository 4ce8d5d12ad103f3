//! Runner health (docs/reference.md, "Beyond catstack"): a runner that is not installed,
//! exits non-zero, or times out on 2 jobs in a row, is benched (moved to the end of its
//! table) for a backoff that doubles up to a cap; an answer clears it. A runner benched
//! because it was not installed is looked up again for every job and is back in its place
//! as soon as it is found. The rules, pure; `store::health_store` keeps them in
//! `<state>/health.json` under a lock, shared by the daemon, `run` and `ask`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::core::config::HealthConfig;
use crate::core::digest::sha1_hex;
use crate::core::runner::table::{Runner, RunnerKind};
use crate::core::verdict::RunEnd;

/// Timeouts in a row that bench a runner.
pub const TIMEOUTS_TO_BENCH: u32 = 2;

/// One runner's health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerHealth {
    pub name: String,
    /// The backoff of the last bench (0 when never benched since the last answer).
    pub backoff_seconds: f64,
    /// Unix seconds; benched while in the future.
    pub benched_until: f64,
    pub timeouts_in_a_row: u32,
    pub last_reason: String,
    /// Benched because its program was not found: found again, it is back in its place.
    #[serde(default)]
    pub not_installed: bool,
}

/// Every runner's health, keyed by name and argv.
pub type HealthFile = BTreeMap<String, RunnerHealth>;

/// What an attempt says about a runner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sign {
    Answered,
    Failed,
    TimedOut,
    /// The program was not found: benched until it is found again.
    NotInstalled,
    /// Spawn errors, prose without JSON: no health change.
    Neutral,
}

/// Classifies an attempt.
pub fn sign_of(end: &RunEnd, answered: bool) -> Sign {
    match end {
        _ if answered => Sign::Answered,
        RunEnd::Exited { code } if *code != 0 => Sign::Failed,
        RunEnd::RequestFailed => Sign::Failed,
        RunEnd::TimedOut { .. } => Sign::TimedOut,
        RunEnd::NotInstalled | RunEnd::NotConfigured { .. } | RunEnd::NotLoggedIn { .. } => {
            Sign::NotInstalled
        }
        _ => Sign::Neutral,
    }
}

/// The key of a runner: its name and a hash of its argv and its own environment (a
/// changed argv or env starts fresh; a runner without env keeps its earlier key), or
/// of an API runner's request identity (protocol, model, base URL, ...).
pub fn key(runner: &Runner) -> String {
    let mut text = match runner.kind() {
        RunnerKind::Cli { argv, .. } => argv.join("\0"),
        RunnerKind::Api(api) => api.identity().join("\0"),
    };
    if !runner.env.is_empty() {
        text.push_str("\0\0env");
        for item in crate::core::runner::env::identity(&runner.env) {
            text.push('\0');
            text.push_str(&item);
        }
    }
    let hex = sha1_hex(text.as_bytes(), 6);
    format!("{}@{hex}", runner.name)
}

/// What one attempt says of its runner's health.
#[derive(Debug, Clone, Copy)]
pub struct Sighting<'a> {
    pub runner: &'a str,
    pub sign: Sign,
    /// Why the attempt ended as it did.
    pub reason: &'a str,
    /// When (Unix seconds).
    pub at: f64,
}

/// The next health of a runner after an attempt (`None`: healthy, forget it).
pub fn update(
    prev: Option<&RunnerHealth>,
    seen: Sighting<'_>,
    cfg: &HealthConfig,
) -> Option<RunnerHealth> {
    let Sighting {
        runner,
        sign,
        reason,
        at: now,
    } = seen;
    let mut next = prev.cloned().unwrap_or(RunnerHealth {
        name: runner.to_string(),
        backoff_seconds: 0.0,
        benched_until: 0.0,
        timeouts_in_a_row: 0,
        last_reason: String::new(),
        not_installed: false,
    });
    match sign {
        Sign::Answered => return None,
        Sign::Neutral => return prev.cloned(),
        Sign::TimedOut => {
            next.timeouts_in_a_row += 1;
            if next.timeouts_in_a_row < TIMEOUTS_TO_BENCH {
                next.last_reason = reason.to_string();
                return Some(next);
            }
        }
        Sign::Failed | Sign::NotInstalled => {}
    }
    next.not_installed = sign == Sign::NotInstalled;
    next.backoff_seconds = if next.backoff_seconds > 0.0 {
        (next.backoff_seconds * 2.0).min(cfg.backoff_max_seconds)
    } else {
        cfg.backoff_start_seconds
    };
    next.benched_until = now + next.backoff_seconds;
    next.last_reason = reason.to_string();
    Some(next)
}

/// The table in trying order: healthy runners in table order, then benched ones (all
/// benched: the whole table in its order). `installed` looks a runner's program up
/// again; it is asked only of runners benched as not installed.
pub fn order<'a>(
    table: &'a [Runner],
    health: &HealthFile,
    now: f64,
    installed: impl Fn(&Runner) -> bool,
) -> Vec<&'a Runner> {
    standing(table, health, now, installed)
        .into_iter()
        .map(|(runner, _)| runner)
        .collect()
}

/// The table in trying order (`order`), each runner with whether it is benched.
pub fn standing<'a>(
    table: &'a [Runner],
    health: &HealthFile,
    now: f64,
    installed: impl Fn(&Runner) -> bool,
) -> Vec<(&'a Runner, bool)> {
    let benched = |r: &Runner| {
        health
            .get(&key(r))
            .is_some_and(|h| h.benched_until > now && !(h.not_installed && installed(r)))
    };
    let (late, early): (Vec<_>, Vec<_>) =
        table.iter().map(|r| (r, benched(r))).partition(|(_, b)| *b);
    early.into_iter().chain(late).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: HealthConfig = HealthConfig {
        enabled: true,
        backoff_start_seconds: 60.0,
        backoff_max_seconds: 300.0,
    };

    fn step(prev: Option<RunnerHealth>, sign: Sign, now: f64) -> Option<RunnerHealth> {
        let seen = Sighting {
            runner: "r",
            sign,
            reason: "why",
            at: now,
        };
        update(prev.as_ref(), seen, &CFG)
    }

    #[test]
    fn failures_bench_with_a_doubling_capped_backoff() {
        let h = step(None, Sign::Failed, 1000.0).unwrap();
        assert_eq!((h.backoff_seconds, h.benched_until), (60.0, 1060.0));
        let h = step(Some(h), Sign::Failed, 2000.0).unwrap();
        assert_eq!((h.backoff_seconds, h.benched_until), (120.0, 2120.0));
        let h = step(Some(h), Sign::Failed, 3000.0).unwrap();
        assert_eq!(h.backoff_seconds, 240.0);
        let h = step(Some(h), Sign::Failed, 4000.0).unwrap();
        assert_eq!(h.backoff_seconds, 300.0, "capped");
        assert_eq!(
            step(Some(h), Sign::Answered, 5000.0),
            None,
            "an answer clears it"
        );
    }

    #[test]
    fn two_timeouts_in_a_row_bench() {
        let h = step(None, Sign::TimedOut, 10.0).unwrap();
        assert_eq!((h.timeouts_in_a_row, h.benched_until), (1, 0.0));
        let h = step(Some(h), Sign::TimedOut, 20.0).unwrap();
        assert_eq!((h.timeouts_in_a_row, h.benched_until), (2, 80.0));
    }

    #[test]
    fn neutral_attempts_change_nothing() {
        assert_eq!(step(None, Sign::Neutral, 1.0), None);
        let h = step(None, Sign::Failed, 1.0);
        assert_eq!(step(h.clone(), Sign::Neutral, 2.0), h);
    }

    #[test]
    fn signs() {
        assert_eq!(sign_of(&RunEnd::Exited { code: 0 }, true), Sign::Answered);
        assert_eq!(sign_of(&RunEnd::Exited { code: 1 }, false), Sign::Failed);
        assert_eq!(sign_of(&RunEnd::Exited { code: -9 }, false), Sign::Failed);
        assert_eq!(
            sign_of(&RunEnd::TimedOut { seconds: 1.0 }, false),
            Sign::TimedOut
        );
        assert_eq!(sign_of(&RunEnd::Exited { code: 0 }, false), Sign::Neutral);
        assert_eq!(sign_of(&RunEnd::NotInstalled, false), Sign::NotInstalled);
        let no_key = RunEnd::NotConfigured { var: "K".into() };
        assert_eq!(
            sign_of(&no_key, false),
            Sign::NotInstalled,
            "like not installed"
        );
        assert_eq!(
            sign_of(&RunEnd::RequestFailed, false),
            Sign::Failed,
            "like exit 1"
        );
        assert_eq!(
            sign_of(&RunEnd::Replied, false),
            Sign::Neutral,
            "like exit 0"
        );
        assert_eq!(sign_of(&RunEnd::Replied, true), Sign::Answered);
    }

    #[test]
    fn benched_runners_go_last_and_all_benched_keep_table_order() {
        let r = |n: &str| Runner::for_tests(n, &[n]);
        let table = [r("a"), r("b"), r("c")];
        let mut health = HealthFile::new();
        let benched = |until| RunnerHealth {
            name: String::new(),
            backoff_seconds: 60.0,
            benched_until: until,
            timeouts_in_a_row: 0,
            last_reason: String::new(),
            not_installed: false,
        };
        health.insert(key(&table[0]), benched(100.0));
        let names = |v: Vec<&Runner>| v.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(order(&table, &health, 50.0, |_| false)),
            ["b", "c", "a"]
        );
        assert_eq!(
            names(order(&table, &health, 150.0, |_| false)),
            ["a", "b", "c"],
            "backoff over"
        );
        health.insert(key(&table[1]), benched(100.0));
        health.insert(key(&table[2]), benched(100.0));
        assert_eq!(
            names(order(&table, &health, 50.0, |_| false)),
            ["a", "b", "c"]
        );
    }

    /// Not installed benches like a failure, but the program is looked up again for
    /// every job: found, the runner is back in its place before its backoff ends.
    #[test]
    fn not_installed_benches_until_the_program_is_found() {
        let h = step(None, Sign::NotInstalled, 1000.0).unwrap();
        assert_eq!((h.benched_until, h.not_installed), (1060.0, true));
        let r = |n: &str| Runner::for_tests(n, &[n]);
        let table = [r("a"), r("b")];
        let health = HealthFile::from([(key(&table[0]), h.clone())]);
        let names = |v: Vec<&Runner>| v.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(order(&table, &health, 1001.0, |_| false)), ["b", "a"]);
        assert_eq!(
            names(order(&table, &health, 1001.0, |_| true)),
            ["a", "b"],
            "found again: back in its place"
        );
        let failed = step(Some(h), Sign::Failed, 1002.0).unwrap();
        assert!(!failed.not_installed, "a failure is not a missing program");
        let health = HealthFile::from([(key(&table[0]), failed)]);
        assert_eq!(names(order(&table, &health, 1003.0, |_| true)), ["b", "a"]);
    }

    #[test]
    fn a_changed_argv_or_env_is_another_runner() {
        let a = Runner::for_tests("x", &["x"]);
        let b = Runner {
            argv: vec!["x".into(), "-v".into()],
            ..a.clone()
        };
        assert_ne!(key(&a), key(&b));
        // A runner with no env keeps the key it had before runners had one.
        assert_eq!(key(&a), format!("x@{}", sha1_hex(b"x", 6)));
        let with_env = |value: &str| Runner {
            env: [(
                "CLAUDE_CODE_MAX_OUTPUT_TOKENS".to_string(),
                value.to_string(),
            )]
            .into(),
            ..a.clone()
        };
        assert_ne!(key(&a), key(&with_env("1024")));
        assert_ne!(key(&with_env("512")), key(&with_env("1024")));
        assert_eq!(key(&with_env("512")), key(&with_env("512")));
    }
}
