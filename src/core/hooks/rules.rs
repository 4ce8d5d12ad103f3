//! The user's rules (`rules.toml`, docs/hooks.md): each a question asked about an
//! agent's reply at a hook event, what makes its answer a hit, and what a hit does
//! (block the stop, or a notice at the next prompt). Unknown keys and wrong values are
//! refused with the file's line, as config keys are.

use serde::Deserialize;
use thiserror::Error;

use crate::core::config::key::{line_at, unknown_field};
use crate::core::job::Mode;

/// When a rule is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// The agent finished its reply (Cursor: `afterAgentResponse`).
    Stop,
    /// A helper agent finished (claude and codex `SubagentStop`).
    SubagentStop,
}

/// What a hit does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// The stop waits (up to `wait_ms`) for the verdict; a hit sends the agent back to
    /// work with the notice. Anything else lets the stop through (a later hit becomes a
    /// notice).
    Block,
    /// The stop goes on at once; a hit's notice reaches the agent at the session's next
    /// prompt or start.
    Notice,
    /// Claude only: judged in the background by an `asyncRewake` hook, which wakes the
    /// model with the notice on a hit.
    Rewake,
}

impl Action {
    /// Its name in rules.toml.
    pub fn name(self) -> &'static str {
        match self {
            Action::Block => "block",
            Action::Notice => "notice",
            Action::Rewake => "rewake",
        }
    }
}

/// What makes an answer a hit: the job keys of the same names.
#[derive(Debug, Clone, PartialEq)]
pub enum Hit {
    /// Every key is JSON `true`.
    AllTrue(Vec<String>),
    /// Any key is JSON `true`; each key's notice says why (in the rule's order).
    AnyTrue(Vec<(String, String)>),
}

/// One rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: String,
    pub on: Vec<Trigger>,
    pub action: Action,
    /// The question; the judge adds the reply (and the user's prompt) as data.
    pub question: String,
    pub hit: Hit,
    /// What the agent is told on a hit (with `hit_if_any_true`: its keys' notices).
    pub notice: String,
    pub mode: Mode,
    /// Off: never asked (the shipped examples start off).
    pub enabled: bool,
    /// How long a block (or rewake) waits for the verdict; `None`: the config's.
    pub wait_ms: Option<u64>,
    /// Per runner; `None`: the config's default.
    pub timeout_seconds: Option<f64>,
}

/// A rules file that cannot be used: its line (when known) and what to fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub struct RulesError {
    pub line: Option<usize>,
    pub message: String,
}

/// The longest a block may hold a stop (the harness's own hook timeout is above it).
pub const MAX_WAIT_MS: u64 = 120_000;

/// The keys of a `[[rule]]` table, as messages list them.
const RULE_KEYS: [&str; 11] = [
    "name",
    "on",
    "action",
    "question",
    "hit_if_all_true",
    "hit_if_any_true",
    "notice",
    "mode",
    "enabled",
    "wait_ms",
    "timeout_seconds",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rule: Vec<toml::Spanned<Entry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    #[serde(default = "default_on")]
    on: Vec<Trigger>,
    #[serde(default = "default_action")]
    action: Action,
    question: String,
    #[serde(default)]
    hit_if_all_true: Option<Vec<String>>,
    #[serde(default)]
    hit_if_any_true: Option<toml::Table>,
    #[serde(default)]
    notice: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default = "default_enabled")]
    enabled: bool,
    #[serde(default)]
    wait_ms: Option<u64>,
    #[serde(default)]
    timeout_seconds: Option<f64>,
}

fn default_on() -> Vec<Trigger> {
    vec![Trigger::Stop]
}

fn default_action() -> Action {
    Action::Notice
}

fn default_enabled() -> bool {
    true
}

/// Reads a rules file; every rule is checked, the first problem is the error.
pub fn parse_rules(text: &str) -> Result<Vec<Rule>, RulesError> {
    let file: File = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    let mut rules: Vec<Rule> = Vec::with_capacity(file.rule.len());
    for spanned in file.rule {
        let line = line_at(text, spanned.span().start);
        let rule = check(spanned.into_inner()).map_err(|problem| RulesError {
            line: Some(line),
            message: problem.to_string(),
        })?;
        if rules.iter().any(|r| r.name == rule.name) {
            return Err(RulesError {
                line: Some(line),
                message: format!(
                    "a second rule named {:?}; give each rule its own name",
                    rule.name
                ),
            });
        }
        rules.push(rule);
    }
    Ok(rules)
}

