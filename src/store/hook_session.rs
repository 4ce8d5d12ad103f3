//! What `llm-judge hook` keeps between the calls of one session, in
//! `<state>/hooks/<session hash>/` (a 0700 folder, files read with `O_NOFOLLOW`): the
//! jobs already queued (so a retried hook never judges twice), a hit remembered for a
//! reply the agent repeats, the blocks of each turn (the cap), the one-off messages
//! already shown, the user's last prompt, and Cursor's block jobs waiting for its
//! `stop`. Nothing here is needed for a verdict: losing it costs at most a repeat.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::core::digest::sha1_hex;
use crate::store::state_dir::{
    StateDir, private_dir, publish, read_nofollow_at_most, transcript_hash,
};

/// The user's prompt is kept up to this many bytes.
const PROMPT_CAP: usize = 16 * 1024;

/// One session's folder.
#[derive(Debug, Clone)]
pub struct HookSession {
    dir: PathBuf,
}

impl HookSession {
    /// The folder of the session `key` (made when missing).
    pub fn open(state: &StateDir, key: &str) -> io::Result<Self> {
        let hooks = state.hooks();
        private_dir(&hooks)?;
        // Named as the session's verdict folder is (its key is their `transcript`).
        let dir = hooks.join(transcript_hash(key));
        private_dir(&dir)?;
        Ok(HookSession { dir })
    }

    fn file(&self, kind: &str, name: &str) -> PathBuf {
        self.dir
            .join(format!("{kind}-{}", sha1_hex(name.as_bytes(), 10)))
    }

    /// True the first time it is asked for `job_id` (the job is then queued).
    pub fn first_time(&self, job_id: &str) -> io::Result<bool> {
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.file("job", job_id))
        {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Remembers the notice of a hit of `job_id` (a reply the agent repeats word for
    /// word is not judged again: it gets this).
    pub fn remember_hit(&self, job_id: &str, notice: &str) -> io::Result<()> {
        publish(&self.file("job", job_id), notice.as_bytes(), false)
    }

    /// The notice remembered for `job_id`, if its verdict was a hit.
    pub fn remembered_hit(&self, job_id: &str) -> Option<String> {
        read_text(&self.file("job", job_id), PROMPT_CAP).filter(|t| !t.is_empty())
    }

    /// Blocks so far in `turn`, counted up to `max`.
    pub fn blocks(&self, turn: &str, max: u32) -> u32 {
        (0..max)
            .take_while(|n| self.block_file(turn, *n).exists())
            .count() as u32
    }

    /// Takes one of the `max` blocks of `turn`: false when all are taken. Each block is
    /// a file made with `O_EXCL`, so two stops at once cannot both take the last one.
    pub fn reserve_block(&self, turn: &str, max: u32) -> io::Result<bool> {
        for n in 0..max {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.block_file(turn, n))
            {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    fn block_file(&self, turn: &str, n: u32) -> PathBuf {
        self.file("block", &format!("{turn}\0{n}"))
    }

    /// True the first time `topic` is asked in this session (a message said once).
    pub fn say_once(&self, topic: &str) -> bool {
        self.first_time(&format!("said {topic}")).unwrap_or(false)
    }

    /// Keeps the user's latest prompt (its first 16 KiB).
    pub fn save_prompt(&self, prompt: &str) -> io::Result<()> {
        let mut end = prompt.len().min(PROMPT_CAP);
        while !prompt.is_char_boundary(end) {
            end -= 1;
        }
        publish(&self.dir.join("prompt"), &prompt.as_bytes()[..end], false)
    }

    /// The user's latest prompt, if one was kept.
    pub fn prompt(&self) -> Option<String> {
        read_text(&self.dir.join("prompt"), PROMPT_CAP)
    }

    /// Keeps the block jobs of `turn` for the harness's later stop (Cursor).
    pub fn save_pending(&self, turn: &str, ids: &[String]) -> io::Result<()> {
        publish(
            &self.file("pending", turn),
            ids.join("\n").as_bytes(),
            false,
        )
    }

    /// The block jobs kept for `turn`, forgotten once read.
    pub fn take_pending(&self, turn: &str) -> Vec<String> {
        let path = self.file("pending", turn);
        let ids = read_text(&path, PROMPT_CAP).unwrap_or_default();
        let _ = fs::remove_file(&path);
        ids.lines()
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    }
}

/// Removes the session folders untouched for `older_than` (called at session starts).
pub fn prune(state: &StateDir, older_than: Duration) {
    let Ok(entries) = fs::read_dir(state.hooks()) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > older_than));
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if old && is_dir {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

fn read_text(path: &Path, cap: usize) -> Option<String> {
    let bytes = read_nofollow_at_most(path, cap as u64).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_markers_counts_and_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        state.create().unwrap();
        let s = HookSession::open(&state, "codex:s1").unwrap();
        assert!(s.first_time("hook-1").unwrap());
        assert!(!s.first_time("hook-1").unwrap());
        assert_eq!(s.remembered_hit("hook-1"), None);
        s.remember_hit("hook-1", "Run the tests.").unwrap();
        assert_eq!(
            s.remembered_hit("hook-1").as_deref(),
            Some("Run the tests.")
        );
        assert!(!s.first_time("hook-1").unwrap(), "still queued once");
        assert_eq!(s.blocks("t1", 2), 0);
        assert!(s.reserve_block("t1", 2).unwrap());
        assert!(s.reserve_block("t1", 2).unwrap());
        assert!(!s.reserve_block("t1", 2).unwrap(), "the cap holds");
        assert_eq!((s.blocks("t1", 2), s.blocks("t2", 2)), (2, 0));
        assert!(s.say_once("no daemon") && !s.say_once("no daemon"));
        assert_eq!(s.prompt(), None);
        s.save_prompt(&"é".repeat(20_000)).unwrap();
        assert!(s.prompt().unwrap().len() <= PROMPT_CAP);
        s.save_pending("g1", &["a".into(), "b".into()]).unwrap();
        assert_eq!(s.take_pending("g1"), ["a", "b"]);
        assert!(s.take_pending("g1").is_empty());
        // Stops at once never take more blocks than the cap.
        let taken: usize = std::thread::scope(|scope| {
            let runs: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| s.reserve_block("t3", 3).unwrap()))
                .collect();
            runs.into_iter()
                .map(|r| r.join().unwrap_or(false))
                .filter(|taken| *taken)
                .count()
        });
        assert_eq!(taken, 3);
        // Another session has its own folder; an old one goes at the next prune.
        let other = HookSession::open(&state, "claude:s1").unwrap();
        assert!(other.first_time("hook-1").unwrap());
        prune(&state, Duration::ZERO);
        assert!(fs::read_dir(state.hooks()).unwrap().next().is_none());
    }
}
