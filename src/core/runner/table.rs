//! Runner tables, the override variable and argv building (docs/reference.md, "Runners"). Pure.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::core::api::spec::ApiSpec;
use crate::core::runner::PROMPT_SLOT;
use crate::core::runner::entry::{EntryError, RunnerEntry};
use crate::core::runner::env::{EnvError, RunnerEnv, check_env};
use crate::core::runner::output_format::{OutputFormat, output_format};

/// The environment variable that replaces every runner table.
pub const RUNNERS_VAR: &str = "CATSTACK_LLM_JUDGE_RUNNERS";
/// The largest single argv item Linux accepts (MAX_ARG_STRLEN minus the NUL).
pub const MAX_ARG_BYTES: usize = 131_071;

/// One runner: a name and an argv, or a name and a model API (`api`). A table entry
/// is read through `core::runner::entry::RunnerEntry`, which checks which keys go with
/// which kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RunnerEntry", into = "RunnerEntry")]
pub struct Runner {
    /// Shown in attempts, verdicts and logs.
    pub name: String,
    /// The program and its arguments; `{prompt}` marks the prompt. Empty for an API
    /// runner.
    pub argv: Vec<String>,
    /// At most this many copies at once across workers (section 10).
    pub max_concurrent: Option<u32>,
    /// Copies the daemon keeps started ahead of their jobs, each waiting for its prompt
    /// on stdin in a fresh private folder (default table only; `engine::prestart`).
    pub prestart: Option<u32>,
    /// Variables set for this runner on top of the runner environment (`core::runner::env`).
    pub env: RunnerEnv,
    /// A runner that asks a model API over HTTP instead of starting a CLI.
    pub api: Option<ApiSpec>,
}

/// What a runner is, decided in one place: a CLI started as a process, or a model API
/// asked over HTTP. Code that runs or reads a runner matches on this, not on `api`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunnerKind<'a> {
    /// A CLI: its table argv and the output format its flags ask for.
    Cli {
        argv: &'a [String],
        format: OutputFormat,
    },
    /// A model API over HTTP.
    Api(&'a ApiSpec),
}

impl RunnerKind<'_> {
    /// The format its process output is read in (an API runner's reply is never read
    /// as process output; `Plain` when a scripted spawner mixes them up).
    pub fn output_format(self) -> OutputFormat {
        match self {
            RunnerKind::Cli { format, .. } => format,
            RunnerKind::Api(_) => OutputFormat::Plain,
        }
    }
}

impl Runner {
    /// True for a runner that starts a process (it has an argv), false for an API runner.
    pub fn is_cli(&self) -> bool {
        self.api.is_none()
    }

    /// Its kind, with the output format worked out from the argv once.
    pub fn kind(&self) -> RunnerKind<'_> {
        match &self.api {
            Some(api) => RunnerKind::Api(api),
            None => RunnerKind::Cli {
                argv: &self.argv,
                format: output_format(&self.argv),
            },
        }
    }
}

impl TryFrom<RunnerEntry> for Runner {
    type Error = EntryError;

    /// The runner a table entry describes, once its keys fit its kind.
    fn try_from(entry: RunnerEntry) -> Result<Runner, EntryError> {
        let api = entry.api_spec()?;
        Ok(Runner {
            name: entry.name,
            argv: entry.argv.unwrap_or_default(),
            max_concurrent: entry.max_concurrent,
            prestart: entry.prestart,
            env: entry.env,
            api,
        })
    }
}

impl From<Runner> for RunnerEntry {
    fn from(runner: Runner) -> RunnerEntry {
        let mut entry = RunnerEntry {
            name: runner.name,
            argv: Some(runner.argv),
            max_concurrent: runner.max_concurrent,
            prestart: runner.prestart,
            env: runner.env,
            ..RunnerEntry::default()
        };
        if let Some(spec) = &runner.api {
            entry.set_api(spec);
        }
        entry
    }
}

#[cfg(test)]
impl Runner {
    /// A runner with no `max_concurrent`, for tests.
    pub fn for_tests(name: &str, argv: &[&str]) -> Runner {
        Runner {
            name: name.into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            max_concurrent: None,
            prestart: None,
            env: RunnerEnv::new(),
            api: None,
        }
    }
}

