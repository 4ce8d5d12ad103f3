//! The one test world: a private temp folder per test holding the state folder, a
//! HOME with its XDG_CONFIG_HOME, a TMPDIR for the judge's temp folders, the fakes
//! and what they record, and a config file; and reading back what the judge wrote
//! there (jobs, verdicts, judge.log). Starting the judge is in `launch.rs`, the fake
//! runners in `fakes.rs`.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;

use serde_json::Value;

/// First 16 hex digits of SHA-1 of a transcript: its verdict folder's name.
pub use llm_judge::api::transcript_hash;

/// The login files of codex and claude, under HOME.
const LOGIN_FILES: [&str; 2] = [".codex/auth.json", ".claude/.credentials.json"];

/// The verdict folder of jobs with no usable transcript (`""`).
pub const NO_TRANSCRIPT: &str = "da39a3ee5e6b4b0d";

/// A private temp world for one test; removed when dropped.
pub struct World {
    _dir: tempfile::TempDir,
    /// The (canonical) temp folder holding everything below; `$W` in fake runners.
    pub root: PathBuf,
    pub home: PathBuf,
    /// XDG_CONFIG_HOME (`home/.config`).
    pub xdg: PathBuf,
    /// TMPDIR of the judge (it must put none of its own folders there).
    pub tmp: PathBuf,
    /// Fake runner scripts (`<name>.sh`) and fake programs.
    pub bin: PathBuf,
    /// Other scripts a test writes.
    pub scripts: PathBuf,
    /// What fakes record, one folder per program (basename of `$0`).
    pub rec: PathBuf,
    /// A plain folder to use as a job's `cwd`.
    pub work: PathBuf,
    /// Numbers the output files of started commands.
    pub(super) outputs: AtomicUsize,
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("llm-judge-test-")
            .tempdir()
            .expect("temp folder");
        let root = dir.path().canonicalize().expect("canonical temp folder");
        let world = World {
            _dir: dir,
            home: root.join("home"),
            xdg: root.join("home/.config"),
            tmp: root.join("tmp"),
            bin: root.join("bin"),
            scripts: root.join("scripts"),
            rec: root.join("rec"),
            work: root.join("work"),
            root,
            outputs: AtomicUsize::new(0),
        };
        // Private: the judge refuses a state folder others can reach.
        for dir in [
            world.state(),
            world.jobs(),
            world.home.clone(),
            world.bin.clone(),
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .expect("create private test folder");
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod 700");
        }
        for dir in [
            &world.xdg,
            &world.tmp,
            &world.scripts,
            &world.rec,
            &world.work,
        ] {
            fs::create_dir_all(dir).expect("create test folder");
        }
        fs::create_dir_all(world.path("out")).expect("create out/");
        // The config read when a command names no --config.
        fs::create_dir_all(world.xdg.join("llm-judge")).expect("create config folder");
        fs::write(
            world.xdg.join("llm-judge/config.toml"),
            with_test_defaults(""),
        )
        .expect("write default test config");
        world.config("");
        world.log_in();
        world
    }

    /// The login files codex and claude keep under HOME (what `core::runner::login` looks
    /// for): a world is logged in unless a test logs it out.
    pub fn log_in(&self) {
        for file in LOGIN_FILES {
            let path = self.home.join(file);
            fs::create_dir_all(path.parent().expect("a file in a folder")).expect("login folder");
            fs::write(path, "{}").expect("write a login file");
        }
    }

    /// Removes the login files of [`World::log_in`].
    pub fn log_out(&self) {
        for file in LOGIN_FILES {
            let _ = fs::remove_file(self.home.join(file));
        }
    }

    /// A path inside the world.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// `--state-dir`.
    pub fn state(&self) -> PathBuf {
        self.path("state")
    }

    pub fn jobs(&self) -> PathBuf {
        self.state().join("jobs")
    }

    pub fn log_path(&self) -> PathBuf {
        self.state().join("judge.log")
    }

    /// The config file `command` names: fsync off and a one-second kill grace unless
    /// `extra` sets it (see [`write_config`] for exactly the given text).
    pub fn config(&self, extra: &str) {
        let mut text = format!("fsync = false\n{extra}\n");
        if !extra.contains("kill_grace_seconds") {
            text.insert_str(0, "kill_grace_seconds = 1\n");
        }
        write_config(self, &text);
    }

    /// Writes another config file `name` (with the test defaults) and returns its path.
    pub fn config_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        fs::write(&path, with_test_defaults(text)).expect("write config");
        path
    }

    /// Publishes `jobs/<name>.json` the way producers must (hidden temp file, then
    /// rename) and returns its path.
    pub fn job(&self, name: &str, job: &Value) -> PathBuf {
        let temp = self.jobs().join(format!(".{name}.tmp"));
        fs::write(&temp, job.to_string()).expect("write job");
        let path = self.jobs().join(format!("{name}.json"));
        fs::rename(&temp, &path).expect("publish job");
        path
    }

    /// Writes `jobs/<stem>.json` holding `bytes`.
    pub fn job_bytes(&self, stem: &str, bytes: &[u8]) -> PathBuf {
        let path = self.jobs().join(format!("{stem}.json"));
        fs::write(&path, bytes).expect("write job");
        path
    }

    /// The job file `jobs/<id>.json` as JSON.
    pub fn queued_job(&self, id: &str) -> Value {
        let path = self.jobs().join(format!("{id}.json"));
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
    }

    /// The names left in `jobs/`.
    pub fn jobs_left(&self) -> Vec<String> {
        names(&self.jobs())
    }

    /// Every verdict, as (folder, file name, content), by file name.
    pub fn verdicts(&self) -> Vec<(String, String, Value)> {
        let mut out: Vec<(String, String, Value)> = self
            .all_verdicts()
            .into_iter()
            .map(|path| {
                let text = fs::read_to_string(&path).expect("read verdict");
                let folder = path.parent().and_then(Path::file_name).unwrap_or_default();
                (
                    folder.to_string_lossy().into_owned(),
                    path.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned(),
                    serde_json::from_str(&text).unwrap_or(Value::Null),
                )
            })
            .collect();
        out.sort_by(|a, b| a.1.cmp(&b.1));
        out
    }

    /// The one verdict of job `name`, in whatever folder.
    pub fn verdict(&self, name: &str) -> Value {
        let found: Vec<Value> = self
            .verdicts()
            .into_iter()
            .filter(|(_, n, _)| n == &format!("{name}.json"))
            .map(|(_, _, v)| v)
            .collect();
        assert_eq!(found.len(), 1, "verdicts for {name}: {found:?}");
        found[0].clone()
    }

    /// The verdict of job `stem` for `transcript` (its folder is checked too).
    pub fn verdict_of(&self, transcript: &str, stem: &str) -> Value {
        self.verdict_in(&transcript_hash(transcript), stem)
    }

    /// The verdict folder of `transcript`.
    pub fn verdict_folder(&self, transcript: &str) -> PathBuf {
        self.state()
            .join("verdicts")
            .join(transcript_hash(transcript))
    }

    /// The path of a verdict.
    pub fn verdict_path(&self, folder: &str, stem: &str) -> PathBuf {
        self.state()
            .join("verdicts")
            .join(folder)
            .join(format!("{stem}.json"))
    }

    /// The verdict of job `stem` in the verdict folder `folder`.
    pub fn verdict_in(&self, folder: &str, stem: &str) -> Value {
        let path = self.verdict_path(folder, stem);
        let text = fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "verdict {}: {e}\nverdicts: {:?}\njudge.log:\n{}",
                path.display(),
                self.all_verdicts(),
                self.log()
            )
        });
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("verdict {}: {e}: {text}", path.display()))
    }

    /// Every published verdict file (hidden temp files excluded), sorted.
    pub fn all_verdicts(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let Ok(folders) = fs::read_dir(self.state().join("verdicts")) else {
            return found;
        };
        for folder in folders.flatten() {
            for file in fs::read_dir(folder.path()).into_iter().flatten().flatten() {
                if !file.file_name().to_string_lossy().starts_with('.') {
                    found.push(file.path());
                }
            }
        }
        found.sort();
        found
    }

    /// judge.log ("" when there is none yet).
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// judge.log lines containing `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    /// The one judge.log line ending with `tail` (after the timestamp and level).
    pub fn log_line_ending(&self, tail: &str) -> String {
        let lines: Vec<String> = self
            .log()
            .lines()
            .filter(|l| l.ends_with(tail))
            .map(str::to_string)
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "one line ending with {tail:?} in judge.log:\n{}",
            self.log()
        );
        lines[0].clone()
    }

    /// Waits (bounded) for judge.log to hold `what`.
    pub fn wait_log(&self, what: &str) {
        super::wait_for(&format!("judge.log line {what:?}"), super::NO_HANG, || {
            self.log().contains(what)
        });
    }

    /// A file of the world as text ("" when it is missing).
    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_default()
    }

    /// The private folder of the judge's fresh runner folders (never a folder others
    /// can write, such as TMPDIR).
    pub fn runner_tmp(&self) -> PathBuf {
        self.state().join("tmp")
    }

    /// The names left in the runner folders' parent (folders that were not removed)
    /// and in TMPDIR (the judge must not put any there).
    pub fn tmp_entries(&self) -> Vec<String> {
        let mut found = names(&self.tmp);
        found.extend(names(&self.runner_tmp()));
        found.sort();
        found
    }
}

