//! The command line (SPEC section 9): argument parsing and the `run` and `ask` commands.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::config::{self, Settings, Sources};
use crate::job::{HitRule, Job, Mode, timeout_of};
use crate::job_file::{self, Handled};
use crate::spool::StateDir;
use crate::verdict::Outcome;

/// Exit code: the command worked.
pub const EXIT_OK: i32 = 0;
/// Exit code: the command failed.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code: bad usage or invalid input (config, environment, job).
pub const EXIT_USAGE: i32 = 2;

#[derive(Parser, Debug)]
#[command(name = "llm-judge", version, about = "Judges hook questions with model CLIs on a bounded pool")]
struct Cli {
    /// State folder (jobs/, verdicts/, judge.log). Default: $CATSTACK_LLM_JUDGE_STATE_DIR, the config's state_dir, ~/.cache/catstack-llm-judge
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Config file. Default: $LLM_JUDGE_CONFIG, else $XDG_CONFIG_HOME/llm-judge/config.toml if it exists
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the daemon in the foreground: watch jobs/, judge on a bounded pool.
    #[command(after_help = "Example:\n  llm-judge daemon --workers 2")]
    Daemon {
        /// Jobs judged at once (overrides the config's workers).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        workers: Option<u16>,
    },
    /// Judge one job file now, write its verdict and remove the job (exit 0 whatever the outcome).
    #[command(after_help = "Example:\n  llm-judge run ~/.cache/catstack-llm-judge/jobs/1234.json")]
    Run {
        /// The job file.
        job_file: PathBuf,
    },
    /// Ask the runners directly and print {outcome, runner, answer, attempts} as JSON.
    #[command(after_help = "Example:\n  llm-judge ask --timeout 30 'Reply with one JSON line: {\"ok\": true}'\n\nExit 0 when a runner answered, 1 when none did.")]
    Ask {
        /// Runner table.
        #[arg(long, value_enum, default_value = "default")]
        mode: AskMode,
        /// Per-runner timeout in seconds (same rules as a job's timeout_seconds).
        #[arg(long, value_name = "S")]
        timeout: Option<f64>,
        /// The runners' working folder (absolute; else a fresh temp folder).
        #[arg(long, value_name = "DIR")]
        cwd: Option<String>,
        /// The question.
        prompt: String,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum AskMode {
    Default,
    Investigate,
}

/// Runs the command line; returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    let sources = Sources::from_process(cli.config.clone(), cli.state_dir.clone());
    let settings = match config::load(&sources) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("llm-judge: {e}");
            return EXIT_USAGE;
        }
    };
    match cli.command {
        Command::Daemon { workers } => crate::daemon::main(settings, sources, workers.map(usize::from)),
        Command::Run { job_file } => run(&settings, job_file),
        Command::Ask { mode, timeout, cwd, prompt } => ask(&settings, mode, timeout, cwd, prompt),
    }
}

/// Creates the state folder and starts judge.log; says why on failure.
pub fn open_state(settings: &Settings, also_stderr: bool) -> Result<StateDir, String> {
    let state = StateDir::new(&settings.state_dir);
    state
        .create()
        .map_err(|e| format!("state folder {}: {e}; fix its permissions or pass --state-dir", state.root.display()))?;
    crate::logging::init(&state.log(), settings.config.log_max_bytes, also_stderr);
    if settings.runner_override.is_some() {
        tracing::warn!("{} is set: it replaces every runner table (no safety check)", crate::runners::RUNNERS_VAR);
    }
    Ok(state)
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

fn run(settings: &Settings, job_file: PathBuf) -> i32 {
    let result = open_state(settings, false).and_then(|state| {
        let rt = runtime()?;
        Ok(rt.block_on(job_file::handle(settings, &state, &job_file, None)))
    });
    match result {
        Ok(Handled::Busy { holder_pid }) => {
            let holder = holder_pid.map_or("another process".to_string(), |p| format!("process {p}"));
            eprintln!("llm-judge: {} is being judged by {holder}; not judging it twice", job_file.display());
            EXIT_OK
        }
        Ok(Handled::Gone) => {
            eprintln!("llm-judge: {} does not exist (already judged?)", job_file.display());
            EXIT_OK
        }
        Ok(Handled::Failed(e)) => {
            eprintln!("llm-judge: {}: {e}", job_file.display());
            EXIT_FAILURE
        }
        Ok(_) => EXIT_OK,
        Err(e) => {
            eprintln!("llm-judge: {e}");
            EXIT_FAILURE
        }
    }
}

fn ask(settings: &Settings, mode: AskMode, timeout: Option<f64>, cwd: Option<String>, prompt: String) -> i32 {
    let job = Job {
        id: "ask".into(),
        prompt,
        mode: match mode {
            AskMode::Default => Mode::Default,
            AskMode::Investigate => Mode::Investigate,
        },
        mode_warning: None,
        timeout_seconds: timeout_of(timeout.map(Value::from).as_ref(), settings.config.timeouts()),
        cwd: cwd.map(Value::String),
        transcript: String::new(),
        hook: Value::Null,
        on_hit: Value::Null,
        rule_id: None,
        rule: HitRule::AllTrue(Vec::new()),
    };
    let verdict = match open_state(settings, false).and_then(|_| runtime()) {
        Ok(rt) => rt.block_on(crate::judge::judge(settings, &job, &crate::claim::new_tag(), |_, _| {})),
        Err(e) => {
            eprintln!("llm-judge: {e}");
            return EXIT_FAILURE;
        }
    };
    let out = json!({
        "outcome": verdict.outcome,
        "runner": verdict.runner,
        "answer": verdict.answer,
        "attempts": verdict.attempts,
    });
    println!("{out}");
    if verdict.outcome == Outcome::Unchecked { EXIT_FAILURE } else { EXIT_OK }
}