/// What to start: the final argv and, when the prompt goes there, stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The argv with the prompt slot filled or dropped.
    pub argv: Vec<String>,
    /// The prompt when it goes on stdin; `None` means stdin is /dev/null.
    pub stdin: Option<String>,
}

/// Fills the prompt slot, or moves the prompt to stdin when it cannot be one argument.
pub fn build_invocation(argv: &[String], prompt: &str) -> Invocation {
    let has_slot = argv.iter().any(|a| a == PROMPT_SLOT);
    if !has_slot {
        return Invocation {
            argv: argv.to_vec(),
            stdin: Some(stdin_payload(argv, prompt)),
        };
    }
    if prompt.len() <= MAX_ARG_BYTES && !prompt.contains('\0') {
        let argv = argv
            .iter()
            .map(|a| if a == PROMPT_SLOT { prompt } else { a })
            .map(str::to_string)
            .collect();
        return Invocation { argv, stdin: None };
    }
    let argv = without_prompt_slot(argv);
    let stdin = Some(stdin_payload(&argv, prompt));
    Invocation { argv, stdin }
}

/// What stdin carries for a prompt: the prompt itself, or, for a Claude Code argv with
/// `--input-format stream-json`, the prompt as one stream-json user message (a line).
pub fn stdin_payload(argv: &[String], prompt: &str) -> String {
    if !takes_stream_json(argv) {
        return prompt.to_string();
    }
    let message = serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": prompt},
    });
    format!("{message}\n")
}

/// True when the argv reads stream-json messages on stdin (`--input-format stream-json`).
pub fn takes_stream_json(argv: &[String]) -> bool {
    argv.iter().any(|a| a == "--input-format=stream-json")
        || argv
            .windows(2)
            .any(|w| w[0] == "--input-format" && w[1] == "stream-json")
}

/// True when the prompt never goes in the argv.
pub fn prompt_on_stdin(argv: &[String]) -> bool {
    !argv.iter().any(|a| a == PROMPT_SLOT)
}

/// The argv of a copy started ahead of its job (`prestart`), or `None` when the runner
/// cannot wait for its prompt: an argv without `{prompt}` gets its prompt on stdin as
/// it is; `codex exec` reads its prompt from stdin when the prompt item is `-`, so a
/// codex argv ending in `{prompt}` waits with `-` there. The prompt then goes on stdin
/// as `stdin_payload` of this argv makes it, and stdin closes.
pub fn waiting_argv(argv: &[String]) -> Option<Vec<String>> {
    if prompt_on_stdin(argv) {
        return Some(argv.to_vec());
    }
    let (last, rest) = argv.split_last()?;
    let program = argv.first()?.rsplit('/').next()?;
    let codex_exec = program == "codex" && rest.iter().any(|a| a == "exec");
    let one_slot_at_the_end = last == PROMPT_SLOT && prompt_on_stdin(rest);
    (codex_exec && one_slot_at_the_end).then(|| {
        let mut waiting = rest.to_vec();
        waiting.push("-".into());
        waiting
    })
}

/// Drops each `{prompt}` item and a `--` right before it.
fn without_prompt_slot(argv: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(argv.len());
    for item in argv {
        if item == PROMPT_SLOT {
            if out.last().is_some_and(|prev| prev == "--") {
                out.pop();
            }
        } else {
            out.push(item.clone());
        }
    }
    out
}

/// A table as what identifies each runner, in order (cache and single-flight keys):
/// `[name, argv]`, `[name, argv, env]` for a runner with its own environment, and
/// `[name, [api=..., model=..., ...]]` for an API runner.
pub fn table_identity(table: &[Runner]) -> Value {
    table
        .iter()
        .map(|r| match (&r.api, r.env.is_empty()) {
            (Some(api), _) => serde_json::json!([r.name, api.identity()]),
            (None, true) => serde_json::json!([r.name, r.argv]),
            (None, false) => {
                serde_json::json!([r.name, r.argv, crate::core::runner::env::identity(&r.env)])
            }
        })
        .collect()
}

