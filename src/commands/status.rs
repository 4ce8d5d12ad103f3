//! `llm-judge status [--json]`: the daemon (from its lock and status record), the
//! queue (from jobs/ itself, so it works with the daemon down) and running jobs
//! (from live claims, which also shows `llm-judge run` at work), and what the runners
//! spent (from the spend ledger, so it survives restarts).

use std::io::IsTerminal;
use std::time::UNIX_EPOCH;

use serde_json::{Value, json};

use crate::core::config::Settings;
use crate::core::job::life::{ClaimRecord, Stage};
use crate::core::spend::{Budget, DAY, HOUR, dollars, over_budget, totals_since};
use crate::process::os::is_alive;
use crate::store::state_dir::{StateDir, is_job_name, now_unix};
use crate::store::status_file::{StatusRecord, TallyRead};
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK};

/// `status` flags.
#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// Machine-readable JSON.
    #[arg(long)]
    pub json: bool,
    /// Forget all runner health (benched runners go back to their table order).
    #[arg(long)]
    pub reset_health: bool,
}

/// Shows status; returns the exit code.
pub fn main(settings: &Settings, args: &StatusArgs) -> i32 {
    let state = StateDir::new(&settings.state_dir);
    if let Some(why) = crate::store::unreadable_state(&state) {
        say_err!("llm-judge status: {why}");
        return EXIT_FAILURE;
    }
    if args.reset_health {
        if let Err(e) = crate::store::health_store::reset(&state) {
            say_err!(
                "llm-judge status: cannot reset runner health in {}: {e}",
                state.root.display(),
                e = e.chain()
            );
            return EXIT_FAILURE;
        }
        say_err!("runner health reset: every runner is back in its table order");
    }
    let mut report = collect(&state, &settings.config.budget());
    report["hits_last_hour"] = hits_last_hour(&state, &settings.config);
    let text = if args.json {
        // A `Value` always serialises: `{:#}` is its pretty form.
        format!("{report:#}\n")
    } else {
        render(&report, std::io::stdout().is_terminal())
    };
    if crate::support::exit::print_stdout(&text) {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}

/// The whole report as the JSON of docs/reference.md, "status --json", plus `spend` (runs,
/// tokens and cost per runner for the last hour and day, and the cap).
pub fn collect(state: &StateDir, budget: &Budget) -> Value {
    let now = now_unix();
    let holder = crate::store::daemon_lock::holder(&state.lock());
    let record: Option<StatusRecord> = holder.and_then(|_| {
        let bytes = crate::store::state_dir::read_nofollow(&state.status()).ok()?;
        serde_json::from_slice(&bytes).ok()
    });
    let running = running_jobs(state, now);
    let (waiting, oldest) = queue(state, running.len());
    let daemon = json!({
        "running": holder.is_some(),
        "pid": holder,
        "version": record.as_ref().map(|r| r.version.clone()),
        "uptime_seconds": record.as_ref().map(|r| round(now - r.started_at)),
        "workers": record.as_ref().map(|r| r.workers),
        "draining": record.as_ref().map(|r| r.draining),
        "prestarted": record.as_ref().map(|r| r.prestarted),
    });
    // The tally (rewritten before each verdict's rename) when it is this daemon's: its
    // counts and runner stats agree with each other and with the verdicts one can read;
    // status.json is rewritten at most once a second.
    let tally = record.as_ref().and_then(|r| {
        crate::store::status_file::read_tally(&crate::store::status_file::tally_path(state), r.pid)
    });
    let runner_stats = match (&tally, &record) {
        (
            Some(TallyRead {
                runners: Some(r), ..
            }),
            _,
        ) => Some(r.clone()),
        (_, Some(record)) => Some(record.runners.clone()),
        _ => None,
    };
    let mut runners: serde_json::Map<String, Value> = runner_stats
        .as_ref()
        .map(|stats| {
            stats
                .iter()
                .map(|(name, s)| {
                    let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
                    v["health"] = Value::Null;
                    (name.clone(), v)
                })
                .collect()
        })
        .unwrap_or_default();
    for h in crate::store::health_store::read(state).into_values() {
        let entry = runners
            .entry(h.name.clone())
            .or_insert_with(|| json!({"health": null}));
        entry["health"] = json!({
            "benched": h.benched_until > now,
            "benched_until": h.benched_until,
            "backoff_seconds": h.backoff_seconds,
            "timeouts_in_a_row": h.timeouts_in_a_row,
            "last_reason": h.last_reason,
        });
    }
    let codex_models = record
        .as_ref()
        .map(|r| r.codex_models.clone())
        .unwrap_or_default();
    json!({
        "state_dir": state.root,
        "daemon": daemon,
        "queue": {"waiting": waiting, "oldest_age_seconds": oldest.map(|t| round(now - t))},
        "running": running,
        "outcomes": match tally {
            Some(t) => t.counts,
            None => record.map(|r| r.outcomes).unwrap_or_default(),
        },
        "runners": runners,
        "codex_models": codex_models,
        "spend": spend(state, budget, now),
    })
}

/// `hits_last_hour`: the hits per rule of the last hour, from the verdict history as
/// imported so far (an empty list when there is none; `null` when it cannot be read,
/// which is said).
fn hits_last_hour(state: &StateDir, config: &crate::core::config::Config) -> Value {
    // No database yet: nothing imported, and status makes none.
    if !state
        .history()
        .join(crate::store::history::DB_NAME)
        .exists()
    {
        return json!([]);
    }
    // Read only: what the daemon (or `history`) imported; status writes nothing.
    let hits = crate::store::history::History::open(state, config.fsync)
        .and_then(|history| history.hits_since(now_unix() - HOUR));
    match hits {
        Ok(hits) => hits
            .into_iter()
            .map(|(rule, hits)| json!({"rule": rule, "hits": hits}))
            .collect(),
        Err(e) => {
            say_warn!("llm-judge status: {e}");
            Value::Null
        }
    }
}

/// `spend`: totals per runner of the ledger's last hour and day, and the cap's state.
fn spend(state: &StateDir, budget: &Budget, now: f64) -> Value {
    let recent = crate::store::spend_ledger::recent(state);
    let window = |since| serde_json::to_value(totals_since(&recent, since)).unwrap_or_default();
    json!({
        "last_hour": window(now - HOUR),
        "last_day": window(now - DAY),
        "budget": {
            "max_cost_usd_per_day": budget.max_cost_usd_per_day,
            "max_runs_per_hour": budget.max_runs_per_hour,
            "reached": over_budget(&recent, budget, now, 0).map(|cap| cap.to_string()),
        },
    })
}

fn round(seconds: f64) -> f64 {
    (seconds.max(0.0) * 10.0).round() / 10.0
}

/// Job files waiting (minus those being judged) and the oldest one's mtime.
fn queue(state: &StateDir, running: usize) -> (usize, Option<f64>) {
    let Ok(entries) = std::fs::read_dir(state.jobs()) else {
        return (0, None);
    };
    let mut count: usize = 0;
    let mut oldest: Option<f64> = None;
    for entry in entries.flatten() {
        if !is_job_name(&entry.file_name()) {
            continue;
        }
        count += 1;
        let mtime = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64());
        if let Some(t) = mtime {
            oldest = Some(oldest.map_or(t, |o| o.min(t)));
        }
    }
    (count.saturating_sub(running), oldest)
}

