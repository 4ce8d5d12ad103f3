//! What the daemon tells a running job (`Control`), and waiting for it.

/// What the daemon tells running jobs; it only ever moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Control {
    /// Go on.
    #[default]
    Run,
    /// Shutdown past its grace: stop the runner as at its timeout (SIGTERM, kill
    /// grace, SIGKILL).
    Stop,
    /// Another stop during the kill grace: SIGKILL now.
    StopNow,
}

/// A job's view of the daemon's `Control`.
pub type StopSignal = tokio::sync::watch::Receiver<Control>;

/// Resolves once `stop` reaches `at_least`; never without one (or once its sender is
/// gone without getting there).
pub(super) async fn reached(stop: Option<&StopSignal>, at_least: Control) {
    let Some(stop) = stop else {
        return std::future::pending().await;
    };
    let mut stop = stop.clone();
    if stop.wait_for(|c| *c >= at_least).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Resolves once the job is told to stop.
pub async fn stopped(stop: Option<&StopSignal>) {
    reached(stop, Control::Stop).await;
}
