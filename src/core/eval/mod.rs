//! `llm-judge eval`: the runs it makes for the cases of a CASES.jsonl file
//! (`core::eval::cases`: every case on every runner of its mode's table, alone); the
//! report of each runner against `expect` is `core::eval::report`. Pure: reading the
//! file, running and printing are `commands::eval`.

pub mod cases;
pub mod report;

use std::collections::HashMap;

use thiserror::Error;

use crate::core::config::Settings;
pub use crate::core::eval::cases::Case;
pub use crate::core::eval::report::{Judged, Report, RunnerReport, percent, render};
use crate::core::job::Mode;
use crate::core::runner::table::Runner;

/// A runner of a mode's table as eval shows it: its name, or `name#2` for the second
/// of two runners one table names alike (a row must be one runner).
#[derive(Debug, Clone, PartialEq)]
pub struct Seat {
    /// The row's label.
    pub label: String,
    /// The table it comes from.
    pub mode: Mode,
    /// The runner.
    pub runner: Runner,
}

/// The runners the cases' modes use, each table in order; a label that two modes share
/// (`claude` in both shipped tables) is one row, each case run by its own mode's one.
pub fn seats(settings: &Settings, cases: &[Case]) -> Vec<Seat> {
    let mut seats = Vec::new();
    for mode in [Mode::Default, Mode::Investigate] {
        if !cases.iter().any(|c| c.job.mode == mode) {
            continue;
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for runner in settings.table(mode) {
            let count = seen.entry(runner.name.as_str()).or_insert(0);
            *count += 1;
            let label = match *count {
                1 => runner.name.clone(),
                n => format!("{}#{n}", runner.name),
            };
            seats.push(Seat {
                label,
                mode,
                runner: runner.clone(),
            });
        }
    }
    seats
}

/// The row labels of `seats`, first appearance first.
pub fn labels(seats: &[Seat]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for seat in seats {
        if !out.contains(&seat.label) {
            out.push(seat.label.clone());
        }
    }
    out
}

/// `--runner` names that are no row; the error lists the rows there are.
#[derive(Debug, Clone, PartialEq, Error)]
#[error(
    "--runner {unknown}: no such runner in the table{} the cases use; available: {}",
    if *modes > 1 { "s" } else { "" },
    available.join(", ")
)]
pub struct UnknownRunner {
    /// The first name not found.
    pub unknown: String,
    /// The rows there are.
    pub available: Vec<String>,
    /// How many tables the cases use.
    pub modes: usize,
}

/// Keeps the seats `wanted` names (all when it is empty).
pub fn select(seats: Vec<Seat>, wanted: &[String]) -> Result<Vec<Seat>, UnknownRunner> {
    let available = labels(&seats);
    if let Some(unknown) = wanted.iter().find(|w| !available.contains(w)) {
        let mut modes: Vec<Mode> = seats.iter().map(|s| s.mode).collect();
        modes.dedup();
        return Err(UnknownRunner {
            unknown: unknown.clone(),
            available,
            modes: modes.len(),
        });
    }
    Ok(seats
        .into_iter()
        .filter(|s| wanted.is_empty() || wanted.contains(&s.label))
        .collect())
}

/// `settings` with one runner as the whole table of `mode`: the table `judge` then
/// tries is that runner alone, with every other rule (cwd, answer, outcome) the same.
/// The override variable, when set, is the table every mode uses, so it is the one
/// replaced (and its bypass of the cwd rule stays).
pub fn alone(settings: &Settings, mode: Mode, runner: &Runner) -> Settings {
    let mut one = settings.clone();
    let table = vec![runner.clone()];
    match (&mut one.runner_override, mode) {
        (Some(over), _) => *over = table,
        (None, Mode::Default) => one.config.runners.default = table,
        (None, Mode::Investigate) => one.config.runners.investigate = table,
    }
    one
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::eval::cases::CaseError;
    use crate::core::job::TimeoutRules;

    const RULES: TimeoutRules = TimeoutRules {
        default_seconds: 60.0,
        max_seconds: 600.0,
    };

    fn parse(text: &str) -> Result<Vec<Case>, Vec<CaseError>> {
        crate::core::eval::cases::parse_cases(text.as_bytes(), RULES)
    }

    fn settings_with(over: Option<Vec<Runner>>) -> Settings {
        let mut s = Settings::for_tests("/nowhere".into(), "x");
        s.runner_override = over;
        s
    }

    fn case(mode: Mode) -> Case {
        let mut cases =
            parse(r#"{"prompt": "p", "expect": "hit", "hit_if_all_true": ["k"]}"#).unwrap();
        let mut case = cases.remove(0);
        case.job.mode = mode;
        case
    }

    #[test]
    fn seats_cover_the_modes_used_and_label_twins() {
        let s = settings_with(None);
        let default_only = seats(&s, &[case(Mode::Default)]);
        let names: Vec<&str> = default_only.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(names, ["claude", "codex", "cursor"]);
        let both = seats(&s, &[case(Mode::Investigate), case(Mode::Default)]);
        assert_eq!(both.len(), 5);
        assert_eq!(labels(&both), ["claude", "codex", "cursor"]);
        let twins = settings_with(Some(vec![
            Runner::for_tests("a", &["a"]),
            Runner::for_tests("a", &["b"]),
        ]));
        let got = seats(&twins, &[case(Mode::Default)]);
        assert_eq!(labels(&got), ["a", "a#2"]);
    }

    #[test]
    fn select_keeps_the_named_and_names_the_available() {
        let s = settings_with(None);
        let all = seats(&s, &[case(Mode::Default)]);
        let picked = select(all.clone(), &["codex".into()]).unwrap();
        assert_eq!(labels(&picked), ["codex"]);
        assert_eq!(select(all.clone(), &[]).unwrap().len(), 3);
        let e = select(all, &["codex".into(), "gpt".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--runner gpt: no such runner in the table the cases use; available: claude, codex, cursor"
        );
    }

    #[test]
    fn alone_replaces_only_that_table() {
        let s = settings_with(None);
        let codex = s.config.runners.default[1].clone();
        let one = alone(&s, Mode::Default, &codex);
        assert_eq!(one.table(Mode::Default), std::slice::from_ref(&codex));
        assert_eq!(one.table(Mode::Investigate).len(), 2);
        assert!(one.runner_override.is_none(), "the cwd rule still applies");
        let over = settings_with(Some(vec![
            Runner::for_tests("a", &["a"]),
            Runner::for_tests("b", &["b"]),
        ]));
        let b = Runner::for_tests("b", &["b"]);
        let one = alone(&over, Mode::Investigate, &b);
        assert_eq!(
            one.runner_override.as_deref(),
            Some(std::slice::from_ref(&b))
        );
    }
}
