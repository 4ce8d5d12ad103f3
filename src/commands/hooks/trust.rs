//! `llm-judge hooks trust DIR`: pins a project's `.llm-judge/rules.toml` as it is now,
//! after showing each of its rules in full (question, hit keys, action, wait), and
//! which of them the hook leaves out because the user has a rule of that name: a
//! project's rules only add (docs/hooks.md, "Project rules").

use std::path::Path;

use super::{Refused, write_text};
use crate::core::hooks::rules::{Hit, Rule, added_to, parse_rules};
use crate::core::job::Mode;
use crate::store::config_file::Sources;
use crate::store::rules_files::{self, PROJECT_RULES, Pins, pin_of, pins_path, pins_to_change};

/// A question is shown up to this many characters.
const QUESTION_SHOWN: usize = 600;

/// Pins a project's rules file as it is now (the hook then reads it).
pub(super) fn project(sources: &Sources, dir: &Path) -> Result<(), Refused> {
    let path = std::fs::canonicalize(dir.join(PROJECT_RULES)).map_err(|e| {
        Refused::Usage(format!(
            "{}: {e}; give a folder with a {PROJECT_RULES}",
            dir.join(PROJECT_RULES).display()
        ))
    })?;
    let text = crate::store::state_dir::read_small_text(&path)
        .map_err(Refused::Failed)?
        .ok_or_else(|| Refused::Usage(format!("{} is not there", path.display())))?;
    let rules = parse_rules(&text).map_err(|e| {
        Refused::Usage(format!("{} {e}; fix it before trusting it", path.display()))
    })?;
    let pins_file = pins_path(sources).ok_or_else(|| Refused::Usage("HOME is not set".into()))?;
    let mut all: Pins = pins_to_change(sources).map_err(Refused::Usage)?;
    all.trusted
        .insert(path.display().to_string(), pin_of(&text));
    let json = serde_json::to_string_pretty(&all).map_err(|e| Refused::Failed(e.to_string()))?;
    write_text(&pins_file, &format!("{json}\n"), None, false, 0o600)?;
    say!(
        "trusted {} as it is now ({} rules):",
        path.display(),
        rules.len()
    );
    let users = rules_files::load_user(sources).rules;
    let (_, shadowed) = added_to(&users, rules.clone());
    for rule in &rules {
        say!("{}", describe(rule, shadowed.contains(&rule.name)));
    }
    say!("any change to it turns its rules off until you trust it again");
    Ok(())
}

/// One rule as the user should read it before trusting it.
fn describe(rule: &Rule, shadowed: bool) -> String {
    let mut out = format!(
        "- {} ({}{}, {}{})",
        rule.name,
        rule.action.name(),
        if rule.mode == Mode::Investigate {
            ", investigate: reads files under the session's folder"
        } else {
            ""
        },
        if rule.enabled { "on" } else { "off" },
        rule.wait_ms
            .map(|ms| format!(", waits up to {ms} ms"))
            .unwrap_or_default()
    );
    if shadowed {
        out.push_str(
            "\n  LEFT OUT: you have a rule of this name; yours is kept (a project's rules only add)",
        );
    }
    let question: String = rule.question.trim().chars().take(QUESTION_SHOWN).collect();
    let cut = rule.question.trim().chars().count() > QUESTION_SHOWN;
    out.push_str("\n  question: ");
    out.push_str(&question.replace('\n', "\n    "));
    if cut {
        out.push_str(" [...]");
    }
    match &rule.hit {
        Hit::AllTrue(keys) => {
            out.push_str(&format!("\n  hit when all true: {}", keys.join(", ")));
            out.push_str(&format!("\n  tells the agent: {}", rule.notice.trim()));
        }
        Hit::AnyTrue(pairs) => {
            for (key, notice) in pairs {
                out.push_str(&format!(
                    "\n  hit when {key} is true; tells the agent: {notice}"
                ));
            }
        }
    }
    out
}
