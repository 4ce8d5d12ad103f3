//! `llm-judge eval`'s report: each runner's row against the cases' `expect`
//! (confusion, accuracy over the cases it answered, latency percentiles, tokens, cost,
//! the cases it got wrong and those it left unchecked with why), the `--min-accuracy`
//! result, and the aligned text table. Pure.

use serde::Serialize;

use crate::core::eval::cases::Expect;
use crate::core::verdict::usage::Usage;
use crate::core::verdict::{Attempt, Outcome};

/// One case as one runner judged it.
#[derive(Debug, Clone, Copy)]
pub struct Judged<'a> {
    /// The case's id.
    pub id: &'a str,
    /// Its cases file, when eval was given several (then an id names a case only with
    /// its file); `None` with one.
    pub file: Option<&'a str>,
    /// What it should have been.
    pub expect: Expect,
    /// What it was.
    pub outcome: Outcome,
    /// Why, as the verdict says (for an unchecked case: why no runner answered).
    pub reason: &'a str,
    /// The attempts of the run (one, or the cache's).
    pub attempts: &'a [Attempt],
}

impl Judged<'_> {
    /// The case as the report names it: its id, after its file when there are several.
    fn label(&self) -> String {
        match self.file {
            Some(file) => format!("{file}:{}", self.id),
            None => self.id.to_string(),
        }
    }
}

/// Outcomes of the cases that expected one thing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Counts {
    pub hit: usize,
    pub clean: usize,
    pub unchecked: usize,
}

impl Counts {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Hit => self.hit += 1,
            Outcome::Clean => self.clean += 1,
            Outcome::Unchecked => self.unchecked += 1,
        }
    }
}

/// Outcomes by what was expected: `hit` holds the cases that expected a hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Confusion {
    pub hit: Counts,
    pub clean: Counts,
}

/// Nearest-rank percentiles of the attempts' wall times; `None` with no timed attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    pub p50: Option<u64>,
    pub p95: Option<u64>,
}

/// Tokens summed over the attempts that reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Tokens {
    pub input: u64,
    pub cached_input: u64,
    pub output: u64,
}

/// A case the runner did not answer, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unchecked {
    pub id: String,
    /// Its cases file, when eval was given several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The verdict's reason (`no runner answered: <runner>: <reason>`, ...).
    pub reason: String,
}

/// One runner's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunnerReport {
    pub runner: String,
    pub cases: usize,
    /// The cases it answered (`cases - unchecked`).
    pub answered: usize,
    pub correct: usize,
    /// `correct / answered`; `None` when it answered none (a runner that cannot run
    /// has no accuracy, not 0).
    pub accuracy: Option<f64>,
    pub confusion: Confusion,
    pub unchecked: usize,
    pub latency_ms: Latency,
    pub tokens: Tokens,
    /// Summed over the attempts that reported a cost; `None` when none did.
    pub cost_usd: Option<f64>,
    /// The answered cases judged otherwise than expected, in file order: ids, each
    /// after its file (`file:id`) when eval was given several files.
    pub wrong: Vec<String>,
    /// The cases it did not answer, in file order, each with its reason.
    pub unchecked_cases: Vec<Unchecked>,
}

