//! What the judge does for codex: the model a codex runner runs with, from the login's
//! catalog (`model`), and the slim codex: the judge's own instructions and the trimmed
//! catalog in place of codex's large defaults (`slim`).

pub mod model;
pub mod slim;
