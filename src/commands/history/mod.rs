//! `llm-judge history`: the verdicts on record (docs/history.md), newest last, as a
//! table or JSON lines; `--session` shows what that session's agent was told, in order;
//! `--cases` writes the marked verdicts as rule cases for `eval --rules`. Its
//! siblings read the same history: `stats` (per-rule figures) and `mark` (labels).

pub mod mark;
pub mod stats;

use crate::core::config::Settings;
use crate::core::history::cases::case_of;
use crate::core::history::listing::{Row, render_table};
use crate::core::history::since::Since;
use crate::store::history::{self, Filter, History};
use crate::store::state_dir::StateDir;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE, print_stdout};

/// Rows shown without `--limit` (all of them with `--session` or `--cases`).
const DEFAULT_LIMIT: usize = 50;

/// `history` flags.
#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Only this session: its id, or its first characters as the table shows them.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only this rule's verdicts.
    #[arg(long, value_name = "NAME")]
    pub rule: Option<String>,
    /// Only verdicts with this outcome.
    #[arg(long, value_parser = ["hit", "clean", "unchecked"])]
    pub outcome: Option<String>,
    /// Only verdicts since then: 30m, 24h, 7d, 2w, or a date (2026-12-01, local midnight).
    #[arg(long, value_name = "SPAN|DATE")]
    pub since: Option<String>,
    /// Only this harness's sessions.
    #[arg(long, value_parser = ["claude", "codex", "cursor"])]
    pub harness: Option<String>,
    /// Only verdicts marked right or wrong (llm-judge mark).
    #[arg(long)]
    pub marked: bool,
    /// Write the marked verdicts as rule cases (JSON lines) for `llm-judge eval --rules`.
    #[arg(long, conflicts_with = "json")]
    pub cases: bool,
    /// The newest N verdicts (default 50; all with --session or --cases; 0: all).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// One JSON object a line.
    #[arg(long)]
    pub json: bool,
}

/// Lists the history; returns the exit code.
pub fn main(settings: &Settings, args: &HistoryArgs) -> i32 {
    let filter = match filter_of(args) {
        Ok(filter) => filter,
        Err(code) => return code,
    };
    let history = match open(settings, "history") {
        Ok(history) => history,
        Err(code) => return code,
    };
    let rows = match history.rows(&filter) {
        Ok(rows) => rows,
        Err(e) => {
            say_err!("llm-judge history: {e}");
            return EXIT_FAILURE;
        }
    };
    if args.cases {
        return print_cases(&history, &rows);
    }
    if rows.is_empty() {
        say_err!("no verdict on record matches (llm-judge stats shows what is there)");
        return EXIT_OK;
    }
    let text = match args.json {
        true => rows.iter().map(|r| format!("{}\n", r.to_json())).collect(),
        false => render_table(&rows, args.session.is_some()),
    };
    if print_stdout(&text) {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}

fn filter_of(args: &HistoryArgs) -> Result<Filter, i32> {
    let since = parse_since(args.since.as_deref(), "history")?;
    let all = args.session.is_some() || args.cases;
    let limit = match args.limit {
        Some(0) => None,
        Some(n) => Some(n),
        None if all => None,
        None => Some(DEFAULT_LIMIT),
    };
    Ok(Filter {
        since,
        session: args.session.clone(),
        rule: args.rule.clone(),
        outcome: args.outcome.clone(),
        harness: args.harness.clone(),
        marked: args.marked || args.cases,
        limit,
    })
}

/// A `--since` value, or the usage exit after saying what to give.
pub(crate) fn parse_since(since: Option<&str>, command: &str) -> Result<Option<Since>, i32> {
    since.map(Since::parse).transpose().map_err(|e| {
        say_err!("llm-judge {command}: {e}");
        EXIT_USAGE
    })
}

/// The marked verdicts as cases, one JSON line each; those whose texts are gone are
/// said and left out.
fn print_cases(history: &History, rows: &[Row]) -> i32 {
    let mut out = String::new();
    for row in rows {
        let texts = match history.texts(row) {
            Ok(Some(texts)) => texts,
            Ok(None) => {
                say_warn!(
                    "record {}: its reply is no longer kept (history.keep_texts_days), so it is left out",
                    row.record
                );
                continue;
            }
            Err(e) => {
                say_err!("llm-judge history: {e}");
                return EXIT_FAILURE;
            }
        };
        if let Some(case) = case_of(row, &texts) {
            out.push_str(&format!("{case}\n"));
        }
    }
    if out.is_empty() {
        say_err!(
            "no marked verdict to write as a case; mark one first: llm-judge mark <ID> right|wrong \
             (the ID column of llm-judge history)"
        );
        return EXIT_OK;
    }
    if print_stdout(&out) {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}

/// The state folder's history, its spool imported; or the exit code after saying why
/// it cannot be read.
pub(crate) fn open(settings: &Settings, command: &str) -> Result<History, i32> {
    let state = StateDir::new(&settings.state_dir);
    if let Some(why) = crate::store::unreadable_state(&state) {
        say_err!("llm-judge {command}: {why}");
        return Err(EXIT_FAILURE);
    }
    history::open_current(&state, &settings.config).map_err(|e| {
        say_err!("llm-judge {command}: {e}");
        EXIT_FAILURE
    })
}
