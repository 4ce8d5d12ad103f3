//! Blocking work (fsyncs, /proc reads, file locks) called from async code.

/// Runs blocking file or /proc work, off the async worker when the runtime allows it.
pub fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}
