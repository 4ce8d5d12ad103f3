//! `llm-judge hook claude|codex|cursor` (docs/hooks.md): one hook call of a harness.
//! It reads the hook's JSON on stdin, queues a job per matching rule when the agent
//! stops, waits (bounded) for the verdicts of block rules, delivers earlier verdicts as
//! notices at the next prompt or start, and writes the harness's own output shape. It
//! never breaks the session: whatever fails, it exits 0 with nothing that blocks, one
//! judge.log line, and at most one `systemMessage` a session saying what is wrong.

mod deliver;
mod guard;
mod settle;
mod stop;

use std::io::Write;

use crate::core::config::Settings;
use crate::core::history::{Decision, DecisionRecord, QueuedRecord, Record};
use crate::core::hooks::input::{Event, Harness, HookInput, InputError, parse_input};
use crate::core::hooks::jobs::session_key;
use crate::core::hooks::output::{Answer, render};
use crate::core::hooks::rules::{Action, Trigger};
use crate::store::config_file::{self, Sources};
use crate::store::hook_session::HookSession;
use crate::store::state_dir::StateDir;
use crate::support::exit::EXIT_OK;

use guard::{Child, Stdin};

/// Session folders untouched this long go at the next session start.
const SESSION_KEEP: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// Exit status of a rewake hook with a hit: claude's `asyncRewake` wakes the model.
pub const EXIT_REWAKE: i32 = 2;

/// Runs one hook call; the exit code (0, or 2 for a rewake hook's hit).
pub fn main(harness: Harness, rewake: bool, sources: &Sources) -> i32 {
    let started = std::time::Instant::now();
    let stdin = guard::read_stdin();
    let (settings, config_problem) = match config_file::load(sources) {
        Ok(settings) => (Some(settings), None),
        Err(e) => (
            config_file::load_embedded(sources),
            Some(crate::support::error::chain(&e)),
        ),
    };
    let Some(settings) = settings else {
        return EXIT_OK;
    };
    if let Some(why) = guard::unknown_state_folder(sources, &settings) {
        return refuse(harness, &why);
    }
    let state = StateDir::new(&settings.state_dir);
    // Checked before anything is made or written there (a missing folder is fine).
    if let Err(why) = guard::check_state(&state) {
        return refuse(harness, &format!("{why}; nothing is judged or delivered"));
    }
    if state.create().is_ok() {
        crate::store::judge_log::init_log_only(&state.log(), settings.config.log_max_bytes);
    }
    let child = guard::child(sources, &state);
    if child == Child::Judges {
        return EXIT_OK;
    }
    let input = match read_input(harness, stdin) {
        Ok(input) => input,
        Err(Some(why)) => return refuse(harness, &why),
        Err(None) => return EXIT_OK,
    };
    if let Err(why) = guard::check_session(&state, &session_key(&input)) {
        return refuse(harness, &format!("{why}; nothing is judged or delivered"));
    }
    let mut call = Call::new(&settings, state, sources, input, started);
    if let Some(problem) = config_problem {
        call.tell_once(
            "config",
            format!("config not loaded ({problem}); the hooks use the defaults"),
        );
    }
    if sources.config_dir_flag.is_none() || sources.state_dir_flag.is_none() {
        call.tell_once(
            "unpinned",
            format!(
                "this hook was installed without --config-dir and --state-dir, so a project's \
                 environment can move its config and state; run `llm-judge hooks install {}` \
                 again",
                harness.name()
            ),
        );
    }
    if child == Child::Forged {
        call.tell_once(
            "child marker",
            format!(
                "{} is set in this session without the judge's token (a project's settings \
                 `env` can set it), so the hooks judge anyway",
                crate::process::spawn::CHILD_VAR
            ),
        );
    }
    let (answer, code) = match rewake {
        true => call.rewake(),
        false => (call.handle(), EXIT_OK),
    };
    // A rewake hit is exit 2 with the notice on stderr (claude wakes the model with it).
    let written = match (code, &answer.block, rewake) {
        (EXIT_REWAKE, Some(reason), _) => writeln!(std::io::stderr().lock(), "{reason}").is_ok(),
        (_, _, true) => true,
        _ => match render(harness, &call.input.event, &answer) {
            Some(out) => writeln!(std::io::stdout().lock(), "{out}").is_ok(),
            None => true,
        },
    };
    call.finish(written);
    code
}

