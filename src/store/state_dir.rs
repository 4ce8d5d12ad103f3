//! The state folder (docs/reference.md, "State folder") and publishing by rename: hidden
//! temp file in the target folder, fsync, rename, fsync the folder.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::core::digest::sha1_hex;

/// Paths inside one state folder.
#[derive(Debug, Clone)]
pub struct StateDir {
    pub root: PathBuf,
}

impl StateDir {
    /// A state folder rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StateDir { root: root.into() }
    }

    /// The inbox.
    pub fn jobs(&self) -> PathBuf {
        self.root.join("jobs")
    }

    /// Verdict folders, one per transcript hash.
    pub fn verdicts(&self) -> PathBuf {
        self.root.join("verdicts")
    }

    /// Claims of jobs being judged (see claim.rs).
    pub fn claims(&self) -> PathBuf {
        self.root.join("claims")
    }

    /// Non-regular files moved out of the inbox.
    pub fn rejected(&self) -> PathBuf {
        self.root.join("rejected")
    }

    /// The human-readable log.
    pub fn log(&self) -> PathBuf {
        self.root.join("judge.log")
    }

    /// The private parent of the runners' fresh temp folders: inside `runtime`
    /// (`Settings::runtime_dir`, the tmpfs of `$XDG_RUNTIME_DIR`: a folder there costs
    /// a tenth of one on disk) when there is one, else `<state>/tmp`. Either way never
    /// a folder others can write (docs/reference.md, "Runners").
    pub fn runner_tmp(&self, runtime: Option<&Path>) -> PathBuf {
        match runtime {
            Some(runtime) => {
                let hash = sha1_hex(self.root.as_os_str().as_encoded_bytes(), 6);
                runtime.join(format!("llm-judge-{hash}"))
            }
            None => self.root.join("tmp"),
        }
    }

    /// `tag.key`: the random key in the tags of this folder's pre-started runners.
    pub fn tag_key(&self) -> PathBuf {
        self.root.join("tag.key")
    }

    /// `child.key`: the random key every runner of this folder gets as the proof that
    /// it is the judge's own child (`store::child_key`).
    pub fn child_key(&self) -> PathBuf {
        self.root.join("child.key")
    }

    /// The daemon's lock file.
    pub fn lock(&self) -> PathBuf {
        self.root.join("daemon.lock")
    }

    /// The daemon's status record.
    pub fn status(&self) -> PathBuf {
        self.root.join("status.json")
    }

    /// `status.tally`: the daemon's outcome counts since start.
    pub fn status_tally(&self) -> PathBuf {
        self.root.join("status.tally")
    }

    /// `cache/`: the answer cache, one file per entry.
    pub fn cache(&self) -> PathBuf {
        self.root.join("cache")
    }

    /// `health.json`: runner health, kept across restarts.
    pub fn health(&self) -> PathBuf {
        self.root.join("health.json")
    }

    /// `health.lock`: serialises updates of `health.json`.
    pub fn health_lock(&self) -> PathBuf {
        self.root.join("health.lock")
    }

    /// `spend.jsonl`: one line per runner run (`store::spend_ledger`).
    pub fn spend(&self) -> PathBuf {
        self.root.join("spend.jsonl")
    }

    /// `spend.lock`: appends share it, compaction holds it alone.
    pub fn spend_lock(&self) -> PathBuf {
        self.root.join("spend.lock")
    }

    /// `spend.logged`: its mtime is when the budget line was last logged.
    pub fn spend_logged(&self) -> PathBuf {
        self.root.join("spend.logged")
    }

    /// The folder of a transcript's verdicts.
    pub fn verdict_dir(&self, transcript: &str) -> PathBuf {
        self.verdicts().join(transcript_hash(transcript))
    }

    /// `hooks/`: what `llm-judge hook` keeps per session (`store::hook_session`).
    pub fn hooks(&self) -> PathBuf {
        self.root.join("hooks")
    }

    /// `history/`: the verdict history's spool and database (`store::history`).
    pub fn history(&self) -> PathBuf {
        self.root.join("history")
    }

    /// The judge's own files for codex: its instructions per table, the trimmed
    /// model catalog (`store::codex_files`).
    pub fn codex(&self) -> PathBuf {
        self.root.join("codex")
    }

    /// Creates the root and its folders (0700) if missing.
    pub fn create(&self) -> io::Result<()> {
        for dir in [
            self.root.clone(),
            self.jobs(),
            self.verdicts(),
            self.claims(),
        ] {
            create_dir(&dir)?;
        }
        Ok(())
    }
}

