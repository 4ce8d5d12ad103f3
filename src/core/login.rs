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
}

/// The login places of `program` (basename of argv[0]), given HOME and the CLI's own
/// config-folder variable; `None` for a runner whose login cannot be seen from outside.
pub fn places(program: &str, home: &Path, config_dir: Option<&Path>) -> Option<LoginPlaces> {
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
            files: vec![
                config_dir
                    .map_or_else(|| home.join(".claude"), Path::to_path_buf)
                    .join(".credentials.json"),
            ],
            fix: "run `claude` once and /login as the service's user, or set ANTHROPIC_API_KEY \
                  in the service's environment",
        }),
        "codex" => Some(LoginPlaces {
            vars: &["CODEX_API_KEY", "OPENAI_API_KEY"],
            files: vec![
                config_dir
                    .map_or_else(|| home.join(".codex"), Path::to_path_buf)
                    .join("auth.json"),
            ],
            fix: "run `codex login` as the service's user, or set CODEX_API_KEY in the \
                  service's environment",
        }),
        _ => None,
    }
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
    #[cfg(not(target_os = "macos"))]
    fn claude_login_is_a_key_or_credentials_json() {
        let p = places("claude", Path::new("/h"), None).expect("claude");
        assert!(p.vars.contains(&"ANTHROPIC_API_KEY"));
        assert_eq!(p.files, vec![PathBuf::from("/h/.claude/.credentials.json")]);
        assert_eq!(places("cursor-agent", Path::new("/h"), None), None);
    }
}
