//! Start-up checks of who may write the state folder (docs/reference.md, "Guarantees").

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why a state folder is refused; each names the folder and the command that fixes it.
#[derive(Debug, Error)]
pub enum PermissionError {
    /// The folder cannot be looked at.
    #[error("cannot stat {}", path.display())]
    Stat {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A symlink or a file where a folder belongs.
    #[error(
        "{0} is a symlink or not a folder; the judge never follows links inside its \
         state folder: replace it with a real folder (`rm {0} && mkdir -m 700 {0}`)",
        path.display()
    )]
    NotAFolder { path: PathBuf },
    /// Owned by another user.
    #[error(
        "{0} is owned by uid {owner}, not by you (uid {me}); another user could plant jobs: \
         fix with `chown {me} {0}` or use another --state-dir",
        path.display()
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    /// Writable by others.
    #[error(
        "{0} is writable by others (mode {mode:o}); anyone could plant jobs: fix with `chmod o-w {0}`",
        path.display()
    )]
    WorldWritable { path: PathBuf, mode: u32 },
    /// An ACL lets another user or group write.
    #[error(
        "{0} has an ACL that lets {who} {grants} (`getfacl {0}` lists it); another \
         user could plant or change jobs: remove the ACL with `setfacl -b {0}`",
        path.display()
    )]
    AclGrant {
        path: PathBuf,
        who: String,
        grants: &'static str,
    },
    /// An ACL whose bytes cannot be read.
    #[cfg(target_os = "linux")]
    #[error(
        "cannot read the ACL of {0}: {cause}; remove it with `setfacl -b {0}`",
        path.display()
    )]
    AclMalformed {
        path: PathBuf,
        cause: AclFormatError,
    },
    /// The ACL attribute cannot be read.
    #[cfg(target_os = "linux")]
    #[error(
        "cannot read the ACL of {0}: {cause}; check the folder (`getfacl {0}`)",
        path.display()
    )]
    AclUnreadable {
        path: PathBuf,
        cause: rustix::io::Errno,
    },
}

/// ACL bytes that are not a version 2 POSIX ACL.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AclFormatError {
    /// Fewer than 4 bytes.
    #[error("it is shorter than its header")]
    Short,
    /// A header other than version 2.
    #[error("unknown ACL version {0}")]
    Version(u32),
    /// A torn last entry.
    #[error("{0} bytes of entries, not whole 8-byte entries")]
    Torn(usize),
}

/// When this user cannot enter `path` or one of the folders above it: which folder,
/// its owner and mode, and what to do (a private state folder of another user looked
/// empty, or gave a bare "Permission denied").
pub fn entry_denied(path: &Path) -> Option<String> {
    use rustix::fs::{Access, access};
    let me = rustix::process::geteuid().as_raw();
    let mut walked = PathBuf::new();
    for part in path.components() {
        walked.push(part);
        if access(&walked, Access::EXEC_OK).is_ok() {
            continue;
        }
        let meta = std::fs::metadata(&walked).ok()?;
        if !meta.is_dir() {
            return None;
        }
        return Some(format!(
            "{} is not open to this user (uid {me}): it belongs to uid {} (mode {:o}); run \
             llm-judge as that user (e.g. sudo -u '#{}' llm-judge ...), or give a state folder \
             of your own with --state-dir",
            walked.display(),
            meta.uid(),
            meta.mode() & 0o7777,
            meta.uid()
        ));
    }
    None
}

/// Refuses a folder owned by another user or writable by others; returns a warning
/// for a group-writable one.
pub fn check_private(dir: &Path) -> Result<Option<String>, PermissionError> {
    let path = dir.to_path_buf();
    let meta = std::fs::symlink_metadata(dir).map_err(|source| PermissionError::Stat {
        path: path.clone(),
        source,
    })?;
    if !meta.is_dir() {
        // Checking a link's target would vouch for a folder anyone could swap in.
        return Err(PermissionError::NotAFolder { path });
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        let owner = meta.uid();
        return Err(PermissionError::NotOwned { path, owner, me });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(PermissionError::WorldWritable { path, mode });
    }
    // With an ACL the mode's group bits are only its mask: `setfacl -m u:other:rwx`
    // shows as group-writable, yet lets that user plant jobs. A default ACL hands its
    // grants to every file made inside (a producer's job file, before it is judged).
    for (xattr, grants) in [
        (ACL_XATTR, "write it"),
        (
            DEFAULT_ACL_XATTR,
            "write every file created in it (by default)",
        ),
    ] {
        if let Some(who) = acl_writer(dir, xattr, me)? {
            return Err(PermissionError::AclGrant { path, who, grants });
        }
    }
    if mode & 0o020 != 0 {
        return Ok(Some(format!(
            "{} is group-writable (mode {mode:o}); fine with a private group, else `chmod g-w {}`",
            dir.display(),
            dir.display()
        )));
    }
    Ok(None)
}

