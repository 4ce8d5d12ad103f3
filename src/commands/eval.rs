//! `llm-judge eval CASES.jsonl`: every case on every runner of its mode's table, each
//! runner alone, on a bounded pool; then a row per runner against the cases' `expect`.
//! The cases are never written to jobs/ and no verdict file is written.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::core::config::Settings;
use crate::core::eval::{
    Case, Judged, Report, RunnerReport, Seat, alone, labels, parse_cases, percent, render, seats,
    select,
};
use crate::core::job::Job;
use crate::core::verdict::{Outcome, Verdict, verdict_for};
use crate::engine::attempts::{CacheSlot, Extras, judge};
use crate::store::cache::Cache;
use crate::store::claim::new_tag;
use crate::store::open_state;
use crate::store::state_dir::now_unix;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE, print_stdout};
use crate::support::runtime::runtime;

/// `eval --help`'s examples.
pub const EXAMPLES: &str = "Examples:
  llm-judge eval cases.jsonl
  llm-judge eval cases.jsonl --runner claude --workers 2 --min-accuracy 0.9
  llm-judge eval cases.jsonl --json | jq '.runners[] | {runner, accuracy}'

Each line of CASES.jsonl is a job object (the keys of a job file) plus \"expect\":
  {\"id\": \"r1\", \"prompt\": \"Did the reply retract a claim? Reply {\\\"retracts\\\": true|false}\",
   \"hit_if_all_true\": [\"retracts\"], \"expect\": \"hit\"}
Every case runs on every runner of its mode's table, each alone (no fallback), with no
answer cache (unless --cache) and no runner health. Exit 0; 1 when a runner's accuracy
is under --min-accuracy or the file cannot be read; 2 for a bad line (nothing runs).";

/// `eval` flags.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// The cases: one JSON object per line, a job plus "expect": "hit" or "clean".
    #[arg(value_name = "CASES.jsonl")]
    cases: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Exit 1 when any runner's accuracy is under F (a fraction from 0 to 1).
    #[arg(long, value_name = "F", value_parser = fraction)]
    min_accuracy: Option<f64>,
    /// At most N runner runs at once (default: the config's workers).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    workers: Option<u16>,
    /// Only this runner (repeatable; default: every runner of the tables the cases use).
    #[arg(long = "runner", value_name = "NAME")]
    runners: Vec<String>,
    /// Reuse and keep answers in the state folder's answer cache, as `run` does
    /// (default-mode cases; with `cache.ttl_seconds = 0` there is none).
    #[arg(long)]
    cache: bool,
}

/// `--min-accuracy`'s value: a fraction from 0 to 1.
fn fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        Ok(_) => Err(format!(
            "{text} is outside 0..=1; give a fraction, e.g. 0.9 for 90 %"
        )),
        Err(_) => Err(format!(
            "{text:?} is not a number; give a fraction from 0 to 1, e.g. 0.9"
        )),
    }
}

/// Bad lines shown before "and N more": a file of the wrong format would flood.
const ERRORS_SHOWN: usize = 20;

/// Runs the cases and prints the report; the exit code.
pub fn main(settings: &Settings, args: EvalArgs) -> i32 {
    let file = args.cases.display().to_string();
    let text = match std::fs::read(&args.cases) {
        Ok(text) => text,
        Err(e) => {
            say_err!("llm-judge eval: cannot read {file}: {e}");
            return EXIT_FAILURE;
        }
    };
    let cases = match parse_cases(&text, settings.config.timeouts()) {
        Ok(cases) => cases,
        Err(errors) => {
            for e in errors.iter().take(ERRORS_SHOWN) {
                say_err!("llm-judge eval: {file}: {e}");
            }
            if errors.len() > ERRORS_SHOWN {
                say_err!(
                    "llm-judge eval: {file}: and {} more bad lines",
                    errors.len() - ERRORS_SHOWN
                );
            }
            say_err!("llm-judge eval: nothing was run");
            return EXIT_USAGE;
        }
    };
    let seats = match select(seats(settings, &cases), &args.runners) {
        Ok(seats) if seats.is_empty() => {
            say_err!(
                "llm-judge eval: the runner table the cases use is empty; nothing to evaluate"
            );
            return EXIT_USAGE;
        }
        Ok(seats) => seats,
        Err(e) => {
            say_err!("llm-judge eval: {e}");
            return EXIT_USAGE;
        }
    };
    let state = match open_state(settings, false) {
        Ok(state) => state,
        Err(e) => {
            say_err!("llm-judge: {e}");
            return EXIT_FAILURE;
        }
    };
    // Never health: it would move a failing runner behind another, and each runner is
    // measured here on its own.
    let extras = Extras {
        cache: if args.cache {
            Cache::open(&state, &settings.config.cache)
        } else {
            None
        },
        ..Extras::default()
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            say_err!("llm-judge: {e}");
            return EXIT_FAILURE;
        }
    };
    let workers = args
        .workers
        .map_or(settings.config.workers, usize::from)
        .max(1);
    let rows = labels(&seats);
    let mut progress = Progress::new(&rows, &seats, &cases);
    let plan = Plan {
        cases: Arc::new(cases),
        seats: seats
            .iter()
            .map(|s| Arc::new(alone(settings, s.mode, &s.runner)))
            .collect(),
        extras: Arc::new(extras),
    };
    let results = rt.block_on(run_all(&plan, &seats, workers, &mut progress));
    progress.bar.finish_and_clear();
    let report = Report::new(
        rows.iter()
            .map(|label| row(label, &plan.cases, &seats, &results))
            .collect(),
        args.min_accuracy,
    );
    let text = if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => format!("{json}\n"),
            Err(e) => {
                say_err!("llm-judge eval: cannot write the report as JSON: {e}");
                return EXIT_FAILURE;
            }
        }
    } else {
        render(&report)
    };
    if !print_stdout(&text) {
        return EXIT_FAILURE;
    }
    if report.passed { EXIT_OK } else { EXIT_FAILURE }
}

