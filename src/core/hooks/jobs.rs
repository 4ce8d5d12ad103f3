//! The job a rule asks about one reply: its id (the same for a retried hook, so a turn
//! is never judged twice), the session's verdict key, and the job it asks, typed
//! (`core::job::wire`; docs/reference.md, "Job file").

use serde_json::json;

use super::input::HookInput;
use super::prompt::render;
use super::rules::{Action, Hit, Rule, Trigger};
use crate::core::digest::sha1_hex;
use crate::core::job::Mode;
use crate::core::job::wire::JobRequest;

/// A job to queue for one rule.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleJob {
    pub id: String,
    pub rule: String,
    pub action: Action,
    /// The rule's own wait, if it sets one.
    pub wait_ms: Option<u64>,
    /// The job asked.
    pub job: JobRequest,
}

/// A session's verdict key (its jobs' `transcript`): `<harness>:<session id>`, so two
/// harnesses' sessions never share a folder.
pub fn session_key(input: &HookInput) -> String {
    format!("{}:{}", input.harness.name(), input.session)
}

/// The id of `rule`'s job about the reply whose digest is `reply_digest` (hashed once
/// for all of a stop's rules: a reply may be megabytes) in the input's turn: the same
/// for a retried hook (same session, turn, rule and reply), another for the agent's
/// next reply.
fn job_id(input: &HookInput, rule: &str, reply_digest: &str) -> String {
    let key = json!([
        input.harness.name(),
        input.session,
        input.turn.as_deref().unwrap_or(""),
        rule,
        reply_digest
    ]);
    format!("hook-{}", sha1_hex(key.to_string().as_bytes(), 12))
}

/// The jobs of the enabled `rules` for `trigger` whose action is in `actions`, about
/// the input's reply (none without one), with the user's `prompt` when known.
pub fn rule_jobs(
    input: &HookInput,
    rules: &[Rule],
    trigger: Trigger,
    actions: &[Action],
    prompt: Option<&str>,
) -> Vec<RuleJob> {
    let Some(reply) = input.reply.as_deref().filter(|r| !r.trim().is_empty()) else {
        return Vec::new();
    };
    let digest = sha1_hex(reply.as_bytes(), 20);
    rules
        .iter()
        .filter(|r| r.enabled && r.on.contains(&trigger) && actions.contains(&r.action))
        .map(|rule| {
            let id = job_id(input, &rule.name, &digest);
            RuleJob {
                job: job_object(input, rule, reply, prompt, &id),
                id,
                rule: rule.name.clone(),
                action: rule.action,
                wait_ms: rule.wait_ms,
            }
        })
        .collect()
}

fn job_object(
    input: &HookInput,
    rule: &Rule,
    reply: &str,
    prompt: Option<&str>,
    id: &str,
) -> JobRequest {
    JobRequest {
        id: Some(id.to_string()),
        transcript: Some(session_key(input)),
        hook: Some(format!("llm-judge hook {}", input.harness.name())),
        ..job_for(rule, reply, prompt, input.cwd.as_deref())
    }
}