impl RunnerReport {
    /// The row of `runner` from its judged cases.
    pub fn of<'a>(runner: &str, judged: impl IntoIterator<Item = Judged<'a>>) -> Self {
        let mut report = RunnerReport {
            runner: runner.to_string(),
            cases: 0,
            answered: 0,
            correct: 0,
            accuracy: None,
            confusion: Confusion::default(),
            unchecked: 0,
            latency_ms: Latency::default(),
            tokens: Tokens::default(),
            cost_usd: None,
            wrong: Vec::new(),
            unchecked_cases: Vec::new(),
        };
        let mut times = Vec::new();
        let mut spent = Usage::default();
        for case in judged {
            report.cases += 1;
            if case.outcome == Outcome::Unchecked {
                report.unchecked += 1;
                report.unchecked_cases.push(Unchecked {
                    id: case.id.to_string(),
                    file: case.file.map(str::to_string),
                    reason: case.reason.to_string(),
                });
            } else if case.expect.met_by(case.outcome) {
                report.correct += 1;
            } else {
                report.wrong.push(case.label());
            }
            match case.expect {
                Expect::Hit => report.confusion.hit.add(case.outcome),
                Expect::Clean => report.confusion.clean.add(case.outcome),
            }
            for attempt in case.attempts {
                times.extend(attempt.elapsed_ms);
                if let Some(usage) = &attempt.usage {
                    spent.add(usage);
                }
            }
        }
        report.tokens = Tokens {
            input: spent.input_tokens,
            cached_input: spent.cached_input_tokens,
            output: spent.output_tokens,
        };
        // Sums of a few decimal costs show float noise (0.0030000000000000005).
        report.cost_usd = spent.cost_usd.map(|c| (c * 1e9).round() / 1e9);
        report.answered = report.cases - report.unchecked;
        if report.answered > 0 {
            report.accuracy = Some(report.correct as f64 / report.answered as f64);
        }
        times.sort_unstable();
        report.latency_ms = Latency {
            p50: percentile(&times, 50),
            p95: percentile(&times, 95),
        };
        report
    }

    /// Its accuracy as the text shows it: `80.0%`, or `-` when it answered none.
    fn accuracy_text(&self) -> String {
        self.accuracy.map_or_else(|| "-".to_string(), percent)
    }

    /// True when it meets `min`: it answered some case, and enough of them right.
    fn meets(&self, min: f64) -> bool {
        self.accuracy.is_some_and(|a| a >= min)
    }
}

/// The nearest-rank percentile `p` (1..=100) of sorted values: the smallest value at
/// least `p` % of them are at or below. Integer ranks: no float rounding moves it.
pub fn percentile(sorted: &[u64], p: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p.saturating_mul(sorted.len())).div_ceil(100);
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// The whole report: `--json` prints it as it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub runners: Vec<RunnerReport>,
    pub min_accuracy: Option<f64>,
    /// False when a runner's accuracy is under `min_accuracy`.
    pub passed: bool,
}

impl Report {
    /// The report of these rows against `min_accuracy` (a runner that answered no
    /// case does not meet it).
    pub fn new(runners: Vec<RunnerReport>, min_accuracy: Option<f64>) -> Self {
        let passed = min_accuracy.is_none_or(|min| runners.iter().all(|r| r.meets(min)));
        Report {
            runners,
            min_accuracy,
            passed,
        }
    }
}

/// Wrongly judged (or unchecked) cases shown per runner (or reason) in the text form;
/// `--json` has them all.
const WRONG_SHOWN: usize = 10;
/// Distinct reasons shown per runner for its unchecked cases.
const REASONS_SHOWN: usize = 3;

/// The text form: one aligned table, a row per runner, then the cases each runner got
/// wrong, those it left unchecked (by reason), and the `--min-accuracy` result.
pub fn render(report: &Report) -> String {
    let header = [
        "runner",
        "cases",
        "correct",
        "accuracy",
        "hit→h/c/u",
        "clean→h/c/u",
        "unchecked",
        "p50 ms",
        "p95 ms",
        "tokens in",
        "cached",
        "out",
        "cost $",
    ];
    let mut rows = vec![header.map(str::to_string).to_vec()];
    for r in &report.runners {
        let counts = |c: &Counts| format!("{}/{}/{}", c.hit, c.clean, c.unchecked);
        let ms = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        rows.push(vec![
            r.runner.clone(),
            r.cases.to_string(),
            r.correct.to_string(),
            r.accuracy_text(),
            counts(&r.confusion.hit),
            counts(&r.confusion.clean),
            r.unchecked.to_string(),
            ms(r.latency_ms.p50),
            ms(r.latency_ms.p95),
            r.tokens.input.to_string(),
            r.tokens.cached_input.to_string(),
            r.tokens.output.to_string(),
            r.cost_usd.map_or("-".to_string(), |c| format!("{c:.6}")),
        ]);
    }
    let mut out = align(&rows);
    out.push_str(
        "(hit→h/c/u: the cases expected hit judged hit / clean / unchecked; clean→ likewise)\n",
    );
    for r in report.runners.iter().filter(|r| !r.wrong.is_empty()) {
        out.push_str(&format!("wrong, {}: {}\n", r.runner, listed(&r.wrong)));
    }
    for r in report.runners.iter().filter(|r| r.unchecked > 0) {
        if r.answered == 0 {
            out.push_str(&format!(
                "{} answered none of its {} cases, so it has no accuracy\n",
                r.runner, r.cases
            ));
        }
        out.push_str(&unchecked_lines(r));
    }
    if let Some(min) = report.min_accuracy {
        let under: Vec<String> = report
            .runners
            .iter()
            .filter(|r| !r.meets(min))
            .map(|r| match r.accuracy {
                Some(a) => format!("{} {}", r.runner, percent(a)),
                None => format!("{} answered none", r.runner),
            })
            .collect();
        if under.is_empty() {
            out.push_str(&format!("min accuracy {}: passed\n", percent(min)));
        } else {
            out.push_str(&format!(
                "min accuracy {}: failed ({})\n",
                percent(min),
                under.join(", ")
            ));
        }
    }
    out
}

