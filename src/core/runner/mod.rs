//! Runners: a table entry as written (`entry`, a CLI's argv or an API's keys), the
//! tables and their checks, argv building and the prompt's place (`table`), a runner's
//! own environment (`env`), where each CLI keeps its login (`login`), and how a CLI's
//! stdout is read (`output_format`).

/// The argv item replaced by the prompt.
pub const PROMPT_SLOT: &str = "{prompt}";

pub mod entry;
pub mod env;
pub mod login;
pub mod output_format;
pub mod table;
