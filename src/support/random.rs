//! Ids no other process makes: random ones from the kernel (job ids, keys), and
//! cheap unique ones (history records).

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};

/// 128 bits from the kernel's random source, as 32 hex digits.
pub fn random_hex() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// An id unique among this machine's processes (pid, the time in nanoseconds, a count
/// in this process): no file opened, for records written on a hook's stop.
pub fn unique_id() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let count = COUNT.fetch_add(1, Ordering::Relaxed);
    format!("{:x}-{nanos:x}-{count:x}", std::process::id())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_differ() {
        assert_ne!(super::unique_id(), super::unique_id());
        let a = super::random_hex().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, super::random_hex().unwrap());
    }
}
