//! The async runtime of one-shot commands, and blocking work (fsyncs, /proc reads,
//! file locks) called from async code.

/// Runs blocking file or /proc work, off the async worker when the runtime allows it.
pub fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// The async runtime could not start (a thread or descriptor limit).
#[derive(Debug, thiserror::Error)]
#[error("cannot start the async runtime")]
pub struct RuntimeError(#[source] pub std::io::Error);

/// A single-threaded async runtime for one-shot commands.
pub fn runtime() -> Result<tokio::runtime::Runtime, RuntimeError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RuntimeError)
}