/// Creates a folder (and parents) with mode 0700; an existing one is fine, a
/// symlink in its place is refused (docs/reference.md, "State folder": never followed).
/// Each folder it creates is made durable (its parent fsynced): a file published in
/// it later survives power loss only if the folder's own name does. A folder fsync
/// that fails is logged, not an error: the folder is there, and the publish that
/// follows syncs (and fails) on its own.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    // The usual case, once per job for claims/ and the verdict folder: one lstat.
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => return Err(refused_folder(dir)),
        Err(_) => {}
    }
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && fs::symlink_metadata(d).is_err())
        .collect();
    make_dirs(dir)?;
    // Top down, so each name is durable before the names inside it.
    for created in missing.iter().rev() {
        let parent = created.parent().filter(|p| !p.as_os_str().is_empty());
        if let Err(e) = sync_dir(parent.unwrap_or(Path::new("."))) {
            tracing::warn!("folder {} made, not yet durable: {e}", created.display());
        }
    }
    Ok(())
}

fn make_dirs(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create folder {}: {e}", dir.display()),
            )
        })?;
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        _ => Err(refused_folder(dir)),
    }
}

/// `open` flag that refuses a symlink in the last component (docs/reference.md, "State
/// folder").
pub const NOFOLLOW: i32 = libc::O_NOFOLLOW;

/// Opens a file to read without following a symlink in its last component (that is
/// `ELOOP`) or blocking on a FIFO.
pub fn open_nofollow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Reads a state file without following a symlink or blocking on a FIFO.
pub fn read_nofollow(path: &Path) -> io::Result<Vec<u8>> {
    read_nofollow_at_most(path, u64::MAX)
}

/// `read_nofollow`, at most the first `max` bytes.
pub fn read_nofollow_at_most(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    read_nofollow_with_meta(path, max).map(|(bytes, _)| bytes)
}

/// The largest small text file [`read_small_text`] reads.
pub const SMALL_TEXT_MAX: u64 = 1 << 20;

/// A small text file's text (a rules file, a harness's settings file, the pins) read
/// without following a link or blocking; `None` when there is no such file, an error
/// naming it otherwise (over 1 MiB, not UTF-8, unreadable).
pub fn read_small_text(path: &Path) -> Result<Option<String>, String> {
    let bytes = match read_nofollow_at_most(path, SMALL_TEXT_MAX + 1) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if bytes.len() as u64 > SMALL_TEXT_MAX {
        return Err(format!("{} is over 1 MiB; it is not read", path.display()));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// `read_nofollow_at_most`, and the metadata of the file read (by `fstat`: who owns
/// what was read, not what the name points at now).
pub fn read_nofollow_with_meta(path: &Path, max: u64) -> io::Result<(Vec<u8>, fs::Metadata)> {
    use std::io::Read;
    let file = open_nofollow(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok((bytes, meta))
}

/// Makes sure `dir` is a real folder of ours with mode 0700, creating it if missing.
/// A symlink in its place, or another user's folder, is refused, never followed (docs/reference.md, "State folder").
/// Not made durable: for folders nothing depends on after a power cut (runner folders,
/// a drain's claim folder, hook sessions, codex's files, all made again when missing).
pub fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => make_dirs(dir),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot stat {}: {e}", dir.display()),
        )),
        Ok(meta) if !meta.is_dir() => Err(refused_folder(dir)),
        Ok(meta) if meta.uid() != rustix::process::geteuid().as_raw() => {
            Err(io::Error::other(format!(
                "{} belongs to uid {}, not to this user: another user could plant files in \
                 it; remove it (the judge makes it again)",
                dir.display(),
                meta.uid()
            )))
        }
        Ok(meta) if meta.mode() & 0o077 != 0 => {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        }
        Ok(_) => Ok(()),
    }
}

/// True for an absolute path to a real folder (not a symlink) owned by us that no one
/// else can write or enter.
pub fn is_private_folder(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    dir.is_absolute()
        && fs::symlink_metadata(dir).is_ok_and(|m| {
            m.is_dir() && m.uid() == rustix::process::geteuid().as_raw() && m.mode() & 0o077 == 0
        })
}

/// The error for a symlink or file where the judge expects its own folder.
pub fn refused_folder(dir: &Path) -> io::Error {
    io::Error::other(format!(
        "{} is a symlink or not a folder; the judge never follows links inside its state \
         folder: remove it (the judge recreates the folder)",
        dir.display()
    ))
}

