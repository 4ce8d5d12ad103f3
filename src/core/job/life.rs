//! A claimed job's life, the one model of it: the state its claim record persists
//! (`Stage`, each state with the data it needs), the moves between states (functions
//! that refuse an illegal move), and what an earlier holder's record means for the
//! next holder (`take_over`). `store::claim` saves it; `engine` acts on it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Which job file a record belongs to (a later file of the same name is another job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    pub mtime_ns: i128,
}

impl FileIdentity {
    /// The identity of a file from its metadata.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// A runner process group started for the claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerRecord {
    pub name: String,
    pub pgid: u32,
    /// The leader's start time (Linux clock ticks), so a reused pid is never killed.
    pub start_time: Option<u64>,
}

/// Where a claimed job is, with what that state needs. Saved as `"state"` plus the
/// state's own fields inside the claim record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Stage {
    /// Being judged; `runner` is the runner running now, if any. Found by a later
    /// holder, it means the judge was interrupted.
    Running {
        #[serde(default)]
        runner: Option<RunnerRecord>,
    },
    /// Given back unjudged (shutdown, or an error before the verdict was published):
    /// judge again, not counted as an interruption.
    Queued,
    /// The verdict's temp file is durable and is being renamed to `verdict_path`;
    /// `runner` is the one that answered (for `status`).
    Publishing {
        #[serde(with = "path_bytes")]
        verdict_temp: PathBuf,
        #[serde(with = "path_bytes")]
        verdict_path: PathBuf,
        #[serde(default)]
        runner: Option<RunnerRecord>,
    },
}

impl Default for Stage {
    fn default() -> Self {
        Stage::Running { runner: None }
    }
}

/// A move the life does not allow (a bug in the caller, never a user's input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a claimed job cannot go from {from} to {to}")]
pub struct IllegalMove {
    pub from: &'static str,
    pub to: &'static str,
}

impl Stage {
    /// The state's name as saved.
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Running { .. } => "running",
            Stage::Queued => "queued",
            Stage::Publishing { .. } => "publishing",
        }
    }

    fn illegal(&self, to: &'static str) -> IllegalMove {
        IllegalMove {
            from: self.name(),
            to,
        }
    }

    /// A runner started: only while running.
    pub fn runner_started(&self, runner: RunnerRecord) -> Result<Stage, IllegalMove> {
        match self {
            Stage::Running { .. } => Ok(Stage::Running {
                runner: Some(runner),
            }),
            _ => Err(self.illegal("running with a runner")),
        }
    }

    /// Given back unjudged: from running, or from publishing when the rename failed
    /// (its temp file is gone, so there is nothing to finish).
    pub fn requeue(&self) -> Result<Stage, IllegalMove> {
        match self {
            Stage::Running { .. } | Stage::Publishing { .. } => Ok(Stage::Queued),
            Stage::Queued => Err(self.illegal("queued")),
        }
    }

    /// The verdict's temp file is durable: only a running job publishes.
    pub fn publishing(&self, temp: PathBuf, target: PathBuf) -> Result<Stage, IllegalMove> {
        match self {
            Stage::Running { runner } => Ok(Stage::Publishing {
                verdict_temp: temp,
                verdict_path: target,
                runner: runner.clone(),
            }),
            _ => Err(self.illegal("publishing")),
        }
    }

    /// The runner group a holder may have left behind.
    pub fn runner(&self) -> Option<&RunnerRecord> {
        match self {
            Stage::Running { runner } | Stage::Publishing { runner, .. } => runner.as_ref(),
            Stage::Queued => None,
        }
    }
}

/// The record inside a claim file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ClaimRecord {
    #[serde(flatten)]
    pub stage: Stage,
    /// Times a judge stopped (crash, kill) while this job was running.
    pub interruptions: u32,
    /// The process holding the claim.
    pub owner_pid: u32,
    /// In every runner's environment as `LLM_JUDGE_TAG`.
    pub tag: String,
    pub job: Option<FileIdentity>,
    /// Job id and hook, for `status`.
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub hook: serde_json::Value,
    /// Unix seconds when this holder claimed the job.
    #[serde(default)]
    pub claimed_at: f64,
}