/// What is wrong with one `[[rule]]`; each names the rule (by its name as written).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
enum RuleProblem {
    #[error("name {0:?}: give a short name (1 to 64 characters, no control characters)")]
    BadName(String),
    #[error("rule {0:?}: question is empty; ask what the reply should be checked for")]
    NoQuestion(String),
    #[error("rule {0:?}: on is empty; give [\"stop\"] or [\"subagent-stop\"]")]
    NoTrigger(String),
    #[error(
        "rule {name:?}: mode {mode:?} is not a mode; give \"investigate\" (read-only runners in \
         the session's folder) or leave it out"
    )]
    BadMode { name: String, mode: String },
    #[error("rule {0:?}: give hit_if_all_true or hit_if_any_true, not both")]
    BothHitKeys(String),
    #[error(
        "rule {0:?}: no hit keys; give hit_if_all_true = [\"key\"] (or hit_if_any_true = \
         {{ key = \"notice\" }}) naming the answer's keys that make a hit (without one every \
         answer would be a hit)"
    )]
    NoHitKeys(String),
    #[error(
        "rule {name:?}: hit_if_any_true.{key} must be the notice (a string) the agent gets \
         when {key} is true"
    )]
    BadAnyTrueNotice { name: String, key: String },
    #[error("rule {0:?}: notice is missing; say what the agent is told on a hit")]
    NoNotice(String),
    #[error("rule {0:?}: wait_ms is above {MAX_WAIT_MS}; give a shorter wait")]
    WaitTooLong(String),
    #[error("rule {0:?}: timeout_seconds must be a number of seconds above 0")]
    BadTimeout(String),
}

/// A rule from its table, or what is wrong with it.
fn check(entry: Entry) -> Result<Rule, RuleProblem> {
    let name = entry.name.trim().to_string();
    if name.is_empty() || name.chars().any(char::is_control) || name.chars().count() > 64 {
        return Err(RuleProblem::BadName(entry.name));
    }
    if entry.question.trim().is_empty() {
        return Err(RuleProblem::NoQuestion(name));
    }
    if entry.on.is_empty() {
        return Err(RuleProblem::NoTrigger(name));
    }
    let mode = match entry.mode.as_deref() {
        None | Some("default") => Mode::Default,
        Some("investigate") => Mode::Investigate,
        Some(other) => {
            let mode = other.to_string();
            return Err(RuleProblem::BadMode { name, mode });
        }
    };
    let hit = match (entry.hit_if_all_true, entry.hit_if_any_true) {
        (Some(_), Some(_)) => return Err(RuleProblem::BothHitKeys(name)),
        (Some(keys), None) if !keys.is_empty() && keys.iter().all(|k| !k.is_empty()) => {
            Hit::AllTrue(keys)
        }
        (None, Some(table)) if !table.is_empty() => Hit::AnyTrue(any_true(&name, table)?),
        _ => return Err(RuleProblem::NoHitKeys(name)),
    };
    let notice = match (entry.notice, &hit) {
        (Some(n), _) if !n.trim().is_empty() => n,
        (_, Hit::AnyTrue(_)) => String::new(),
        _ => return Err(RuleProblem::NoNotice(name)),
    };
    if entry.wait_ms.is_some_and(|w| w > MAX_WAIT_MS) {
        return Err(RuleProblem::WaitTooLong(name));
    }
    if entry
        .timeout_seconds
        .is_some_and(|t| !t.is_finite() || t <= 0.0)
    {
        return Err(RuleProblem::BadTimeout(name));
    }
    Ok(Rule {
        name,
        on: entry.on,
        action: entry.action,
        question: entry.question,
        hit,
        notice,
        mode,
        enabled: entry.enabled,
        wait_ms: entry.wait_ms,
        timeout_seconds: entry.timeout_seconds,
    })
}

/// `hit_if_any_true`'s keys and notices, in the file's order.
fn any_true(name: &str, table: toml::Table) -> Result<Vec<(String, String)>, RuleProblem> {
    table
        .into_iter()
        .map(|(key, value)| match value {
            toml::Value::String(notice) if !notice.trim().is_empty() => Ok((key, notice)),
            _ => Err(RuleProblem::BadAnyTrueNotice {
                name: name.to_string(),
                key,
            }),
        })
        .collect()
}

/// A TOML or shape error with its line, and "did you mean" for a misspelt key.
fn toml_error(text: &str, e: &toml::de::Error) -> RulesError {
    let line = e.span().map(|s| line_at(text, s.start));
    let message = e.message().trim().to_string();
    let message = match unknown_field(&message) {
        Some((field, _)) => match crate::core::job::keys::resembles(field, &RULE_KEYS) {
            Some(meant) => format!("{field} is not a rule key; did you mean {meant}?"),
            None => format!(
                "{field} is not a rule key; the keys of a [[rule]]: {}",
                RULE_KEYS.join(", ")
            ),
        },
        None => message,
    };
    RulesError { line, message }
}

/// The first rule that is on and asks in investigate mode: what makes the investigate
/// table matter to a user of hooks (an off rule is never asked).
pub fn first_investigating(rules: &[Rule]) -> Option<&Rule> {
    rules
        .iter()
        .find(|rule| rule.enabled && rule.mode == Mode::Investigate)
}

