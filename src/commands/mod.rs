//! One module per command of the command line (SPEC section 9).

pub mod ask;
pub mod doctor;
pub mod drain;
pub mod enqueue;
pub mod run;
pub mod service;
pub mod status;
