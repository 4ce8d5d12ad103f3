//! A runner's environment (the judge's own, filtered, with the table's variables and
//! our markers on top) and its program (resolved on `PATH`, absolute entries only).

use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::core::runner::env::RunnerEnv;
use crate::core::runner::table::{Runner, RunnerKind};
use crate::process::error::ProcessError;
use crate::process::supervisor::Env;
use crate::process::tag::TAG_VAR;

/// Set in every runner's environment: hooks that see it must not enqueue jobs.
pub const CHILD_VAR: &str = "CATSTACK_LLM_JUDGE_CHILD";
/// Set beside it: the state folder's child key (`store::child_key`), which a project's
/// settings cannot know; `llm-judge hook` skips only when it holds its folder's key.
pub const CHILD_TOKEN_VAR: &str = "LLM_JUDGE_CHILD_TOKEN";

/// The child key of the state folder this process judges for, once it is known.
static CHILD_TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Gives every runner this process starts from now on `token` as its proof of being
/// the judge's child (one state folder a process: a second call changes nothing).
pub fn set_child_token(token: String) {
    let _ = CHILD_TOKEN.set(token);
}

/// True once this process's runners have their child token.
pub fn has_child_token() -> bool {
    CHILD_TOKEN.get().is_some()
}
/// Set to `/dev/null` in every runner's environment, so git finds no repository in the
/// job's folder: codex runs `git status` there outside its sandbox, and a repository's
/// own config and attributes (a `filter.<name>.clean` command, `.git/info/attributes`)
/// would run commands. No git variable can switch off a filter it cannot name; with no
/// repository there is nothing to run (docs/security.md, measured with codex 0.171).
const GIT_DIR_VAR: &str = "GIT_DIR";

/// The `inherited` environment with the runner table's own variables on top, plus
/// the child marker, the attempt's tag and `GIT_DIR=/dev/null`, as `KEY=value` strings;
/// the `withheld` variables the table does not set are left out.
pub(super) fn runner_env(
    tag: &str,
    table: &RunnerEnv,
    withheld: &[&str],
    inherited: &Arc<[CString]>,
) -> Result<Env, ProcessError> {
    let mut own = Vec::with_capacity(table.len() + 4);
    // The table's check refused NUL bytes and our own names; a NUL here is skipped.
    own.extend(
        table
            .iter()
            .filter_map(|(key, value)| CString::new(format!("{key}={value}")).ok()),
    );
    let replacing = own.len();
    let token = CHILD_TOKEN.get().map(|t| (CHILD_TOKEN_VAR, t.as_str()));
    for (key, value) in [(CHILD_VAR, "1"), (TAG_VAR, tag), (GIT_DIR_VAR, "/dev/null")]
        .into_iter()
        .chain(token)
    {
        let pair = CString::new(format!("{key}={value}"));
        own.push(pair.map_err(|_| ProcessError::NulInOwnVariable(key))?);
    }
    let withheld = withheld
        .iter()
        .filter(|name| !table.contains_key(**name))
        .map(|name| name.as_bytes().to_vec())
        .collect();
    Ok(Env {
        shared: inherited.clone(),
        own,
        replacing,
        withheld,
    })
}

/// `vars` without the service manager's variables and our own markers, as `KEY=value`.
pub(super) fn inherited_env(vars: impl Iterator<Item = (OsString, OsString)>) -> Vec<CString> {
    vars.filter(|(key, _)| {
        !key.to_str().is_some_and(|k| {
            matches!(
                k,
                "NOTIFY_SOCKET"
                    | "WATCHDOG_PID"
                    | "WATCHDOG_USEC"
                    | CHILD_VAR
                    | CHILD_TOKEN_VAR
                    | TAG_VAR
                    | GIT_DIR_VAR
            ) || k.starts_with("LISTEN_")
        })
    })
    .filter_map(|(key, value)| {
        let mut pair = key.into_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        // The environment cannot hold a NUL byte; skip rather than fail if it did.
        CString::new(pair).ok()
    })
    .collect()
}

/// The program to start, or `None` when it is not installed.
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        if !path.is_absolute() {
            return None;
        }
        return is_executable(&path).then_some(path);
    }
    find_on_path(program.as_ref(), std::env::var_os("PATH").as_deref())
}