/// Jobs whose claim holder is alive.
fn running_jobs(state: &StateDir, now: f64) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(state.claims()) else {
        return Vec::new();
    };
    let mut jobs: Vec<(f64, Value)> = entries
        .flatten()
        .filter_map(|e| {
            let record: ClaimRecord =
                serde_json::from_slice(&crate::store::state_dir::read_nofollow(&e.path()).ok()?)
                    .ok()?;
            let live = record.stage != Stage::Queued && is_alive(record.owner_pid);
            live.then(|| {
                let job = json!({
                    "id": record.id,
                    "file": e.file_name().to_string_lossy(),
                    "hook": record.hook,
                    "runner": record.stage.runner().map(|r| r.name.clone()),
                    "age_seconds": round(now - record.claimed_at),
                    "pid": record.owner_pid,
                });
                (record.claimed_at, job)
            })
        })
        .collect();
    jobs.sort_by(|a, b| a.0.total_cmp(&b.0));
    jobs.into_iter().map(|(_, j)| j).collect()
}

/// The report for a terminal.
pub fn render(report: &Value, colour: bool) -> String {
    let paint = |text: &str, code: &str| {
        if colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    };
    let d = &report["daemon"];
    let mut out = String::new();
    let daemon = if d["running"] == true {
        format!(
            "{}  pid {}  version {}  up {}  workers {}{}{}",
            paint("running", "32"),
            d["pid"],
            shown(d["version"].as_str().unwrap_or("?")),
            duration(d["uptime_seconds"].as_f64()),
            d["workers"],
            match d["prestarted"].as_u64() {
                Some(n) if n > 0 => format!("  pre-started {n}"),
                _ => String::new(),
            },
            if d["draining"] == true {
                "  (draining)"
            } else {
                ""
            }
        )
    } else {
        format!(
            "{}  (jobs wait until one starts: llm-judge daemon)",
            paint("not running", "31")
        )
    };
    out += &format!("{:<10}{daemon}\n", "daemon");
    let q = &report["queue"];
    out += &format!(
        "{:<10}{} waiting{}\n",
        "queue",
        q["waiting"],
        q["oldest_age_seconds"]
            .as_f64()
            .map_or(String::new(), |a| format!(", oldest {}", duration(Some(a))))
    );
    let running: Vec<Vec<String>> = report["running"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            vec![
                text(&j["id"]),
                text(&j["hook"]),
                text(&j["runner"]),
                duration(j["age_seconds"].as_f64()),
            ]
        })
        .collect();
    out += &section("running", &["ID", "HOOK", "RUNNER", "AGE"], &running);
    let o = &report["outcomes"];
    out += &format!(
        "{:<10}hit {}  clean {}  unchecked {}\n",
        "outcomes", o["hit"], o["clean"], o["unchecked"]
    );
    let hits: Vec<String> = report["hits_last_hour"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| format!("{} {}", text(&h["rule"]), h["hits"]))
        .collect();
    if !hits.is_empty() {
        out += &format!("{:<10}{}  (last hour, per rule)\n", "hits", hits.join("  "));
    }
    let runners: Vec<Vec<String>> = report["runners"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, s)| {
            vec![
                shown(name),
                format!("{}/{}", text(&s["answered"]), text(&s["attempts"])),
                s["answer_rate"]
                    .as_f64()
                    .map_or("-".into(), |r| format!("{:.0}%", r * 100.0)),
                s["median_seconds"]
                    .as_f64()
                    .map_or("-".into(), |m| format!("{m:.1}s")),
                health_text(&s["health"]),
            ]
        })
        .collect();
    out += &section(
        "runners",
        &["NAME", "ANSWERED", "RATE", "MEDIAN", "HEALTH"],
        &runners,
    );
    for (label, key) in [("last hour", "last_hour"), ("last day", "last_day")] {
        out += &spend_section(label, &report["spend"][key]);
    }
    out += &format!(
        "{:<10}{}\n",
        "budget",
        budget_text(&report["spend"]["budget"])
    );
    for m in report["codex_models"].as_array().into_iter().flatten() {
        let replaced = m["replaced"].as_str().map_or(String::new(), |t| {
            format!(" (not {}: this login's catalog lacks it)", shown(t))
        });
        out += &format!(
            "{:<10}{} runner {}: model {}{replaced}\n",
            "codex",
            text(&m["table"]),
            text(&m["runner"]),
            text(&m["model"])
        );
    }
    out
}

