//! `llm-judge enqueue`: write a job safely (validated, hidden temp file, fsync,
//! rename) and print its id; `--wait` waits for its verdict.

mod subagent;
mod wait;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{Map, Value};
use thiserror::Error;

use crate::commands::ModeArg;
use crate::core::config::Settings;
use crate::core::job::Mode;
use crate::core::job::keys::{JOB_KEYS, KeyTypo, unknown_keys};
use crate::core::job::wire::{JobFile, JobRequest};
use crate::store::protocol::{self, Published};
use crate::store::state_dir::StateDir;
use crate::support::error::Chained;
use crate::support::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};

use subagent::subagent_reason;

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "Examples:
  llm-judge enqueue --transcript \"$T\" --hook stop --hit-if-all-true retracts \\
      --prompt 'Does this reply retract an earlier claim? Reply {\"retracts\": true|false}'
  printf '%s' \"$PROMPT\" | llm-judge enqueue --prompt-file - --transcript \"$T\" --wait 120
  llm-judge enqueue --json job.json

Prints the job's id. With CATSTACK_LLM_JUDGE_CHILD set (inside a runner) it writes nothing.
--wait prints the verdict as one JSON line and removes it; exit 124 when it times out.";

/// Seconds `--wait` waits when given no value.
const DEFAULT_WAIT_SECONDS: &str = "300";

/// `enqueue` flags: one per job key, or a whole job with `--json`.
#[derive(Args, Debug)]
pub struct EnqueueArgs {
    /// The question (or use --prompt-file, or "prompt" in --json).
    #[arg(long, conflicts_with = "prompt_file")]
    prompt: Option<String>,
    /// Read the prompt from FILE, or stdin with -.
    #[arg(long, value_name = "FILE|-")]
    prompt_file: Option<PathBuf>,
    /// The job id and file name (default: a random 32-hex id).
    #[arg(long)]
    id: Option<String>,
    /// Copied to the verdict.
    #[arg(long)]
    hook: Option<String>,
    /// The transcript whose drain gets the verdict.
    #[arg(long)]
    transcript: Option<String>,
    /// Runner table.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Per-runner timeout in seconds.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    timeout: Option<f64>,
    /// The runners' working folder (made absolute).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Hit when every such key of the answer is true (repeatable).
    #[arg(long = "hit-if-all-true", value_name = "KEY")]
    hit_if_all_true: Vec<String>,
    /// Hit when any such key is true, with its notice (repeatable; wins over --hit-if-all-true).
    #[arg(long = "hit-if-any-true", value_name = "KEY=NOTICE")]
    hit_if_any_true: Vec<String>,
    /// Copied to the verdict (replaced by the notices on an any-true hit).
    #[arg(long)]
    on_hit: Option<String>,
    /// Copied to the verdict.
    #[arg(long)]
    rule_id: Option<String>,
    /// A whole job object from FILE, or stdin with -; flags given too override its keys.
    #[arg(long, value_name = "FILE|-")]
    json: Option<PathBuf>,
    /// Wait for the verdict (default 300 s), print it and remove it.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = DEFAULT_WAIT_SECONDS)]
    wait: Option<f64>,
    /// Write the job even when it is a subagent job (catstack's rule), which is skipped by
    /// default.
    #[arg(long)]
    allow_subagent: bool,
}

/// True when a runner's hook is calling: write nothing.
pub fn recursion_guard() -> bool {
    std::env::var_os(crate::process::spawn::CHILD_VAR).is_some()
}

