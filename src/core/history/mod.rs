//! The verdict history (docs/history.md): what goes on record about each verdict and
//! each hook decision, and how the records are read back as a listing, per-rule
//! figures and eval cases. Pure: `store::history` keeps the records, `commands::history`,
//! `stats` and `mark` show them.

pub mod cases;
pub mod listing;
pub mod record;
pub mod since;
pub mod stats;

pub use record::{Decision, DecisionRecord, JudgedBy, QueuedRecord, Record, VerdictRecord};