/// Up to `WRONG_SHOWN` names, and how many more.
fn listed(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(WRONG_SHOWN).map(String::as_str).collect();
    let more = names.len().saturating_sub(WRONG_SHOWN);
    let tail = if more > 0 {
        format!(" and {more} more (--json lists all)")
    } else {
        String::new()
    };
    format!("{}{tail}", shown.join(", "))
}

/// A runner's unchecked cases, a line per reason (the first `REASONS_SHOWN`), first
/// seen first: `unchecked, r: c1, c2: no runner answered: r: exit 3`.
fn unchecked_lines(r: &RunnerReport) -> String {
    let mut reasons: Vec<(&str, Vec<String>)> = Vec::new();
    for case in &r.unchecked_cases {
        let label = match &case.file {
            Some(file) => format!("{file}:{}", case.id),
            None => case.id.clone(),
        };
        match reasons
            .iter_mut()
            .find(|(reason, _)| *reason == case.reason)
        {
            Some((_, labels)) => labels.push(label),
            None => reasons.push((&case.reason, vec![label])),
        }
    }
    let mut out = String::new();
    for (reason, labels) in reasons.iter().take(REASONS_SHOWN) {
        out.push_str(&format!(
            "unchecked, {}: {}: {reason}\n",
            r.runner,
            listed(labels)
        ));
    }
    let more = reasons.len().saturating_sub(REASONS_SHOWN);
    if more > 0 {
        out.push_str(&format!(
            "unchecked, {}: and {more} more reasons (--json lists all)\n",
            r.runner
        ));
    }
    out
}

