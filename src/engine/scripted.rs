//! The job-run tests' stand-ins: a scripted spawner in place of runner processes
//! and model APIs (answers, hangs until its timeout or stop, an API runner's request
//! ending as scripted, and copies started ahead of their jobs that wait, die or print
//! early) and a bench (a temp state folder, settings with one
//! scripted runner).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::core::api::protocol::CallEnd;
use crate::core::config::Settings;
use crate::core::job::life::FileIdentity;
use crate::core::verdict::{Outcome, RunEnd};
use crate::engine::attempts::Services;
use crate::engine::events::StopSignal;
use crate::engine::exiting::Ended;
use crate::engine::job_run::{JobEnd, JobRun};
use crate::engine::spawner::{
    ApiOutput, AttemptOutput, AttemptSpec, BoxFuture, OnProgress, Progress, Spawner, WaitSpec,
    WaitingRunner,
};
use crate::process::spawn::{RunOutput, stopped};
use crate::store::claim::{self, Acquired};
use crate::store::state_dir::StateDir;

/// What the scripted runner does on one start.
pub enum Act {
    /// Exits 0 with this stdout.
    Answer(&'static str),
    /// Runs until its timeout or the stop signal, as a real runner that never answers.
    Hang,
    /// An API runner's request that ended so (a reply, an error status, a timeout...).
    Api(CallEnd),
}

/// What a scripted copy started ahead of its job does.
pub enum CopyAct {
    /// Waits for its prompt, then exits 0 with this stdout.
    Waits(&'static str),
    /// Ended while it waited.
    Dies,
    /// Printed this on stdout before any prompt came.
    PrintsEarly(&'static str),
}

/// A spawner that plays `Act`s in order for attempts and `CopyAct`s for the copies
/// started ahead of their jobs, and counts what it was asked.
#[derive(Default)]
pub struct Scripted {
    acts: Mutex<VecDeque<Act>>,
    copies: Mutex<VecDeque<CopyAct>>,
    runs: AtomicUsize,
    copies_started: AtomicUsize,
    /// What the copies did with their job: the prompts they got, how many were discarded.
    copy_log: Arc<CopyLog>,
    pub started: Notify,
}

/// What became of the scripted copies.
#[derive(Default)]
pub struct CopyLog {
    prompts: Mutex<Vec<String>>,
    discarded: AtomicUsize,
    /// For each copy started, how many verdicts of transcript `T` were published then.
    verdicts_at_start: Mutex<Vec<usize>>,
    /// Awaited by a waiting copy given a job before it answers.
    before_answer: Mutex<Option<BeforeAnswer>>,
}

/// What a copy given a job waits for before it answers (`Scripted::before_answer`).
pub type BeforeAnswer = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

impl Scripted {
    pub fn new(acts: Vec<Act>) -> Arc<Self> {
        Scripted::with_copies(acts, Vec::new())
    }

    pub fn with_copies(acts: Vec<Act>, copies: Vec<CopyAct>) -> Arc<Self> {
        Arc::new(Scripted {
            acts: Mutex::new(acts.into()),
            copies: Mutex::new(copies.into()),
            ..Scripted::default()
        })
    }

    /// Attempts it spawned a runner for (copies not counted).
    pub fn starts(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// Copies it started ahead of their jobs.
    pub fn copies_started(&self) -> usize {
        self.copies_started.load(Ordering::SeqCst)
    }

    /// The prompts copies were given.
    pub fn copy_prompts(&self) -> Vec<String> {
        self.copy_log
            .prompts
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// Copies stopped unused.
    pub fn copies_discarded(&self) -> usize {
        self.copy_log.discarded.load(Ordering::SeqCst)
    }

    /// For each copy started, how many verdicts of transcript `T` were published then.
    pub fn verdicts_at_copy_starts(&self) -> Vec<usize> {
        self.copy_log
            .verdicts_at_start
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// Makes every copy given a job await `hook` before it answers.
    pub fn before_answer(&self, hook: BeforeAnswer) {
        if let Ok(mut slot) = self.copy_log.before_answer.lock() {
            *slot = Some(hook);
        }
    }

    async fn play(&self, spec: &AttemptSpec<'_>, progress: &mut OnProgress<'_>) -> AttemptOutput {
        let act = self.acts.lock().ok().and_then(|mut a| a.pop_front());
        self.runs.fetch_add(1, Ordering::SeqCst);
        progress(Progress::Starting {
            cwd: None,
            prestarted: false,
        });
        // A request starts no process: no process group to report.
        if let Some(Act::Api(end)) = act {
            self.started.notify_one();
            let elapsed = Duration::ZERO;
            return AttemptOutput::Api(ApiOutput { end, elapsed });
        }
        // pgid 0 is no process group: recovery and health never signal it.
        progress(Progress::Spawned { pgid: 0 });
        self.started.notify_one();
        let (end, stdout) = match act {
            Some(Act::Answer(text)) => (RunEnd::Exited { code: 0 }, text.to_string()),
            Some(Act::Hang | Act::Api(_)) | None => tokio::select! {
                () = tokio::time::sleep(spec.timeout()) => (RunEnd::TimedOut { seconds: spec.timeout().as_secs_f64() }, String::new()),
                () = stopped(spec.stop()) => (RunEnd::Stopped, String::new()),
            },
        };
        answered(end, stdout).into()
    }
}

fn answered(end: RunEnd, stdout: String) -> RunOutput {
    RunOutput {
        end,
        stdout,
        stderr: String::new(),
        stdout_cut: None,
        elapsed: Duration::ZERO,
    }
}

impl Spawner for Scripted {
    fn run<'a>(
        &'a self,
        spec: &'a AttemptSpec<'a>,
        progress: &'a mut OnProgress<'_>,
    ) -> BoxFuture<'a, AttemptOutput> {
        Box::pin(self.play(spec, progress))
    }

    fn start_waiting<'a>(
        &'a self,
        spec: &'a WaitSpec<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn WaitingRunner>, RunEnd>> {
        self.copies_started.fetch_add(1, Ordering::SeqCst);
        let verdicts = StateDir::new(&spec.settings.state_dir).verdict_dir("T");
        let published = std::fs::read_dir(verdicts).map_or(0, |d| d.count());
        if let Ok(mut starts) = self.copy_log.verdicts_at_start.lock() {
            starts.push(published);
        }
        let act = self.copies.lock().ok().and_then(|mut c| c.pop_front());
        let copy = act.map(|act| ScriptedCopy {
            early: match &act {
                CopyAct::PrintsEarly(text) => text.as_bytes().to_vec(),
                _ => Vec::new(),
            },
            act,
            log: self.copy_log.clone(),
        });
        Box::pin(async move {
            match copy {
                Some(copy) => Ok(Box::new(copy) as Box<dyn WaitingRunner>),
                None => Err(RunEnd::NotInstalled),
            }
        })
    }
}

/// A scripted copy waiting for its prompt.
struct ScriptedCopy {
    act: CopyAct,
    early: Vec<u8>,
    log: Arc<CopyLog>,
}

impl WaitingRunner for ScriptedCopy {
    fn pgid(&self) -> u32 {
        0
    }

    fn has_ended(&self) -> bool {
        matches!(self.act, CopyAct::Dies)
    }

    fn stdout_so_far(&mut self) -> &[u8] {
        &self.early
    }

    fn finish<'a>(self: Box<Self>, spec: &'a AttemptSpec<'a>) -> BoxFuture<'a, Ended> {
        if let Ok(mut prompts) = self.log.prompts.lock() {
            prompts.push(spec.job().prompt.clone());
        }
        let hook = self.log.before_answer.lock().ok().and_then(|h| h.clone());
        let out = match self.act {
            CopyAct::Waits(text) => answered(RunEnd::Exited { code: 0 }, text.to_string()),
            // A copy that died or printed early is never given a job.
            CopyAct::Dies | CopyAct::PrintsEarly(_) => {
                answered(RunEnd::Exited { code: -9 }, String::new())
            }
        };
        Box::pin(async move {
            if let Some(hook) = hook {
                hook().await;
            }
            Ended {
                output: out,
                rest: None,
            }
        })
    }

    fn discard(self: Box<Self>, _kill_grace: Duration) -> BoxFuture<'static, ()> {
        self.log.discarded.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::ready(()))
    }
}

/// A temp state folder, settings with one scripted runner, and a spawner.
pub struct Bench {
    _dir: tempfile::TempDir,
    pub state: StateDir,
    pub settings: Settings,
    pub spawner: Arc<Scripted>,
}

impl Bench {
    pub fn new(acts: Vec<Act>) -> Bench {
        Bench::with_spawner(Scripted::new(acts))
    }