/// First 16 lowercase hex digits of SHA-1 of the transcript string.
pub fn transcript_hash(transcript: &str) -> String {
    sha1_hex(transcript.as_bytes(), 8)
}

/// The stem of a job file name: the name without `.json`.
pub fn stem_of(name: &OsStr) -> String {
    let name = name.to_string_lossy();
    name.strip_suffix(".json").unwrap_or(&name).to_string()
}

/// The verdict file name of a job file: `<stem>.json` with the stem's exact bytes
/// (a lossy stem could give two jobs one verdict file).
pub fn verdict_name(job_name: &OsStr) -> OsString {
    use std::os::unix::ffi::OsStrExt;
    let mut name = job_name.to_os_string();
    if !job_name.as_bytes().ends_with(b".json") {
        name.push(".json");
    }
    name
}

/// True for names the inbox treats as jobs (not hidden, ending in `.json`).
pub fn is_job_name(name: &OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    !bytes.starts_with(b".") && bytes.ends_with(b".json")
}

/// A file's mtime by `lstat` (never following a link); the epoch when unknown, so it
/// sorts first.
pub fn mtime_of(path: &Path) -> SystemTime {
    fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The names in `dir` that `keep` accepts, oldest first (mtime, then name).
pub fn oldest_first(dir: &Path, keep: impl Fn(&OsStr) -> bool) -> io::Result<Vec<OsString>> {
    let mut found: Vec<(SystemTime, OsString)> = fs::read_dir(dir)?
        .flatten()
        .map(|entry| entry.file_name())
        .filter(|name| keep(name))
        .map(|name| (mtime_of(&dir.join(&name)), name))
        .collect();
    found.sort();
    Ok(found.into_iter().map(|(_, name)| name).collect())
}

/// A written, synced temp file waiting to be renamed into place. Dropped before
/// `keep`, it is removed: an error or a dropped future leaves no temp file behind.
#[derive(Debug)]
pub struct TempFile {
    pub path: PathBuf,
    kept: bool,
}

impl TempFile {
    /// Hands the file over (a claim record names it now, so recovery finishes or
    /// removes it): it is no longer removed on drop.
    pub fn keep(mut self) -> PathBuf {
        self.kept = true;
        std::mem::take(&mut self.path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.kept {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Writes `bytes` to a new hidden temp file in `dir` and syncs it.
pub fn write_temp(dir: &Path, name: &OsStr, bytes: &[u8], fsync: bool) -> io::Result<TempFile> {
    create_dir(dir)?;
    write_temp_in(dir, name, bytes, fsync, PRIVATE_FILE)
}

/// The mode of every file the store writes.
const PRIVATE_FILE: u32 = 0o600;

/// Writes `bytes` to a new hidden temp file in the existing folder `dir` with `mode`;
/// a mode other than the store's private one is set whatever the umask.
fn write_temp_in(
    dir: &Path,
    name: &OsStr,
    bytes: &[u8],
    fsync: bool,
    mode: u32,
) -> io::Result<TempFile> {
    let mut temp_name = OsString::from(".");
    // A name near the 255-byte limit leaves no room for the suffix: use its hash.
    if name.len() > 200 {
        use std::os::unix::ffi::OsStrExt;
        temp_name.push(sha1_hex(name.as_bytes(), 8));
    } else {
        temp_name.push(name);
    }
    temp_name.push(format!(".{}.{}.tmp", std::process::id(), unique()));
    let path = dir.join(temp_name);
    let result: io::Result<()> = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)?;
        if mode != PRIVATE_FILE {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        file.write_all(bytes)?;
        if fsync {
            file.sync_all()?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(TempFile { path, kept: false }),
        Err(e) => {
            let _ = fs::remove_file(&path);
            Err(io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", path.display()),
            ))
        }
    }
}

/// Renames a temp file into place and syncs the folder.
pub fn commit(temp: &Path, target: &Path, fsync: bool) -> io::Result<()> {
    fs::rename(temp, target).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot rename {} to {}: {e}",
                temp.display(),
                target.display()
            ),
        )
    })?;
    if fsync {
        sync_dir(target.parent().unwrap_or(Path::new(".")))?;
    }
    Ok(())
}

/// Publishes `bytes` at `target` atomically.
pub fn publish(target: &Path, bytes: &[u8], fsync: bool) -> io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    create_dir(dir)?;
    publish_in(dir, target, bytes, fsync, PRIVATE_FILE)
}

