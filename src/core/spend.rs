//! What the runners spent: one entry per runner run, totals per runner over a window,
//! and the spend cap (`max_cost_usd_per_day`, `max_runs_per_hour`). Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::core::verdict::usage::Usage;

/// Seconds in the cap's hour.
pub const HOUR: f64 = 3600.0;
/// Seconds in the cap's day (a rolling 24 hours, not a calendar day).
pub const DAY: f64 = 24.0 * HOUR;

/// One runner run: a process was started for a job (a cache hit or a runner that is
/// not installed starts none and costs nothing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpendEntry {
    /// When the run ended, Unix seconds.
    pub at: f64,
    /// The runner's name.
    pub runner: String,
    /// True when this run gave the verdict's answer.
    pub answered: bool,
    /// Tokens and cost, when the runner's CLI reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One runner's spend over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Runs started.
    pub runs: u64,
    /// Runs that gave the verdict's answer.
    pub verdicts: u64,
    /// Tokens, and the cost where any run of the window reported one.
    #[serde(flatten)]
    pub usage: Usage,
}

impl SpendEntry {
    /// The usage this run counts for: none when the line's figures are out of the
    /// per-run bounds (`Usage::out_of_bounds`), as a line written before those bounds
    /// existed may be. So a forged line cannot lock judging out for a day.
    pub fn counted_usage(&self) -> Option<&Usage> {
        self.usage.as_ref().filter(|u| u.out_of_bounds().is_none())
    }
}

impl Totals {
    fn add(&mut self, entry: &SpendEntry) {
        self.runs += 1;
        self.verdicts += u64::from(entry.answered);
        if let Some(u) = entry.counted_usage() {
            self.usage.add(u);
        }
    }
}

/// Totals per runner of the entries at or after `since`.
pub fn totals_since<'a>(
    entries: impl IntoIterator<Item = &'a SpendEntry>,
    since: f64,
) -> BTreeMap<String, Totals> {
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    for e in entries.into_iter().filter(|e| e.at >= since) {
        out.entry(e.runner.clone()).or_default().add(e);
    }
    out
}

/// The spend cap; both keys optional (docs/reference.md, "Configuration").
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    /// Reported cost allowed in any 24 hours.
    pub max_cost_usd_per_day: Option<f64>,
    /// Runner runs allowed in any hour.
    pub max_runs_per_hour: Option<u64>,
}

impl Budget {
    /// True when neither key is set.
    pub fn is_unlimited(&self) -> bool {
        self.max_cost_usd_per_day.is_none() && self.max_runs_per_hour.is_none()
    }
}

/// Why the spend cap lets no runner start now; shown as the reason of the jobs it
/// ends (`budget: ...`), in `status` and by `doctor`.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum CapReached {
    /// `max_runs_per_hour`: `runs` in the last hour, those in flight included.
    #[error(
        "budget: {runs} runner runs in the last hour reached max_runs_per_hour = {max}; \
         raise it in the config or wait"
    )]
    Runs { runs: u64, max: u64 },
    /// `max_cost_usd_per_day`: the cost reported in the last 24 hours.
    #[error(
        "budget: {} USD reported in the last 24 hours reached max_cost_usd_per_day = {}; \
         raise it in the config or wait",
        dollars(*cost),
        crate::core::verdict::human_number(*max)
    )]
    Cost { cost: f64, max: f64 },
}

/// Why no runner may start now, or `None` under budget. `in_flight` runs were started
/// and are not in `entries` yet: they count toward `max_runs_per_hour` already (their
/// cost is not known until they end).
pub fn over_budget<'a>(
    entries: impl IntoIterator<Item = &'a SpendEntry> + Clone,
    budget: &Budget,
    now: f64,
    in_flight: u64,
) -> Option<CapReached> {
    if let Some(max) = budget.max_runs_per_hour {
        let ended = entries
            .clone()
            .into_iter()
            .filter(|e| e.at >= now - HOUR)
            .count() as u64;
        let runs = ended.saturating_add(in_flight);
        if runs >= max {
            return Some(CapReached::Runs { runs, max });
        }
    }
    if let Some(max) = budget.max_cost_usd_per_day {
        let cost: f64 = entries
            .into_iter()
            .filter(|e| e.at >= now - DAY)
            .filter_map(|e| e.counted_usage().and_then(|u| u.cost_usd))
            .sum();
        if cost >= max {
            return Some(CapReached::Cost { cost, max });
        }
    }
    None
}