/// The POSIX access ACL's extended attribute (Linux).
const ACL_XATTR: &str = "system.posix_acl_access";
/// A folder's default ACL: what files created in it start with (Linux).
const DEFAULT_ACL_XATTR: &str = "system.posix_acl_default";

/// Who other than the owner (`me`) may write through `dir`'s ACL named `xattr`, if anyone.
#[cfg(target_os = "linux")]
fn acl_writer(dir: &Path, xattr: &str, me: u32) -> Result<Option<String>, PermissionError> {
    use rustix::io::Errno;
    // XATTR_SIZE_MAX: no value is longer.
    let mut buf = vec![0u8; 65536];
    let path = dir.to_path_buf();
    match rustix::fs::lgetxattr(dir, xattr, &mut buf[..]) {
        Ok(len) => {
            let acl = buf.get(..len).unwrap_or_default();
            acl_write_grant(acl, me).map_err(|cause| PermissionError::AclMalformed { path, cause })
        }
        // No ACL, or a filesystem without ACLs (or xattrs): the mode tells it all.
        Err(e) if e == Errno::NODATA || e == Errno::OPNOTSUPP || e == Errno::NOSYS => Ok(None),
        Err(cause) => Err(PermissionError::AclUnreadable { path, cause }),
    }
}

/// macOS ACLs are not read (docs/security.md, "Not defended").
#[cfg(not(target_os = "linux"))]
fn acl_writer(_dir: &Path, _xattr: &str, _me: u32) -> Result<Option<String>, PermissionError> {
    Ok(None)
}

