//! `doctor`'s look at the hook side: whether each harness has llm-judge's hooks, whether
//! the user's rules load, and whether catstack's hooks resolve the daemon's state folder.

use std::path::Path;

use super::{Level, Report};
use crate::core::config::Settings;
use crate::store::config_file::Sources;
use crate::store::state_dir::StateDir;

/// Per harness, whether llm-judge's hooks are in the user's settings; whether the
/// user's rules file loads.
pub(super) fn check_hooks(settings: &Settings, sources: &Sources, report: &mut Report) {
    use crate::core::hooks::input::Harness;
    let command = crate::service::hook_command::hook_command(settings, sources).unwrap_or_default();
    for harness in [Harness::Claude, Harness::Codex, Harness::Cursor] {
        let Some(path) = crate::store::harness_files::settings_path(sources, harness, None) else {
            continue;
        };
        let doc = crate::store::state_dir::read_small_text(&path)
            .ok()
            .flatten()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
        let entries = crate::core::hooks::install::entries(harness, &command);
        let (level, text) = match doc {
            Some(doc) if crate::core::hooks::install::installed(harness, &doc, &entries) => {
                let installed =
                    format!("{} hooks: installed in {}", harness.name(), path.display());
                match harness {
                    Harness::Codex => codex_trusted(sources, &path, &doc, &entries, installed),
                    _ => (Level::Ok, installed),
                }
            }
            Some(doc) if has_judge_hook(&doc) => (
                Level::Ok,
                format!(
                    "{} hooks: in {}, but not as this binary writes them; run `llm-judge hooks install {}`",
                    harness.name(),
                    path.display(),
                    harness.name()
                ),
            ),
            _ => (
                Level::Ok,
                format!(
                    "{} hooks: not installed (`llm-judge hooks install {}` judges its sessions)",
                    harness.name(),
                    harness.name()
                ),
            ),
        };
        report.add(level, text);
    }
    check_rules(sources, report);
}

/// Whether codex trusts the judge's handlers of `path` (it skips an untrusted hook
/// silently): each one's hash recorded in codex's config.toml.
fn codex_trusted(
    sources: &Sources,
    path: &Path,
    doc: &serde_json::Value,
    entries: &[crate::core::hooks::install::Entry],
    installed: String,
) -> (Level, String) {
    let source = path.to_string_lossy();
    let wanted = crate::core::hooks::codex_trust::codex_trust(&source, doc, entries);
    let Some(home) = crate::store::harness_files::codex_home(sources) else {
        return (Level::Ok, installed);
    };
    let config = home.join("config.toml");
    let table: toml::Table = crate::store::state_dir::read_small_text(&config)
        .ok()
        .flatten()
        .and_then(|text| text.parse().ok())
        .unwrap_or_default();
    let state = table.get("hooks").and_then(|h| h.get("state"));
    let untrusted = wanted
        .iter()
        .filter(|t| {
            let hash = state
                .and_then(|s| s.get(&t.key))
                .and_then(|k| k.get("trusted_hash"))
                .and_then(toml::Value::as_str);
            hash != Some(t.hash.as_str())
        })
        .count();
    match untrusted {
        0 => (Level::Ok, format!("{installed}, trusted by codex")),
        n => (
            Level::Warn,
            format!(
                "{installed}, but codex does not trust {n} of them, so it skips them silently: \
                 run `llm-judge hooks install codex --trust` (or trust them in codex's /hooks)"
            ),
        ),
    }
}