/// Writes the job; returns the exit code.
pub fn main(settings: &Settings, args: EnqueueArgs) -> i32 {
    let wait = args.wait;
    if let Some(s) =
        wait.filter(|s| !(s.is_finite() && *s >= 0.0 && *s <= crate::core::config::MAX_SECONDS))
    {
        say_err!("llm-judge enqueue: --wait {s} must be a number of seconds from 0 to 1e9");
        return EXIT_USAGE;
    }
    let job = match build_job(&args) {
        Ok(job) => job,
        Err(e) => {
            say_err!("llm-judge enqueue: {e}", e = e.chain());
            return EXIT_USAGE;
        }
    };
    // Helper agents fire hooks too; judging their turns costs runner calls and fills
    // the parent's inbox with noise (catstack's rule, docs/reference.md, "The catstack
    // drop-in").
    if !args.allow_subagent
        && let Some(why) = subagent_reason(&job)
    {
        say_err!(
            "llm-judge enqueue: not queued: a subagent job ({why}); pass --allow-subagent to queue it"
        );
        return EXIT_OK;
    }
    let job = match validate(settings, job) {
        Ok(job) => job,
        Err(e) => {
            say_err!("llm-judge enqueue: {e}", e = e.chain());
            return EXIT_USAGE;
        }
    };
    let state = StateDir::new(&settings.state_dir);
    let id = job.file.id().to_string();
    if let Err(e) = publish(settings, &state, &job) {
        say_err!("llm-judge enqueue: {e}", e = e.chain());
        return match e {
            EnqueueError::StillQueued { .. } | EnqueueError::Unsafe(_) => EXIT_USAGE,
            _ => EXIT_FAILURE,
        };
    }
    if job.no_rule {
        say_warn!(
            "llm-judge enqueue: warning: job {id} has no rule (no hit_if_all_true or \
             hit_if_any_true), so every answer is a hit; pass --hit-if-all-true KEY or \
             --hit-if-any-true KEY=NOTICE"
        );
    }
    if !job.other_keys.is_empty() {
        let keys: Vec<String> = job.other_keys.iter().map(|k| format!("{k:?}")).collect();
        say_warn!(
            "llm-judge enqueue: warning: job {id}: {} {}: kept in the job file and ignored by \
             the judge",
            keys.join(", "),
            if keys.len() == 1 {
                "is not a job key"
            } else {
                "are not job keys"
            }
        );
    }
    if job.file.job().transcript.is_empty() {
        say_warn!(
            "llm-judge enqueue: warning: job {id} has no transcript, so its verdict can never be \
             drained (pass --transcript)"
        );
    }
    if wait.is_none() && !protocol::daemon_runs(&state) {
        say_warn!(
            "llm-judge enqueue: warning: no daemon holds the lock of {}; the job waits until one \
             starts (llm-judge daemon, or llm-judge run {})",
            state.root.display(),
            protocol::job_path(&state, &id).display()
        );
    }
    if let Err(e) = writeln!(std::io::stdout().lock(), "{id}") {
        say_err!("llm-judge enqueue: job {id} was queued but stdout is closed: {e}");
        return EXIT_FAILURE;
    }
    match wait {
        None => EXIT_OK,
        Some(seconds) => wait::wait_and_print(&state, &job, seconds),
    }
}

/// Why no job was written; each names the flag, key or file.
#[derive(Debug, Error)]
enum EnqueueError {
    /// Two flags both read stdin.
    #[error("--json - and --prompt-file - cannot both read stdin")]
    BothStdin,
    /// `--json` or `--prompt-file` cannot be read.
    #[error("{flag} {}", path.display())]
    Read {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// `--json` holds JSON that is not an object.
    #[error("--json must hold one JSON object")]
    JsonNotObject,
    /// `--json` is not JSON.
    #[error("--json is not valid JSON")]
    JsonInvalid(#[source] serde_json::Error),
    /// `--timeout` not above 0.
    #[error("--timeout {value} must be a number of seconds above 0")]
    Timeout { value: f64 },
    /// `--cwd` cannot be made absolute.
    #[error("--cwd {}", path.display())]
    Cwd {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A `--hit-if-any-true` without `=`.
    #[error("--hit-if-any-true {pair:?} must be KEY=NOTICE")]
    HitPair { pair: String },
    /// An `id` key that is not a string.
    #[error("\"id\" must be a string")]
    IdNotString,
    /// No random id without `/dev/urandom`.
    #[error("cannot read /dev/urandom for a job id: {0}; pass --id")]
    NoRandom(std::io::Error),
    /// Over `max_job_bytes`.
    #[error("the job is {bytes} bytes, over max_job_bytes ({max}); shorten the prompt")]
    TooLarge { bytes: usize, max: u64 },
    /// The judge's own parser refuses it.
    #[error("invalid job: {why}")]
    Invalid { why: String },
    /// A key that looks like a misspelt job key: the job would lose that key's
    /// meaning (a misspelt rule makes every answer a hit).
    #[error(
        "{}; a key of your own needs a name further from the job keys ({})",
        typos_text(.0), JOB_KEYS.join(", ")
    )]
    Typo(Vec<KeyTypo>),
    /// A job of that id is still in `jobs/`: a rename would replace it unjudged.
    #[error(
        "job {id} is still queued ({}): its verdict is not written yet; wait for it \
         (llm-judge drain, or enqueue --wait), or pick another id (--id, or none for a \
         random one)",
        path.display()
    )]
    StillQueued { id: String, path: PathBuf },
    /// The state folder cannot be created.
    #[error("state folder {}", path.display())]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The job file cannot be published.
    #[error(transparent)]
    Publish(std::io::Error),
    /// The state folder is one the daemon refuses (others could plant jobs).
    #[error(transparent)]
    Unsafe(#[from] crate::store::permissions::PermissionError),
}

/// A job ready to write.
struct NewJob {
    file: JobFile,
    /// Keys that are not job keys (kept in the file, ignored by the judge).
    other_keys: Vec<String>,
    /// It gives no key to check: every answer is a hit.
    no_rule: bool,
}

/// `"hit_if_all_ture" is not a job key but looks like a misspelt "hit_if_all_true"`,
/// for each typo.
fn typos_text(typos: &[KeyTypo]) -> String {
    let each: Vec<String> = typos
        .iter()
        .map(|t| {
            format!(
                "{:?} is not a job key but looks like a misspelt {:?}: rename it to {:?}",
                t.key, t.resembles, t.resembles
            )
        })
        .collect();
    each.join("; ")
}

