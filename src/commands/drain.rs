//! `llm-judge drain --transcript T`: a transcript's verdicts as JSON lines, oldest
//! first, each removed once printed (see outbox.rs for the exactly-once protocol).

use std::io::Write;

use crate::core::config::Settings;
use crate::store::protocol;
use crate::store::state_dir::StateDir;
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK};

/// Prints and removes the transcript's verdicts; returns the exit code.
pub fn main(settings: &Settings, transcript: &str) -> i32 {
    let state = StateDir::new(&settings.state_dir);
    let dir = state.verdict_dir(transcript);
    let pending = match protocol::pending_verdicts(&state, transcript) {
        Ok(pending) => pending,
        Err(e) => {
            if let Some(why) = crate::store::permissions::entry_denied(&dir) {
                say_err!("llm-judge drain: cannot read {}: {why}", dir.display());
                return EXIT_FAILURE;
            }
            crate::store::judge_log::init(&state.log(), settings.config.log_max_bytes, false);
            tracing::error!(folder = %dir.display(), "drain refused: {e}", e = e.chain());
            say_err!(
                "llm-judge drain: cannot read {}: {e}",
                dir.display(),
                e = e.chain()
            );
            return EXIT_FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    for path in pending {
        let Some(taken) = protocol::take(&path) else {
            continue; // Another drain took it.
        };
        crate::support::failpoint::crash("drain_claimed");
        let printed = writeln!(out, "{}", taken.line).and_then(|()| out.flush());
        if let Err(e) = printed {
            // Nobody read it (closed pipe): it goes back for the next drain.
            let back = taken.give_back();
            say_err!("llm-judge: cannot print verdicts ({e}); the rest stay for the next drain");
            if let Err(e) = back {
                say_err!("llm-judge: cannot put back {}: {e}", path.display());
            }
            return EXIT_FAILURE;
        }
        crate::support::failpoint::crash("drain_printed");
        if let Err(e) = taken.done() {
            say_err!(
                "llm-judge: printed {} but cannot remove it: {e}",
                path.display()
            );
        }
    }
    EXIT_OK
}