/// Whether the user's rules file loads (a failure: the hooks then judge nothing), has a
/// rule on, and the project rules of the folder doctor runs in, if any, are trusted.
fn check_rules(sources: &Sources, report: &mut Report) {
    if let Some(path) = crate::store::rules_files::user_rules_path(sources) {
        match crate::store::state_dir::read_small_text(&path) {
            Ok(None) => report.add(
                Level::Ok,
                format!("rules: no {} (hooks judge nothing)", path.display()),
            ),
            Ok(Some(text)) => match crate::core::hooks::rules::parse_rules(&text) {
                Ok(rules) => {
                    let on = rules.iter().filter(|r| r.enabled).count();
                    let counted = format!(
                        "rules: {} ({} rules, {on} enabled)",
                        path.display(),
                        rules.len()
                    );
                    match on {
                        0 => report.add(
                            Level::Warn,
                            format!("{counted}: none is on, so the hooks judge nothing; set enabled = true on those you want"),
                        ),
                        _ => report.add(Level::Ok, counted),
                    }
                }
                Err(e) => report.add(
                    Level::Fail,
                    format!(
                        "rules: {} {e}; the hooks judge nothing until it is fixed",
                        path.display()
                    ),
                ),
            },
            Err(why) => report.add(Level::Fail, format!("rules: {why}")),
        }
    }
    let here = std::env::current_dir().ok();
    let project = here
        .as_deref()
        .and_then(crate::store::rules_files::project_rules)
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p));
    if let Some(path) = project {
        match crate::store::rules_files::project(sources, &path) {
            Ok(rules) => report.add(
                Level::Ok,
                format!(
                    "project rules: {} ({} rules, trusted)",
                    path.display(),
                    rules.len()
                ),
            ),
            Err(why) => report.add(Level::Warn, why),
        }
    }
}

/// True when some hook command of `doc` runs `llm-judge hook`.
fn has_judge_hook(doc: &serde_json::Value) -> bool {
    let text = doc.to_string();
    text.contains("llm-judge") && text.contains(" hook ")
}

/// Warns when the state folder catstack's hooks resolve differs from the daemon's.
/// Hooks (judge.py, docs/reference.md, "The catstack drop-in") use
/// `CATSTACK_LLM_JUDGE_STATE_DIR`, else `~/.cache/catstack-llm-judge`, and never read the
/// config. The daemon records its resolved folder and its own value of that variable in
/// status.json, so a variable set on one side only (say in the service but not in the
/// hooks' shell) shows up.
pub(super) fn check_state_dir(settings: &Settings, report: &mut Report) {
    let var = crate::core::config::STATE_DIR_VAR;
    let env = std::env::var(var).ok().filter(|v| !v.is_empty());
    let hooks = match (&env, std::env::var_os("HOME")) {
        (Some(dir), _) => std::path::PathBuf::from(dir),
        (None, Some(home)) => Path::new(&home).join(".cache/catstack-llm-judge"),
        (None, None) => return,
    };
    let hooks = std::path::absolute(&hooks).unwrap_or(hooks);
    let from = if env.is_some() {
        format!("from {var}")
    } else {
        format!("{var} is not set")
    };
    if hooks != settings.state_dir {
        report.add(
            Level::Warn,
            format!(
                "hooks using judge.py resolve the state folder {} ({from}), but this llm-judge \
                 uses {} (--state-dir or the config's state_dir): jobs and verdicts would not \
                 meet; set {var} to one folder for the hooks and the service",
                hooks.display(),
                settings.state_dir.display()
            ),
        );
    }
    let mut folders = vec![settings.state_dir.clone()];
    if hooks != settings.state_dir {
        folders.push(hooks.clone());
    }
    for folder in folders {
        let state = StateDir::new(&folder);
        let Some(pid) = crate::store::daemon_lock::holder(&state.lock()) else {
            continue;
        };
        let record: Option<crate::store::status_file::StatusRecord> =
            crate::store::state_dir::read_nofollow(&state.status())
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
        let Some(record) = record.filter(|r| r.pid == pid) else {
            continue;
        };
        if record.state_dir_env != env {
            let show =
                |v: &Option<String>| v.as_ref().map_or("unset".to_string(), |v| format!("={v}"));
            report.add(
                Level::Warn,
                format!(
                    "{var} is {} for the daemon (pid {pid}) but {} here, where hooks run: set \
                     it on both sides or neither (for the service: systemctl --user edit \
                     llm-judge, Environment={var}=...)",
                    show(&record.state_dir_env),
                    show(&env)
                ),
            );
        }
        if !record.state_dir.is_empty() && Path::new(&record.state_dir) != hooks {
            report.add(
                Level::Warn,
                format!(
                    "the daemon (pid {pid}) serves {}, not {} where hooks using judge.py queue jobs",
                    record.state_dir,
                    hooks.display()
                ),
            );
        }
    }
}