/// `0.5` as `50.0%`.
pub fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// Columns padded to their widest cell: the first left-aligned, the rest right.
fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &width))| {
                let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
                if c == 0 {
                    format!("{cell}{pad}")
                } else {
                    format!("{pad}{cell}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::verdict::usage::Usage;

    #[test]
    fn percentiles_are_nearest_rank() {
        assert_eq!(percentile(&[], 50), None);
        assert_eq!(percentile(&[7], 50), Some(7));
        assert_eq!(percentile(&[7], 95), Some(7));
        let v: Vec<u64> = (1..=20).collect();
        assert_eq!(percentile(&v, 50), Some(10));
        assert_eq!(percentile(&v, 95), Some(19));
        assert_eq!(percentile(&[1, 2, 3, 4], 50), Some(2));
        assert_eq!(percentile(&[1, 2, 3, 4], 95), Some(4));
        assert_eq!(percentile(&[1, 2, 3], 50), Some(2));
    }

    fn attempt(ms: Option<u64>, usage: Option<Usage>) -> Attempt {
        Attempt {
            runner: "r".into(),
            ok: true,
            reason: "answered".into(),
            elapsed_ms: ms,
            usage,
            cwd_refused: None,
        }
    }

    fn usage(input: u64, cached: u64, output: u64, cost: Option<f64>) -> Option<Usage> {
        Some(Usage {
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            cost_usd: cost,
        })
    }

    #[test]
    fn a_row_counts_confusion_accuracy_latency_tokens_and_cost() {
        let a1 = [attempt(Some(30), usage(10, 2, 5, Some(0.001)))];
        let a2 = [attempt(Some(10), usage(20, 0, 1, None))];
        let a3 = [attempt(Some(20), None)];
        let a4 = [attempt(None, None)];
        let judged = [
            Judged {
                id: "a",
                file: None,
                reason: "all true: bug",
                expect: Expect::Hit,
                outcome: Outcome::Hit,
                attempts: &a1,
            },
            Judged {
                id: "b",
                file: None,
                reason: "r",
                expect: Expect::Hit,
                outcome: Outcome::Unchecked,
                attempts: &a2,
            },
            Judged {
                id: "c",
                file: None,
                reason: "r",
                expect: Expect::Clean,
                outcome: Outcome::Hit,
                attempts: &a3,
            },
            Judged {
                id: "d",
                file: None,
                reason: "r",
                expect: Expect::Clean,
                outcome: Outcome::Clean,
                attempts: &a4,
            },
        ];
        let r = RunnerReport::of("r", judged);
        // b was not answered: not wrong, and not in the accuracy (2 right of 3 answered).
        assert_eq!(
            (r.cases, r.answered, r.correct, r.accuracy),
            (4, 3, 2, Some(2.0 / 3.0))
        );
        assert_eq!(
            r.confusion,
            Confusion {
                hit: Counts {
                    hit: 1,
                    clean: 0,
                    unchecked: 1
                },
                clean: Counts {
                    hit: 1,
                    clean: 1,
                    unchecked: 0
                },
            }
        );
        assert_eq!(r.unchecked, 1);
        assert_eq!(r.wrong, ["c"]);
        assert_eq!(
            r.unchecked_cases,
            [Unchecked {
                id: "b".into(),
                file: None,
                reason: "r".into()
            }]
        );
        // Only the timed attempts count: 10, 20, 30.
        assert_eq!(
            r.latency_ms,
            Latency {
                p50: Some(20),
                p95: Some(30)
            }
        );
        assert_eq!(
            r.tokens,
            Tokens {
                input: 30,
                cached_input: 2,
                output: 6
            }
        );
        assert_eq!(r.cost_usd, Some(0.001));
        let none = RunnerReport::of(
            "n",
            [Judged {
                id: "d",
                file: None,
                reason: "r",
                expect: Expect::Clean,
                outcome: Outcome::Clean,
                attempts: &a4,
            }],
        );
        assert_eq!(
            (none.cost_usd, none.latency_ms.p50, none.accuracy),
            (None, None, Some(1.0))
        );
    }

    /// A runner that answered no case has no accuracy (not 0 %), fails any
    /// `--min-accuracy`, and the text says so with each reason; several files name
    /// each case's file.
    #[test]
    fn a_runner_that_answered_none_has_no_accuracy_and_says_why() {
        let unchecked = |id, file, reason| Judged {
            id,
            file: Some(file),
            expect: Expect::Hit,
            outcome: Outcome::Unchecked,
            reason,
            attempts: &[],
        };
        let r = RunnerReport::of(
            "down",
            [
                unchecked("c1", "a.jsonl", "no runner answered: down: exit 3"),
                unchecked("c1", "b.jsonl", "no runner answered: down: exit 3"),
                unchecked("c2", "b.jsonl", "no runner answered: down: not installed"),
            ],
        );
        assert_eq!((r.answered, r.accuracy, r.unchecked), (0, None, 3));
        assert!(r.wrong.is_empty(), "unchecked is not wrong");
        assert_eq!(r.unchecked_cases[1].file.as_deref(), Some("b.jsonl"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["accuracy"], serde_json::Value::Null);
        assert_eq!(
            json["unchecked_cases"][2],
            serde_json::json!({"id": "c2", "file": "b.jsonl", "reason": "no runner answered: down: not installed"})
        );
        let report = Report::new(vec![r], Some(0.0));
        assert!(!report.passed, "no answer meets no minimum");
        let text = render(&report);
        assert!(
            text.lines()
                .nth(1)
                .unwrap_or_default()
                .starts_with("down        3        0         -"),
            "{text}"
        );
        assert!(
            text.contains("\ndown answered none of its 3 cases, so it has no accuracy\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "\nunchecked, down: a.jsonl:c1, b.jsonl:c1: no runner answered: down: exit 3\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\nunchecked, down: b.jsonl:c2: no runner answered: down: not installed\n"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("min accuracy 0.0%: failed (down answered none)\n"),
            "{text}"
        );
    }

    #[test]
    fn a_wrong_case_is_named_after_its_file_when_there_are_several() {
        let wrong = Judged {
            id: "c4",
            file: Some("rules/cases/b.jsonl"),
            expect: Expect::Clean,
            outcome: Outcome::Hit,
            reason: "all true: bug",
            attempts: &[],
        };
        let r = RunnerReport::of(
            "r",
            [
                wrong,
                Judged {
                    file: None,
                    ..wrong
                },
            ],
        );
        assert_eq!(r.wrong, ["rules/cases/b.jsonl:c4", "c4"]);
        assert_eq!(r.accuracy, Some(0.0), "answered, all wrong: 0 %");
    }

    #[test]
    fn min_accuracy_fails_when_any_runner_is_under_it() {
        let row = |name: &str, correct: usize| RunnerReport {
            correct,
            accuracy: Some(correct as f64 / 10.0),
            ..RunnerReport::of(name, [])
        };
        let rows = vec![row("a", 9), row("b", 10)];
        assert!(Report::new(rows.clone(), None).passed);
        assert!(
            Report::new(rows.clone(), Some(0.9)).passed,
            "0.9 is not under 0.9"
        );
        assert!(!Report::new(rows, Some(0.95)).passed);
    }

    #[test]
    fn the_text_table_is_aligned_and_names_the_wrong_cases() {
        let a = [attempt(Some(12), usage(10, 0, 5, Some(0.001)))];
        let b = [attempt(Some(3), None)];
        let yes = RunnerReport::of(
            "yes",
            [
                Judged {
                    id: "c1",
                    file: None,
                    reason: "r",
                    expect: Expect::Hit,
                    outcome: Outcome::Hit,
                    attempts: &a,
                },
                Judged {
                    id: "c2",
                    file: None,
                    reason: "r",
                    expect: Expect::Clean,
                    outcome: Outcome::Hit,
                    attempts: &a,
                },
            ],
        );
        let failing = RunnerReport::of(
            "failing",
            [
                Judged {
                    id: "c1",
                    file: None,
                    reason: "r",
                    expect: Expect::Hit,
                    outcome: Outcome::Unchecked,
                    attempts: &b,
                },
                Judged {
                    id: "c2",
                    file: None,
                    reason: "r",
                    expect: Expect::Clean,
                    outcome: Outcome::Unchecked,
                    attempts: &b,
                },
            ],
        );
        let text = render(&Report::new(vec![yes, failing], Some(0.9)));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("runner   cases  correct  accuracy"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("yes          2        1     50.0%"),
            "{text}"
        );
        assert!(lines[1].ends_with("20       0   10  0.002000"), "{text}");
        assert!(
            lines[2].starts_with("failing      2        0         -"),
            "{text}"
        );
        assert!(lines[2].ends_with("0       0    0         -"), "{text}");
        // Every row is as wide as the header: the columns line up.
        let width = lines[0].chars().count();
        assert!(
            lines[1..3].iter().all(|l| l.chars().count() == width),
            "{text}"
        );
        assert!(text.contains("\nwrong, yes: c2\n"), "{text}");
        assert!(
            !text.contains("wrong, failing"),
            "unchecked is not wrong: {text}"
        );
        assert!(text.contains("\nunchecked, failing: c1, c2: r\n"), "{text}");
        assert!(
            text.ends_with("min accuracy 90.0%: failed (yes 50.0%, failing answered none)\n"),
            "{text}"
        );
    }

    #[test]
    fn long_wrong_lists_are_cut_in_the_text() {
        let b = [attempt(Some(3), None)];
        let ids: Vec<String> = (0..13).map(|i| format!("c{i}")).collect();
        let r = RunnerReport::of(
            "r",
            ids.iter().map(|id| Judged {
                id,
                file: None,
                reason: "r",
                expect: Expect::Hit,
                outcome: Outcome::Clean,
                attempts: &b,
            }),
        );
        assert_eq!(r.wrong.len(), 13);
        let text = render(&Report::new(vec![r], None));
        assert!(
            text.contains("c9 and 3 more (--json lists all)\n"),
            "{text}"
        );
        assert!(!text.contains("min accuracy"), "{text}");
    }
}
