//! Leaf helpers any layer may use: how errors are shown (`error`), the async runtime
//! and blocking work, the log level and stderr style, and the test-only crash points.

pub mod error;
#[macro_use]
pub mod exit;
pub mod failpoint;
pub mod log_level;
pub mod random;
pub mod runtime;
