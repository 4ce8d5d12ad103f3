//! Where a hook's rules come from: the user's `rules.toml` in the config folder
//! (`hook --config-dir`, else `$XDG_CONFIG_HOME/llm-judge/`; never a variable a project
//! could set), and a project's `.llm-judge/rules.toml` (in the session's folder or the
//! nearest folder above it that has one) only while its content is the one the user
//! pinned with `llm-judge hooks trust`: the agent being judged can edit a project's
//! files, so any change to that file switches its rules off until the user trusts it
//! again. A project's rules only add to the user's: one named like a rule of the
//! user's is left out, so a trusted file cannot swap the user's rule for another
//! (docs/hooks.md, "Project rules").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::config::Settings;
use crate::core::digest::sha256_hex;
use crate::core::hooks::rules::{Rule, first_investigating, parse_rules};
use crate::store::config_file::{Sources, config_folder};
use crate::store::state_dir::read_small_text as read;

/// A project's rules file, relative to the project's folder.
pub const PROJECT_RULES: &str = ".llm-judge/rules.toml";
/// The pins of trusted project rules files, in the config folder.
const PINS_FILE: &str = "trusted-rules.json";

/// The rules in force, and what could not be read (for the user).
#[derive(Debug, Default)]
pub struct Loaded {
    pub rules: Vec<Rule>,
    pub problems: Vec<String>,
}

/// The user's rules file.
pub fn user_rules_path(sources: &Sources) -> Option<PathBuf> {
    config_folder(sources).map(|dir| dir.join("rules.toml"))
}

/// The user's own rules.
pub fn load_user(sources: &Sources) -> Loaded {
    let mut loaded = Loaded::default();
    if let Some(path) = user_rules_path(sources) {
        match read(&path) {
            Ok(Some(text)) => match parse_rules(&text) {
                Ok(rules) => loaded.rules = rules,
                Err(e) => loaded.problems.push(format!(
                    "rules file {} {e}; its rules are off until it is fixed",
                    path.display()
                )),
            },
            Ok(None) => {}
            Err(why) => loaded.problems.push(why),
        }
    }
    loaded
}

/// The rules for a session in `cwd`.
pub fn load(sources: &Sources, cwd: Option<&Path>) -> Loaded {
    let mut loaded = load_user(sources);
    // Keyed as `hooks trust` pins it: the real path, links resolved.
    if let Some(path) = cwd
        .and_then(project_rules)
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
    {
        match project(sources, &path) {
            Ok(rules) => {
                let (added, shadowed) = crate::core::hooks::rules::added_to(&loaded.rules, rules);
                for name in shadowed {
                    loaded.problems.push(format!(
                        "project rule {name} in {} has the name of one of your rules, so yours \
                         is kept and it is left out (a project's rules only add; rename it)",
                        path.display()
                    ));
                }
                loaded.rules.extend(added);
            }
            Err(why) => loaded.problems.push(why),
        }
    }
    loaded
}

/// What uses investigate mode, in words for a warning: the config's own investigate
/// table, a rule of the user's rules file, or one of a project rules file the user
/// trusts (as trusted: a changed one's rules are off). `None`: nothing does, so an
/// investigate table nothing can run concerns no one until an investigate job comes.
pub fn investigate_use(settings: &Settings, sources: &Sources) -> Option<String> {
    if settings.config.own_investigate_table() {
        let file = settings
            .config_path
            .as_ref()
            .map_or("the config".to_string(), |p| p.display().to_string());
        return Some(format!("{file} sets [[runners.investigate]]"));
    }
    let user = load_user(sources);
    if let (Some(rule), Some(path)) = (first_investigating(&user.rules), user_rules_path(sources)) {
        return Some(format!(
            "rule {:?} in {} uses mode = \"investigate\"",
            rule.name,
            path.display()
        ));
    }
    let pins = pins(sources);
    pins.trusted.keys().find_map(|path| {
        let rules = pinned_project(&pins, Path::new(path)).ok()?;
        let rule = first_investigating(&rules)?;
        Some(format!(
            "project rule {:?} in {path} uses mode = \"investigate\"",
            rule.name
        ))
    })
}

/// A project's rules when the user trusts this content of the file (`path`: its real
/// path); else why they are off.
pub fn project(sources: &Sources, path: &Path) -> Result<Vec<Rule>, String> {
    pinned_project(&pins(sources), path)
}