/// Runs, verdicts, tokens and cost per runner of one window.
fn spend_section(label: &str, totals: &Value) -> String {
    let rows: Vec<Vec<String>> = totals
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, t)| {
            vec![
                shown(name),
                text(&t["runs"]),
                text(&t["verdicts"]),
                format!("{}/{}", text(&t["input_tokens"]), text(&t["output_tokens"])),
                t["cost_usd"]
                    .as_f64()
                    .map_or("-".into(), |c| format!("${}", dollars(c))),
            ]
        })
        .collect();
    section(
        label,
        &["NAME", "RUNS", "VERDICTS", "TOKENS IN/OUT", "COST"],
        &rows,
    )
}

/// The cap: none, its keys and "under", or the reason jobs end unchecked.
fn budget_text(b: &Value) -> String {
    let mut keys = Vec::new();
    if let Some(cost) = b["max_cost_usd_per_day"].as_f64() {
        keys.push(format!("max_cost_usd_per_day {cost}"));
    }
    if let Some(runs) = b["max_runs_per_hour"].as_u64() {
        keys.push(format!("max_runs_per_hour {runs}"));
    }
    match (keys.is_empty(), b["reached"].as_str()) {
        (true, _) => "no cap (max_cost_usd_per_day, max_runs_per_hour unset)".into(),
        (false, Some(reason)) => format!("REACHED, jobs end unchecked: {}", shown(reason)),
        (false, None) => format!("{}: under", keys.join(", ")),
    }
}

