//! One module per command of the command line (docs/reference.md, "Command line").

pub mod ask;
pub mod doctor;
pub mod drain;
pub mod enqueue;
pub mod eval;
pub mod history;
pub mod hook;
pub mod hooks;
pub mod run;
pub mod runners;
pub mod shell_docs;
pub mod status;

use crate::core::job::Mode;

/// A runner table on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ModeArg {
    Default,
    Investigate,
}

/// A harness on the command line (`llm-judge hook <harness>`, `hooks install <harness>`).
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum HarnessArg {
    Claude,
    Codex,
    Cursor,
}

impl From<HarnessArg> for crate::core::hooks::input::Harness {
    fn from(h: HarnessArg) -> Self {
        use crate::core::hooks::input::Harness;
        match h {
            HarnessArg::Claude => Harness::Claude,
            HarnessArg::Codex => Harness::Codex,
            HarnessArg::Cursor => Harness::Cursor,
        }
    }
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Default => Mode::Default,
            ModeArg::Investigate => Mode::Investigate,
        }
    }
}