/// The hook's input, or why there is none: `Some` when the user should hear of it (a
/// reply may have gone unjudged), `None` when it was no harness's input at all.
fn read_input(harness: Harness, stdin: Stdin) -> Result<HookInput, Option<String>> {
    let bytes = match stdin {
        Stdin::Read(bytes) => bytes,
        Stdin::TooLarge => {
            return Err(Some(format!(
                "the hook's input was over {} MiB, so this reply was not judged",
                guard::MAX_INPUT_BYTES >> 20
            )));
        }
        Stdin::NotClosed => {
            return Err(Some(
                "the hook's input did not end within 5 s, so this reply was not judged".into(),
            ));
        }
    };
    parse_input(harness, &bytes).map_err(|e| {
        tracing::warn!(harness = harness.name(), "hook input ignored: {e}");
        matches!(e, InputError::NotJson { .. })
            .then(|| format!("{e}; whatever reply it held was not judged"))
    })
}

/// Says `why` to the user where the harness shows it (claude and codex read a
/// `systemMessage` from any event), logs it, and lets the session go on.
fn refuse(harness: Harness, why: &str) -> i32 {
    tracing::warn!(harness = harness.name(), "{why}");
    if harness.shows_system_message() {
        let out = serde_json::json!({ "systemMessage": format!("llm-judge: {why}") });
        let _ = writeln!(std::io::stdout().lock(), "{out}");
    }
    EXIT_OK
}

/// One hook call: its settings, state folder, input and session.
struct Call<'a> {
    settings: &'a Settings,
    state: StateDir,
    sources: &'a Sources,
    input: HookInput,
    /// `None` when the session's folder cannot be made (nothing is remembered then).
    session: Option<HookSession>,
    /// What the user is told this call, a line each (one `systemMessage`).
    messages: Vec<String>,
    /// Verdicts taken out for this answer: removed once it is written, given back if
    /// it cannot be (so a notice is delivered exactly once).
    taken: Vec<crate::store::outbox::Taken>,
    /// When the hook started: its records say how long the stop took.
    started: std::time::Instant,
    /// The jobs this call queued, for the history.
    queued: Vec<QueuedRecord>,
    /// What this call did with verdicts: logged and put on record once the answer
    /// carrying them is written.
    decisions: Vec<DecisionRecord>,
    /// This call held the stop for its block rules (their records get the whole stop).
    waited_for_blocks: bool,
}

impl<'a> Call<'a> {
    fn new(
        settings: &'a Settings,
        state: StateDir,
        sources: &'a Sources,
        input: HookInput,
        started: std::time::Instant,
    ) -> Self {
        let session = match HookSession::open(&state, &session_key(&input)) {
            Ok(session) => Some(session),
            Err(e) => {
                tracing::warn!("hook session folder: {e}");
                None
            }
        };
        Call {
            settings,
            state,
            sources,
            input,
            session,
            messages: Vec::new(),
            taken: Vec::new(),
            started,
            queued: Vec::new(),
            decisions: Vec::new(),
            waited_for_blocks: false,
        }
    }

    /// The answer to the harness for this event.
    fn handle(&mut self) -> Answer {
        let mut answer = match self.input.event.clone() {
            Event::Stop => self.on_stop(Trigger::Stop),
            Event::SubagentStop => self.on_stop(Trigger::SubagentStop),
            Event::AgentResponse => {
                self.queue_for_later(Trigger::Stop);
                Answer::default()
            }
            Event::LoopEnd => self.on_loop_end(),
            Event::PromptSubmit => {
                self.keep_prompt();
                // Cursor reads only `continue` here: its notices wait for its `stop`.
                match self.input.harness {
                    Harness::Cursor => Answer::default(),
                    _ => self.deliver(),
                }
            }
            Event::SessionStart => {
                crate::store::hook_session::prune(&self.state, SESSION_KEEP);
                self.deliver()
            }
            Event::Other(_) => Answer::default(),
        };
        answer.system_message =
            (!self.messages.is_empty()).then(|| std::mem::take(&mut self.messages).join("\n"));
        answer
    }

