//! systemd's notify protocol: datagrams to `$NOTIFY_SOCKET` (READY=1, STATUS=,
//! STOPPING=1, WATCHDOG=1). Without the variable every call does nothing.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// A connection to the service manager, if it asked for one.
pub struct Notifier {
    socket: UnixDatagram,
    addr: SocketAddr,
    /// Half of `WATCHDOG_USEC`, when the watchdog is on for this process.
    pub watchdog_every: Option<Duration>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and `WATCHDOG_USEC`/`WATCHDOG_PID`.
    pub fn from_env() -> Option<Self> {
        let path = std::env::var_os("NOTIFY_SOCKET")?;
        let addr = socket_addr(path.to_str()?)?;
        let socket = UnixDatagram::unbound().ok()?;
        let for_us = std::env::var("WATCHDOG_PID")
            .map(|pid| pid.trim() == std::process::id().to_string())
            .unwrap_or(true);
        let watchdog_every = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|usec| usec.trim().parse::<u64>().ok())
            .filter(|&usec| usec > 0 && for_us)
            .map(|usec| Duration::from_micros(usec / 2));
        Some(Notifier {
            socket,
            addr,
            watchdog_every,
        })
    }

    /// Sends one message; failures are logged, never fatal.
    pub fn send(&self, message: &str) {
        if let Err(e) = self.socket.send_to_addr(message.as_bytes(), &self.addr) {
            tracing::warn!("cannot notify the service manager ({message}): {e}");
        }
    }
}

fn socket_addr(path: &str) -> Option<SocketAddr> {
    match path.strip_prefix('@') {
        #[cfg(target_os = "linux")]
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes()).ok()
        }
        #[cfg(not(target_os = "linux"))]
        Some(_) => None,
        None => SocketAddr::from_pathname(path).ok(),
    }
}