/// Why an argv's program could come from the job.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProgramError {
    /// The prompt slot where the program goes.
    #[error(
        "\"argv\" starts with \"{}\"; the first item must be the program",
        PROMPT_SLOT
    )]
    PromptFirst,
    /// A relative path, which would be found in the job's cwd.
    #[error(
        "program {program:?} is a relative path; give a bare name found on PATH or an absolute path"
    )]
    RelativePath { program: String },
    /// Nothing would be left to run once the prompt moves to stdin.
    #[error("\"argv\" would be empty once a long prompt moves to stdin; give the program first")]
    EmptyOnStdin,
}

/// A bad `CATSTACK_LLM_JUDGE_RUNNERS`; the message names the variable and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{} is not a JSON list of [name, [argv...]] pairs: {}; fix it or unset it \
     (example: [[\"fake\", [\"/path/to/fake-runner\", \"{{prompt}}\"]]])",
    RUNNERS_VAR,
    crate::support::error::Chain(problem)
)]
pub struct OverrideError {
    /// What is wrong, naming the item and runner.
    pub problem: OverrideProblem,
}

/// What is wrong with the override variable's value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OverrideProblem {
    /// Not JSON at all (serde_json's message).
    #[error("{message}")]
    Json { message: String },
    /// JSON, but not a list.
    #[error("it is not a list")]
    NotAList,
    /// An item that is not `[name, [argv...]]`.
    #[error("item {index}: not a [name, [argv...]] pair")]
    NotAPair { index: usize },
    /// A runner with no argv.
    #[error("item {index}: runner {runner:?} has an empty argv")]
    EmptyArgv { index: usize, runner: String },
    /// A runner whose argv holds a non-string.
    #[error("item {index}: runner {runner:?} has an argv item that is not a string")]
    NotAString { index: usize, runner: String },
    /// A runner whose program is refused.
    #[error("item {index}: runner {runner:?}")]
    Program {
        index: usize,
        runner: String,
        source: ProgramError,
    },
}

/// A configured runner table entry that cannot run; names `runners.TABLE[INDEX]`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TableError {
    /// A runner without a name.
    #[error("runners.{table}[{index}]: \"name\" is empty; give the runner a name")]
    EmptyName { table: String, index: usize },
    /// A runner without a program.
    #[error(
        "runners.{table}[{index}] ({runner:?}): \"argv\" is empty or has an empty program; \
         give the program and its arguments"
    )]
    EmptyArgv {
        table: String,
        index: usize,
        runner: String,
    },
    /// A runner whose program is refused.
    #[error("runners.{table}[{index}] ({runner:?})")]
    Program {
        table: String,
        index: usize,
        runner: String,
        source: ProgramError,
    },
    /// `prestart` in a table other than default: those runners start in the job's cwd.
    #[error(
        "runners.{table}[{index}] ({runner:?}): \"prestart\" is only for the default table \
         (an investigate runner starts in the job's cwd, unknown before the job); remove it"
    )]
    PrestartOutsideDefault {
        table: String,
        index: usize,
        runner: String,
    },
    /// `prestart` with the prompt in the argv, which is unknown before the job.
    #[error(
        "runners.{table}[{index}] ({runner:?}): \"prestart\" needs the prompt on stdin; \
         remove the \"{{prompt}}\" item (and the \"--\" before it), or remove \"prestart\" \
         (only a codex exec argv may keep \"{{prompt}}\" as its last item: it waits with \"-\" there)"
    )]
    PrestartWithPromptSlot {
        table: String,
        index: usize,
        runner: String,
    },
    /// An `env` entry no table may hold.
    #[error("runners.{table}[{index}] ({runner:?}): \"env\"")]
    Env {
        table: String,
        index: usize,
        runner: String,
        source: EnvError,
    },
    /// An API runner in the investigate table: it only sees the prompt, so it cannot
    /// read the files an investigate job asks about.
    #[error(
        "runners.{table}[{index}] ({runner:?}): an API runner cannot investigate: it gets \
         only the prompt and cannot read, search or open files; put it in the default \
         table, and use a CLI runner (codex, claude) for investigate"
    )]
    ApiInInvestigate {
        table: String,
        index: usize,
        runner: String,
    },
    /// `max_concurrent = 0`, which would never run.
    #[error(
        "runners.{table}[{index}] ({runner:?}): \"max_concurrent\" is 0; remove it or give 1 or more"
    )]
    NoConcurrency {
        table: String,
        index: usize,
        runner: String,
    },
}

