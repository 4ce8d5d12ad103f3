//! The rules of pre-start that need no process: which runners may have copies
//! waiting and which one does now (the first the jobs will take), and what a waiting
//! copy may print before its prompt.

use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::core::runner::table::Runner;

/// The runners of `settings`' default table that may have copies waiting, and how many:
/// `prestart`, at most `workers`; none under the override variable.
pub fn wanted(settings: &Settings, workers: usize) -> Vec<(Runner, usize)> {
    if settings.runner_override.is_some() {
        return Vec::new();
    }
    settings
        .table(Mode::Default)
        .iter()
        .filter_map(|r| {
            let n = usize::try_from(r.prestart?).ok()?.min(workers);
            (n > 0).then(|| (r.clone(), n))
        })
        .collect()
}

/// The runner whose copies wait now, and how many: of the `candidates` (`wanted`), the
/// first that is not benched in the trying order `standing` (the default table, each
/// runner with whether runner health benches it). Jobs try runners in that order, so
/// its copy is the one a job finds first; a benched runner's copy would wait unused
/// (a claude whose login is gone hands its copy to codex). `None` when every
/// candidate is benched.
pub fn waiting_for(
    standing: &[(&Runner, bool)],
    candidates: &[(Runner, usize)],
) -> Option<(Runner, usize)> {
    standing
        .iter()
        .filter(|(_, benched)| !benched)
        .find_map(|(runner, _)| candidates.iter().find(|(c, _)| c == *runner).cloned())
}

/// Why a waiting copy's stdout before its prompt breaks the protocol, if it does: only
/// whole lines that are the CLI's own `system` events (JSON objects with `"type":
/// "system"`) or blank may come before the prompt; a line still being written counts
/// against it too (it could become anything), and so does more than the cap.
pub fn early_output_problem(early: &[u8]) -> Option<String> {
    if early.is_empty() {
        return None;
    }
    if early.len() > crate::process::spawn::EARLY_OUTPUT_CAP {
        return Some(format!(
            "printed more than {} bytes before its prompt",
            crate::process::spawn::EARLY_OUTPUT_CAP
        ));
    }
    let text = String::from_utf8_lossy(early);
    let mut lines = text.split_inclusive('\n');
    let offending = lines.find(|line| {
        let whole = line.ends_with('\n');
        let line = line.trim();
        !whole || (!line.is_empty() && !is_system_event(line))
    })?;
    let shown: String = offending.trim().chars().take(80).collect();
    Some(format!("printed {shown:?} before its prompt"))
}

/// A CLI start-up event line: a JSON object whose `type` is `system`.
fn is_system_event(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line)
        .is_ok_and(|v| v.get("type").and_then(|t| t.as_str()) == Some("system"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_system_events_may_come_before_the_prompt() {
        let fine = [
            "",
            "{\"type\":\"system\",\"subtype\":\"ui_invalidate\"}\n",
            "{\"type\":\"system\",\"subtype\":\"init\",\"cwd\":\"/x\"}\n\n{\"type\": \"system\"}\n",
        ];
        for early in fine {
            assert_eq!(early_output_problem(early.as_bytes()), None, "{early:?}");
        }
        let broken = [
            "{\"type\":\"result\",\"result\":\"{\\\"ok\\\": true}\"}\n",
            "{\"type\":\"system\"}\n{\"bug\": true}\n",
            "Warning: banner\n",
            "{\"type\":\"system\"",
            "{\"type\":\"assistant\"}\n",
            "[1]\n",
        ];
        for early in broken {
            let why = early_output_problem(early.as_bytes());
            assert!(
                why.as_deref()
                    .is_some_and(|w| w.contains("before its prompt")),
                "{early:?}"
            );
        }
        let flood = "{\"type\":\"system\"}\n".repeat(5000);
        assert!(
            early_output_problem(flood.as_bytes())
                .unwrap()
                .contains("more than")
        );
    }

    fn settings_with(table: Vec<Runner>) -> Settings {
        let mut s = Settings::for_tests("/nonexistent".into(), "x");
        s.config.runners.default = table;
        s.runner_override = None;
        s
    }

    #[test]
    fn only_prestart_runners_are_wanted_and_at_most_workers_of_each() {
        let plain = Runner::for_tests("plain", &["/bin/a"]);
        let two = Runner {
            prestart: Some(2),
            ..Runner::for_tests("two", &["/bin/b"])
        };
        let off = Runner {
            prestart: Some(0),
            ..Runner::for_tests("off", &["/bin/c"])
        };
        let s = settings_with(vec![plain, two.clone(), off]);
        assert_eq!(wanted(&s, 4), vec![(two.clone(), 2)]);
        assert_eq!(wanted(&s, 1), vec![(two, 1)]);
    }

    #[test]
    fn copies_wait_for_the_first_candidate_health_does_not_bench() {
        let runner = |name: &str| Runner {
            prestart: Some(1),
            ..Runner::for_tests(name, &["/bin/x"])
        };
        let (claude, codex, cursor) = (
            runner("claude"),
            runner("codex"),
            Runner::for_tests("cursor", &["/bin/c"]),
        );
        let candidates = vec![(claude.clone(), 1), (codex.clone(), 2)];
        let healthy = [(&claude, false), (&codex, false), (&cursor, false)];
        assert_eq!(
            waiting_for(&healthy, &candidates),
            Some((claude.clone(), 1))
        );
        let claude_benched = [(&codex, false), (&cursor, false), (&claude, true)];
        assert_eq!(
            waiting_for(&claude_benched, &candidates),
            Some((codex.clone(), 2))
        );
        let cursor_first = [(&cursor, false), (&codex, false), (&claude, true)];
        assert_eq!(
            waiting_for(&cursor_first, &candidates),
            Some((codex.clone(), 2)),
            "cursor has no prestart"
        );
        let all_benched = [(&claude, true), (&codex, true), (&cursor, true)];
        assert_eq!(waiting_for(&all_benched, &candidates), None);
        assert_eq!(waiting_for(&healthy, &[]), None);
    }

    #[test]
    fn the_override_variable_wants_none() {
        let mut s = settings_with(vec![Runner {
            prestart: Some(1),
            ..Runner::for_tests("p", &["/bin/p"])
        }]);
        s.runner_override = Some(Vec::new());
        assert!(wanted(&s, 4).is_empty());
    }
}
