//! The report pipe's wire protocol: what a supervisor tells the judge about its
//! attempt, one fixed-size record at a time.

use std::os::fd::RawFd;

/// A report record: one tag byte, three spare bytes, one native-endian i32.
pub(crate) const RECORD_BYTES: usize = 8;
const SPAWNED: u8 = b'S';
const SPAWNED_IN_NAMESPACE: u8 = b'N';
const SPAWN_FAILED: u8 = b'E';
const EXITED: u8 = b'X';

/// What the supervisor tells the judge on the report pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// The runner started with this pid (also its process group id), as the judge
    /// sees it: a namespace's init reads it from `/proc` when the runner is its only child.
    Spawned(i32),
    /// The runner started with this pid inside the supervisor's PID namespace, which
    /// could not tell its outer pid (the judge looks it up: `os::outer_pid_of_child`).
    SpawnedInNamespace(i32),
    /// `posix_spawn` failed with this errno.
    SpawnFailed(i32),
    /// The runner ended with this raw wait status, and its tree is gone.
    Exited(i32),
}

impl Report {
    /// The record for this report.
    pub(crate) fn encode(self) -> [u8; RECORD_BYTES] {
        let (tag, value) = match self {
            Report::Spawned(v) => (SPAWNED, v),
            Report::SpawnedInNamespace(v) => (SPAWNED_IN_NAMESPACE, v),
            Report::SpawnFailed(v) => (SPAWN_FAILED, v),
            Report::Exited(v) => (EXITED, v),
        };
        let v = value.to_ne_bytes();
        [tag, 0, 0, 0, v[0], v[1], v[2], v[3]]
    }

    /// Decodes one report record; `None` for an unknown tag.
    pub(crate) fn decode(record: [u8; RECORD_BYTES]) -> Option<Report> {
        let value = i32::from_ne_bytes([record[4], record[5], record[6], record[7]]);
        match record[0] {
            SPAWNED => Some(Report::Spawned(value)),
            SPAWNED_IN_NAMESPACE => Some(Report::SpawnedInNamespace(value)),
            SPAWN_FAILED => Some(Report::SpawnFailed(value)),
            EXITED => Some(Report::Exited(value)),
            _ => None,
        }
    }

    /// Writes the record to the report pipe `fd` (async-signal-safe). A judge that
    /// is gone cannot read it: nothing to do about a failed write.
    pub(crate) fn send(self, fd: RawFd) {
        let record = self.encode();
        // SAFETY: `record` is valid for RECORD_BYTES reads; a bad fd only fails.
        unsafe { libc::write(fd, record.as_ptr().cast(), RECORD_BYTES) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        for report in [
            Report::Spawned(4242),
            Report::SpawnedInNamespace(2),
            Report::SpawnFailed(libc::ENOENT),
            Report::Exited(-1),
        ] {
            assert_eq!(Report::decode(report.encode()), Some(report));
        }
        assert_eq!(Report::decode([b'?'; RECORD_BYTES]), None);
    }
}
