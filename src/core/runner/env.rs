//! A runner's own environment (`env = { NAME = "value", … }` in its table), the pure
//! part: what any table may set, and the identity it adds to a runner. The variables
//! are applied on top of the runner environment when it starts (`process::spawn`);
//! which of them an investigate table may set is the allowlist's (`core::safety`).

use std::collections::BTreeMap;

use thiserror::Error;

/// A runner's own variables, sorted by name (so its identity does not depend on order).
pub type RunnerEnv = BTreeMap<String, String>;

/// Variables the judge sets for every runner itself: a table may not change them
/// (`GIT_DIR` keeps a repository's filters from running, the others find a runner's
/// processes and mark them as the judge's children).
pub const RESERVED: [&str; 4] = [
    "CATSTACK_LLM_JUDGE_CHILD",
    "LLM_JUDGE_CHILD_TOKEN",
    "LLM_JUDGE_TAG",
    "GIT_DIR",
];

/// A runner `env` entry no table may hold.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EnvError {
    /// An empty name, or one with `=` or a NUL byte.
    #[error("variable name {name:?} is not a name (empty, or holds '=' or a NUL byte)")]
    BadName { name: String },
    /// A value with a NUL byte, which no environment can hold.
    #[error("variable {name:?} has a value with a NUL byte")]
    NulValue { name: String },
    /// One of the judge's own variables.
    #[error("variable {name:?} is set by the judge itself for every runner; remove it")]
    Reserved { name: String },
}

/// Checks every entry of a runner's `env`.
pub fn check_env(env: &RunnerEnv) -> Result<(), EnvError> {
    for (name, value) in env {
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(EnvError::BadName { name: name.clone() });
        }
        if value.contains('\0') {
            return Err(EnvError::NulValue { name: name.clone() });
        }
        if RESERVED.contains(&name.as_str()) {
            return Err(EnvError::Reserved { name: name.clone() });
        }
    }
    Ok(())
}

/// The env as `NAME=value` items in name order: what a runner's identity (health,
/// cache and single-flight keys) adds for it.
pub fn identity(env: &RunnerEnv) -> Vec<String> {
    env.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> RunnerEnv {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_values_and_the_judges_own_variables_are_checked() {
        assert_eq!(
            check_env(&env(&[("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "1024")])),
            Ok(())
        );
        assert_eq!(check_env(&RunnerEnv::new()), Ok(()));
        for (name, value, words) in [
            ("", "1", "not a name"),
            ("A=B", "1", "not a name"),
            ("A\0", "1", "not a name"),
            ("A", "x\0y", "NUL byte"),
            ("GIT_DIR", "/repo/.git", "set by the judge"),
            ("LLM_JUDGE_TAG", "x", "set by the judge"),
            ("CATSTACK_LLM_JUDGE_CHILD", "0", "set by the judge"),
            ("LLM_JUDGE_CHILD_TOKEN", "0", "set by the judge"),
        ] {
            let e = check_env(&env(&[(name, value)])).unwrap_err().to_string();
            assert!(e.contains(words), "{name:?}: {e}");
        }
    }

    #[test]
    fn identity_is_sorted_whatever_the_order_written() {
        let a = env(&[("B", "2"), ("A", "1")]);
        assert_eq!(identity(&a), ["A=1", "B=2"]);
    }
}
