//! What an investigate runner may read (pure): the deny rules every investigate claude
//! keeps, the check of its `--settings` permissions, and the job `cwd` rule. Claude's
//! read confinement (`blockReadsOutsideWorkingDirectories`) is relative to its working
//! folder and its `additionalDirectories`: a working folder of `/` or `$HOME` (or a
//! folder above it) confines nothing, so neither is ever given or accepted.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

/// The deny rules of the shipped investigate claude: the user's keys, tool logins,
/// package-registry and cloud tokens, keyrings and shell histories. An investigate
/// table may add rules, never drop one of these.
pub const SHIPPED_DENY: [&str; 32] = [
    "Read(~/.ssh/**)",
    "Read(~/.aws/**)",
    "Read(~/.config/**)",
    "Read(~/.claude/**)",
    "Read(~/.claude.json)",
    "Read(~/.codex/**)",
    "Read(~/.netrc)",
    "Read(~/.git-credentials)",
    "Read(~/.gnupg/**)",
    "Read(~/.docker/**)",
    "Read(~/.kube/**)",
    "Read(~/.npmrc)",
    "Read(~/.pypirc)",
    "Read(~/.pgpass)",
    "Read(~/.cargo/credentials)",
    "Read(~/.cargo/credentials.toml)",
    "Read(~/.azure/**)",
    "Read(~/.password-store/**)",
    "Read(~/.local/share/keyrings/**)",
    "Read(~/.bash_history)",
    "Read(~/.zsh_history)",
    "Read(~/.zsh_sessions/**)",
    "Read(~/.histfile)",
    "Read(~/.sh_history)",
    "Read(~/.python_history)",
    "Read(~/.node_repl_history)",
    "Read(~/.psql_history)",
    "Read(~/.mysql_history)",
    "Read(~/.sqlite_history)",
    "Read(~/.rediscli_history)",
    "Read(~/.lesshst)",
    "Read(~/.local/share/fish/fish_history)",
];

/// What makes an investigate claude's `--settings` object unsafe, if anything: any key
/// but `disableAllHooks` (true) and `permissions`, whose keys may only narrow reads.
/// `reads`: the runner has read tools, so the shipped confinement must stay
/// (`blockReadsOutsideWorkingDirectories` and every rule of `SHIPPED_DENY`).
pub fn settings_problem(map: &Map<String, Value>, reads: bool) -> Option<String> {
    if map.get("disableAllHooks") != Some(&Value::Bool(true)) {
        return Some("\"disableAllHooks\" must be true".into());
    }
    if let Some(key) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "disableAllHooks" | "permissions"))
    {
        return Some(format!("key {key:?} is not allowed"));
    }
    let permissions = match map.get("permissions") {
        Some(Value::Object(p)) => p,
        Some(_) => return Some("\"permissions\" must be an object".into()),
        None if reads => return Some(unconfined("it has no \"permissions\"")),
        None => return None,
    };
    for (key, v) in permissions {
        if let Some(problem) = permission_problem(key, v) {
            return Some(problem);
        }
    }
    if reads {
        return confinement_dropped(permissions).map(|why| unconfined(&why));
    }
    None
}

fn unconfined(why: &str) -> String {
    format!(
        "a claude with read tools keeps the shipped read confinement \
         (\"blockReadsOutsideWorkingDirectories\": true and every shipped \"deny\" rule; a \
         table may add rules, not drop them), but {why}"
    )
}

/// One permissions key: only keys that narrow reads, with values that do.
fn permission_problem(key: &str, v: &Value) -> Option<String> {
    let fine = match key {
        "blockReadsOutsideWorkingDirectories" => *v == Value::Bool(true),
        "additionalDirectories" => match strings(v) {
            Some(dirs) => {
                if let Some(dir) = dirs.iter().find(|d| normalised(d).is_some_and(is_root)) {
                    return Some(format!(
                        "\"additionalDirectories\" names {dir:?}, the root folder: it would \
                         open every file to reads"
                    ));
                }
                dirs.iter().all(|d| d.starts_with('/'))
            }
            None => false,
        },
        "deny" => strings(v).is_some(),
        _ => return Some(format!("permissions key {key:?} is not allowed")),
    };
    (!fine).then(|| format!("permissions key {key:?} has a value that is not allowed"))
}

/// Why the shipped confinement is not all there, if it is not.
fn confinement_dropped(permissions: &Map<String, Value>) -> Option<String> {
    if permissions.get("blockReadsOutsideWorkingDirectories") != Some(&Value::Bool(true)) {
        return Some("\"blockReadsOutsideWorkingDirectories\" is not true".into());
    }
    let denied = permissions
        .get("deny")
        .and_then(strings)
        .unwrap_or_default();
    let missing: Vec<&str> = SHIPPED_DENY
        .iter()
        .copied()
        .filter(|rule| !denied.contains(rule))
        .collect();
    (!missing.is_empty()).then(|| format!("\"deny\" lacks {missing:?}"))
}

/// The strings of a JSON array of strings; `None` for anything else.
fn strings(v: &Value) -> Option<Vec<&str>> {
    v.as_array()?.iter().map(Value::as_str).collect()
}

/// The `additionalDirectories` entry of `settings` (an investigate claude's `--settings`
/// value) that is `home` or a folder above it, if any. Compared lexically (`.` and `..`
/// resolved), as the config is checked without touching the disk.
pub fn directory_above_home<'a>(settings: &'a Value, home: &Path) -> Option<&'a str> {
    let home = normalised(home.to_str()?)?;
    let dirs = settings
        .get("permissions")?
        .get("additionalDirectories")
        .and_then(strings)?;
    dirs.into_iter()
        .find(|d| normalised(d).is_some_and(|d| home.starts_with(d)))
}

