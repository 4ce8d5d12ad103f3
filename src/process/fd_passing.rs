//! Descriptors over a Unix socket (`SCM_RIGHTS`), for the zygote and the pooled
//! supervisors (Linux: `MSG_CMSG_CLOEXEC`).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use libc::c_int;

/// The most descriptors one message carries.
const MAX_FDS: usize = 4;

/// A control-message buffer, aligned for `cmsghdr` (room for `MAX_FDS` descriptors).
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

fn errno() -> c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Sends all of `bytes` with `fds` (at most `MAX_FDS`) attached to the first byte. An
/// error says whether any of it (and so the descriptors) went.
pub(crate) fn send_with_fds(
    mut sock: &UnixStream,
    bytes: &[u8],
    fds: &[RawFd],
) -> Result<(), (bool, io::Error)> {
    if fds.is_empty() {
        // Unknown how much went: say some did.
        return sock.write_all(bytes).map_err(|e| (true, e));
    }
    if fds.len() > MAX_FDS || bytes.is_empty() {
        return Err((false, io::Error::other("bad descriptor message")));
    }
    let mut control = ControlBuffer([0u8; 64]);
    let payload = std::mem::size_of_val(fds) as u32;
    // SAFETY: msghdr and cmsghdr are plain C structs; the control buffer has room for
    // one header with the descriptors (CMSG_SPACE checked below).
    unsafe {
        let space = libc::CMSG_SPACE(payload) as usize;
        if space > control.0.len() {
            return Err((false, io::Error::other("control buffer too small")));
        }
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr().cast_mut().cast(),
            iov_len: bytes.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), fds.len());
        loop {
            let n = libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
            if n == bytes.len() as isize {
                return Ok(());
            }
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n < 0 {
                return Err((false, io::Error::last_os_error()));
            }
            // The descriptors went with the first bytes; finish the rest plainly.
            return sock.write_all(&bytes[n as usize..]).map_err(|e| (true, e));
        }
    }
}

/// Reads exactly `buf.len()` bytes and the descriptors sent with them (close-on-exec);
/// `None` on EOF before any byte.
pub(crate) fn recv_with_fds(
    mut sock: &UnixStream,
    buf: &mut [u8],
) -> io::Result<Option<Vec<OwnedFd>>> {
    let mut control = ControlBuffer([0u8; 64]);
    let mut fds = Vec::new();
    // SAFETY: as in send_with_fds; every descriptor the kernel passed is taken into an
    // OwnedFd exactly once.
    let n = unsafe {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        let n = loop {
            let n = libc::recvmsg(
                sock.as_raw_fd(),
                &mut msg,
                libc::MSG_CMSG_CLOEXEC | libc::MSG_WAITALL,
            );
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            break n;
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<c_int>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(*data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        n as usize
    };
    if n == 0 {
        return Ok(None);
    }
    if n < buf.len() {
        sock.read_exact(&mut buf[n..])?;
    }
    Ok(Some(fds))
}
