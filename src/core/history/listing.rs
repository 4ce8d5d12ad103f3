//! `llm-judge history`: one row per verdict on record, with what the hook did with it,
//! as a table that fits 100 columns (newest last) or one JSON object a line.

use serde_json::{Value, json};

use super::record::Decision;

/// A verdict on record, as the history reads it back.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    /// The history's own id (job ids can repeat).
    pub record: i64,
    pub at: f64,
    /// Local `YYYY-MM-DD HH:MM:SS`.
    pub time: String,
    /// `daemon`, `run` or `hook`.
    pub by: String,
    pub job_id: String,
    pub transcript: String,
    pub harness: Option<String>,
    pub session: String,
    pub rule: Option<String>,
    pub mode: Option<String>,
    pub outcome: String,
    pub reason: String,
    pub runner: Option<String>,
    pub judge_ms: u64,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    pub answer: Option<String>,
    /// The rule's action when a hook queued the job (`block`, `notice`, `rewake`).
    pub rule_action: Option<String>,
    /// The wall time of the hook call that queued the job.
    pub stop_ms: Option<u64>,
    /// The hook's last decision about it.
    pub decision: Option<Decision>,
    /// What that decision told the agent.
    pub told: Option<String>,
    /// `right` or `wrong`, when marked.
    pub mark: Option<String>,
    /// True while the judged texts are kept (a case can be made of it).
    pub has_texts: bool,
}

/// The action shown for a verdict no hook decided about yet: a hook's hit waits for
/// the agent's next prompt.
pub const NOTICE_PENDING: &str = "notice pending";

impl Row {
    /// What was done with the verdict: the hook's last decision, `notice pending` for a
    /// hook's hit not delivered yet, else `-`.
    pub fn action(&self) -> &'static str {
        match self.decision {
            Some(d) => d.name(),
            None if self.outcome == "hit" && self.rule_action.is_some() => NOTICE_PENDING,
            None => "-",
        }
    }

    /// The row as one JSON object (`history --json`).
    pub fn to_json(&self) -> Value {
        let answer = self
            .answer
            .as_ref()
            .map(|a| serde_json::from_str::<Value>(a).unwrap_or_else(|_| json!(a)));
        json!({
            "record": self.record,
            "at": self.at,
            "time": self.time,
            "by": self.by,
            "job_id": self.job_id,
            "transcript": self.transcript,
            "harness": self.harness,
            "session": self.session,
            "rule": self.rule,
            "mode": self.mode,
            "outcome": self.outcome,
            "action": self.action(),
            "told": self.told,
            "reason": self.reason,
            "runner": self.runner,
            "judge_ms": self.judge_ms,
            "stop_ms": self.stop_ms,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "answer": answer,
            "mark": self.mark,
        })
    }
}

/// The table of `rows` (oldest first); with `told`, each row that told the agent
/// something is followed by what it said.
pub fn render_table(rows: &[Row], told: bool) -> String {
    let mut out = format!(
        "{:>6} {:<11} {:<7} {:<8} {:<18} {:<9} {:<19} {:>7}\n",
        "ID", "TIME", "AGENT", "SESSION", "RULE", "OUTCOME", "ACTION", "JUDGE"
    );
    for row in rows {
        let time = row.time.get(5..16).unwrap_or(&row.time);
        let mark = match row.mark.as_deref() {
            Some("wrong") => "✗",
            Some(_) => "✓",
            None => "",
        };
        out.push_str(&format!(
            "{:>6} {:<11} {:<7} {:<8} {:<18} {:<9} {:<19} {:>7}\n",
            row.record,
            time,
            row.harness.as_deref().unwrap_or("-"),
            fit(&row.session, 8),
            fit(row.rule.as_deref().unwrap_or("-"), 18),
            format!("{}{mark}", row.outcome),
            row.action(),
            seconds(row.judge_ms),
        ));
        if let (true, Some(text)) = (told, &row.told) {
            let line = crate::core::text::one_line(text);
            out.push_str(&format!("{:>6} told: {}\n", "", fit(&line, 87)));
        }
    }
    out
}

/// `text` in at most `width` characters (cut with `…`), control characters shown as
/// `?` (a session id or a project's notice must not steer the terminal).
pub fn fit(text: &str, width: usize) -> String {
    let shown = text.chars().map(|c| if c.is_control() { '?' } else { c });
    if text.chars().count() <= width {
        return shown.collect();
    }
    let kept: String = shown.take(width.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// Milliseconds as `0.42s` under 10 s, else whole seconds (`95s`).
pub fn seconds(ms: u64) -> String {
    let s = ms as f64 / 1000.0;
    if s < 10.0 {
        format!("{s:.2}s")
    } else {
        format!("{}s", ms / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(record: i64) -> Row {
        Row {
            record,
            time: "2026-12-07 10:31:05".into(),
            harness: Some("claude".into()),
            session: "3f2a91c0-1111-2222-3333-444455556666".into(),
            rule: Some("a-very-long-rule-name-indeed".into()),
            outcome: "hit".into(),
            rule_action: Some("notice".into()),
            judge_ms: 2_140,
            ..Row::default()
        }
    }

    #[test]
    fn the_action_is_the_last_decision_or_a_pending_notice() {
        let mut r = row(1);
        assert_eq!(r.action(), NOTICE_PENDING);
        r.decision = Some(Decision::Blocked);
        assert_eq!(r.action(), "blocked");
        let mut clean = row(2);
        clean.outcome = "clean".into();
        assert_eq!(clean.action(), "-");
        let mut catstack = row(3);
        catstack.rule_action = None;
        assert_eq!(catstack.action(), "-");
    }

    #[test]
    fn the_table_fits_100_columns() {
        let mut r = row(123_456);
        r.decision = Some(Decision::LetThroughAtWait);
        r.mark = Some("wrong".into());
        r.told = Some("You said the tests pass\nbut ran none. ".repeat(10));
        r.judge_ms = 1_234_567;
        let table = render_table(&[r], true);
        for line in table.lines() {
            assert!(
                line.chars().count() <= 100,
                "{line:?} is {} wide",
                line.chars().count()
            );
        }
        assert!(table.contains("12-07 10:31"), "{table}");
        assert!(table.contains("hit✗"), "{table}");
        assert!(
            table.contains("told: You said the tests pass but ran none."),
            "{table}"
        );
    }

    #[test]
    fn json_rows_carry_the_action_and_the_answer_object() {
        let mut r = row(7);
        r.answer = Some(r#"{"unverified":true}"#.into());
        let v = r.to_json();
        assert_eq!(v["action"], "notice pending");
        assert_eq!(v["answer"]["unverified"], true);
        r.answer = Some("{\"cut".into());
        assert_eq!(r.to_json()["answer"], "{\"cut");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let mut r = row(1);
        r.session = "s\u{1b}[2J".into();
        r.told = Some("Run \u{1b}]0;pwned\u{7} the tests".into());
        let table = render_table(&[r], true);
        assert!(
            !table.chars().any(|c| c.is_control() && c != '\n'),
            "{table:?}"
        );
    }

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(seconds(420), "0.42s");
        assert_eq!(seconds(12_345), "12s");
        assert_eq!(seconds(95_000), "95s");
    }
}
