//! From a wrong verdict to a better rule: `llm-judge mark RECORD right|wrong` labels a
//! verdict on record, and `history --cases` writes the marked ones as the rule cases
//! `eval --rules` reads (`{"id", "rule", "reply", "user", "cwd", "expect"}`).

use serde_json::{Map, Value, json};

use super::listing::Row;

/// A label of `mark`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// The verdict was what it should have been.
    Right,
    /// It should have been the other outcome.
    Wrong,
}

impl Label {
    pub fn name(self) -> &'static str {
        match self {
            Label::Right => "right",
            Label::Wrong => "wrong",
        }
    }
}

/// The texts a hook's job judged.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Texts {
    pub reply: String,
    pub prompt: Option<String>,
    pub cwd: Option<String>,
}

/// Why the verdict `row` cannot be marked (`None`: it can). `texts_kept` is whether
/// the texts it judged are still on record.
pub fn mark_refusal(row: &Row, texts_kept: bool) -> Option<String> {
    let record = row.record;
    if row.outcome == "unchecked" {
        return Some(format!(
            "record {record} is unchecked (no runner answered: {}), so it has no outcome to be \
             right or wrong about",
            row.reason
        ));
    }
    if row.rule.is_none() || row.rule_action.is_none() {
        return Some(format!(
            "record {record} is not a hook rule's verdict (job {}), so the history has no reply \
             to make a case of; label it in your own cases file",
            row.job_id
        ));
    }
    if !texts_kept {
        return Some(format!(
            "record {record}'s reply and prompt are no longer kept (history.keep_texts_days, \
             history.max_texts_mb), so it cannot become a case"
        ));
    }
    None
}

/// The case of the marked verdict `row` (`None` without a mark or a rule): its expected
/// outcome is the verdict's when marked right, the other one when marked wrong.
pub fn case_of(row: &Row, texts: &Texts) -> Option<Value> {
    let rule = row.rule.as_ref()?;
    let judged_hit = row.outcome == "hit";
    let hit = match row.mark.as_deref()? {
        "right" => judged_hit,
        "wrong" => !judged_hit,
        _ => return None,
    };
    let mut case = Map::new();
    case.insert("id".into(), json!(format!("record-{}", row.record)));
    case.insert("rule".into(), json!(rule));
    case.insert("reply".into(), json!(texts.reply));
    if let Some(prompt) = &texts.prompt {
        case.insert("user".into(), json!(prompt));
    }
    if let Some(cwd) = &texts.cwd {
        case.insert("cwd".into(), json!(cwd));
    }
    case.insert("expect".into(), json!(if hit { "hit" } else { "clean" }));
    Some(Value::Object(case))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(outcome: &str, mark: Option<&str>) -> Row {
        Row {
            record: 12,
            job_id: "hook-1".into(),
            rule: Some("tests".into()),
            rule_action: Some("block".into()),
            outcome: outcome.into(),
            reason: "codex: exit 1".into(),
            mark: mark.map(String::from),
            ..Row::default()
        }
    }

    #[test]
    fn only_an_answered_hook_verdict_with_its_texts_is_marked() {
        assert_eq!(mark_refusal(&row("hit", None), true), None);
        let unchecked = mark_refusal(&row("unchecked", None), true).unwrap();
        assert!(
            unchecked.contains("unchecked (no runner answered: codex: exit 1)"),
            "{unchecked}"
        );
        let mut catstack = row("hit", None);
        catstack.rule_action = None;
        assert!(
            mark_refusal(&catstack, true)
                .unwrap()
                .contains("not a hook rule's verdict")
        );
        assert!(
            mark_refusal(&row("clean", None), false)
                .unwrap()
                .contains("no longer kept")
        );
    }

    #[test]
    fn a_wrong_mark_expects_the_other_outcome() {
        let texts = Texts {
            reply: "All tests pass.".into(),
            prompt: Some("fix it".into()),
            cwd: None,
        };
        let case =
            |outcome, mark| case_of(&row(outcome, Some(mark)), &texts).unwrap()["expect"].clone();
        assert_eq!(case("hit", "right"), "hit");
        assert_eq!(case("hit", "wrong"), "clean");
        assert_eq!(case("clean", "wrong"), "hit");
        let whole = case_of(&row("hit", Some("wrong")), &texts).unwrap();
        assert_eq!(
            whole,
            json!({"id": "record-12", "rule": "tests", "reply": "All tests pass.", "user": "fix it", "expect": "clean"})
        );
        assert_eq!(case_of(&row("hit", None), &texts), None);
    }
}