/// Dollars with four decimals (`0.0135`), the precision a per-day total needs.
pub fn dollars(cost: f64) -> String {
    format!("{cost:.4}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(at: f64, runner: &str, answered: bool, cost: Option<f64>) -> SpendEntry {
        SpendEntry {
            at,
            runner: runner.into(),
            answered,
            usage: Some(Usage {
                input_tokens: 10,
                cached_input_tokens: 2,
                output_tokens: 5,
                cost_usd: cost,
            }),
        }
    }

    #[test]
    fn totals_count_runs_verdicts_tokens_and_cost_per_runner_in_the_window() {
        let entries = [
            run(100.0, "claude", true, Some(0.5)),
            run(5000.0, "claude", false, Some(0.25)),
            run(5000.0, "codex", true, None),
            SpendEntry {
                at: 5001.0,
                runner: "cursor".into(),
                answered: true,
                usage: None,
            },
        ];
        let all = totals_since(&entries, 0.0);
        assert_eq!(
            all["claude"],
            Totals {
                runs: 2,
                verdicts: 1,
                usage: Usage {
                    input_tokens: 20,
                    cached_input_tokens: 4,
                    output_tokens: 10,
                    cost_usd: Some(0.75)
                }
            }
        );
        assert_eq!(all["codex"].usage.cost_usd, None, "codex reports no cost");
        assert_eq!(all["cursor"].runs, 1);
        assert_eq!(all["cursor"].usage.input_tokens, 0);
        let recent = totals_since(&entries, 1000.0);
        assert_eq!(recent["claude"].runs, 1);
        assert_eq!(recent["claude"].usage.cost_usd, Some(0.25));
    }

    #[test]
    fn no_budget_is_never_over() {
        let entries: Vec<_> = (0..1000)
            .map(|i| run(f64::from(i), "c", true, Some(9.0)))
            .collect();
        assert!(Budget::default().is_unlimited());
        assert_eq!(over_budget(&entries, &Budget::default(), 1000.0, 0), None);
    }

    #[test]
    fn runs_per_hour_counts_the_last_hour_only() {
        let now = 10_000.0;
        let budget = Budget {
            max_runs_per_hour: Some(2),
            ..Budget::default()
        };
        let old = run(now - HOUR - 1.0, "c", true, None);
        let one = run(now - 10.0, "c", true, None);
        assert_eq!(
            over_budget(&[old.clone(), old.clone(), one.clone()], &budget, now, 0),
            None
        );
        let reason =
            over_budget(&[one.clone(), one.clone()], &budget, now, 0).map(|r| r.to_string());
        assert_eq!(
            reason.as_deref(),
            Some(
                "budget: 2 runner runs in the last hour reached max_runs_per_hour = 2; raise it in the config or wait"
            )
        );
        let zero = Budget {
            max_runs_per_hour: Some(0),
            ..Budget::default()
        };
        assert!(over_budget(&[], &zero, now, 0).is_some(), "0 runs nothing");
        assert_eq!(
            over_budget(&[one], &budget, now, 1),
            Some(CapReached::Runs { runs: 2, max: 2 }),
            "a run in flight counts before it ends"
        );
    }

    #[test]
    fn cost_per_day_sums_reported_cost_of_the_last_24_hours() {
        let now = 200_000.0;
        let budget = Budget {
            max_cost_usd_per_day: Some(1.0),
            ..Budget::default()
        };
        let stale = run(now - DAY - 1.0, "claude", true, Some(5.0));
        let half = run(now - 60.0, "claude", true, Some(0.5));
        let unknown = run(now - 60.0, "codex", true, None);
        assert_eq!(
            over_budget(&[stale, half.clone(), unknown], &budget, now, 5),
            None,
            "runs in flight have no cost yet"
        );
        let reason = over_budget(&[half.clone(), half], &budget, now, 0).map(|r| r.to_string());
        assert_eq!(
            reason.as_deref(),
            Some(
                "budget: 1.0000 USD reported in the last 24 hours reached max_cost_usd_per_day = 1; raise it in the config or wait"
            )
        );
    }

    /// Issue 39, item 4: a ledger line with a forged cost of 1.7e308 and token counts
    /// of 2^64-1 ended every job `unchecked` for a day, its 300-digit figure in `status`.
    #[test]
    fn a_forged_line_counts_as_a_run_but_not_its_usage() {
        let now = 10_000.0;
        let mut forged = run(now - 5.0, "cursor", true, Some(1.7e308));
        if let Some(u) = forged.usage.as_mut() {
            u.input_tokens = u64::MAX;
            u.output_tokens = u64::MAX;
        }
        let fair = run(now - 5.0, "cursor", true, Some(0.25));
        let budget = Budget {
            max_cost_usd_per_day: Some(1.0),
            ..Budget::default()
        };
        assert_eq!(
            over_budget(&[forged.clone(), fair.clone()], &budget, now, 0),
            None
        );
        let totals = totals_since(&[forged, fair], 0.0);
        assert_eq!(totals["cursor"].runs, 2);
        assert_eq!(totals["cursor"].usage.input_tokens, 10);
        assert_eq!(totals["cursor"].usage.cost_usd, Some(0.25));
    }

    #[test]
    fn an_entry_reads_and_writes_one_line() {
        let e = run(1.5, "claude", true, Some(0.001));
        let line = serde_json::to_string(&e).unwrap_or_default();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<SpendEntry>(&line).ok(), Some(e));
        let bare = r#"{"at":2,"runner":"x","answered":false}"#;
        let parsed: SpendEntry =
            serde_json::from_str(bare).unwrap_or_else(|_| run(0.0, "", false, None));
        assert_eq!(parsed.usage, None);
        assert_eq!(parsed.runner, "x");
    }
}
