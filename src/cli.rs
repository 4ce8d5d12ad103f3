//! The command line (docs/reference.md, "Command line"): argument parsing and dispatch to
//! `commands`.

use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

use crate::commands;
use crate::commands::ModeArg;
use crate::commands::status::StatusArgs;
use crate::service::ServiceAction;
use crate::store::config_file::{self, Sources};
use crate::support::error::Chained;
use crate::support::exit::{EXIT_OK, EXIT_USAGE};

#[derive(Parser, Debug)]
#[command(
    name = "llm-judge",
    version,
    about = "Judges hook questions with model CLIs on a bounded pool"
)]
struct Cli {
    /// State folder (jobs/, verdicts/, judge.log). Default: $CATSTACK_LLM_JUDGE_STATE_DIR, the config's state_dir, ~/.cache/catstack-llm-judge
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Config file. Default: $LLM_JUDGE_CONFIG, else $XDG_CONFIG_HOME/llm-judge/config.toml if it exists
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Set one config key over the file's (TOML value; repeatable), e.g. --set kill_grace_seconds=1
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// More log lines: debug (-vv: trace), on stderr and in judge.log. Overrides RUST_LOG
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    verbose: u8,
    /// Fewer log lines on stderr: warn (-qq: error, -qqq: none); judge.log keeps info
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    quiet: u8,
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
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
    #[command(
        after_help = "Examples:\n  llm-judge ask --timeout 30 'Reply with one JSON line: {\"ok\": true}'\n  printf '%s' \"$PROMPT\" | llm-judge ask --prompt-file -\n\nPrints outcome \"answered\" or \"unchecked\". Exit 0 when a runner answered, 1 when none did.\nUses and updates runner health as the daemon does (a benched runner is tried last)."
    )]
    Ask {
        /// Runner table.
        #[arg(long, value_enum, default_value = "default")]
        mode: ModeArg,
        /// Per-runner timeout in seconds (same rules as a job's timeout_seconds).
        #[arg(long, value_name = "S", allow_negative_numbers = true)]
        timeout: Option<f64>,
        /// The runners' working folder (absolute; else a fresh temp folder).
        #[arg(long, value_name = "DIR")]
        cwd: Option<String>,
        /// The question (or use --prompt-file).
        #[arg(
            required_unless_present = "prompt_file",
            conflicts_with = "prompt_file"
        )]
        prompt: Option<String>,
        /// Read the question from FILE, or stdin with -.
        #[arg(long, value_name = "FILE|-")]
        prompt_file: Option<PathBuf>,
        /// Judge runner health at this time (Unix seconds) instead of the clock; the
        /// catstack drop-in passes its caller's time.time().
        #[arg(long, value_name = "UNIX_SECONDS", hide = true)]
        now: Option<f64>,
    },
    /// Print a mode's runner table as one JSON line of [name, [argv...]] pairs.
    #[command(
        after_help = "Examples:\n  llm-judge runners\n  llm-judge runners --mode investigate --shipped\n\nWithout --shipped: the table run, ask and the daemon use (config file, --set,\nCATSTACK_LLM_JUDGE_RUNNERS); the daemon may still swap a codex runner's -m model\nfor one the login's catalog lists (see status)."
    )]
    Runners {
        /// Runner table.
        #[arg(long, value_enum, default_value = "default")]
        mode: ModeArg,
        /// The table shipped in the binary, ignoring config file, --set and the variable.
        #[arg(long)]
        shipped: bool,
    },
    /// One hook call of Claude Code, Codex or Cursor (installed by `llm-judge hooks install`).
    #[command(
        after_help = "Reads the hook's JSON on stdin and writes the harness's own answer on stdout.\nAlways exits 0: a broken config, a daemon that is down or a full disk never break the\nsession (they are logged, and said once a session). Rules: <config folder>/rules.toml.\nNo variable chooses a hook's rules or runners (a project's settings can set any).\n\nExample (what `hooks install claude` writes into ~/.claude/settings.json):\n  {\"type\": \"command\", \"command\": \"/home/me/.cargo/bin/llm-judge hook claude --config-dir /home/me/.config/llm-judge --state-dir /home/me/.cache/catstack-llm-judge\", \"timeout\": 150}"
    )]
    Hook {
        /// The harness calling.
        #[arg(value_enum)]
        harness: commands::HarnessArg,
        /// The config folder (rules.toml, trusted-rules.json, config.toml), as `hooks
        /// install` resolved it; then no variable moves the config. Default: $XDG_CONFIG_HOME/llm-judge
        #[arg(long, value_name = "DIR")]
        config_dir: Option<PathBuf>,
        /// claude's asyncRewake hook: judge the rewake rules, exit 2 with the notice on a hit.
        #[arg(long)]
        rewake: bool,
    },
    /// Install or remove llm-judge's hooks in Claude Code, Codex or Cursor; trust a project's rules.
    #[command(subcommand)]
    Hooks(commands::hooks::HooksAction),
    /// Write a job into the inbox safely and print its id.
    #[command(after_help = commands::enqueue::EXAMPLES)]
    Enqueue(commands::enqueue::EnqueueArgs),
    /// Run a file of cases (a job plus its expected outcome) on every runner; accuracy per runner.
    #[command(after_help = commands::eval::EXAMPLES)]
    Eval(commands::eval::EvalArgs),
    /// Print a transcript's verdicts as JSON lines, oldest first, removing each once printed.
    #[command(
        after_help = "Example:\n  llm-judge drain --transcript \"$TRANSCRIPT_PATH\" | while read -r v; do ...; done"
    )]
    Drain {
        /// The transcript whose verdicts to take.
        #[arg(long)]
        transcript: String,
    },
    /// The verdicts on record, newest last: what each rule found and what the agent was told.
    #[command(
        after_help = "Examples:\n  llm-judge history\n  llm-judge history --session 3f2a91c0\n  llm-judge history --rule tests --outcome hit --since 7d\n  llm-judge history --json | jq 'select(.action == \"blocked\")'\n  llm-judge history --rule tests --cases > tests.cases.jsonl"
    )]
    History(commands::history::HistoryArgs),
    /// Per rule: judged, hits, blocks, notices, unchecked, latency, tokens, cost, marks.
    #[command(
        after_help = "Examples:\n  llm-judge stats\n  llm-judge stats --since 7d --by day\n  llm-judge stats --json | jq '.rules[] | {rule, hit_rate}'"
    )]
    Stats(commands::history::stats::StatsArgs),
    /// Label a verdict on record right or wrong (history --cases turns it into an eval case).
    #[command(
        after_help = "Examples:\n  llm-judge mark 42 wrong\n  llm-judge history --rule tests --cases > tests.cases.jsonl && llm-judge eval --rules tests.cases.jsonl"
    )]
    Mark {
        /// The record's id (the ID column of llm-judge history).
        record: i64,
        /// right: the verdict was right; wrong: it should have been the other outcome.
        #[arg(value_enum)]
        label: commands::history::mark::LabelArg,
    },
    /// The daemon and the queue at a glance.
    #[command(
        after_help = "Examples:\n  llm-judge status\n  llm-judge status --json | jq .queue\n  llm-judge status --reset-health"
    )]
    Status(StatusArgs),
    /// Check runners, config, safety and the state folder; exit 1 when jobs could not be judged.
    #[command(
        after_help = "Examples:\n  llm-judge doctor\n  llm-judge doctor --online\n  llm-judge doctor --json | jq '.runners[] | select(.usable | not)'"
    )]
    Doctor(commands::doctor::DoctorArgs),
    /// Install, remove or inspect the systemd user service or launchd agent.
    #[command(subcommand)]
    Service(ServiceAction),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  llm-judge completions bash > ~/.local/share/bash-completion/completions/llm-judge\n  llm-judge completions zsh > ~/.zfunc/_llm-judge\n  llm-judge completions fish > ~/.config/fish/completions/llm-judge.fish"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command with --out-dir.
    #[command(
        after_help = "Examples:\n  llm-judge man | man -l -\n  llm-judge man --out-dir ~/.local/share/man/man1"
    )]
    Man(commands::shell_docs::ManArgs),
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
    crate::support::log_level::choose(crate::support::log_level::LogChoice::new(
        cli.verbose,
        cli.quiet,
        std::env::var("RUST_LOG").ok().as_deref(),
    ));
    // The recursion guard comes first: a hook run by a runner must not even read config.
    if let Command::Enqueue(_) = &cli.command
        && commands::enqueue::recursion_guard()
    {
        return EXIT_OK;
    }
    // Generated from the command line alone: no config, no state.
    match &cli.command {
        Command::Completions { shell } => {
            return commands::shell_docs::completions(Cli::command(), *shell);
        }
        Command::Man(args) => return commands::shell_docs::man(Cli::command(), args),
        _ => {}
    }
    // A hook loads its config itself: a broken one must not break the session.
    if let Command::Hook {
        harness,
        config_dir,
        rewake,
    } = &cli.command
    {
        let sources = Sources {
            sets: cli.sets.clone(),
            ..Sources::from_process(cli.config.clone(), cli.state_dir.clone())
        }
        .for_hook(config_dir.clone());
        return commands::hook::main((*harness).into(), *rewake, &sources);
    }
    // The shipped tables need no config (a broken one must not hide them).
    if let Command::Runners {
        mode,
        shipped: true,
    } = cli.command
    {
        return commands::runners::shipped(mode.into());
    }
    let sources = Sources {
        sets: cli.sets.clone(),
        ..Sources::from_process(cli.config.clone(), cli.state_dir.clone())
    };
    let settings = match config_file::load(&sources) {
        Ok(settings) => settings,
        Err(e) => {
            say_err!("llm-judge: {e}", e = e.chain());
            // doctor reports a bad config as one of its findings.
            if let Command::Doctor(args) = &cli.command {
                return commands::doctor::config_failed(&sources, &e, args);
            }
            // run gives the job a judge-error verdict for a bad runner variable.
            if let Command::Run { job_file } = &cli.command {
                return commands::run::config_failed(&sources, job_file, &e);
            }
            return EXIT_USAGE;
        }
    };
    match cli.command {
        Command::Daemon { workers } => {
            crate::daemon::main(settings, sources, workers.map(usize::from))
        }
        Command::Run { job_file } => {
            commands::run::main(&settings, job_file, sources.state_dir_flag.is_some())
        }
        Command::Ask {
            mode,
            timeout,
            cwd,
            prompt,
            prompt_file,
            now,
        } => commands::ask::main(
            &settings,
            commands::ask::AskArgs {
                mode: mode.into(),
                timeout,
                cwd,
                prompt,
                prompt_file,
                now,
            },
        ),
        Command::Runners { mode, .. } => commands::runners::main(&settings, mode.into()),
        Command::Enqueue(args) => commands::enqueue::main(&settings, args),
        Command::Eval(args) => commands::eval::main(&settings, args),
        Command::Drain { transcript } => commands::drain::main(&settings, &transcript),
        Command::Status(args) => commands::status::main(&settings, &args),
        Command::History(args) => commands::history::main(&settings, &args),
        Command::Stats(args) => commands::history::stats::main(&settings, &args),
        Command::Mark { record, label } => commands::history::mark::main(&settings, record, label),
        Command::Doctor(args) => commands::doctor::main(&settings, &sources, &args),
        Command::Service(action) => crate::service::main(&settings, action),
        Command::Hooks(action) => commands::hooks::main(&settings, &sources, action),
        // Answered before the config is read.
        Command::Completions { .. } | Command::Man(_) | Command::Hook { .. } => EXIT_OK,
    }
}