/// Turns runner health and the answer cache off unless `text` configures them: tests
/// of other features must not be changed by them (they have their own tests).
pub fn with_test_defaults(text: &str) -> String {
    let mut out = text.to_string();
    for (table, body) in [
        ("[health]", "enabled = false"),
        ("[cache]", "ttl_seconds = 0"),
    ] {
        if !text.contains(table) {
            out.push_str(&format!("\n{table}\n{body}\n"));
        }
    }
    out
}

/// Writes the world's config file with exactly `text` plus the test defaults.
pub fn write_config(w: &World, text: &str) {
    fs::write(w.path("config.toml"), with_test_defaults(text)).expect("write config.toml");
}

/// Every file name (lossy) in a folder, sorted; empty when it does not exist.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every (folder, file name) under `verdicts/`, hidden ones included, sorted.
pub fn verdict_entries(state: &Path) -> Vec<(String, String)> {
    let verdicts = state.join("verdicts");
    let mut out: Vec<(String, String)> = names(&verdicts)
        .into_iter()
        .flat_map(|folder| {
            names(&verdicts.join(&folder))
                .into_iter()
                .map(move |name| (folder.clone(), name))
        })
        .collect();
    out.sort();
    out
}

/// A path as a `&str` (test paths are always UTF-8).
pub fn s(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// NUL-terminated items (as `printf '%s\0' "$@"` writes them), lossy.
pub fn nul_items(bytes: &[u8]) -> Vec<String> {
    let mut items: Vec<String> = bytes
        .split(|&b| b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    if items.last().is_some_and(String::is_empty) {
        items.pop();
    }
    items
}

/// `(runner, ok, reason)` of each attempt of a verdict (or `ask` output).
pub fn attempts(verdict: &Value) -> Vec<(String, bool, String)> {
    verdict["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("attempts is not a list: {verdict}"))
        .iter()
        .map(|a| {
            (
                a["runner"].as_str().expect("runner").to_string(),
                a["ok"].as_bool().expect("ok"),
                a["reason"].as_str().expect("reason").to_string(),
            )
        })
        .collect()
}

/// Owned `(runner, ok, reason)` triples from borrowed ones, for comparisons.
pub fn expected(items: &[(&str, bool, &str)]) -> Vec<(String, bool, String)> {
    items
        .iter()
        .map(|(r, ok, why)| (r.to_string(), *ok, why.to_string()))
        .collect()
}

/// The most spans open at once, from lines "start <ns>" / "end <ns>" that runners
/// append; also returns how many lines there were.
pub fn peak_overlap(spans: &str) -> (usize, i32) {
    let mut events: Vec<(u128, i32)> = spans
        .lines()
        .filter_map(|l| {
            let (kind, t) = l.split_once(' ')?;
            Some((t.parse().ok()?, if kind == "start" { 1 } else { -1 }))
        })
        .collect();
    // Ends sort before starts at the same instant.
    events.sort();
    let (mut now, mut peak) = (0, 0);
    for (_, delta) in &events {
        now += delta;
        peak = peak.max(now);
    }
    (events.len(), peak)
}