/// What an earlier holder left in the claim file.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Previous {
    /// No record: a fresh claim.
    Nothing,
    /// A readable record.
    Record(ClaimRecord),
    /// A record cut short by a crash mid-write.
    Torn,
}

/// What the earlier holder's record means for the job file now at the claim's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakeOver {
    /// No earlier holder.
    Fresh,
    /// A record cut short by a crash: one interruption.
    Torn,
    /// The record is another job's (an earlier file of the same name): judge this one
    /// afresh, after finishing that job's publish if it was publishing.
    OtherJob,
    /// Given back unjudged: judge again with the interruptions so far.
    Requeued { interruptions: u32 },
    /// Its holder stopped while judging it: judge again, one interruption more.
    Interrupted { interruptions: u32 },
    /// Its verdict was being renamed into place: finish that; nothing to judge.
    AlreadyPublished,
}

impl TakeOver {
    /// The interruptions to judge with, or `None` when there is nothing to judge.
    pub fn interruptions(self) -> Option<u32> {
        match self {
            TakeOver::Fresh | TakeOver::OtherJob => Some(0),
            TakeOver::Torn => Some(1),
            TakeOver::Requeued { interruptions } | TakeOver::Interrupted { interruptions } => {
                Some(interruptions)
            }
            TakeOver::AlreadyPublished => None,
        }
    }
}

/// What `previous` means for the job file whose identity is `job`.
pub fn take_over(previous: &Previous, job: FileIdentity) -> TakeOver {
    let record = match previous {
        Previous::Nothing => return TakeOver::Fresh,
        Previous::Torn => return TakeOver::Torn,
        Previous::Record(record) => record,
    };
    if record.job != Some(job) {
        return TakeOver::OtherJob;
    }
    match record.stage {
        Stage::Publishing { .. } => TakeOver::AlreadyPublished,
        Stage::Queued => TakeOver::Requeued {
            interruptions: record.interruptions,
        },
        Stage::Running { .. } => TakeOver::Interrupted {
            interruptions: record.interruptions + 1,
        },
    }
}