/// Publishes `bytes` at `target` atomically, its content synced with `fsync` but not its
/// name: after a power cut the file is whole, its earlier version, or gone; never empty
/// or cut short (for files that are advice: the cache, runner health).
pub fn publish_content(target: &Path, bytes: &[u8], fsync: bool) -> io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    create_dir(dir)?;
    let name = target.file_name().unwrap_or(OsStr::new("file"));
    let temp = write_temp_in(dir, name, bytes, fsync, PRIVATE_FILE)?;
    commit(&temp.path, target, false).inspect_err(|_| {
        let _ = fs::remove_file(&temp.path);
    })
}

/// Publishes `bytes` at `target` atomically, only if no file has that name yet:
/// `ErrorKind::AlreadyExists` otherwise. A hard link, unlike a rename, never replaces
/// a name, so two producers racing for one name cannot both succeed.
pub fn publish_new(target: &Path, bytes: &[u8], fsync: bool) -> io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    create_dir(dir)?;
    let name = target.file_name().unwrap_or(OsStr::new("file"));
    let temp = write_temp_in(dir, name, bytes, fsync, PRIVATE_FILE)?;
    match fs::hard_link(&temp.path, target) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(e),
        // A file system without hard links: look, then rename (a racing producer of
        // the same name may then replace this file, as before).
        Err(_) if fs::symlink_metadata(target).is_ok() => {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        Err(_) => return commit(&temp.path, target, fsync),
    }
    // The job lives on under `target`; dropping `temp` removes the hidden name.
    drop(temp);
    if fsync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Publishes `bytes` at `target` atomically and durably with `mode`, in a folder
/// outside the state folder that must exist (a service unit, say).
pub fn publish_with_mode(target: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    publish_in(dir, target, bytes, true, mode)
}

fn publish_in(dir: &Path, target: &Path, bytes: &[u8], fsync: bool, mode: u32) -> io::Result<()> {
    let name = target.file_name().unwrap_or(OsStr::new("file"));
    let temp = write_temp_in(dir, name, bytes, fsync, mode)?;
    commit(&temp.path, target, fsync).inspect_err(|_| {
        let _ = fs::remove_file(&temp.path);
    })
}

/// True when `file` is not empty and its last byte is not a newline: a crash cut the
/// last line of an append-only file short (the next append starts a line of its own).
pub fn ends_cut_short(file: &File) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(false);
    }
    let mut last = [0u8; 1];
    file.read_at(&mut last, len - 1)?;
    Ok(last[0] != b'\n')
}

/// fsyncs a folder so renames and new names in it survive power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot fsync folder {}: {e}", dir.display()),
        )
    })
}

/// A process-unique counter for temp names.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Seconds since the Unix epoch, as a float.
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_hash_is_sha1_prefix() {
        assert_eq!(transcript_hash(""), "da39a3ee5e6b4b0d");
        assert_eq!(transcript_hash("abc"), "a9993e364706816a");
    }

    #[test]
    fn verdict_names_keep_the_exact_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let a = verdict_name(OsStr::from_bytes(b"\xff.json"));
        let b = verdict_name(OsStr::from_bytes(b"\xfe.json"));
        assert_ne!(a, b);
        assert_eq!(
            verdict_name(OsStr::new("job.txt")),
            OsString::from("job.txt.json")
        );
    }

    #[test]
    fn long_names_get_short_temp_names() {
        let dir = tempfile::tempdir().unwrap();
        let long = "L".repeat(250);
        let temp = write_temp(dir.path(), OsStr::new(&long), b"x", false).unwrap();
        assert!(temp.path.file_name().unwrap().len() < 255);
    }

    #[test]
    fn a_temp_file_is_removed_when_dropped_unless_kept() {
        let dir = tempfile::tempdir().unwrap();
        let dropped = write_temp(dir.path(), OsStr::new("a"), b"x", false).unwrap();
        let path = dropped.path.clone();
        drop(dropped);
        assert!(!path.exists(), "a dropped temp file is removed");
        let kept = write_temp(dir.path(), OsStr::new("b"), b"x", false)
            .unwrap()
            .keep();
        assert!(kept.exists(), "a kept temp file stays for its new owner");
    }

    #[test]
    fn job_names() {
        assert!(is_job_name(OsStr::new("a.json")));
        assert!(!is_job_name(OsStr::new(".a.json")));
        assert!(!is_job_name(OsStr::new("a.json.tmp")));
        assert_eq!(stem_of(OsStr::new("abc.json")), "abc");
    }

    #[test]
    fn publish_replaces_atomically_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("sub").join("v.json");
        publish(&target, b"one", true).unwrap();
        publish(&target, b"two", false).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(target.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![OsString::from("v.json")]);
    }
}