/// The job `rule` asks about `reply` (with the user's `prompt`; an investigate rule
/// works in `cwd`): its prompt, rule keys, notice, mode and timeout, without the keys
/// of a session (`id`, `transcript`, `hook`). `eval --rules` judges these.
pub fn job_for(rule: &Rule, reply: &str, prompt: Option<&str>, cwd: Option<&str>) -> JobRequest {
    let investigate = rule.mode == Mode::Investigate;
    let mut job = JobRequest {
        prompt: Some(render(&rule.question, reply, prompt)),
        rule_id: Some(rule.name.clone()),
        mode: Some(rule.mode),
        cwd: cwd.filter(|_| investigate).map(String::from),
        timeout_seconds: rule.timeout_seconds,
        ..JobRequest::default()
    };
    match &rule.hit {
        Hit::AllTrue(keys) => {
            job.hit_if_all_true = Some(keys.clone());
            job.on_hit = Some(rule.notice.clone());
        }
        Hit::AnyTrue(pairs) => job.hit_if_any_true = Some(pairs.clone()),
    }
    job
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hooks::input::{Event, Harness};
    use crate::core::hooks::rules::parse_rules;
    use crate::core::job::{TimeoutRules, parse_job};
    use serde_json::Value;

    fn input(reply: &str, turn: &str) -> HookInput {
        HookInput {
            harness: Harness::Codex,
            event: Event::Stop,
            session: "s1".into(),
            turn: Some(turn.into()),
            cwd: Some("/w/project".into()),
            reply: Some(reply.into()),
            prompt: None,
            agent: None,
        }
    }

    const RULES: &str = r#"
[[rule]]
name = "tests"
action = "block"
question = "Did it claim tests pass? Reply {\"unverified\": bool}"
hit_if_all_true = ["unverified"]
notice = "Run the tests."
[[rule]]
name = "look"
question = "Is the blocker real? Reply {\"fake\": bool}"
hit_if_any_true = { fake = "Not a real blocker." }
mode = "investigate"
timeout_seconds = 30
[[rule]]
name = "off"
enabled = false
question = "q"
hit_if_all_true = ["x"]
notice = "n"
[[rule]]
name = "helpers"
on = ["subagent-stop"]
question = "q"
hit_if_all_true = ["x"]
notice = "n"
"#;

    #[test]
    fn each_enabled_rule_of_the_event_gives_a_valid_job() {
        let rules = parse_rules(RULES).unwrap();
        let all = [Action::Block, Action::Notice];
        let jobs = rule_jobs(
            &input("All tests pass.", "t1"),
            &rules,
            Trigger::Stop,
            &all,
            Some("fix it"),
        );
        let names: Vec<&str> = jobs.iter().map(|j| j.rule.as_str()).collect();
        assert_eq!(names, ["tests", "look"]);
        let rules_t = TimeoutRules {
            default_seconds: 60.0,
            max_seconds: 600.0,
        };
        for j in &jobs {
            let text = Value::Object(j.job.object()).to_string();
            let job = parse_job(text.as_bytes(), &j.id, rules_t).expect("a job the judge reads");
            assert_eq!(job.transcript, "codex:s1");
            assert_eq!(job.rule_id.as_deref(), Some(j.rule.as_str()));
            assert!(job.typos.is_empty() && !job.has_no_rule());
        }
        let (first, second) = (jobs[0].job.object(), jobs[1].job.object());
        assert_eq!(first["on_hit"], "Run the tests.");
        assert_eq!(
            (second["mode"].as_str(), second["cwd"].as_str()),
            (Some("investigate"), Some("/w/project"))
        );
        assert_eq!(second["timeout_seconds"], 30.0);
        assert!(
            !first.contains_key("cwd"),
            "a default rule works in a fresh folder"
        );
        let helpers = rule_jobs(&input("r", "t1"), &rules, Trigger::SubagentStop, &all, None);
        assert_eq!(helpers.len(), 1);
        assert!(
            rule_jobs(
                &input("r", "t1"),
                &rules,
                Trigger::Stop,
                &[Action::Rewake],
                None
            )
            .is_empty()
        );
        assert!(
            rule_jobs(&input("  ", "t1"), &rules, Trigger::Stop, &all, None).is_empty(),
            "no reply"
        );
    }

    #[test]
    fn a_retried_hook_gets_the_same_id_and_a_new_reply_another() {
        let id = |reply: &str, turn: &str| {
            job_id(
                &input(reply, turn),
                "tests",
                &sha1_hex(reply.as_bytes(), 20),
            )
        };
        assert_eq!(id("a", "t1"), id("a", "t1"));
        assert_ne!(
            id("a", "t1"),
            id("b", "t1"),
            "the reply after a block is judged anew"
        );
        assert_ne!(id("a", "t1"), id("a", "t2"));
        assert!(id("a", "t1").starts_with("hook-") && id("a", "t1").len() == 29);
    }
}
