//! Earlier verdicts of the session, delivered to the agent at its next prompt or start
//! (Cursor: at its next stop): each hit's notice exactly once. A verdict is taken out
//! by rename (`store::outbox`) and removed only after the answer holding it is written;
//! clean ones go silently, unchecked ones are counted and said once a session.

use crate::core::history::Decision;
use crate::core::hooks::jobs::session_key;
use crate::core::hooks::output::Answer;
use crate::core::verdict::Outcome;
use crate::store::protocol;

use super::Call;

impl Call<'_> {
    /// The notices of the session's verdicts that are there now.
    pub(super) fn deliver(&mut self) -> Answer {
        let pending = match protocol::pending_verdicts(&self.state, &session_key(&self.input)) {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!(session = %self.input.session, "cannot read the session's verdicts: {e}");
                return Answer::default();
            }
        };
        let mut answer = Answer::default();
        let mut unchecked = 0;
        for path in pending {
            let Some(taken) = protocol::take(&path) else {
                continue; // Another call took it.
            };
            match taken.verdict.notice() {
                Some(notice) => {
                    let rule = taken.verdict.rule_id.clone();
                    let name = rule.as_deref().unwrap_or("(unnamed)");
                    self.tell_user(format!(
                        "the notice of rule {name} went to the agent: {}",
                        super::stop::one_line(&notice)
                    ));
                    self.decide(
                        &taken.verdict.id,
                        rule.as_deref(),
                        Decision::NoticeDelivered,
                        Some(&notice),
                    );
                    answer.notices.push(notice);
                }
                None if taken.verdict.outcome == Outcome::Unchecked => unchecked += 1,
                None => {}
            }
            self.taken.push(taken);
        }
        if unchecked > 0 {
            self.tell_once(
                "unchecked",
                format!(
                    "the judge could not check {unchecked} reply{} (no runner answered); \
                     `llm-judge doctor` says why",
                    if unchecked == 1 { "" } else { "s" }
                ),
            );
        }
        answer
    }
}