    /// Says `text` to the user, once in this session for `topic` (and always logs it).
    fn tell_once(&mut self, topic: &str, text: String) {
        tracing::warn!(session = %self.input.session, "{text}");
        let first = self.session.as_ref().is_none_or(|s| s.say_once(topic));
        if first {
            self.messages.push(format!("llm-judge: {text}"));
        }
    }

    /// Tells the user what a rule did (`hooks.tell_user`), where the harness shows it.
    fn tell_user(&mut self, text: String) {
        if self.settings.config.hooks.tell_user {
            self.messages.push(format!("llm-judge: {text}"));
        }
    }

    /// Notes what this call did with rule `rule`'s job `id` (`told`: what the agent was
    /// told), for judge.log and the history once the answer is written.
    fn decide(&mut self, id: &str, rule: Option<&str>, decision: Decision, told: Option<&str>) {
        self.decisions.push(DecisionRecord {
            uid: crate::support::random::unique_id(),
            at: crate::store::state_dir::now_unix(),
            job_id: id.to_string(),
            transcript: session_key(&self.input),
            rule: rule.map(String::from),
            decision,
            told: told.map(String::from),
        });
    }

    /// The verdicts taken for the answer: gone once it was written, back otherwise;
    /// the history gets the jobs queued, and the decisions the answer carried.
    fn finish(self, written: bool) {
        let session = session_key(&self.input);
        let stop_ms = self.started.elapsed().as_millis() as u64;
        let waited = self.waited_for_blocks;
        let mut records: Vec<Record> = self
            .queued
            .into_iter()
            .map(|q| match waited && q.action == Action::Block.name() {
                true => Record::Queued(QueuedRecord { stop_ms, ..q }),
                false => Record::Queued(q),
            })
            .collect();
        if written {
            for d in self.decisions {
                log_decision(&d, &session);
                records.push(Record::Decision(d));
            }
        }
        crate::store::history::record(&self.state, self.settings.config.history.enabled, &records);
        for taken in self.taken {
            let done = match written {
                true => taken.done(),
                false => taken.give_back(),
            };
            if let Err(e) = done {
                tracing::warn!("verdict taken for a hook's answer: {e}");
            }
        }
    }

    fn keep_prompt(&self) {
        if let (Some(session), Some(prompt)) = (&self.session, &self.input.prompt)
            && let Err(e) = session.save_prompt(prompt)
        {
            tracing::warn!("cannot keep the user's prompt for the judge: {e}");
        }
    }

    /// The rules for this session's folder; problems are told once.
    fn rules(&mut self) -> Vec<crate::core::hooks::rules::Rule> {
        let cwd = self.input.cwd.as_deref().map(std::path::Path::new);
        let loaded = crate::store::rules_files::load(self.sources, cwd);
        for problem in loaded.problems {
            self.tell_once(&format!("rules {problem}"), problem);
        }
        loaded.rules
    }
}

/// The judge.log line of a hook's decision: what it did, the rule, the session, the job.
fn log_decision(d: &DecisionRecord, session: &str) {
    let rule = d.rule.as_deref().unwrap_or("-");
    let id = &d.job_id;
    match d.decision {
        Decision::LetThroughAtCap | Decision::LetThroughAtWait => {
            let why = match d.decision {
                Decision::LetThroughAtCap => "block cap",
                _ => "wait",
            };
            tracing::info!(%rule, %session, %id, why, "let through");
        }
        other => tracing::info!(%rule, %session, %id, "{}", other.name()),
    }
}
