//! `doctor`'s check of the installed programs (docs/install.md, "Where the binary
//! lives"): each program the user's installed hooks (claude, codex, Cursor) and the
//! service run still exists, is this version, and does not live in a cache that uvx or
//! npx clears; when not, what to run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::Level;
use crate::core::hooks::input::Harness;
use crate::core::install_place::Advice;
use crate::process::probe::ProbeSpec;
use crate::store::config_file::Sources;

/// How long `PROGRAM --version` may take.
const VERSION_WAIT: Duration = Duration::from_secs(5);

/// Adds a finding through `add` for each program the installed hooks and service run.
pub fn check(sources: &Sources, mut add: impl FnMut(Level, String)) {
    // Program -> the harnesses whose hooks run it.
    let mut programs: BTreeMap<String, Vec<Harness>> = BTreeMap::new();
    for harness in [Harness::Claude, Harness::Codex, Harness::Cursor] {
        let Some(path) = crate::store::harness_files::settings_path(sources, harness, None) else {
            continue;
        };
        let Some(doc) = crate::store::state_dir::read_small_text(&path)
            .ok()
            .flatten()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        else {
            continue;
        };
        let mut commands = Vec::new();
        commands_in(&doc, &mut commands);
        for command in commands {
            if let Some(program) = crate::core::hooks::install::program_of(harness, command) {
                let users = programs.entry(program).or_default();
                if !users.contains(&harness) {
                    users.push(harness);
                }
            }
        }
    }
    for (program, harnesses) in &programs {
        let names: Vec<&str> = harnesses.iter().map(|h| h.name()).collect();
        let who = format!("{} hooks", names.join(" and "));
        let fix = names
            .iter()
            .map(|n| format!("`llm-judge hooks install {n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        judge((&who, "run"), program, &fix, &mut add);
    }
    match crate::service::installed::service_program() {
        None => {}
        Some((file, None)) => add(
            Level::Warn,
            format!(
                "service: {} names no program this llm-judge can read; `llm-judge service \
                 install` rewrites it",
                file.display()
            ),
        ),
        Some((_, Some(program))) => judge(
            ("the service", "runs"),
            &program,
            "`llm-judge service install`",
            &mut add,
        ),
    }
}

/// One program's finding: gone (fail), another version or in a cache (warn), else ok.
/// `who` runs it: ("claude hooks", "run"), ("the service", "runs").
fn judge(who: (&str, &str), program: &str, fix: &str, add: &mut impl FnMut(Level, String)) {
    let (what, runs) = who;
    let path = Path::new(program);
    let mine = env!("CARGO_PKG_VERSION");
    if !path.is_file() {
        add(
            Level::Fail,
            format!(
                "{what} {runs} {program}, which is gone; run {fix} with the llm-judge you use now"
            ),
        );
        return;
    }
    if let Advice::Refuse(why) = crate::service::place::judge(path, what) {
        add(Level::Warn, format!("{what}: {why}"));
        return;
    }
    let same_file = match (std::env::current_exe(), std::fs::canonicalize(path)) {
        (Ok(exe), Ok(real)) => std::fs::canonicalize(exe).is_ok_and(|e| e == real),
        _ => false,
    };
    let version = if same_file {
        Ok(mine.to_string())
    } else {
        version_of(path)
    };
    match version {
        Ok(v) if v == mine => add(
            Level::Ok,
            format!("{what} {runs} {program} (llm-judge {v}, this version)"),
        ),
        Ok(v) => add(
            Level::Warn,
            format!(
                "{what} {runs} {program}, llm-judge {v}, not this one ({mine}); to use this \
                 one, run {fix}"
            ),
        ),
        Err(why) => add(
            Level::Warn,
            format!("{what} {runs} {program}, whose version is unknown ({why}); run {fix}"),
        ),
    }
}

/// Every `"command"` string in a settings document (each harness's hook handlers).
fn commands_in<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                match v {
                    serde_json::Value::String(s) if key == "command" => out.push(s),
                    _ => commands_in(v, out),
                }
            }
        }
        serde_json::Value::Array(list) => list.iter().for_each(|v| commands_in(v, out)),
        _ => {}
    }
}

/// The version `program --version` prints (`llm-judge X`), within `VERSION_WAIT`, run
/// as doctor's other probes are (`process::probe`: supervised, in a fresh folder, its
/// whole tree stopped at the deadline).
fn version_of(program: &Path) -> Result<String, String> {
    let no_env = crate::core::runner::env::RunnerEnv::new();
    let run = super::in_fresh_folder(async |cwd| {
        let spec = ProbeSpec {
            program,
            args: &["--version"],
            env: &no_env,
            withheld: &[],
            cwd,
            timeout: VERSION_WAIT,
        };
        crate::process::probe::run(&spec).await
    })?
    .map_err(|e| crate::support::error::chain(&e))?;
    let out = run.stdout.lines().next().unwrap_or_default().trim();
    match out.strip_prefix("llm-judge ") {
        Some(v) if run.success() && !v.is_empty() => Ok(v.to_string()),
        _ => Err(format!("--version printed {out:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_of_the_judges_hooks_are_found_and_no_others() {
        let doc = serde_json::json!({"hooks": {
            "Stop": [{"hooks": [
                {"type": "command", "command": "'/a b/llm-judge' hook claude --state-dir /s"},
                {"type": "command", "command": "/x/llm-judge hook claude --rewake"},
                {"type": "command", "command": "my-notifier.sh"},
                {"type": "command", "command": "/x/llm-judge hook codex"}
            ]}]
        }});
        let mut commands = Vec::new();
        commands_in(&doc, &mut commands);
        let programs: Vec<String> = commands
            .into_iter()
            .filter_map(|c| crate::core::hooks::install::program_of(Harness::Claude, c))
            .collect();
        assert_eq!(programs, ["/a b/llm-judge", "/x/llm-judge"]);
    }

    #[test]
    fn a_gone_program_fails_and_this_one_is_this_version() {
        let mut found = Vec::new();
        judge(
            ("claude hooks", "run"),
            "/nonexistent/llm-judge",
            "`fix`",
            &mut |l, t| found.push((l, t)),
        );
        assert_eq!(found[0].0, Level::Fail);
        assert!(
            found[0]
                .1
                .contains("/nonexistent/llm-judge, which is gone; run `fix`")
        );
        // The running binary is this version without being asked.
        let exe = std::env::current_exe().unwrap();
        let mut found = Vec::new();
        judge(
            ("the service", "runs"),
            &exe.to_string_lossy(),
            "`fix`",
            &mut |l, t| found.push((l, t)),
        );
        assert_eq!(found[0].0, Level::Ok, "{found:?}");
    }
}
