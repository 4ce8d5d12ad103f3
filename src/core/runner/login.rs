//! Where each runner keeps its login, so `doctor` can tell "not logged in" without the
//! network. No I/O: the caller looks at the variables and files named here.

use std::path::{Path, PathBuf};

/// Where one runner's credentials can be found.
#[derive(Debug, PartialEq, Eq)]
pub struct LoginPlaces {
    /// Environment variables any one of which is a login (a key, a token, a cloud provider).
    pub vars: &'static [&'static str],
    /// Files any one of which is a login.
    pub files: Vec<PathBuf>,
    /// How to log in, for the warning.
    pub fix: &'static str,
    /// The same in a few words, for an attempt's reason (clipped to 300 characters).
    pub short_fix: &'static str,
}

/// The login places of `program` (basename of argv[0]), given HOME and the CLI's own
/// config-folder variable; `None` for a runner whose login cannot be seen from outside.
pub fn places(program: &str, home: &Path, config_dir: Option<&Path>) -> Option<LoginPlaces> {
    let folder = cli_home(program, home, |_| {
        config_dir.map(|d| d.to_string_lossy().into_owned())
    });
    match program {
        // On macOS claude keeps its login in the keychain, which doctor cannot read.
        "claude" if !cfg!(target_os = "macos") => Some(LoginPlaces {
            vars: &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
                "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_USE_VERTEX",
            ],
            files: folder
                .map(|f| f.join(".credentials.json"))
                .into_iter()
                .collect(),
            fix: "run `claude` once and /login as the service's user, or set ANTHROPIC_API_KEY \
                  in the service's environment",
            short_fix: "run `claude` and /login, or set ANTHROPIC_API_KEY",
        }),
        "codex" => Some(LoginPlaces {
            vars: &["CODEX_API_KEY", "OPENAI_API_KEY"],
            files: folder.map(|f| f.join("auth.json")).into_iter().collect(),
            fix: "run `codex login` as the service's user, or set CODEX_API_KEY in the \
                  service's environment",
            short_fix: "run `codex login`, or set CODEX_API_KEY",
        }),
        _ => None,
    }
}

/// Why a runner has no login it could use, given what it would see: `var` its
/// environment (what it inherits and its table's `env`), `exists` the file system.
/// `None` when a login is there, or when it cannot be seen from outside (another
/// program, claude on macOS, a codex whose table names its own provider, which takes
/// its key from a variable of its own).
pub fn missing_login(
    argv: &[String],
    var: impl Fn(&str) -> Option<String>,
    exists: impl Fn(&Path) -> bool,
) -> Option<String> {
    let program = Path::new(argv.first()?).file_name()?.to_str()?;
    if program == "codex" && names_a_provider(argv) {
        return None;
    }
    let home = var("HOME")?;
    let config_dir = config_dir_var(program).and_then(&var).map(PathBuf::from);
    let places = places(program, Path::new(&home), config_dir.as_deref())?;
    if places.vars.iter().any(|v| var(v).is_some()) || places.files.iter().any(|f| exists(f)) {
        return None;
    }
    let files: Vec<String> = places
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    Some(format!(
        "no {program} login ({} missing, none of its key variables set); {}",
        files.join(", "),
        places.short_fix
    ))
}

/// True when a codex argv sets its own model provider or base URL (`-c` keys).
fn names_a_provider(argv: &[String]) -> bool {
    argv.iter()
        .any(|a| a.starts_with("model_provider") || a.starts_with("openai_base_url"))
}

/// A CLI's config folder: its own variable (`$CLAUDE_CONFIG_DIR`, `$CODEX_HOME`) as
/// `var` gives it, else `<home>/.claude` or `<home>/.codex`; `None` for other programs.
pub fn cli_home(
    program: &str,
    home: &Path,
    var: impl Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    let default = match program {
        "claude" => home.join(".claude"),
        "codex" => home.join(".codex"),
        _ => return None,
    };
    let moved = config_dir_var(program)
        .and_then(var)
        .filter(|v| !v.is_empty());
    Some(moved.map_or(default, PathBuf::from))
}

/// The variable that moves a CLI's config folder (`~/.claude`, `~/.codex`).
pub fn config_dir_var(program: &str) -> Option<&'static str> {
    match program {
        "claude" => Some("CLAUDE_CONFIG_DIR"),
        "codex" => Some("CODEX_HOME"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_login_is_a_key_or_auth_json_in_codex_home() {
        let p = places("codex", Path::new("/h"), None).expect("codex");
        assert!(p.vars.contains(&"CODEX_API_KEY"));
        assert_eq!(p.files, vec![PathBuf::from("/h/.codex/auth.json")]);
        let p = places("codex", Path::new("/h"), Some(Path::new("/c"))).expect("codex");
        assert_eq!(p.files, vec![PathBuf::from("/c/auth.json")]);
    }

    #[test]
    fn a_missing_login_is_named_and_a_found_or_unseen_one_is_not() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let codex = argv(&["/usr/bin/codex", "exec", "--", "{prompt}"]);
        let home = |v: &str| (v == "HOME").then(|| "/h".to_string());
        let none = |_: &Path| false;
        let why = missing_login(&codex, home, none).expect("no codex login");
        assert!(
            why == "no codex login (/h/.codex/auth.json missing, none of its key variables \
                    set); run `codex login`, or set CODEX_API_KEY",
            "{why}"
        );
        let keyed = |v: &str| matches!(v, "HOME" | "CODEX_API_KEY").then(|| "x".to_string());
        assert_eq!(missing_login(&codex, keyed, none), None);
        assert_eq!(
            missing_login(&codex, home, |f: &Path| f
                == Path::new("/h/.codex/auth.json")),
            None
        );
        let moved = |v: &str| match v {
            "HOME" => Some("/h".to_string()),
            "CODEX_HOME" => Some("/c".to_string()),
            _ => None,
        };
        assert!(
            missing_login(&codex, moved, none)
                .unwrap()
                .contains("/c/auth.json")
        );
        let provider = argv(&[
            "codex",
            "exec",
            "-c",
            "model_provider=\"azure\"",
            "--",
            "{prompt}",
        ]);
        assert_eq!(missing_login(&provider, home, none), None);
        assert_eq!(
            missing_login(&argv(&["cursor-agent", "-p"]), home, none),
            None
        );
        assert_eq!(
            missing_login(&codex, |_: &str| None, none),
            None,
            "no HOME: unseen"
        );
    }

    #[test]
    #[cfg(not(target_os = "macos"))]
    fn claude_login_is_a_key_or_credentials_json() {
        let p = places("claude", Path::new("/h"), None).expect("claude");
        assert!(p.vars.contains(&"ANTHROPIC_API_KEY"));
        assert_eq!(p.files, vec![PathBuf::from("/h/.claude/.credentials.json")]);
        assert_eq!(places("cursor-agent", Path::new("/h"), None), None);
    }
}
