//! Runners: a table entry as written (`entry`, a CLI's argv or an API's keys), the
//! tables and their checks, argv building and the prompt's place (`table`), a runner's
//! own environment (`env`), and where each CLI keeps its login (`login`).

pub mod entry;
pub mod env;
pub mod login;
pub mod table;
