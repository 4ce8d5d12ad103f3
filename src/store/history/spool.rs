//! The history's spool, `<state>/history/spool-<hour>.jsonl`: every writer (the daemon,
//! `run`, a hook) appends its records there as whole JSON lines in one `O_APPEND` write,
//! with no lock and no database on its path (a stop pays a few microseconds, not a
//! database's open). The database imports the spool when it is next opened (the
//! daemon every few seconds, `history`, `stats`, `mark`, `status`), from where its last
//! import ended, up to the last whole line; a file of an hour gone by, read to its end,
//! is removed. A record written twice is stored once (its `uid`).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::core::history::Record;
use crate::store::state_dir::{self, NOFOLLOW, StateDir, now_unix};

/// A spool file stops taking records past this size (when nothing imports it); what
/// the writers had then is dropped, each writer saying so in judge.log.
pub const MAX_SPOOL_BYTES: u64 = 64 << 20;

/// At most this many spool files wait (three days of hours with records, when nothing
/// imports them): a new hour's file is not started past it.
pub const MAX_SPOOL_FILES: usize = 72;

/// The seconds a spool file covers.
const SPOOL_SPAN: u64 = 3_600;

/// Appends `records` to this hour's spool file, one write. Never waits. The folder is
/// checked each time: a link or another user's folder in its place is refused.
pub fn append(state: &StateDir, records: &[Record]) -> io::Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let mut lines = Vec::new();
    for record in records {
        serde_json::to_writer(&mut lines, record).map_err(io::Error::other)?;
        lines.push(b'\n');
    }
    let dir = state.history();
    state_dir::private_dir(&dir)?;
    let path = dir.join(spool_name(now_unix()));
    let file = open_append(&path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if meta.len() > MAX_SPOOL_BYTES {
        return Err(io::Error::other(format!(
            "{} is over {} MiB (nothing imported it): history records are dropped until \
             `llm-judge history` or the daemon imports it",
            path.display(),
            MAX_SPOOL_BYTES >> 20
        )));
    }
    // A new hour's file: started only while the files waiting are few.
    if meta.len() == 0 && files(&dir)?.len() > MAX_SPOOL_FILES {
        let _ = std::fs::remove_file(&path);
        return Err(io::Error::other(format!(
            "{} holds over {MAX_SPOOL_FILES} spool files (nothing imported them): history \
             records are dropped until `llm-judge history` or the daemon imports them",
            dir.display()
        )));
    }
    // One write of whole lines: O_APPEND keeps the lines of several writers whole.
    (&file).write_all(&lines)
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// `spool-<hour>.jsonl` for the time `at`.
fn spool_name(at: f64) -> String {
    format!("spool-{}.jsonl", at.max(0.0) as u64 / SPOOL_SPAN)
}

/// A spool file found by [`files`].
#[derive(Debug, Clone)]
pub struct SpoolFile {
    pub path: PathBuf,
    /// Its name, the key of how far it was imported.
    pub name: String,
    /// True when its hour is over (a few minutes past, so no late writer is still at it).
    pub closed: bool,
}

/// The spool files in `dir`, oldest first.
pub fn files(dir: &Path) -> io::Result<Vec<SpoolFile>> {
    let now_hour = (now_unix().max(0.0) as u64).saturating_sub(300) / SPOOL_SPAN;
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found: Vec<(u64, SpoolFile)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let hour: u64 = name
                .strip_prefix("spool-")?
                .strip_suffix(".jsonl")?
                .parse()
                .ok()?;
            let file = SpoolFile {
                path: entry.path(),
                name,
                closed: hour < now_hour,
            };
            Some((hour, file))
        })
        .collect();
    found.sort_by_key(|(hour, _)| *hour);
    Ok(found.into_iter().map(|(_, f)| f).collect())
}

/// What one spool file holds past `from`, up to its last whole line: the records, the
/// lines that are not one, and the offset read to.
pub struct Read {
    pub records: Vec<Record>,
    pub bad_lines: usize,
    pub to: u64,
    /// True when the read reached the file's end (what is past `to` is then a line
    /// not ended yet, or one a crash cut short).
    pub at_end: bool,
}