/// Parses `CATSTACK_LLM_JUDGE_RUNNERS`: a JSON list of `[name, [argv...]]` pairs.
pub fn parse_override(text: &str) -> Result<Vec<Runner>, OverrideError> {
    let value: Value = serde_json::from_str(text).map_err(|e| OverrideProblem::Json {
        message: e.to_string(),
    })?;
    let Value::Array(items) = value else {
        return Err(OverrideProblem::NotAList.into());
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| override_entry(index, item).map_err(OverrideError::from))
        .collect()
}

impl From<OverrideProblem> for OverrideError {
    fn from(problem: OverrideProblem) -> Self {
        OverrideError { problem }
    }
}

fn override_entry(index: usize, item: &Value) -> Result<Runner, OverrideProblem> {
    let Some([Value::String(name), Value::Array(argv)]) = item.as_array().map(Vec::as_slice) else {
        return Err(OverrideProblem::NotAPair { index });
    };
    let runner = name.clone();
    if argv.is_empty() {
        return Err(OverrideProblem::EmptyArgv { index, runner });
    }
    let Some(argv) = argv
        .iter()
        .map(|a| a.as_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()
    else {
        return Err(OverrideProblem::NotAString { index, runner });
    };
    if let Err(source) = check_program(&argv) {
        return Err(OverrideProblem::Program {
            index,
            runner,
            source,
        });
    }
    Ok(Runner {
        name: runner,
        argv,
        max_concurrent: None,
        prestart: None,
        env: RunnerEnv::new(),
        api: None,
    })
}

/// Refuses an argv whose program could come from the job: a relative path (it would
/// be found in the job's cwd), the prompt slot itself, or nothing left once the
/// prompt moves to stdin.
fn check_program(argv: &[String]) -> Result<(), ProgramError> {
    let program = argv.first().map(String::as_str).unwrap_or("");
    if program == PROMPT_SLOT {
        return Err(ProgramError::PromptFirst);
    }
    if program.contains('/') && !program.starts_with('/') {
        return Err(ProgramError::RelativePath {
            program: program.to_string(),
        });
    }
    if without_prompt_slot(argv)
        .first()
        .is_none_or(|p| p != program)
    {
        return Err(ProgramError::EmptyOnStdin);
    }
    Ok(())
}

/// Checks a configured table: every runner has a name and a non-empty argv.
pub fn check_table(table: &str, runners: &[Runner]) -> Result<(), TableError> {
    for (index, r) in runners.iter().enumerate() {
        let (table, runner) = (table.to_string(), r.name.clone());
        if r.name.is_empty() {
            return Err(TableError::EmptyName { table, index });
        }
        if r.max_concurrent == Some(0) {
            return Err(TableError::NoConcurrency {
                table,
                index,
                runner,
            });
        }
        if r.api.is_some() {
            if table == "investigate" {
                return Err(TableError::ApiInInvestigate {
                    table,
                    index,
                    runner,
                });
            }
            continue;
        }
        if r.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(TableError::EmptyArgv {
                table,
                index,
                runner,
            });
        }
        if let Err(source) = check_program(&r.argv) {
            return Err(TableError::Program {
                table,
                index,
                runner,
                source,
            });
        }
        if let Err(source) = check_env(&r.env) {
            return Err(TableError::Env {
                table,
                index,
                runner,
                source,
            });
        }
        if r.prestart.is_some_and(|n| n > 0) {
            if table != "default" {
                return Err(TableError::PrestartOutsideDefault {
                    table,
                    index,
                    runner,
                });
            }
            if waiting_argv(&r.argv).is_none() {
                return Err(TableError::PrestartWithPromptSlot {
                    table,
                    index,
                    runner,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
