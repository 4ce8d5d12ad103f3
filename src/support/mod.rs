//! Leaf helpers any layer may use: the async runtime and blocking work, and the
//! test-only crash points.

#[macro_use]
pub mod exit;
pub mod failpoint;
pub mod runtime;