/// [`project`] against the pins already read.
fn pinned_project(pins: &Pins, path: &Path) -> Result<Vec<Rule>, String> {
    let text = read(path)?.unwrap_or_default();
    let pinned = pins.trusted.get(&path.display().to_string()).cloned();
    let hash = pin_of(&text);
    let folder = path.parent().and_then(Path::parent).unwrap_or(path);
    match pinned {
        Some(pin) if pin == hash => {}
        Some(_) => {
            return Err(format!(
                "project rules {} changed since you trusted them, so they are off; read them, \
                 then run `llm-judge hooks trust {}`",
                path.display(),
                folder.display()
            ));
        }
        None => {
            return Err(format!(
                "project rules {} are not trusted, so they are off; read them, then run \
                 `llm-judge hooks trust {}`",
                path.display(),
                folder.display()
            ));
        }
    }
    parse_rules(&text).map_err(|e| format!("rules file {} {e}", path.display()))
}

/// `.llm-judge/rules.toml` in `cwd` or the nearest folder above it that has one.
pub fn project_rules(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .map(|dir| dir.join(PROJECT_RULES))
        .find(|path| path.is_file())
}

/// The pinned project rules files: path to `sha256:<hex>` of the content trusted.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Pins {
    #[serde(default)]
    pub trusted: BTreeMap<String, String>,
}

/// The pins file.
pub fn pins_path(sources: &Sources) -> Option<PathBuf> {
    config_folder(sources).map(|dir| dir.join(PINS_FILE))
}

/// The pins, for changing them: none when there is no pins file, an error naming it
/// when it cannot be read (rewriting it would drop every pin it holds).
pub fn pins_to_change(sources: &Sources) -> Result<Pins, String> {
    let Some(path) = pins_path(sources) else {
        return Ok(Pins::default());
    };
    match read(&path)? {
        None => Ok(Pins::default()),
        Some(text) => serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is not a pins file ({e}); fix or move it, then trust again",
                path.display()
            )
        }),
    }
}

/// The pins (none when there is no pins file or it cannot be read).
pub fn pins(sources: &Sources) -> Pins {
    pins_path(sources)
        .and_then(|path| read(&path).ok().flatten())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// The pin of `text` as trusted content.
pub fn pin_of(text: &str) -> String {
    format!("sha256:{}", sha256_hex(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::{Settings, parse_config};

    const DEEP: &str = "[[rule]]\nname = \"deep\"\non = [\"stop\"]\nmode = \"investigate\"\n\
        question = \"q\"\nhit_if_all_true = [\"k\"]\nnotice = \"n\"\n";

    fn sources(config_dir: &Path) -> Sources {
        Sources {
            config_flag: None,
            state_dir_flag: None,
            config_dir_flag: Some(config_dir.to_path_buf()),
            sets: Vec::new(),
            env: Vec::new(),
        }
    }

    fn settings(file: Option<&str>) -> Settings {
        Settings {
            config: parse_config(file).expect("config"),
            config_path: None,
            state_dir: PathBuf::from("/nonexistent"),
            runner_override: None,
            runner_error: None,
            runtime_dir: None,
        }
    }

    /// The user's rule, a trusted project's rule (an untrusted one is not), the config's
    /// own table: each uses investigate mode; nothing else does.
    #[test]
    fn investigate_is_used_by_a_rule_on_a_trusted_project_or_the_config() {
        let dir = tempfile::tempdir().expect("temp folder");
        let config_dir = dir.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("config folder");
        let src = sources(&config_dir);
        assert_eq!(investigate_use(&settings(None), &src), None);

        let project = dir.path().join("proj/.llm-judge");
        std::fs::create_dir_all(&project).expect("project folder");
        let project_rules = project.join("rules.toml");
        std::fs::write(&project_rules, DEEP).expect("project rules");
        assert_eq!(investigate_use(&settings(None), &src), None, "not trusted");
        let pins = format!(
            "{{\"trusted\": {{\"{}\": \"{}\"}}}}",
            project_rules.display(),
            pin_of(DEEP)
        );
        std::fs::write(config_dir.join(PINS_FILE), pins).expect("pins");
        let used = investigate_use(&settings(None), &src).unwrap_or_default();
        assert!(used.starts_with("project rule \"deep\" in "), "{used}");

        std::fs::write(config_dir.join("rules.toml"), DEEP).expect("user rules");
        let used = investigate_use(&settings(None), &src).unwrap_or_default();
        assert!(used.starts_with("rule \"deep\" in "), "{used}");

        let own = "[[runners.investigate]]\nname = \"codex\"\nargv = [\"codex\", \"exec\", \
                   \"--sandbox\", \"read-only\", \"--ignore-user-config\", \"--\", \"{prompt}\"]\n";
        let used = investigate_use(&settings(Some(own)), &src).unwrap_or_default();
        assert_eq!(used, "the config sets [[runners.investigate]]");
    }
}
