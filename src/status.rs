//! The daemon's status record (`status.json`): what `llm-judge status` shows.
//! Ages are stored as timestamps so a reader computes them at read time.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::verdict::{Attempt, Outcome};

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
    pub queue: QueueStatus,
    pub running: Vec<RunningJob>,
    pub outcomes: OutcomeCounts,
    pub runners: BTreeMap<String, RunnerStats>,
    /// The state folder the daemon resolved (so `doctor` can compare with the hooks').
    #[serde(default)]
    pub state_dir: String,
    /// `CATSTACK_LLM_JUDGE_STATE_DIR` in the daemon's environment (non-empty), if set.
    #[serde(default)]
    pub state_dir_env: Option<String>,
}

/// Jobs waiting.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueueStatus {
    pub waiting: usize,
    /// The oldest waiting job's mtime (Unix seconds).
    pub oldest_mtime: Option<f64>,
}

/// One job being judged.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunningJob {
    pub file: String,
    pub id: String,
    pub hook: serde_json::Value,
    pub runner: Option<String>,
    pub claimed_at: f64,
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

/// A runner's recent record.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
                ms.sort_unstable();
                let stats = RunnerStats {
                    attempts: q.len(),
                    answered,
                    answer_rate: (!q.is_empty()).then(|| answered as f64 / q.len() as f64),
                    median_seconds: ms.get(ms.len() / 2).map(|m| *m as f64 / 1000.0),
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
    fn history_keeps_recent_attempts() {
        let mut h = RunnerHistory::default();
        let a = |ok, ms| Attempt {
            runner: "r".into(),
            ok,
            reason: String::new(),
            elapsed_ms: Some(ms),
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
