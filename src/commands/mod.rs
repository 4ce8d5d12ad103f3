//! One module per command of the command line (docs/reference.md, "Command line").

pub mod ask;
pub mod doctor;
pub mod doctor_api;
pub mod drain;
pub mod enqueue;
pub mod eval;
pub mod run;
pub mod runners;
pub mod service;
pub mod shell_docs;
pub mod status;

use crate::core::job::Mode;

/// A runner table on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ModeArg {
    Default,
    Investigate,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Default => Mode::Default,
            ModeArg::Investigate => Mode::Investigate,
        }
    }
}
