//! `llm-judge stats`: per rule, what the judge did (docs/history.md): judged, hits,
//! blocks, notices, unchecked, latencies, tokens, cost, marks; by day, week or session.

use serde_json::json;

use crate::core::config::Settings;
use crate::core::history::stats::{aggregate, render_table};
use crate::store::history::{By, Filter};
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, print_stdout};

/// How `--by` groups.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ByArg {
    Day,
    Week,
    Session,
}

/// `stats` flags.
#[derive(clap::Args, Debug)]
pub struct StatsArgs {
    /// Figures per day, week (from Monday) or session, each group's rules under it.
    #[arg(long, value_enum)]
    pub by: Option<ByArg>,
    /// Only verdicts since then: 30m, 24h, 7d, 2w, or a date (2026-12-01, local midnight).
    #[arg(long, value_name = "SPAN|DATE")]
    pub since: Option<String>,
    /// Only this rule.
    #[arg(long, value_name = "NAME")]
    pub rule: Option<String>,
    /// Only this harness's sessions.
    #[arg(long, value_parser = ["claude", "codex", "cursor"])]
    pub harness: Option<String>,
    /// One JSON object: {"since", "by", "rules": [...]}.
    #[arg(long)]
    pub json: bool,
}

/// Shows the figures; returns the exit code.
pub fn main(settings: &Settings, args: &StatsArgs) -> i32 {
    let since = match super::parse_since(args.since.as_deref(), "stats") {
        Ok(since) => since,
        Err(code) => return code,
    };
    let history = match super::open(settings, "stats") {
        Ok(history) => history,
        Err(code) => return code,
    };
    let filter = Filter {
        since,
        rule: args.rule.clone(),
        harness: args.harness.clone(),
        ..Filter::default()
    };
    let by = args.by.map(|by| match by {
        ByArg::Day => By::Day,
        ByArg::Week => By::Week,
        ByArg::Session => By::Session,
    });
    let rows = match history.grouped_rows(&filter, by) {
        Ok(rows) => rows,
        Err(e) => {
            say_err!("llm-judge stats: {e}");
            return EXIT_FAILURE;
        }
    };
    let stats = aggregate(&rows);
    let text = if args.json {
        let by = args.by.map(|b| format!("{b:?}").to_lowercase());
        let rules: Vec<_> = stats.iter().map(|s| s.to_json()).collect();
        format!(
            "{:#}\n",
            json!({"since": args.since, "by": by, "rules": rules})
        )
    } else if stats.is_empty() {
        say_err!(
            "no verdict on record yet{}",
            match args.since {
                Some(_) => " in that span",
                None => "",
            }
        );
        return EXIT_OK;
    } else {
        render_table(&stats)
    };
    if print_stdout(&text) {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}