    pub fn with_spawner(spawner: Arc<Scripted>) -> Bench {
        let dir = tempfile::tempdir().expect("temp state folder");
        let state = StateDir::new(dir.path().join("state"));
        state.create().expect("create state folder");
        let settings = Settings::for_tests(state.root.clone(), "scripted");
        Bench {
            _dir: dir,
            state,
            settings,
            spawner,
        }
    }

    /// The same bench (state folder, settings) with another spawner.
    pub fn respawned(self, spawner: Arc<Scripted>) -> Bench {
        Bench { spawner, ..self }
    }

    pub fn services(&self) -> Services {
        Services {
            spawner: self.spawner.clone(),
            ..Services::default()
        }
    }

    pub fn job(&self, stem: &str, job: &Value) -> std::path::PathBuf {
        let path = self.state.jobs().join(format!("{stem}.json"));
        std::fs::write(&path, job.to_string()).expect("write job");
        path
    }

    pub fn verdict(&self, transcript: &str, stem: &str) -> Option<Value> {
        let path = self
            .state
            .verdict_dir(transcript)
            .join(format!("{stem}.json"));
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Leaves the claim of `path` as an earlier holder that died while running it,
    /// after `already` interruptions: its record stays `Running`, its flock is gone.
    pub fn interrupted_holder(&self, path: &Path, already: u32) {
        let identity = FileIdentity::of(&std::fs::symlink_metadata(path).expect("stat job"));
        let name = path.file_name().expect("job name");
        match claim::acquire(&self.state.claims(), name, false) {
            Ok(Acquired::Claimed { claim, .. }) => {
                claim
                    .start_running(already, identity)
                    .expect("record running");
            }
            other => panic!("claim: {other:?}"),
        }
    }

    /// Judges `path` with this bench's services, never stopped, within the bound.
    pub async fn judge(&self, path: &Path) -> JobEnd {
        bounded(
            "handle",
            self.handle(path, &self.services(), Steer::default()),
        )
        .await
    }

    /// Judges `path` with `services`, steered as a worker slot would.
    pub async fn handle(&self, path: &Path, services: &Services, steer: Steer) -> JobEnd {
        let run = JobRun {
            stop: steer.stop,
            settle: steer.settle,
            ..JobRun::new(&self.settings, &self.state, services)
        };
        run.judge_file(path).await
    }
}

/// What a test gives a run beyond the bench (a worker slot's stop signal and settle time).
#[derive(Default)]
pub struct Steer {
    pub stop: Option<StopSignal>,
    pub settle: Option<std::time::Duration>,
}

pub fn question(prompt: &str) -> Value {
    json!({"prompt": prompt, "transcript": "T", "hit_if_all_true": ["ok"]})
}

pub fn outcome(handled: &JobEnd) -> Option<Outcome> {
    match handled {
        JobEnd::Judged { outcome, .. } => Some(*outcome),
        _ => None,
    }
}

/// A bound that proves nothing hangs; the tests themselves take milliseconds.
pub async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(30), fut).await {
        Ok(value) => value,
        Err(_) => panic!("{what} did not finish within 30 s"),
    }
}