/// An absolute path with `.`, `..` and repeated slashes resolved lexically; `None` for a
/// relative one.
fn normalised(path: &str) -> Option<PathBuf> {
    let path = Path::new(path);
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

fn is_root(path: PathBuf) -> bool {
    path.parent().is_none()
}

/// Why a job's `cwd` (canonical: symlinks resolved) is refused, if it is: `/`, `home` or
/// a folder above it, or one of `judge`'s own folders (the state folder) or inside one.
/// Every path is canonical, so a symlink to `$HOME` counts as `$HOME`.
pub fn cwd_refusal(cwd: &Path, home: Option<&Path>, judge: &[&Path]) -> Option<&'static str> {
    if cwd.parent().is_none() {
        return Some("the root folder");
    }
    if let Some(home) = home {
        if home == cwd {
            return Some("the home folder ($HOME)");
        }
        if home.starts_with(cwd) {
            return Some("a folder above the home folder ($HOME)");
        }
    }
    judge
        .iter()
        .any(|folder| cwd.starts_with(folder))
        .then_some("the judge's state folder or inside it")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            other => panic!("{other}"),
        }
    }

    fn confined(extra: Value) -> Map<String, Value> {
        let mut permissions = object(json!({
            "blockReadsOutsideWorkingDirectories": true,
            "deny": SHIPPED_DENY,
        }));
        permissions.extend(object(extra));
        object(json!({"disableAllHooks": true, "permissions": permissions}))
    }

    #[test]
    fn a_reading_claude_keeps_the_whole_shipped_confinement() {
        assert_eq!(settings_problem(&confined(json!({})), true), None);
        let mut more: Vec<&str> = SHIPPED_DENY.to_vec();
        more.push("Read(~/secrets/**)");
        assert_eq!(
            settings_problem(&confined(json!({"deny": more})), true),
            None
        );
        let empty = settings_problem(&confined(json!({"deny": []})), true).unwrap();
        assert!(
            empty.contains("lacks") && empty.contains("~/.netrc"),
            "{empty}"
        );
        let one_less: Vec<&str> = SHIPPED_DENY
            .iter()
            .copied()
            .filter(|r| *r != "Read(~/.bash_history)")
            .collect();
        let e = settings_problem(&confined(json!({"deny": one_less})), true).unwrap();
        assert!(
            e.contains("[\"Read(~/.bash_history)\"]") && !e.contains("netrc"),
            "{e}"
        );
        let open = confined(json!({"blockReadsOutsideWorkingDirectories": false}));
        assert!(settings_problem(&open, true).is_some());
        let hooks_only = object(json!({"disableAllHooks": true}));
        assert!(
            settings_problem(&hooks_only, true)
                .unwrap()
                .contains("no \"permissions\"")
        );
        // No read tools: nothing to confine.
        assert_eq!(settings_problem(&hooks_only, false), None);
    }

    #[test]
    fn the_root_folder_is_never_an_additional_directory() {
        for root in ["/", "//", "/.", "/..", "/tmp/..", "/./"] {
            let s = confined(json!({"additionalDirectories": ["/var/log", root]}));
            let e = settings_problem(&s, false).unwrap();
            assert!(e.contains("the root folder"), "{root}: {e}");
        }
        let s = confined(json!({"additionalDirectories": ["/var/log/app"]}));
        assert_eq!(settings_problem(&s, true), None);
        let relative = confined(json!({"additionalDirectories": ["logs"]}));
        assert!(settings_problem(&relative, true).is_some());
    }

    #[test]
    fn home_and_the_folders_above_it_are_never_additional_directories() {
        let home = Path::new("/home/u");
        let settings = |dirs: &[&str]| json!({"disableAllHooks": true, "permissions": {"additionalDirectories": dirs}});
        for dir in [
            "/home/u",
            "/home/u/",
            "/home",
            "/home/./u",
            "/home/u/x/..",
            "/",
        ] {
            let s = settings(&["/var/log", dir]);
            assert_eq!(directory_above_home(&s, home), Some(dir), "{dir}");
        }
        for dir in ["/home/u/project", "/home/uv", "/var/log", "/home/v"] {
            assert_eq!(directory_above_home(&settings(&[dir]), home), None, "{dir}");
        }
        assert_eq!(
            directory_above_home(&json!({"disableAllHooks": true}), home),
            None
        );
    }

    #[test]
    fn a_cwd_that_holds_home_or_the_judges_folders_is_refused() {
        let home = Some(Path::new("/home/u"));
        let state = Path::new("/home/u/.cache/catstack-llm-judge");
        let refused = |cwd: &str| cwd_refusal(Path::new(cwd), home, &[state]);
        assert_eq!(refused("/"), Some("the root folder"));
        assert_eq!(refused("/home/u"), Some("the home folder ($HOME)"));
        assert_eq!(
            refused("/home"),
            Some("a folder above the home folder ($HOME)")
        );
        assert!(refused(state.to_str().unwrap()).is_some_and(|r| r.contains("state folder")));
        assert!(refused("/home/u/.cache/catstack-llm-judge/tmp/x").is_some());
        for fine in ["/home/u/project", "/home/u/.cache", "/srv/repo", "/home/uv"] {
            assert_eq!(refused(fine), None, "{fine}");
        }
        assert_eq!(
            cwd_refusal(Path::new("/"), None, &[]),
            Some("the root folder")
        );
        assert_eq!(cwd_refusal(Path::new("/home"), None, &[]), None);
    }
}