/// The job object: `--json`'s (when given) with each flag given set over it.
fn build_job(args: &EnqueueArgs) -> Result<Map<String, Value>, EnqueueError> {
    if args.json.as_deref() == Some(Path::new("-"))
        && args.prompt_file.as_deref() == Some(Path::new("-"))
    {
        return Err(EnqueueError::BothStdin);
    }
    let base = match &args.json {
        Some(source) => match serde_json::from_str(&read_source(source, "--json")?) {
            Ok(Value::Object(obj)) => obj,
            Ok(_) => return Err(EnqueueError::JsonNotObject),
            Err(e) => return Err(EnqueueError::JsonInvalid(e)),
        },
        None => Map::new(),
    };
    Ok(request_of(args)?.over(base))
}

/// The job keys the flags give.
fn request_of(args: &EnqueueArgs) -> Result<JobRequest, EnqueueError> {
    let prompt = match &args.prompt_file {
        Some(source) => Some(read_source(source, "--prompt-file")?),
        None => args.prompt.clone(),
    };
    if let Some(t) = args.timeout.filter(|t| !(t.is_finite() && *t > 0.0)) {
        return Err(EnqueueError::Timeout { value: t });
    }
    let cwd = match &args.cwd {
        Some(cwd) => Some(
            std::path::absolute(cwd).map_err(|source| EnqueueError::Cwd {
                path: cwd.clone(),
                source,
            })?,
        ),
        None => None,
    };
    let pairs = args
        .hit_if_any_true
        .iter()
        .map(|pair| {
            let (key, notice) = pair
                .split_once('=')
                .ok_or_else(|| EnqueueError::HitPair { pair: pair.clone() })?;
            Ok((key.to_string(), notice.to_string()))
        })
        .collect::<Result<Vec<_>, EnqueueError>>()?;
    Ok(JobRequest {
        id: args.id.clone(),
        prompt,
        transcript: args.transcript.clone(),
        hook: args.hook.clone(),
        rule_id: args.rule_id.clone(),
        hit_if_all_true: (!args.hit_if_all_true.is_empty()).then(|| args.hit_if_all_true.clone()),
        hit_if_any_true: (!pairs.is_empty()).then_some(pairs),
        on_hit: args.on_hit.clone(),
        mode: args.mode.map(|m| match m {
            ModeArg::Investigate => Mode::Investigate,
            _ => Mode::Default,
        }),
        cwd: cwd.map(|c| c.to_string_lossy().into_owned()),
        timeout_seconds: args.timeout,
    })
}

fn read_source(source: &Path, flag: &'static str) -> Result<String, EnqueueError> {
    let mut text = String::new();
    let read = if source == Path::new("-") {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(source).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| EnqueueError::Read {
        flag,
        path: source.to_path_buf(),
        source: e,
    })?;
    Ok(text)
}

/// Checks the job with the judge's own parser, so nothing it would refuse is written.
fn validate(settings: &Settings, mut job: Map<String, Value>) -> Result<NewJob, EnqueueError> {
    let id = match job.get("id") {
        Some(Value::String(id)) => id.clone(),
        Some(_) => return Err(EnqueueError::IdNotString),
        None => crate::support::random::random_hex().map_err(EnqueueError::NoRandom)?,
    };
    job.insert("id".into(), Value::String(id.clone()));
    let keys = unknown_keys(job.keys().map(String::as_str), &JOB_KEYS);
    if !keys.typos.is_empty() {
        return Err(EnqueueError::Typo(keys.typos));
    }
    let file =
        JobFile::new(job, &id, settings.config.timeouts()).map_err(|e| EnqueueError::Invalid {
            why: e.problem.to_string(),
        })?;
    let bytes = file.bytes().len();
    let max = settings.config.max_job_bytes;
    if bytes as u64 > max {
        return Err(EnqueueError::TooLarge { bytes, max });
    }
    // The judge would run such a job on the default table; --mode refuses it, so --json does.
    if let Some(why) = &file.job().mode_warning {
        let why = why.split(';').next().unwrap_or(why).to_string();
        return Err(EnqueueError::Invalid {
            why: format!("{why}; the only mode is \"investigate\" (or none for the default table)"),
        });
    }
    Ok(NewJob {
        no_rule: file.job().has_no_rule(),
        file,
        other_keys: keys.others,
    })
}

fn publish(settings: &Settings, state: &StateDir, job: &NewJob) -> Result<(), EnqueueError> {
    state.create().map_err(|source| EnqueueError::StateDir {
        path: state.root.clone(),
        source,
    })?;
    // The daemon refuses a state folder others could plant jobs in; so does enqueue.
    for dir in [&state.root, &state.jobs()] {
        if let Some(warning) = crate::store::permissions::check_private(dir)? {
            say_warn!("llm-judge enqueue: warning: {warning}");
        }
    }
    match protocol::publish_job(state, &job.file, settings.config.fsync) {
        Ok(Published::New) => Ok(()),
        Ok(Published::StillQueued) => Err(EnqueueError::StillQueued {
            id: job.file.id().to_string(),
            path: protocol::job_path(state, job.file.id()),
        }),
        Err(e) => Err(EnqueueError::Publish(e)),
    }
}
