//! The daemon's status record (`status.json`): what `llm-judge status` shows.
//! Ages are stored as timestamps so a reader computes them at read time.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::core::verdict::{Attempt, Outcome};

/// Attempts per runner kept for the answer rate and median time.
const RECENT_ATTEMPTS: usize = 100;

/// The record the daemon publishes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StatusRecord {
    pub pid: u32,
    pub version: String,
    /// Unix seconds.
    pub started_at: f64,
    pub updated_at: f64,
    pub workers: usize,
    pub draining: bool,
    pub outcomes: OutcomeCounts,
    pub runners: BTreeMap<String, RunnerStats>,
    /// The state folder the daemon resolved (so `doctor` can compare with the hooks').
    #[serde(default)]
    pub state_dir: String,
    /// `CATSTACK_LLM_JUDGE_STATE_DIR` in the daemon's environment (non-empty), if set.
    #[serde(default)]
    pub state_dir_env: Option<String>,
    /// The model each codex runner with `-m` is started with (docs/reference.md, "Runners",
    /// the codex model).
    #[serde(default)]
    pub codex_models: Vec<crate::core::codex::model::ModelInUse>,
    /// Runners started ahead of their jobs, waiting now (`prestart`).
    #[serde(default)]
    pub prestarted: usize,
}

/// Outcomes since the daemon started.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OutcomeCounts {
    pub hit: u64,
    pub clean: u64,
    pub unchecked: u64,
}

impl OutcomeCounts {
    /// Counts one verdict.
    pub fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Hit => self.hit += 1,
            Outcome::Clean => self.clean += 1,
            Outcome::Unchecked => self.unchecked += 1,
        }
    }
}

/// Where the daemon's [`Tally`] lives.
pub fn tally_path(state: &crate::store::state_dir::StateDir) -> std::path::PathBuf {
    state.status_tally()
}

/// The daemon's outcome counts and recent runner attempts, kept in `status.tally` and
/// rewritten in place (one `pwrite`, no file creation) by the worker just before each
/// verdict is renamed into place, so `status` counts a verdict, and shows the runner
/// that gave it, as soon as anyone can see it; `status.json` is only rewritten once a
/// second. A fixed-width line (pid, hit, clean, unchecked, check), then one line of the
/// runner stats as JSON behind its own check.
pub struct Tally {
    pid: u32,
    inner: std::sync::Mutex<TallyState>,
}

/// What the tally holds and the file it is written to.
struct TallyState {
    counts: OutcomeCounts,
    history: RunnerHistory,
    file: std::fs::File,
    /// Bytes written last time (a shorter write cuts the file to its length).
    written: usize,
    /// The runner stats last written and their line: once a runner has a full window
    /// of recent attempts its stats rarely change, and the line (JSON with floats) is
    /// the largest part of a tally write, made once per verdict.
    runners: Option<(BTreeMap<String, RunnerStats>, String)>,
}

/// What `status` reads from a tally.
#[derive(Debug, Clone)]
pub struct TallyRead {
    pub counts: OutcomeCounts,
    /// `None` from a tally written before runner stats were kept in it.
    pub runners: Option<BTreeMap<String, RunnerStats>>,
}

const TALLY_LEN: usize = 10 + 4 * 21 + 1;

