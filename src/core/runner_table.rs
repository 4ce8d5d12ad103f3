//! Runner tables, the override variable and argv building (SPEC section 4). Pure.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The argv item replaced by the prompt.
pub const PROMPT_SLOT: &str = "{prompt}";
/// The environment variable that replaces every runner table.
pub const RUNNERS_VAR: &str = "CATSTACK_LLM_JUDGE_RUNNERS";
/// The largest single argv item Linux accepts (MAX_ARG_STRLEN minus the NUL).
pub const MAX_ARG_BYTES: usize = 131_071;

/// One runner: a name and an argv.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runner {
    /// Shown in attempts, verdicts and logs.
    pub name: String,
    /// The program and its arguments; `{prompt}` marks the prompt.
    pub argv: Vec<String>,
    /// At most this many copies at once across workers (section 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u32>,
}

#[cfg(test)]
impl Runner {
    /// A runner with no `max_concurrent`, for tests.
    pub fn for_tests(name: &str, argv: &[&str]) -> Runner {
        Runner {
            name: name.into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            max_concurrent: None,
        }
    }
}

/// What to start: the final argv and, when the prompt goes there, stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The argv with the prompt slot filled or dropped.
    pub argv: Vec<String>,
    /// The prompt when it goes on stdin; `None` means stdin is /dev/null.
    pub stdin: Option<String>,
}

/// Fills the prompt slot, or moves the prompt to stdin when it cannot be one argument.
pub fn build_invocation(argv: &[String], prompt: &str) -> Invocation {
    let has_slot = argv.iter().any(|a| a == PROMPT_SLOT);
    if !has_slot {
        return Invocation {
            argv: argv.to_vec(),
            stdin: Some(prompt.to_string()),
        };
    }
    if prompt.len() <= MAX_ARG_BYTES && !prompt.contains('\0') {
        let argv = argv
            .iter()
            .map(|a| if a == PROMPT_SLOT { prompt } else { a })
            .map(str::to_string)
            .collect();
        return Invocation { argv, stdin: None };
    }
    Invocation {
        argv: without_prompt_slot(argv),
        stdin: Some(prompt.to_string()),
    }
}

/// Drops each `{prompt}` item and a `--` right before it.
fn without_prompt_slot(argv: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(argv.len());
    for item in argv {
        if item == PROMPT_SLOT {
            if out.last().is_some_and(|prev| prev == "--") {
                out.pop();
            }
        } else {
            out.push(item.clone());
        }
    }
    out
}

/// A table as its names and argv, in order: what identifies it in cache and
/// single-flight keys.
pub fn names_and_argv(table: &[Runner]) -> Vec<(&str, &[String])> {
    table
        .iter()
        .map(|r| (r.name.as_str(), r.argv.as_slice()))
        .collect()
}

/// Parses `CATSTACK_LLM_JUDGE_RUNNERS`: a JSON list of `[name, [argv...]]` pairs.
pub fn parse_override(text: &str) -> Result<Vec<Runner>, String> {
    let bad = |why: String| {
        format!(
            "{RUNNERS_VAR} is not a JSON list of [name, [argv...]] pairs: {why}; \
             fix it or unset it (example: [[\"fake\", [\"/path/to/fake-runner\", \"{{prompt}}\"]]])"
        )
    };
    let value: Value = serde_json::from_str(text).map_err(|e| bad(format!("{e}")))?;
    let Value::Array(items) = value else {
        return Err(bad("it is not a list".into()));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| override_entry(item).map_err(|why| bad(format!("item {i}: {why}"))))
        .collect()
}

fn override_entry(item: &Value) -> Result<Runner, String> {
    let Some([Value::String(name), Value::Array(argv)]) = item.as_array().map(Vec::as_slice) else {
        return Err("not a [name, [argv...]] pair".into());
    };
    if argv.is_empty() {
        return Err(format!("runner {name:?} has an empty argv"));
    }
    let argv = argv
        .iter()
        .map(|a| a.as_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("runner {name:?} has an argv item that is not a string"))?;
    check_program(&argv).map_err(|why| format!("runner {name:?}: {why}"))?;
    Ok(Runner {
        name: name.clone(),
        argv,
        max_concurrent: None,
    })
}

/// Refuses an argv whose program could come from the job: a relative path (it would
/// be found in the job's cwd), the prompt slot itself, or nothing left once the
/// prompt moves to stdin.
fn check_program(argv: &[String]) -> Result<(), String> {
    let program = argv.first().map(String::as_str).unwrap_or("");
    if program == PROMPT_SLOT {
        return Err(format!(
            "\"argv\" starts with \"{PROMPT_SLOT}\"; the first item must be the program"
        ));
    }
    if program.contains('/') && !program.starts_with('/') {
        return Err(format!(
            "program {program:?} is a relative path; give a bare name found on PATH or an absolute path"
        ));
    }
    if without_prompt_slot(argv)
        .first()
        .is_none_or(|p| p != program)
    {
        return Err(
            "\"argv\" would be empty once a long prompt moves to stdin; give the program first"
                .into(),
        );
    }
    Ok(())
}

