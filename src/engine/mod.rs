//! The job engine: one job file from claim to removal (`lifecycle`), the runner
//! attempts in fallback order (`attempts`), single-flight, per-runner limits,
//! recovery of what an interrupted holder left, and the codex catalog lookup.

pub mod attempts;
// Not used until the daemon reads the codex catalog (SPEC 4 "Codex model"); the
// branch that wires it in drops this allow.
#[allow(dead_code)]
pub mod codex_catalog;
pub mod flight;
pub mod lifecycle;
pub mod limits;
pub mod recovery;