fn tally_check(pid: u32, c: &OutcomeCounts) -> u64 {
    (pid as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(c.hit.wrapping_mul(3))
        .wrapping_add(c.clean.wrapping_mul(5))
        .wrapping_add(c.unchecked.wrapping_mul(7))
}

fn tally_line(pid: u32, c: &OutcomeCounts) -> String {
    let check = tally_check(pid, c);
    format!(
        "{pid:010} {:020} {:020} {:020} {check:020}\n",
        c.hit, c.clean, c.unchecked
    )
}

/// FNV-1a: a torn runners line (a read racing a write) fails it.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The runners line: `<check as 16 hex digits> <stats JSON>\n`.
fn runners_line(stats: &BTreeMap<String, RunnerStats>) -> String {
    let json = serde_json::to_string(stats).unwrap_or_else(|_| "{}".into());
    format!("{:016x} {json}\n", fnv1a(json.as_bytes()))
}

fn parse_runners_line(bytes: &[u8]) -> Option<BTreeMap<String, RunnerStats>> {
    let line = bytes.split(|b| *b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?;
    let (check, json) = text.split_once(' ')?;
    (u64::from_str_radix(check, 16).ok()? == fnv1a(json.as_bytes()))
        .then(|| serde_json::from_str(json).ok())?
}

impl Tally {
    /// Creates (truncates) the tally at `path` with zero counts for this process.
    pub fn create(path: &std::path::Path) -> std::io::Result<Tally> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(crate::store::state_dir::NOFOLLOW)
            .open(path)?;
        let tally = Tally {
            pid: std::process::id(),
            inner: std::sync::Mutex::new(TallyState {
                counts: OutcomeCounts::default(),
                history: RunnerHistory::default(),
                file,
                written: 0,
                runners: None,
            }),
        };
        tally.update(|_| ())?;
        Ok(tally)
    }

    /// Counts one verdict and its attempts (before it is published).
    pub fn add(&self, outcome: Outcome, attempts: &[Attempt]) {
        let counted = self.update(|t| {
            t.counts.add(outcome);
            t.history.add(attempts);
        });
        if let Err(e) = counted {
            tracing::warn!("cannot update the outcome tally: {e}");
        }
    }

    /// Takes back a count whose verdict could not be published (its attempts stay
    /// counted: the runners did run).
    pub fn undo(&self, outcome: Outcome) {
        let _ = self.update(|t| {
            let c = &mut t.counts;
            match outcome {
                Outcome::Hit => c.hit = c.hit.saturating_sub(1),
                Outcome::Clean => c.clean = c.clean.saturating_sub(1),
                Outcome::Unchecked => c.unchecked = c.unchecked.saturating_sub(1),
            }
        });
    }

    /// The counts so far.
    pub fn counts(&self) -> OutcomeCounts {
        self.lock().counts.clone()
    }

    /// Answer rate and median time per runner, as the tally file shows them.
    pub fn runner_stats(&self) -> BTreeMap<String, RunnerStats> {
        self.lock().history.stats()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TallyState> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn update(&self, change: impl FnOnce(&mut TallyState)) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut guard = self.lock();
        change(&mut guard);
        let mut text = tally_line(self.pid, &guard.counts);
        let stats = guard.history.stats();
        match &guard.runners {
            Some((last, line)) if *last == stats => text.push_str(line),
            _ => {
                let line = runners_line(&stats);
                text.push_str(&line);
                guard.runners = Some((stats, line));
            }
        }
        guard.file.write_all_at(text.as_bytes(), 0)?;
        if text.len() < guard.written {
            guard.file.set_len(text.len() as u64)?;
        }
        guard.written = text.len();
        Ok(())
    }
}

/// The tally at `path` if it is whole and belongs to `pid` (a read racing a write
/// can see a torn line: the checks catch it and the read is retried).
pub fn read_tally(path: &std::path::Path, pid: u32) -> Option<TallyRead> {
    for _ in 0..5 {
        let bytes = crate::store::state_dir::read_nofollow(path).ok()?;
        if let Some((p, read)) = parse_tally(&bytes) {
            return (p == pid).then_some(read);
        }
    }
    None
}

fn parse_tally(bytes: &[u8]) -> Option<(u32, TallyRead)> {
    let (pid, counts) = parse_counts(bytes.get(..TALLY_LEN)?)?;
    let rest = &bytes[TALLY_LEN..];
    // An older daemon's tally has the counts line only.
    let runners = if rest.is_empty() {
        None
    } else {
        Some(parse_runners_line(rest)?)
    };
    Some((pid, TallyRead { counts, runners }))
}

fn parse_counts(bytes: &[u8]) -> Option<(u32, OutcomeCounts)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut fields = text.split_ascii_whitespace();
    let pid: u32 = fields.next()?.parse().ok()?;
    let counts = OutcomeCounts {
        hit: fields.next()?.parse().ok()?,
        clean: fields.next()?.parse().ok()?,
        unchecked: fields.next()?.parse().ok()?,
    };
    let check: u64 = fields.next()?.parse().ok()?;
    (check == tally_check(pid, &counts)).then_some((pid, counts))
}

