//! `llm-judge mark RECORD right|wrong` (docs/history.md): labels a verdict on record,
//! so `history --cases` can turn it into a case for `eval --rules`.

use crate::core::config::Settings;
use crate::core::history::cases::{Label, mark_refusal};
use crate::support::exit::{EXIT_FAILURE, EXIT_OK};

/// A label on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum LabelArg {
    /// The verdict was right.
    Right,
    /// It should have been the other outcome (a false hit, or a missed one).
    Wrong,
}

/// Labels record `record`; returns the exit code.
pub fn main(settings: &Settings, record: i64, label: LabelArg) -> i32 {
    let label = match label {
        LabelArg::Right => Label::Right,
        LabelArg::Wrong => Label::Wrong,
    };
    let history = match super::open(settings, "mark") {
        Ok(history) => history,
        Err(code) => return code,
    };
    let marked = (|| {
        let Some(row) = history.row(record)? else {
            return Ok(Err(format!(
                "no record {record} in the history; `llm-judge history` lists the records and their ids"
            )));
        };
        if let Some(why) = mark_refusal(&row, history.texts(&row)?.is_some()) {
            return Ok(Err(why));
        }
        history.mark(record, label)?;
        Ok(Ok(row))
    })();
    match marked {
        Ok(Ok(row)) => {
            let rule = row.rule.as_deref().unwrap_or("-");
            let expect = match (label, row.outcome.as_str()) {
                (Label::Right, outcome) => outcome,
                (Label::Wrong, "hit") => "clean",
                (Label::Wrong, _) => "hit",
            };
            say!(
                "record {record} (rule {rule}, {}) marked {}: its case expects {expect}\n\
                 llm-judge history --rule {rule} --cases > {rule}.cases.jsonl writes the marked \
                 verdicts for llm-judge eval --rules",
                row.outcome,
                label.name()
            );
            EXIT_OK
        }
        Ok(Err(why)) => {
            say_err!("llm-judge mark: {why}");
            EXIT_FAILURE
        }
        Err(e) => {
            let e: crate::store::history::HistoryError = e;
            say_err!("llm-judge mark: {e}");
            EXIT_FAILURE
        }
    }
}