/// Who, other than the user `me`, an access ACL (the `system.posix_acl_access`
/// bytes: a version 2 header, then entries of tag u16, perm u16, id u32, little
/// endian) lets write: a named user or named group entry with the write bit, not
/// masked off. The owner's own entries and `other` (the mode shows it) do not count.
/// Pure, so every shape is a unit test.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn acl_write_grant(acl: &[u8], me: u32) -> Result<Option<String>, AclFormatError> {
    const VERSION: u32 = 2;
    const USER: u16 = 0x02;
    const GROUP: u16 = 0x08;
    const MASK: u16 = 0x10;
    const WRITE: u16 = 0x02;
    let Some((header, entries)) = acl.split_first_chunk::<4>() else {
        return Err(AclFormatError::Short);
    };
    if u32::from_le_bytes(*header) != VERSION {
        return Err(AclFormatError::Version(u32::from_le_bytes(*header)));
    }
    if entries.len() % 8 != 0 {
        return Err(AclFormatError::Torn(entries.len()));
    }
    let parsed: Vec<(u16, u16, u32)> = entries
        .chunks_exact(8)
        .map(|e| {
            let tag = u16::from_le_bytes([e[0], e[1]]);
            let perm = u16::from_le_bytes([e[2], e[3]]);
            let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
            (tag, perm, id)
        })
        .collect();
    // Named entries grant no more than the mask (an ACL with named entries has one).
    let mask_writes = parsed
        .iter()
        .find(|(tag, _, _)| *tag == MASK)
        .is_none_or(|(_, perm, _)| perm & WRITE != 0);
    if !mask_writes {
        return Ok(None);
    }
    let grant = parsed.iter().find_map(|&(tag, perm, id)| {
        if perm & WRITE == 0 {
            return None;
        }
        match tag {
            USER if id != me => Some(format!("uid {id}")),
            GROUP => Some(format!("gid {id}")),
            _ => None,
        }
    });
    Ok(grant)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn modes() {
        let dir = tempfile::tempdir().unwrap();
        let set = |mode| {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap()
        };
        set(0o700);
        assert_eq!(check_private(dir.path()).unwrap(), None);
        set(0o770);
        assert!(
            check_private(dir.path())
                .unwrap()
                .unwrap()
                .contains("chmod g-w")
        );
        set(0o777);
        assert!(
            check_private(dir.path())
                .unwrap_err()
                .to_string()
                .contains("chmod o-w")
        );
        set(0o700);
        let link = dir.path().join("jobs");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(
            check_private(&link)
                .unwrap_err()
                .to_string()
                .contains("symlink")
        );
    }

    /// ACL bytes: the version 2 header, then (tag, perm, id) entries.
    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut out = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            out.extend_from_slice(&tag.to_le_bytes());
            out.extend_from_slice(&perm.to_le_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        }
        out
    }

    const ANY: u32 = u32::MAX;

    #[test]
    fn an_acl_grants_write_to_others_through_named_entries_the_mask_lets_through() {
        let me = 1000;
        let base = |named: &[(u16, u16, u32)], mask: u16| {
            let mut e = vec![(0x01, 7, ANY)];
            e.extend_from_slice(named);
            e.extend_from_slice(&[(0x04, 5, ANY), (0x10, mask, ANY), (0x20, 5, ANY)]);
            acl(&e)
        };
        let grant = |bytes: &[u8]| acl_write_grant(bytes, me).unwrap();
        // setfacl -m u:other:rwx
        assert_eq!(
            grant(&base(&[(0x02, 7, 65534)], 7)),
            Some("uid 65534".into())
        );
        // setfacl -m g:staff:rw
        assert_eq!(grant(&base(&[(0x08, 6, 50)], 6)), Some("gid 50".into()));
        // -w- alone is still write.
        assert_eq!(grant(&base(&[(0x02, 2, 7)], 2)), Some("uid 7".into()));
        // Read-only grants, the owner's own named entry, a mask without write.
        assert_eq!(grant(&base(&[(0x02, 5, 65534), (0x08, 4, 50)], 7)), None);
        assert_eq!(grant(&base(&[(0x02, 7, me)], 7)), None);
        assert_eq!(grant(&base(&[(0x02, 7, 65534)], 5)), None, "masked off");
        // Only the three base entries (what `setfacl -b` leaves, or a bare chmod).
        assert_eq!(
            grant(&acl(&[(0x01, 7, ANY), (0x04, 7, ANY), (0x20, 5, ANY)])),
            None
        );
        // A named entry and no mask (the kernel refuses it, the parse stays safe).
        assert_eq!(grant(&acl(&[(0x02, 7, 9)])), Some("uid 9".into()));
    }

    #[test]
    fn a_malformed_acl_is_an_error_not_a_pass() {
        assert!(
            acl_write_grant(b"", 0)
                .unwrap_err()
                .to_string()
                .contains("header")
        );
        assert!(
            acl_write_grant(&1u32.to_le_bytes(), 0)
                .unwrap_err()
                .to_string()
                .contains("version 1")
        );
        let mut torn = acl(&[(0x01, 7, ANY)]);
        torn.pop();
        assert!(
            acl_write_grant(&torn, 0)
                .unwrap_err()
                .to_string()
                .contains("8-byte")
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_folder_with_a_write_acl_for_another_user_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let set = |bytes: &[u8]| {
            rustix::fs::setxattr(
                dir.path(),
                ACL_XATTR,
                bytes,
                rustix::fs::XattrFlags::empty(),
            )
        };
        let named = |perm| {
            acl(&[
                (0x01, 7, ANY),
                (0x02, perm, 65534),
                (0x04, 5, ANY),
                (0x10, 7, ANY),
                (0x20, 5, ANY),
            ])
        };
        if let Err(e) = set(&named(7)) {
            // A filesystem without ACLs: nothing to refuse.
            assert_eq!(e, rustix::io::Errno::OPNOTSUPP, "{e}");
            return;
        }
        let err = check_private(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("uid 65534") && err.contains("setfacl -b"),
            "{err}"
        );
        set(&named(5)).unwrap();
        // Read access only: the mask still shows as group-writable, a warning.
        assert!(
            check_private(dir.path())
                .unwrap()
                .unwrap()
                .contains("group-writable")
        );
    }
}