/// A runner's recent record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunnerStats {
    pub attempts: usize,
    pub answered: usize,
    pub answer_rate: Option<f64>,
    pub median_seconds: Option<f64>,
}

/// Recent attempts per runner.
#[derive(Debug, Default)]
pub struct RunnerHistory {
    recent: BTreeMap<String, VecDeque<(bool, u64)>>,
}

impl RunnerHistory {
    /// Records the attempts of one job.
    pub fn add(&mut self, attempts: &[Attempt]) {
        for a in attempts {
            let q = self.recent.entry(a.runner.clone()).or_default();
            if q.len() == RECENT_ATTEMPTS {
                q.pop_front();
            }
            q.push_back((a.ok, a.elapsed_ms.unwrap_or(0)));
        }
    }

    /// Answer rate and median time per runner.
    pub fn stats(&self) -> BTreeMap<String, RunnerStats> {
        self.recent
            .iter()
            .map(|(name, q)| {
                let answered = q.iter().filter(|(ok, _)| *ok).count();
                let mut ms: Vec<u64> = q.iter().map(|(_, ms)| *ms).collect();
                // The middle value without sorting them all: this runs per verdict.
                let mid = ms.len() / 2;
                let median = (!ms.is_empty()).then(|| *ms.select_nth_unstable(mid).1);
                let stats = RunnerStats {
                    attempts: q.len(),
                    answered,
                    answer_rate: (!q.is_empty()).then(|| answered as f64 / q.len() as f64),
                    median_seconds: median.map(|m| m as f64 / 1000.0),
                };
                (name.clone(), stats)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_round_trips_and_refuses_torn_or_foreign_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status.tally");
        let tally = Tally::create(&path).unwrap();
        let attempt = |runner: &str, ok| Attempt {
            runner: runner.into(),
            ok,
            reason: String::new(),
            elapsed_ms: Some(1500),
            usage: None,
            cwd_refused: None,
        };
        tally.add(
            Outcome::Hit,
            &[attempt("a-long-runner-name", false), attempt("b", true)],
        );
        tally.add(Outcome::Clean, &[attempt("b", true)]);
        tally.add(Outcome::Hit, &[attempt("b", true)]);
        tally.undo(Outcome::Clean);
        let me = std::process::id();
        let read = read_tally(&path, me).unwrap();
        let c = &read.counts;
        assert_eq!((c.hit, c.clean, c.unchecked), (2, 0, 0));
        let runners = read.runners.unwrap();
        assert_eq!((runners["b"].attempts, runners["b"].answered), (3, 3));
        assert_eq!(runners["a-long-runner-name"].answer_rate, Some(0.0));
        assert!(read_tally(&path, me.wrapping_add(1)).is_none());
        let mut bytes = std::fs::read(&path).unwrap();
        let whole = bytes.clone();
        bytes[30] = if bytes[30] == b'9' { b'8' } else { b'9' };
        assert!(parse_tally(&bytes).is_none(), "a torn counts line");
        let mut torn = whole.clone();
        let last = torn.len() - 3;
        torn[last] ^= 1;
        assert!(parse_tally(&torn).is_none(), "a torn runners line");
        assert!(
            parse_tally(&whole[..TALLY_LEN])
                .unwrap()
                .1
                .runners
                .is_none()
        );
    }

    #[test]
    fn history_keeps_recent_attempts() {
        let mut h = RunnerHistory::default();
        let a = |ok, ms| Attempt {
            runner: "r".into(),
            ok,
            reason: String::new(),
            elapsed_ms: Some(ms),
            usage: None,
            cwd_refused: None,
        };
        h.add(&[a(false, 10), a(true, 30), a(true, 20)]);
        let s = &h.stats()["r"];
        assert_eq!((s.attempts, s.answered), (3, 2));
        assert_eq!(s.median_seconds, Some(0.02));
        for _ in 0..200 {
            h.add(&[a(true, 1)]);
        }
        assert_eq!(h.stats()["r"].attempts, RECENT_ATTEMPTS);
        assert_eq!(h.stats()["r"].answer_rate, Some(1.0));
    }
}
