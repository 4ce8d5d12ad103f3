//! Processes: spawning one runner under its supervisor and stopping it, and the OS
//! calls about process groups, liveness and `/proc` (`os`), and short bounded runs of
//! an installed runner (`probe`), and the zygote that forks the daemon's pooled
//! supervisors and keeps the idle ones (`zygote`, with `fd_passing`), each the init of
//! its own PID namespace where the system allows (`pid_ns`).

pub mod error;
#[cfg(target_os = "linux")]
mod fd_passing;
pub mod os;
pub(crate) mod pid_ns;
pub mod probe;
pub mod spawn;
pub mod supervisor;
#[cfg(target_os = "linux")]
pub mod zygote;
#[cfg(not(target_os = "linux"))]
#[path = "zygote_stub.rs"]
pub mod zygote;