/// What the runs share: the cases, and per seat the settings whose table is that
/// runner alone.
struct Plan {
    cases: Arc<Vec<Case>>,
    seats: Vec<Arc<Settings>>,
    extras: Arc<Extras>,
}

/// The verdict of every run, `[seat][case]`; `None` where the seat's mode is not the
/// case's, or where a run's task died (counted unchecked).
type Results = Vec<Vec<Option<Verdict>>>;

/// Starts every run, at most `workers` at once, and collects the verdicts.
async fn run_all(plan: &Plan, seats: &[Seat], workers: usize, progress: &mut Progress) -> Results {
    let pool = Arc::new(Semaphore::new(workers));
    let mut set = JoinSet::new();
    // Case by case, each on every runner: runners take turns, so a slow one does not
    // hold the whole pool while the others wait.
    for (case, c) in plan.cases.iter().enumerate() {
        for (seat, (s, settings)) in seats.iter().zip(&plan.seats).enumerate() {
            if s.mode != c.job.mode {
                continue;
            }
            let pool = Arc::clone(&pool);
            let settings = Arc::clone(settings);
            let cases = Arc::clone(&plan.cases);
            let extras = Arc::clone(&plan.extras);
            set.spawn(async move {
                // The pool is never closed, so acquiring only waits.
                let _permit = pool.acquire_owned().await.ok();
                let job = cases.get(case).map(|c| &c.job)?;
                let verdict = judge_case(&settings, job, &extras).await;
                Some((seat, case, verdict))
            });
        }
    }
    let mut results: Results = vec![vec![None; plan.cases.len()]; seats.len()];
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(Some((seat, case, verdict))) => {
                if let (Some(s), Some(c)) = (seats.get(seat), plan.cases.get(case)) {
                    progress.done(&s.label, c, verdict.outcome);
                }
                if let Some(slot) = results.get_mut(seat).and_then(|r| r.get_mut(case)) {
                    *slot = Some(verdict);
                }
            }
            Ok(None) => progress.bar.inc(1),
            Err(e) => {
                progress.bar.inc(1);
                say_err!("llm-judge eval: a run failed (counted unchecked): {e}");
            }
        }
    }
    results
}

/// One case on one runner alone: the answer cache (when on), else `judge`.
async fn judge_case(settings: &Settings, job: &Job, extras: &Extras) -> Verdict {
    let slot = CacheSlot::of(extras, job, settings.table(job.mode));
    if let Some(verdict) = slot.as_ref().and_then(|s| s.verdict(job)) {
        return verdict;
    }
    // Without a stop signal `judge` always ends in a verdict; the fallback keeps the
    // count whole all the same.
    let cwd = crate::engine::job_cwd::job_cwd(settings, job).await;
    let verdict = judge(settings, job, &cwd, &new_tag(), extras, None, |_, _| {})
        .await
        .unwrap_or_else(|| verdict_for(job, None, Vec::new(), now_unix()));
    if let Some(slot) = &slot {
        slot.remember(&verdict);
    }
    verdict
}

/// The row of `label`: the cases in file order that one of its seats ran.
fn row(label: &str, cases: &[Case], seats: &[Seat], results: &Results) -> RunnerReport {
    let judged = cases.iter().enumerate().filter_map(|(case, c)| {
        let seat = seats
            .iter()
            .position(|s| s.label == label && s.mode == c.job.mode)?;
        let (outcome, attempts) = match results.get(seat).and_then(|r| r.get(case)) {
            Some(Some(v)) => (v.outcome, v.attempts.as_slice()),
            _ => (Outcome::Unchecked, &[][..]),
        };
        Some(Judged {
            id: &c.job.id,
            expect: c.expect,
            outcome,
            attempts,
        })
    });
    RunnerReport::of(label, judged)
}

/// The progress bar on stderr (drawn only on a terminal): finished runs, and each
/// runner's accuracy so far.
struct Progress {
    bar: ProgressBar,
    /// Per row: its label, runs finished, runs judged as expected.
    tally: Vec<(String, usize, usize)>,
}

impl Progress {
    fn new(rows: &[String], seats: &[Seat], cases: &[Case]) -> Self {
        let runs = cases
            .iter()
            .map(|c| seats.iter().filter(|s| s.mode == c.job.mode).count() as u64)
            .sum();
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(runs), target);
        if let Ok(style) =
            ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} runs  {wide_msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(rows.join(", "));
        Progress {
            bar,
            tally: rows.iter().map(|r| (r.clone(), 0, 0)).collect(),
        }
    }

    /// One run ended: advance, and show each runner's accuracy so far.
    fn done(&mut self, label: &str, case: &Case, outcome: Outcome) {
        if let Some(entry) = self.tally.iter_mut().find(|(l, _, _)| l == label) {
            entry.1 += 1;
            entry.2 += usize::from(case.expect.met_by(outcome));
        }
        let message: Vec<String> = self
            .tally
            .iter()
            .map(|(label, done, correct)| match *done {
                0 => format!("{label} -"),
                n => format!("{label} {}", percent(*correct as f64 / n as f64)),
            })
            .collect();
        self.bar.set_message(message.join("  "));
        self.bar.inc(1);
    }
}