/// Checks a configured table: every runner has a name and a non-empty argv.
pub fn check_table(table: &str, runners: &[Runner]) -> Result<(), String> {
    for (i, r) in runners.iter().enumerate() {
        if r.name.is_empty() {
            return Err(format!(
                "runners.{table}[{i}]: \"name\" is empty; give the runner a name"
            ));
        }
        if r.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(format!(
                "runners.{table}[{i}] ({:?}): \"argv\" is empty or has an empty program; \
                 give the program and its arguments",
                r.name
            ));
        }
        check_program(&r.argv)
            .map_err(|why| format!("runners.{table}[{i}] ({:?}): {why}", r.name))?;
        if r.max_concurrent == Some(0) {
            return Err(format!(
                "runners.{table}[{i}] ({:?}): \"max_concurrent\" is 0; remove it or give 1 or more",
                r.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn prompt_fills_the_slot() {
        let inv = build_invocation(&v(&["x", "--", "{prompt}"]), "--version");
        assert_eq!(inv.argv, v(&["x", "--", "--version"]));
        assert_eq!(inv.stdin, None);
    }

    #[test]
    fn no_slot_means_stdin() {
        let inv = build_invocation(&v(&["x", "-p"]), "hi");
        assert_eq!(inv.argv, v(&["x", "-p"]));
        assert_eq!(inv.stdin.as_deref(), Some("hi"));
    }

    #[test]
    fn long_prompt_goes_to_stdin_without_the_dashes() {
        let fits = "a".repeat(MAX_ARG_BYTES);
        assert_eq!(
            build_invocation(&v(&["x", "--", "{prompt}"]), &fits).stdin,
            None
        );
        let long = "a".repeat(MAX_ARG_BYTES + 1);
        let inv = build_invocation(&v(&["x", "-p", "--", "{prompt}"]), &long);
        assert_eq!(inv.argv, v(&["x", "-p"]));
        assert_eq!(inv.stdin.as_deref(), Some(long.as_str()));
    }

    #[test]
    fn nul_prompt_goes_to_stdin() {
        let inv = build_invocation(&v(&["x", "{prompt}"]), "a\0b");
        assert_eq!(inv.argv, v(&["x"]));
        assert_eq!(inv.stdin.as_deref(), Some("a\0b"));
    }

    #[test]
    fn override_parses_pairs() {
        let r = parse_override(r#"[["a", ["/bin/a", "{prompt}"]], ["b", ["b", ""]]]"#).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].argv, v(&["b", ""]));
        assert_eq!(parse_override("[]").unwrap(), vec![]);
    }

    #[test]
    fn bad_override_names_the_variable() {
        for bad in [
            "nope",
            "{}",
            "[1]",
            r#"[["a"]]"#,
            r#"[["a", []]]"#,
            r#"[["a", ["x", 1]]]"#,
            r#"[[1, ["x"]]]"#,
            r#"[["a", ["{prompt}"]]]"#,
            r#"[["a", ["bin/fake", "{prompt}"]]]"#,
            r#"[["a", ["./fake"]]]"#,
        ] {
            let e = parse_override(bad).unwrap_err();
            assert!(e.starts_with(RUNNERS_VAR), "{bad}: {e}");
        }
    }

    #[test]
    fn table_check_names_the_problem() {
        let r = |name: &str, argv: &[&str], mc| Runner {
            name: name.into(),
            argv: v(argv),
            max_concurrent: mc,
        };
        assert!(check_table("default", &[r("a", &["x"], Some(2))]).is_ok());
        assert!(
            check_table("default", &[r("", &["x"], None)])
                .unwrap_err()
                .contains("name")
        );
        assert!(
            check_table("default", &[r("a", &[], None)])
                .unwrap_err()
                .contains("argv")
        );
        assert!(
            check_table("default", &[r("a", &["x"], Some(0))])
                .unwrap_err()
                .contains("max_concurrent")
        );
        for (argv, words) in [
            (&["{prompt}"][..], "the first item must be the program"),
            (&["--", "{prompt}"][..], "empty once a long prompt"),
            (&["bin/claude", "{prompt}"][..], "relative path"),
            (&["./claude"][..], "relative path"),
        ] {
            let e = check_table("default", &[r("a", argv, None)]).unwrap_err();
            assert!(e.contains(words), "{argv:?}: {e}");
        }
        assert!(check_table("default", &[r("a", &["/bin/x", "--", "{prompt}"], None)]).is_ok());
    }
}