/// Paths as text when they are UTF-8, else as their bytes (job names may be any bytes).
mod path_bytes {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
        match path.to_str() {
            Some(text) => s.serialize_str(text),
            None => s.serialize_bytes(path.as_os_str().as_bytes()),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Text(String),
        Bytes(Vec<u8>),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        Ok(match Repr::deserialize(d)? {
            Repr::Text(t) => PathBuf::from(t),
            Repr::Bytes(b) => PathBuf::from(OsString::from_vec(b)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner() -> RunnerRecord {
        RunnerRecord {
            name: "codex".into(),
            pgid: 42,
            start_time: Some(7),
        }
    }

    fn publishing() -> Stage {
        Stage::Publishing {
            verdict_temp: "/v/.a.tmp".into(),
            verdict_path: "/v/a.json".into(),
            runner: None,
        }
    }

    fn every_stage() -> [Stage; 3] {
        [Stage::default(), Stage::Queued, publishing()]
    }

    #[test]
    fn runner_started_is_legal_only_while_running() {
        for stage in every_stage() {
            let moved = stage.runner_started(runner());
            match stage {
                Stage::Running { .. } => assert_eq!(
                    moved,
                    Ok(Stage::Running {
                        runner: Some(runner())
                    })
                ),
                _ => assert_eq!(
                    moved.map_err(|e| e.from),
                    Err(stage.name()),
                    "from {stage:?}"
                ),
            }
        }
    }

    #[test]
    fn requeue_is_legal_from_running_and_publishing_and_drops_the_runner() {
        let running = Stage::default().runner_started(runner()).unwrap();
        assert_eq!(running.requeue(), Ok(Stage::Queued));
        assert_eq!(publishing().requeue(), Ok(Stage::Queued));
        assert_eq!(
            Stage::Queued.requeue(),
            Err(IllegalMove {
                from: "queued",
                to: "queued"
            })
        );
    }

    #[test]
    fn publishing_is_legal_only_from_running() {
        let moved = Stage::default().publishing("/t".into(), "/v".into());
        assert_eq!(
            moved,
            Ok(Stage::Publishing {
                verdict_temp: "/t".into(),
                verdict_path: "/v".into(),
                runner: None,
            })
        );
        for stage in [Stage::Queued, publishing()] {
            assert!(
                stage.publishing("/t".into(), "/v".into()).is_err(),
                "{stage:?}"
            );
        }
    }

    fn identity(ino: u64) -> FileIdentity {
        FileIdentity {
            dev: 1,
            ino,
            mtime_ns: 5,
        }
    }

    fn record(stage: Stage, interruptions: u32, job: u64) -> Previous {
        Previous::Record(ClaimRecord {
            stage,
            interruptions,
            job: Some(identity(job)),
            ..Default::default()
        })
    }

    #[test]
    fn take_over_reads_every_kind_of_earlier_record() {
        let job = identity(9);
        assert_eq!(take_over(&Previous::Nothing, job), TakeOver::Fresh);
        assert_eq!(take_over(&Previous::Torn, job), TakeOver::Torn);
        assert_eq!(
            take_over(&record(Stage::default(), 1, 9), job),
            TakeOver::Interrupted { interruptions: 2 }
        );
        assert_eq!(
            take_over(&record(Stage::Queued, 1, 9), job),
            TakeOver::Requeued { interruptions: 1 }
        );
        assert_eq!(
            take_over(&record(publishing(), 0, 9), job),
            TakeOver::AlreadyPublished
        );
        for stage in every_stage() {
            assert_eq!(take_over(&record(stage, 2, 8), job), TakeOver::OtherJob);
        }
    }

    #[test]
    fn interruptions_follow_the_take_over() {
        assert_eq!(TakeOver::Fresh.interruptions(), Some(0));
        assert_eq!(TakeOver::OtherJob.interruptions(), Some(0));
        assert_eq!(TakeOver::Torn.interruptions(), Some(1));
        assert_eq!(
            TakeOver::Interrupted { interruptions: 3 }.interruptions(),
            Some(3)
        );
        assert_eq!(TakeOver::AlreadyPublished.interruptions(), None);
    }

    /// The saved shape stays the one earlier versions wrote: `state` plus flat fields,
    /// so a claim left by an older judge is still read after an upgrade.
    #[test]
    fn the_record_keeps_its_saved_shape() {
        let old = r#"{"state":"publishing","interruptions":1,"owner_pid":3,"tag":"t",
            "job":{"dev":1,"ino":2,"mtime_ns":3},"id":"x","hook":null,"claimed_at":1.0,
            "runner":null,"verdict_temp":"/v/.a.tmp","verdict_path":"/v/a.json"}"#;
        let record: ClaimRecord = serde_json::from_str(old).unwrap();
        assert_eq!(record.stage, publishing());
        let old_running = r#"{"state":"running","interruptions":0,"owner_pid":3,"tag":"t",
            "job":null,"runner":{"name":"codex","pgid":42,"start_time":7},
            "verdict_temp":null,"verdict_path":null}"#;
        let record: ClaimRecord = serde_json::from_str(old_running).unwrap();
        assert_eq!(record.stage.runner(), Some(&runner()));
        let text = serde_json::to_string(&record).unwrap();
        assert!(
            text.starts_with(r#"{"state":"running","runner":{"name":"codex""#),
            "{text}"
        );
    }

    #[test]
    fn non_utf8_paths_survive_the_record() {
        use std::os::unix::ffi::OsStrExt;
        let record = ClaimRecord {
            stage: Stage::Publishing {
                verdict_temp: PathBuf::from(std::ffi::OsStr::from_bytes(b"/v/\xff.json")),
                verdict_path: PathBuf::from("/v/ok.json"),
                runner: Some(runner()),
            },
            ..Default::default()
        };
        let text = serde_json::to_string(&record).unwrap();
        let back: ClaimRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, record);
    }
}