fn health_text(h: &Value) -> String {
    if h["benched"] == true {
        format!(
            "benched {}s ({})",
            h["backoff_seconds"],
            text(&h["last_reason"])
        )
    } else if h["timeouts_in_a_row"].as_u64().is_some_and(|n| n > 0) {
        format!("{} timeout(s) in a row", h["timeouts_in_a_row"])
    } else {
        "ok".into()
    }
}

/// A value for the terminal: strings as they are but for control characters, which
/// are escaped (job ids and hooks come from job files; a newline or an ESC sequence
/// must not reach the terminal).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => shown(s),
        Value::Null => "-".into(),
        other => shown(&other.to_string()),
    }
}

/// Text for the terminal, escaped as judge.log escapes it.
fn shown(s: &str) -> String {
    crate::store::judge_log::escape_controls(s)
}

/// An aligned table under a left label; "none" when empty.
fn section(label: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    if rows.is_empty() {
        return format!("{label:<10}none\n");
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = format!(
        "{label:<10}{}\n",
        line(header.iter().map(|h| h.to_string()).collect())
    );
    for row in rows {
        out += &format!("{:<10}{}\n", "", line(row.clone()));
    }
    out
}

fn duration(seconds: Option<f64>) -> String {
    let Some(s) = seconds else { return "-".into() };
    let s = s as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_without_colour() {
        let report = json!({
            "daemon": {"running": true, "pid": 7, "version": "0.1.0", "uptime_seconds": 75.0, "workers": 4, "draining": false},
            "queue": {"waiting": 2, "oldest_age_seconds": 3.0},
            "running": [{"id": "abc", "hook": "stop", "runner": "codex", "age_seconds": 4.0}],
            "outcomes": {"hit": 1, "clean": 2, "unchecked": 0},
            "runners": {"codex": {"attempts": 4, "answered": 3, "answer_rate": 0.75, "median_seconds": 2.25}},
        });
        let text = render(&report, false);
        assert!(
            text.contains("daemon    running  pid 7  version 0.1.0  up 1m15s  workers 4\n"),
            "{text}"
        );
        assert!(text.contains("queue     2 waiting, oldest 3s\n"), "{text}");
        assert!(
            text.contains("running   ID   HOOK  RUNNER  AGE\n          abc  stop  codex   4s\n"),
            "{text}"
        );
        let mut waiting = report.clone();
        waiting["daemon"]["prestarted"] = json!(1);
        let text = render(&waiting, false);
        assert!(
            text.contains("up 1m15s  workers 4  pre-started 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "runners   NAME   ANSWERED  RATE  MEDIAN  HEALTH\n          codex  3/4       75%   2.2s    ok\n"
            ),
            "{text}"
        );
        assert!(!text.contains('\x1b'));
    }

    #[test]
    fn control_characters_are_escaped_as_in_judge_log() {
        let report = json!({
            "daemon": {"running": true, "pid": 7, "version": "0.1\u{1b}[2J", "uptime_seconds": 1.0, "workers": 1, "draining": false},
            "queue": {"waiting": 0, "oldest_age_seconds": null},
            "running": [{"id": "a\nb", "hook": {"k": "\u{1b}"}, "runner": "r\t", "age_seconds": 1.0}],
            "outcomes": {"hit": 0, "clean": 0, "unchecked": 0},
            "runners": {"x\u{1b}": {"attempts": 1, "answered": 0, "health": {"benched": true, "backoff_seconds": 60, "last_reason": "exit 1: \u{1b}[31m"}}},
            "codex_models": [{"table": "default", "runner": "c\r", "model": "m\n", "replaced": "o\u{7}"}],
            "spend": {"last_hour": {"s\u{1b}": {"runs": 1, "verdicts": 1, "input_tokens": 3, "output_tokens": 1, "cost_usd": null}},
                      "last_day": {},
                      "budget": {"max_runs_per_hour": 1, "reached": "budget: \u{1b}[31m"}},
        });
        let text = render(&report, false);
        assert!(!text.contains(['\x1b', '\r', '\t', '\u{7}']), "{text:?}");
        assert_eq!(text.lines().count(), 12, "one line per row: {text}");
        assert!(
            text.contains("s\\u001b  1     1         3/1            -"),
            "{text}"
        );
        assert!(
            text.contains("REACHED, jobs end unchecked: budget: \\u001b[31m"),
            "{text}"
        );
        for shown in [
            "0.1\\u001b[2J",
            "a\\nb",
            "r\\t",
            "x\\u001b",
            "exit 1: \\u001b[31m",
            "c\\r",
            "m\\n",
            "o\\u0007",
        ] {
            assert!(text.contains(shown), "{shown} in {text}");
        }
    }
}
