//! Processes: spawning one runner under its supervisor and stopping it (`spawn`,
//! `supervisor`), the OS calls about process groups, liveness and `/proc` (`os`, one
//! file per platform), short bounded runs of an installed runner (`probe`), and the
//! daemon's pool of supervisors with the zygote that forks them (`pool`, `zygote`,
//! with `fd_passing`), each the init of its own PID namespace where the system
//! allows (`pid_ns`). `tag` is the variable that marks a runner's processes. Errors are
//! `ProcessError` (`error`). An API runner's request is this layer's other edge
//! (`api_call`): one HTTP exchange instead of a process.

pub mod api_call;
pub mod error;
#[cfg(target_os = "linux")]
mod fd_passing;
pub mod os;
pub(crate) mod pid_ns;
#[cfg(target_os = "linux")]
pub mod pool;
#[cfg(not(target_os = "linux"))]
#[path = "pool_stub.rs"]
pub mod pool;
pub mod probe;
pub mod spawn;
pub mod supervisor;
pub mod tag;
#[cfg(target_os = "linux")]
mod zygote;
