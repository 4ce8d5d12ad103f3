//! The inbox watch on Linux: an inotify descriptor on jobs/, read by the daemon's own
//! runtime, asking only for what can mean a new job (a file created or moved in) and
//! for the watch's own trouble. notify's backend also asks for opens, closes and
//! deletions and reads them on a thread of its own, so every job's own open and
//! removal by the daemon woke that thread (docs/performance.md, run f).

use std::ffi::{CStr, OsStr};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::daemon::inbox::Sink;

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
pub fn start(jobs_dir: &Path, sink: Sink) -> Result<Watch, String> {
    let cannot = |e: Errno| {
        let hint = match e {
            Errno::NOSPC | Errno::MFILE => {
                " (the inotify limits are reached: raise fs.inotify.max_user_watches or \
                 fs.inotify.max_user_instances with sysctl)"
            }
            _ => "",
        };
        format!(
            "cannot watch {}: {}{hint}",
            jobs_dir.display(),
            std::io::Error::from(e)
        )
    };
    let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).map_err(cannot)?;
    let wanted = WatchFlags::CREATE
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW;
    inotify::add_watch(&fd, jobs_dir, wanted).map_err(cannot)?;
    // SAFETY: the descriptor is an OwnedFd the AsyncFd owns; nothing else closes it.
    let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
        .map_err(|e| format!("cannot watch {}: {e}", jobs_dir.display()))?;
    Ok(Watch {
        task: tokio::spawn(read_events(fd, sink)),
    })
}

/// Reads events until the watch is dropped; on a read error, asks to be watched again.
async fn read_events(fd: AsyncFd<OwnedFd>, sink: Sink) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); EVENT_BUFFER];
    loop {
        let Ok(mut ready) = fd.readable().await else {
            return sink.lost();
        };
        let mut events = inotify::Reader::new(fd.get_ref(), &mut buf);
        loop {
            match events.next() {
                Ok(event) => report(&sink, event.events(), event.file_name()),
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => {}
                Err(_) => return sink.lost(),
            }
        }
        ready.clear_ready();
    }
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
