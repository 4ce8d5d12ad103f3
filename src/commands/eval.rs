//! `llm-judge eval CASES.jsonl...`: every case of every file on every runner of its
//! mode's table, each runner alone, on a bounded pool; then a row per runner against
//! the cases' `expect`. The cases are never written to jobs/ and no verdict file is
//! written.

use std::io::{BufRead, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::core::config::Settings;
use crate::core::eval::cases::{CaseError, CaseReader};
use crate::core::eval::{
    Case, Judged, Report, RunnerReport, Seat, alone, labels, percent, render, seats, select,
};
use crate::core::job::Job;
use crate::core::verdict::{Outcome, Verdict};
use crate::engine::attempts::{self, CacheSlot, Judging, Services, judge};
use crate::engine::events::{Control, StopSignal};
use crate::process::tag::new_tag;
use crate::store::cache::Cache;
use crate::store::open_state;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE, print_stdout};

/// The exit code after Ctrl-C (128 + SIGINT, as a shell reports it).
const EXIT_INTERRUPTED: i32 = 130;
use crate::support::error::Chained;
use crate::support::runtime::runtime;

/// `eval --help`'s examples.
pub const EXAMPLES: &str = "Examples:
  llm-judge eval cases.jsonl
  llm-judge eval rules/cases/*.jsonl
  llm-judge eval cases.jsonl --runner claude --workers 2 --min-accuracy 0.9
  llm-judge eval cases.jsonl --json | jq '.runners[] | {runner, accuracy}'
  llm-judge eval --rules ~/.config/llm-judge/rules.toml my-rule-cases.jsonl

Each line of CASES.jsonl is a job object (the keys of a job file) plus \"expect\":
  {\"id\": \"r1\", \"prompt\": \"Did the reply retract a claim? Reply {\\\"retracts\\\": true|false}\",
   \"hit_if_all_true\": [\"retracts\"], \"expect\": \"hit\"}
With --rules, each line is a rule case instead: the job that rule asks about the reply,
  {\"rule\": \"claims-unverified-tests\", \"reply\": \"All tests pass.\", \"expect\": \"hit\"}
Every case runs on every runner of its mode's table, each alone (no fallback), with no
answer cache (unless --cache) and no runner health. A case a runner did not answer is
unchecked, with its reason, and not wrong: accuracy counts the answered cases (a runner
that answered none has none). With several files, a case is named FILE:ID. Exit 0; 1
when a runner's accuracy is under --min-accuracy (or it answered none) or a file cannot
be read; 2 for a bad line or a file that is not a regular file (nothing runs); 130
after Ctrl-C, which stops the runs in flight and prints the report of the runs that
finished.";

/// `eval` flags.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// The cases files (one or more, e.g. a shell glob): one JSON object per line, a
    /// job plus "expect": "hit" or "clean".
    #[arg(value_name = "CASES.jsonl", required = true)]
    cases: Vec<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Exit 1 when any runner's accuracy (over the cases it answered) is under F (a
    /// fraction from 0 to 1), or it answered none.
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
    /// The cases are rule cases ({"rule", "reply", "user"?, "expect"}): each judged as
    /// the job that rule of this rules file (a hooks rules.toml) asks about the reply.
    #[arg(long, value_name = "RULES.toml")]
    rules: Option<PathBuf>,
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

/// Runs the cases and prints the report; the exit code.
pub fn main(settings: &Settings, args: EvalArgs) -> i32 {
    let rules = match args.rules.as_deref().map(read_rules).transpose() {
        Ok(rules) => rules,
        Err(why) => {
            say_err!("llm-judge eval: {why}");
            return EXIT_USAGE;
        }
    };
    let read = match read_all(&args.cases, settings, rules.as_deref()) {
        Ok(read) => read,
        Err(code) => return code,
    };
    let CasesRead {
        cases,
        files,
        origins,
    } = read;
    let seats = match select(seats(settings, &cases), &args.runners) {
        Ok(seats) if seats.is_empty() => {
            say_err!(
                "llm-judge eval: the runner table the cases use is empty; nothing to evaluate"
            );
            return EXIT_USAGE;
        }
        Ok(seats) => seats,
        Err(e) => {
            say_err!("llm-judge eval: {e}", e = e.chain());
            return EXIT_USAGE;
        }
    };
    let state = match open_state(settings, false) {
        Ok(state) => state,
        Err(e) => {
            say_err!("llm-judge: {e}", e = e.chain());
            return EXIT_FAILURE;
        }
    };
    crate::store::child_key::give_runners(&state);
    // Never health: it would move a failing runner behind another, and each runner is
    // measured here on its own.
    let services = Services {
        cache: if args.cache {
            Cache::open(&state, &settings.config.cache, settings.config.fsync)
        } else {
            None
        },
        ..Services::default()
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            say_err!("llm-judge: {e}", e = e.chain());
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
        services: Arc::new(services),
    };
    let (results, interrupted) = rt.block_on(run_all(&plan, &seats, workers, &mut progress));
    progress.bar.finish_and_clear();
    // A case is named by its file too when there are several.
    let named = Named {
        files: &files,
        origins: &origins,
        several: files.len() > 1,
    };
    let report = Report::new(
        rows.iter()
            .map(|label| row(label, &plan.cases, &named, &seats, &results, interrupted))
            .collect(),
        args.min_accuracy,
    );
    if interrupted {
        let finished: usize = results.iter().flatten().filter(|r| r.is_some()).count();
        say_err!(
            "llm-judge eval: interrupted: the report covers the {finished} of {} runs that \
             finished; the runs in flight were stopped",
            progress.bar.length().unwrap_or(0)
        );
    }
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
    if interrupted {
        EXIT_INTERRUPTED
    } else if report.passed {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}

/// The rules of `--rules FILE`, every one (an enabled = false rule is measured too).
fn read_rules(path: &Path) -> Result<Vec<crate::core::hooks::rules::Rule>, String> {
    let text = crate::store::state_dir::read_small_text(path)?
        .ok_or_else(|| format!("--rules {}: no such file", path.display()))?;
    crate::core::hooks::rules::parse_rules(&text)
        .map_err(|e| format!("--rules {} {e}", path.display()))
}

/// The cases of every file, in the order given, with where each came from.
struct CasesRead {
    cases: Vec<Case>,
    /// Each file as given on the command line.
    files: Vec<String>,
    /// Per case, the index of its file.
    origins: Vec<usize>,
}

/// Reads every cases file; the exit code when one cannot be used (each bad line of
/// every file is said first: one edit fixes them all, and nothing runs).
fn read_all(
    paths: &[PathBuf],
    settings: &Settings,
    rules: Option<&[crate::core::hooks::rules::Rule]>,
) -> Result<CasesRead, i32> {
    let mut read = CasesRead {
        cases: Vec::new(),
        files: Vec::new(),
        origins: Vec::new(),
    };
    let mut bad = false;
    for (at, path) in paths.iter().enumerate() {
        let file = path.display().to_string();
        if paths[..at].contains(path) {
            say_err!("llm-judge eval: {file} is given twice; give each cases file once");
            return Err(EXIT_USAGE);
        }
        match read_cases(path, settings, rules.map(<[_]>::to_vec)) {
            Ok(Ok(cases)) => {
                read.origins.extend(std::iter::repeat_n(at, cases.len()));
                read.cases.extend(cases);
            }
            Ok(Err(errors)) => {
                for e in &errors {
                    say_err!("llm-judge eval: {file}: {e}", e = e.chain());
                }
                bad = true;
            }
            Err(ReadError::NotRegular { kind }) => {
                say_err!(
                    "llm-judge eval: {file} is a {kind}, not a regular file; write the cases to \
                     a file and give its path"
                );
                return Err(EXIT_USAGE);
            }
            Err(ReadError::Io(e)) => {
                say_err!("llm-judge eval: cannot read {file}: {e}", e = e.chain());
                return Err(EXIT_FAILURE);
            }
        }
        read.files.push(file);
    }
    if bad {
        say_err!("llm-judge eval: nothing was run");
        return Err(EXIT_USAGE);
    }
    Ok(read)
}

/// Why the cases file was not read.
enum ReadError {
    /// A FIFO, a device, a folder: reading it may never end or never stop.
    NotRegular {
        kind: &'static str,
    },
    Io(std::io::Error),
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Reads the cases file one line at a time, no line longer than `max_job_bytes` (a
/// case is a job); a file that is not a regular file is refused before any read.
fn read_cases(
    path: &Path,
    settings: &Settings,
    rules: Option<Vec<crate::core::hooks::rules::Rule>>,
) -> Result<Result<Vec<Case>, Vec<CaseError>>, ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: opening a FIFO with no writer must not wait; it is refused below.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular {
            kind: crate::engine::job_file::file_kind(&meta),
        });
    }
    let max = settings.config.max_job_bytes;
    let mut reader = std::io::BufReader::new(file);
    let mut cases = CaseReader::new(settings.config.timeouts());
    if let Some(rules) = rules {
        let base = std::path::absolute(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        cases = cases.with_rules(rules, base);
    }
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        if (&mut reader)
            .take(max.saturating_add(1))
            .read_until(b'\n', &mut line)?
            == 0
        {
            break;
        }
        let whole = line.last() == Some(&b'\n');
        if (line.len() - usize::from(whole)) as u64 > max {
            cases.too_long(number, max);
            if !whole {
                skip_line(&mut reader)?;
            }
            continue;
        }
        cases.line(number, &line);
    }
    Ok(cases.finish())
}

/// Reads past the rest of a line without keeping it.
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(());
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(());
            }
            None => {
                let len = chunk.len();
                reader.consume(len);
            }
        }
    }
}

/// What the runs share: the cases, and per seat the settings whose table is that
/// runner alone.
struct Plan {
    cases: Arc<Vec<Case>>,
    seats: Vec<Arc<Settings>>,
    services: Arc<Services>,
}

/// The verdict of every run, `[seat][case]`; `None` where the seat's mode is not the
/// case's, or where a run's task died (counted unchecked).
type Results = Vec<Vec<Option<Verdict>>>;

/// Starts every run, at most `workers` at once, and collects the verdicts; true with
/// them when Ctrl-C stopped the runs (then the unfinished ones are `None`).
async fn run_all(
    plan: &Plan,
    seats: &[Seat],
    workers: usize,
    progress: &mut Progress,
) -> (Results, bool) {
    let pool = Arc::new(Semaphore::new(workers));
    let (stop, stop_signal) = tokio::sync::watch::channel(Control::Run);
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
            let services = Arc::clone(&plan.services);
            let stop_signal = stop_signal.clone();
            set.spawn(async move {
                // The pool is never closed, so acquiring only waits.
                let _permit = pool.acquire_owned().await.ok();
                let job = cases.get(case).map(|c| &c.job)?;
                let verdict = judge_case(&settings, job, &services, &stop_signal)
                    .instrument(crate::store::log_line::job_span(&job.id))
                    .await?;
                Some((seat, case, verdict))
            });
        }
    }
    let mut results: Results = vec![vec![None; plan.cases.len()]; seats.len()];
    let mut interrupt = interrupt_signal();
    let mut interrupted = false;
    loop {
        let joined = tokio::select! {
            joined = set.join_next() => joined,
            () = next_interrupt(interrupt.as_mut()) => {
                // The first Ctrl-C stops each running runner as at its timeout; a
                // second cuts the kill grace short.
                let next = if interrupted { Control::StopNow } else { Control::Stop };
                interrupted = true;
                let _ = stop.send(next);
                progress.interrupted();
                continue;
            }
        };
        let Some(joined) = joined else { break };
        match joined {
            Ok(Some((seat, case, verdict))) => {
                if let (Some(s), Some(c)) = (seats.get(seat), plan.cases.get(case)) {
                    progress.done(&s.label, c, verdict.outcome);
                }
                if let Some(slot) = results.get_mut(seat).and_then(|r| r.get_mut(case)) {
                    *slot = Some(verdict);
                }
            }
            // Stopped by Ctrl-C: not a finished run (the bar jumped to its total).
            Ok(None) => {}
            Err(e) => {
                progress.bar.inc(1);
                say_err!("llm-judge eval: a run failed (counted unchecked): {e}");
            }
        }
    }
    (results, interrupted)
}

/// SIGINT as a stream, from now on (it then no longer ends the process); `None` when
/// it cannot be caught (Ctrl-C then ends eval at once, as before).
fn interrupt_signal() -> Option<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{SignalKind, signal};
    signal(SignalKind::interrupt())
        .inspect_err(|e| say_err!("llm-judge eval: cannot catch Ctrl-C: {e}"))
        .ok()
}

/// The next SIGINT; never without a stream.
async fn next_interrupt(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => {
            if signal.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// One case on one runner alone: the answer cache (when on), else `judge`; `None`
/// when Ctrl-C stopped it.
async fn judge_case(
    settings: &Settings,
    job: &Job,
    services: &Services,
    stop: &StopSignal,
) -> Option<Verdict> {
    if *stop.borrow() != Control::Run {
        return None;
    }
    let cwd = crate::engine::job_cwd::job_cwd(settings, job).await;
    let tag = new_tag();
    let marks = attempts::RunMarks {
        settings,
        tag: &tag,
        stop: Some(stop),
    };
    let judging = Judging::new(
        services,
        job,
        attempts::Plan::new(settings, job, cwd),
        marks,
    );
    let slot = CacheSlot::of(services, job, &judging.plan);
    if let Some(verdict) = slot.as_ref().and_then(|s| s.verdict(job)) {
        return Some(verdict);
    }
    let verdict = judge(&judging, &mut |_| {}).await.ok()?;
    if let Some(slot) = &slot {
        slot.remember(&verdict);
    }
    Some(verdict)
}

/// Where the cases came from, to name them in the report.
struct Named<'a> {
    files: &'a [String],
    origins: &'a [usize],
    /// More than one file: a case's id names it only with its file.
    several: bool,
}

impl Named<'_> {
    /// Case `case`'s file, when the report must name it.
    fn file(&self, case: usize) -> Option<&str> {
        let at = *self.origins.get(case)?;
        self.several
            .then(|| self.files.get(at).map(String::as_str))
            .flatten()
    }
}

/// The reason of a run whose task died.
const RUN_FAILED: &str = "the run failed (its error is on stderr)";

/// The row of `label`: the cases in file order that one of its seats ran. A run with
/// no verdict died (counted unchecked), or, after Ctrl-C, did not finish (left out).
fn row(
    label: &str,
    cases: &[Case],
    named: &Named<'_>,
    seats: &[Seat],
    results: &Results,
    interrupted: bool,
) -> RunnerReport {
    let judged = cases.iter().enumerate().filter_map(|(case, c)| {
        let seat = seats
            .iter()
            .position(|s| s.label == label && s.mode == c.job.mode)?;
        let (outcome, reason, attempts) = match results.get(seat).and_then(|r| r.get(case)) {
            Some(Some(v)) => (v.outcome, v.reason.as_str(), v.attempts.as_slice()),
            _ if interrupted => return None,
            _ => (Outcome::Unchecked, RUN_FAILED, &[][..]),
        };
        Some(Judged {
            id: &c.job.id,
            file: named.file(case),
            expect: c.expect,
            outcome,
            reason,
            attempts,
        })
    });
    RunnerReport::of(label, judged)
}

/// The progress bar on stderr (drawn only on a terminal): finished runs, and each
/// runner's accuracy so far.
struct Progress {
    bar: ProgressBar,
    /// Per row: its label, runs answered, runs judged as expected.
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

    /// Ctrl-C: the runs in flight are being stopped; the bar stays where it is.
    fn interrupted(&mut self) {
        self.bar
            .set_message("interrupted: stopping the runs in flight (Ctrl-C again: at once)");
    }

    /// One run ended: advance, and show each runner's accuracy so far (over the runs
    /// it answered).
    fn done(&mut self, label: &str, case: &Case, outcome: Outcome) {
        if let Some(entry) = self.tally.iter_mut().find(|(l, _, _)| l == label)
            && outcome != Outcome::Unchecked
        {
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