/// A project's `rules` that the user's do not name, and the names of the others: a
/// project's rules only add, so a trusted file cannot turn off or swap a rule of the
/// user's for another question under the same name.
pub fn added_to(users: &[Rule], rules: Vec<Rule>) -> (Vec<Rule>, Vec<String>) {
    let (shadowed, added): (Vec<Rule>, Vec<Rule>) = rules
        .into_iter()
        .partition(|rule| users.iter().any(|u| u.name == rule.name));
    (added, shadowed.into_iter().map(|r| r.name).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
# mine
[[rule]]
name = "claims-unverified-tests"
on = ["stop"]
action = "block"
question = """Did the assistant say that tests pass without running them in this turn?
Reply {"unverified": true|false}"""
hit_if_all_true = ["unverified"]
notice = "You said the tests pass but ran none this turn. Run them and show the output."

[[rule]]
name = "blockers"
on = ["stop", "subagent-stop"]
question = "Is a stated blocker false? Reply {\"false_blocker\": bool, \"gave_up\": bool}"
hit_if_any_true = { false_blocker = "That blocker is not real.", gave_up = "Do not give up." }
mode = "investigate"
enabled = false
wait_ms = 2000
"#;

    #[test]
    fn a_rules_file_reads_into_rules_in_order() {
        let rules = parse_rules(GOOD).unwrap();
        assert_eq!(rules.len(), 2);
        let first = &rules[0];
        assert_eq!(first.name, "claims-unverified-tests");
        assert_eq!(
            (first.action, first.on.as_slice()),
            (Action::Block, &[Trigger::Stop][..])
        );
        assert_eq!(first.hit, Hit::AllTrue(vec!["unverified".into()]));
        assert_eq!((first.enabled, first.mode), (true, Mode::Default));
        let second = &rules[1];
        assert_eq!(second.action, Action::Notice, "the default action");
        assert_eq!(second.on, [Trigger::Stop, Trigger::SubagentStop]);
        assert_eq!(
            second.hit,
            Hit::AnyTrue(vec![
                ("false_blocker".into(), "That blocker is not real.".into()),
                ("gave_up".into(), "Do not give up.".into())
            ])
        );
        assert_eq!(
            (second.mode, second.enabled, second.wait_ms),
            (Mode::Investigate, false, Some(2000))
        );
        assert!(parse_rules("").unwrap().is_empty());
    }

    #[test]
    fn only_a_rule_that_is_on_makes_investigate_used() {
        let rules = parse_rules(GOOD).unwrap();
        assert_eq!(
            first_investigating(&rules),
            None,
            "the investigate rule is off"
        );
        let on = GOOD.replace("enabled = false\n", "");
        let rules = parse_rules(&on).unwrap();
        assert_eq!(
            first_investigating(&rules).map(|r| r.name.as_str()),
            Some("blockers")
        );
        assert_eq!(first_investigating(&[]), None);
    }

    #[test]
    fn unknown_keys_and_wrong_values_are_refused_with_their_line() {
        let rule = |extra: &str| {
            format!(
                "[[rule]]\nname = \"r\"\nquestion = \"q\"\nhit_if_all_true = [\"k\"]\nnotice = \"n\"\n{extra}"
            )
        };
        for (text, line, words) in [
            (rule("actoin = \"block\"\n"), Some(6), "actoin is not a rule key; did you mean action?"),
            (rule("zzz = 1\n"), Some(6), "zzz is not a rule key; the keys of a [[rule]]: name, on"),
            (rule("action = \"blok\"\n"), Some(6), "unknown variant `blok`"),
            (rule("on = [\"start\"]\n"), Some(6), "unknown variant `start`"),
            (rule("mode = \"investigat\"\n"), Some(1), "mode \"investigat\" is not a mode"),
            (rule("hit_if_any_true = { a = \"b\" }\n"), Some(1), "not both"),
            (rule("wait_ms = 999999\n"), Some(1), "wait_ms is above"),
            (rule("timeout_seconds = 0\n"), Some(1), "above 0"),
            ("[[rule]]\nname = \"r\"\nquestion = \"q\"\nnotice = \"n\"\n".to_string(), Some(1), "no hit keys"),
            ("[[rule]]\nname = \"r\"\nquestion = \"q\"\nhit_if_all_true = [\"k\"]\n".to_string(), Some(1), "notice is missing"),
            ("[[rule]]\nname = \"\"\nquestion = \"q\"\nhit_if_all_true = [\"k\"]\nnotice = \"n\"\n".to_string(), Some(1), "give a short name"),
            (format!("{}\n{}", rule(""), rule("")), Some(7), "a second rule named \"r\""),
            ("rule = 1".to_string(), Some(1), "invalid type"),
            ("[[rule]\n".to_string(), Some(1), ""),
        ] {
            let e = parse_rules(&text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.to_string().contains(words), "{text}: {e}");
        }
    }

    #[test]
    fn a_project_rule_only_adds_never_replaces_the_users() {
        let user = parse_rules(GOOD).unwrap();
        let mut project = parse_rules(GOOD).unwrap();
        project[0].enabled = false;
        project[1].name = "the-projects-own".into();
        let (added, shadowed) = added_to(&user, project);
        assert_eq!(shadowed, ["claims-unverified-tests"]);
        assert_eq!(added.len(), 1);
        assert_eq!(added[0].name, "the-projects-own");
    }
}
