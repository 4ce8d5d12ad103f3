//! Processes: spawning one runner under its supervisor and stopping it, and the OS
//! calls about process groups, liveness and `/proc` (`os`).

pub mod os;
pub mod spawn;
pub mod supervisor;