/// Whether a runner can be tried: a CLI's program is found and its login is not
/// missing (a few `stat`s, no process), an API runner's key variable is set (or it
/// needs none).
pub fn is_installed(runner: &Runner) -> bool {
    match runner.kind() {
        RunnerKind::Api(api) => api.key_is_set(|var| std::env::var_os(var)),
        RunnerKind::Cli { argv, .. } => {
            argv.first()
                .is_some_and(|program| resolve_program(program).is_some())
                && missing_login(runner, &[]).is_none()
        }
    }
}

/// Why a CLI runner has no login it could use (`core::runner::login::missing_login`), as it
/// would start: its table's `env` over this process's, without the `withheld` keys.
pub fn missing_login(runner: &Runner, withheld: &[&str]) -> Option<String> {
    let var = |name: &str| {
        let value = match runner.env.get(name) {
            Some(own) => Some(own.clone()),
            None if withheld.contains(&name) => None,
            None => std::env::var(name).ok(),
        };
        value.filter(|v| !v.trim().is_empty())
    };
    crate::core::runner::login::missing_login(&runner.argv, var, |f| f.exists())
}

/// `program` on a `PATH` value, if it is there and executable. Only absolute entries:
/// a relative one (`.`, `bin`) would be looked up in the judge's folder but could name
/// a program inside the job's cwd.
pub fn find_on_path(program: &std::ffi::OsStr, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_env_drops_service_and_marker_variables_and_adds_ours() {
        let var = |k: &str, v: &[u8]| (OsString::from(k), OsString::from_vec(v.to_vec()));
        let inherited = inherited_env(
            [
                var("PATH", b"/bin"),
                var("NOTIFY_SOCKET", b"/run/x"),
                var("LISTEN_FDS", b"2"),
                var(CHILD_VAR, b"1"),
                var(CHILD_TOKEN_VAR, b"forged"),
                var(TAG_VAR, b"old"),
                var("GIT_DIR", b"/home/u/repo/.git"),
                var("RAW", b"\xff"),
            ]
            .into_iter(),
        );
        let names: Vec<&[u8]> = inherited.iter().map(|c| c.as_bytes()).collect();
        assert_eq!(names, [b"PATH=/bin".as_slice(), b"RAW=\xff"]);
        // The launcher's inherited environment, read when it was made, is shared as is.
        let kept: Arc<[CString]> = Arc::from([CString::new("KEPT=1").unwrap()]);
        let env = runner_env("t1", &RunnerEnv::new(), &[], &kept).unwrap();
        assert!(Arc::ptr_eq(&env.shared, &kept));
        let tail: Vec<String> = env
            .own
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            tail[..3],
            [
                format!("{CHILD_VAR}=1"),
                format!("{TAG_VAR}=t1"),
                "GIT_DIR=/dev/null".to_string()
            ]
        );
        // The token, when this process knows its folder's key (another test may set it).
        if let Some(token) = CHILD_TOKEN.get() {
            assert_eq!(tail[3], format!("{CHILD_TOKEN_VAR}={token}"));
        }
    }

    #[test]
    fn withheld_keys_are_dropped_unless_the_table_sets_them() {
        let c = |s: &str| CString::new(s).unwrap();
        let kept: Arc<[CString]> = Arc::from([c("PATH=/bin"), c("A_KEY=a"), c("B_KEY=b")]);
        let table: RunnerEnv = [("B_KEY".to_string(), "mine".to_string())].into();
        let env = runner_env("t", &table, &["A_KEY", "B_KEY"], &kept).unwrap();
        let all: Vec<String> = env
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .filter(|v| v.contains("_KEY") || v.starts_with("PATH"))
            .collect();
        assert_eq!(all, ["PATH=/bin", "B_KEY=mine"]);
    }

    #[test]
    fn programs_resolve_by_path_or_not_at_all() {
        assert!(resolve_program("sh").is_some());
        assert!(resolve_program("/bin/sh").is_some());
        assert!(resolve_program("no-such-program-77").is_none());
        assert!(resolve_program("/no/such/program").is_none());
        let plain = tempfile::NamedTempFile::new().unwrap();
        assert!(
            resolve_program(plain.path().to_str().unwrap()).is_none(),
            "not executable"
        );
    }
}