/// Reads `file` from `from`, without following a link; at most [`MAX_SPOOL_BYTES`]
/// and a bit (a line a writer ended past the cap).
pub fn read_from(file: &Path, from: u64) -> io::Result<Read> {
    use std::io::{Read as _, Seek, SeekFrom};
    let mut opened = state_dir::open_nofollow(file)?;
    let meta = opened.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            file.display()
        )));
    }
    opened.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    opened
        .take(MAX_SPOOL_BYTES + (8 << 20))
        .read_to_end(&mut bytes)?;
    // A line still being written (or cut by a crash) waits for its end.
    let whole = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    let mut read = Read {
        records: Vec::new(),
        bad_lines: 0,
        to: from + whole as u64,
        at_end: from + bytes.len() as u64 >= meta.len(),
    };
    for line in bytes[..whole]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
    {
        match serde_json::from_slice::<Record>(line) {
            Ok(record) => read.records.push(record),
            Err(_) => read.bad_lines += 1,
        }
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::history::{Decision, DecisionRecord};

    fn decision(uid: &str) -> Record {
        Record::Decision(DecisionRecord {
            uid: uid.into(),
            at: 1.0,
            job_id: "j".into(),
            transcript: "claude:s".into(),
            rule: None,
            decision: Decision::Blocked,
            told: None,
        })
    }

    #[test]
    fn appends_are_read_back_from_where_the_last_read_ended() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path());
        append(&state, &[decision("a"), decision("b")]).unwrap();
        let files = files(&state.history()).unwrap();
        assert_eq!(files.len(), 1);
        assert!(!files[0].closed);
        let first = read_from(&files[0].path, 0).unwrap();
        assert_eq!(first.records.len(), 2);
        append(&state, &[decision("c")]).unwrap();
        let next = read_from(&files[0].path, first.to).unwrap();
        assert_eq!(
            next.records.iter().map(Record::uid).collect::<Vec<_>>(),
            ["c"]
        );
    }

    #[test]
    fn a_line_not_yet_ended_waits_and_a_bad_line_is_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("spool-1.jsonl");
        let good = serde_json::to_string(&decision("a")).unwrap();
        std::fs::write(&path, format!("not json\n{good}\n{{\"kind\":")).unwrap();
        let read = read_from(&path, 0).unwrap();
        assert_eq!((read.records.len(), read.bad_lines), (1, 1));
        assert_eq!(read.to as usize, "not json\n".len() + good.len() + 1);
    }

    #[test]
    fn a_link_in_place_of_the_spool_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path());
        std::fs::create_dir(state.history()).unwrap();
        let target = tmp.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, state.history().join(spool_name(now_unix()))).unwrap();
        assert!(append(&state, &[decision("a")]).is_err());
        assert!(!target.exists());
    }

    #[test]
    fn no_new_hour_is_started_past_the_cap_on_waiting_files() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path());
        std::fs::create_dir(state.history()).unwrap();
        for hour in 0..=MAX_SPOOL_FILES {
            std::fs::write(state.history().join(format!("spool-{hour}.jsonl")), "").unwrap();
        }
        let e = append(&state, &[decision("a")]).unwrap_err().to_string();
        assert!(e.contains("over 72 spool files"), "{e}");
        assert_eq!(files(&state.history()).unwrap().len(), MAX_SPOOL_FILES + 1);
    }

    #[test]
    fn a_link_in_place_of_the_folder_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path().join("state"));
        std::fs::create_dir_all(&state.root).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, state.history()).unwrap();
        assert!(append(&state, &[decision("a")]).is_err());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }

    #[test]
    fn spool_files_sort_by_hour_and_old_hours_are_closed() {
        let tmp = tempfile::tempdir().unwrap();
        for name in [
            "spool-10.jsonl",
            "spool-9.jsonl",
            "other.txt",
            "spool-x.jsonl",
        ] {
            std::fs::write(tmp.path().join(name), "").unwrap();
        }
        let found = files(tmp.path()).unwrap();
        assert_eq!(
            found.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
            ["spool-9.jsonl", "spool-10.jsonl"]
        );
        assert!(found.iter().all(|f| f.closed));
    }
}
