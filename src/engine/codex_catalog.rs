//! SPEC 4 "Codex model", the I/O part: run `codex debug models` (bounded) and apply
//! the pure choice of `codex_model` to the loaded tables.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::core::codex_model::{self, Catalog, Substitution};
use crate::core::config::Settings;
use crate::core::runner_table::Runner;
use crate::process::spawn::resolve_program;

/// How long `codex debug models` may take (SPEC 4).
pub const CATALOG_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs `<program> debug models` with a deadline and parses its stdout.
pub fn read_catalog(program: &Path, timeout: Duration) -> Result<Catalog, String> {
    let mut child = Command::new(program)
        .args(["debug", "models"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env("CATSTACK_LLM_JUDGE_CHILD", "1")
        .spawn()
        .map_err(|e| format!("cannot run `{} debug models`: {e}", program.display()))?;
    // Read stdout on a thread so a full pipe cannot stall the deadline wait below.
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.take(16 << 20).read_to_string(&mut text);
        }
        text
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{} debug models` took over {} s; keeping the table's model",
                    program.display(),
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for `codex debug models`: {e}")),
        }
    };
    let text = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "`{} debug models` exited with {status}",
            program.display()
        ));
    }
    codex_model::parse_catalog(&text)
}

/// The first codex program with an `-m` model among these runners, resolved on PATH.
fn codex_program(runners: &[&Runner]) -> Option<std::path::PathBuf> {
    runners
        .iter()
        .filter(|r| r.argv.iter().any(|a| a == "-m" || a == "--model"))
        .filter_map(|r| r.argv.first())
        .filter(|p| Path::new(p).file_name().is_some_and(|n| n == "codex"))
        .find_map(|p| resolve_program(p))
}

/// Rewrites the codex runners of every table of `settings` per the login's catalog.
/// Returns the substitutions made (also logged); nothing when no codex runner has `-m`,
/// and the tables unchanged (a warning logged) when the catalog cannot be read.
pub fn apply(settings: &mut Settings) -> Vec<Substitution> {
    let all: Vec<&Runner> = settings
        .config
        .runners
        .default
        .iter()
        .chain(&settings.config.runners.investigate)
        .chain(settings.runner_override.iter().flatten())
        .collect();
    let Some(program) = codex_program(&all) else {
        return Vec::new();
    };
    let catalog = match read_catalog(&program, CATALOG_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("codex model catalog unreadable, keeping the tables' models: {e}");
            return Vec::new();
        }
    };
    let mut subs = Vec::new();
    let tables = [
        &mut settings.config.runners.default,
        &mut settings.config.runners.investigate,
    ];
    for table in tables {
        let (new, s) = codex_model::apply(table, Some(&catalog));
        *table = new;
        subs.extend(s);
    }
    if let Some(table) = settings.runner_override.as_mut() {
        let (new, s) = codex_model::apply(table, Some(&catalog));
        *table = new;
        subs.extend(s);
    }
    for s in &subs {
        tracing::warn!(
            runner = %s.runner, from = %s.from, to = %s.to,
            "codex model not in this login's catalog; using the catalog's first model"
        );
    }
    subs
}
