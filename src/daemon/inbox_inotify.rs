//! The inbox watch on Linux: an inotify descriptor on jobs/, read by the daemon's own
//! runtime, asking only for what can mean a new job (a file created or moved in) and
//! for the watch's own trouble. notify's backend also asks for opens, closes and
//! deletions and reads them on a thread of its own, so every job's own open and
//! removal by the daemon woke that thread (bench/results/HISTORY.md, run f).

use std::ffi::{CStr, OsStr};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::daemon::inbox::{Sink, WatchError};

/// Room for a few hundred events per read.
const EVENT_BUFFER: usize = 16 * 1024;

/// A running watch; dropping it stops it and closes its descriptor.
pub struct Watch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches `jobs_dir` for `sink`. Must be called inside the daemon's runtime.
pub fn start(jobs_dir: &Path, sink: Sink) -> Result<Watch, WatchError> {
    let cannot = |cause: std::io::Error, hint: &'static str| WatchError::Watch {
        path: jobs_dir.to_path_buf(),
        cause,
        hint,
    };
    let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
        .map_err(|e| cannot(e.into(), limit_hint(e)))?;
    let wanted = WatchFlags::CREATE
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW;
    inotify::add_watch(&fd, jobs_dir, wanted).map_err(|e| cannot(e.into(), limit_hint(e)))?;
    // SAFETY: the descriptor is an OwnedFd the AsyncFd owns; nothing else closes it.
    let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
        .map_err(|e| cannot(e.into_parts().1, ""))?;
    Ok(Watch {
        task: tokio::spawn(read_events(fd, sink)),
    })
}

/// How to lift the limit behind `e`, if a limit it is.
fn limit_hint(e: Errno) -> &'static str {
    match e {
        Errno::NOSPC => " (raise the inotify watch limit: sysctl fs.inotify.max_user_watches)",
        Errno::MFILE => {
            " (raise the inotify instance limit, sysctl fs.inotify.max_user_instances, or the \
             daemon's open-file limit, LimitNOFILE=)"
        }
        Errno::NFILE => " (the system's open-file limit is reached: sysctl fs.file-max)",
        _ => "",
    }
}

/// Events read in one turn before the daemon loop gets to take the hints.
const EVENTS_PER_TURN: usize = 512;

/// Reads events until the watch is dropped; on a read error, asks to be watched again.
async fn read_events(fd: AsyncFd<OwnedFd>, sink: Sink) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); EVENT_BUFFER];
    loop {
        let mut ready = match fd.readable().await {
            Ok(ready) => ready,
            Err(e) => return failed(&sink, e),
        };
        match read_some(fd.get_ref(), &mut buf, &sink) {
            Ok(true) => ready.clear_ready(),
            // More to read (readiness kept): first let the loop take these hints.
            Ok(false) => tokio::task::yield_now().await,
            Err(e) => return failed(&sink, e.into()),
        }
    }
}

/// Reports events until none is left (true), or a turn's worth is read and the
/// buffer is empty (false: nothing read is dropped with the reader).
fn read_some(fd: &OwnedFd, buf: &mut [MaybeUninit<u8>], sink: &Sink) -> Result<bool, Errno> {
    let mut events = inotify::Reader::new(fd, buf);
    let mut seen = 0;
    loop {
        match events.next() {
            Ok(event) => report(sink, event.events(), event.file_name()),
            Err(Errno::AGAIN) => return Ok(true),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
        seen += 1;
        if seen >= EVENTS_PER_TURN && events.is_buffer_empty() {
            return Ok(false);
        }
    }
}

fn failed(sink: &Sink, e: std::io::Error) {
    tracing::warn!("cannot read the inbox watch ({e}): watching jobs/ again");
    sink.lost();
}

fn report(sink: &Sink, flags: ReadFlags, name: Option<&CStr>) {
    let gone =
        ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::IGNORED | ReadFlags::UNMOUNT;
    if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
        sink.rescan();
    } else if flags.intersects(gone) {
        sink.lost();
    } else if let Some(name) = name {
        sink.arrived(OsStr::from_bytes(name.to_bytes()));
    }
}
