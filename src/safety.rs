//! The investigate safety invariant (SPEC section 4): an allowlist check of every
//! investigate runner argv. Pure.

use crate::runners::{PROMPT_SLOT, Runner};

const READ_TOOLS: [&str; 3] = ["Read", "Grep", "Glob"];
const MUST_DENY: [&str; 4] = ["Write", "Edit", "NotebookEdit", "Bash"];

/// Refuses an investigate table with any runner outside the allowlist.
pub fn check_investigate_table(runners: &[Runner]) -> Result<(), String> {
    for runner in runners {
        check_runner(runner).map_err(|why| {
            format!(
                "investigate runner {:?} is unsafe: {why}; investigate runners may only read \
                 (see README, \"Investigate safety\")",
                runner.name
            )
        })?;
    }
    Ok(())
}

fn check_runner(runner: &Runner) -> Result<(), String> {
    let Some((program, args)) = runner.argv.split_first() else {
        return Err("its argv is empty".into());
    };
    let args = args_before_prompt(args)?;
    match program.rsplit('/').next().unwrap_or(program) {
        "claude" => check_claude(args),
        "codex" => check_codex(args),
        other => Err(format!(
            "program {other:?} is not allowed (only claude and codex have read-only switches)"
        )),
    }
}

/// Splits off the required trailing `-- {prompt}` and refuses any other prompt slot.
fn args_before_prompt(args: &[String]) -> Result<&[String], String> {
    let n = args.len();
    if n < 2 || args[n - 2] != "--" || args[n - 1] != PROMPT_SLOT {
        return Err(format!("argv must end with \"--\" and \"{PROMPT_SLOT}\""));
    }
    let head = &args[..n - 2];
    if head.iter().any(|a| a == PROMPT_SLOT || a == "--") {
        return Err(format!(
            "\"{PROMPT_SLOT}\" or \"--\" appears before the final \"-- {PROMPT_SLOT}\""
        ));
    }
    Ok(head)
}

/// One parsed flag: its name and its values.
struct Flag<'a> {
    name: &'a str,
    values: Vec<&'a str>,
}

#[derive(Clone, Copy, PartialEq)]
enum Arity {
    None,
    One,
    List,
}

/// Parses flags with `--flag=value` forms; words of a list run until the next `-` item.
fn parse_flags<'a>(
    args: &'a [String],
    arity: impl Fn(&str) -> Option<Arity>,
) -> Result<Vec<Flag<'a>>, String> {
    let mut flags: Vec<Flag<'a>> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let item = args[i].as_str();
        let (name, inline) = match item.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (item, None),
        };
        let kind = arity(name).ok_or_else(|| format!("flag {item:?} is not allowed"))?;
        if flags.iter().any(|f| f.name == name) {
            return Err(format!("flag {name:?} is given twice"));
        }
        i += 1;
        let mut values: Vec<&str> = inline.into_iter().collect();
        match kind {
            Arity::None if inline.is_some() => return Err(format!("flag {name:?} takes no value")),
            Arity::None => {}
            Arity::One if inline.is_none() => match args.get(i) {
                Some(v) if !v.starts_with('-') => {
                    values.push(v);
                    i += 1;
                }
                _ => return Err(format!("flag {name:?} needs a value")),
            },
            Arity::One => {}
            Arity::List if inline.is_none() => {
                while let Some(v) = args.get(i).filter(|v| !v.starts_with('-')) {
                    values.push(v);
                    i += 1;
                }
            }
            Arity::List => {}
        }
        flags.push(Flag { name, values });
    }
    Ok(flags)
}

/// Tool names of a list flag, space- or comma-separated.
fn tools<'a>(flag: &Flag<'a>) -> Vec<&'a str> {
    flag.values
        .iter()
        .flat_map(|v| v.split([',', ' ']))
        .filter(|t| !t.is_empty())
        .collect()
}

fn find<'f, 'a>(flags: &'f [Flag<'a>], names: &[&str]) -> Option<&'f Flag<'a>> {
    flags.iter().find(|f| names.contains(&f.name))
}

fn check_claude(args: &[String]) -> Result<(), String> {
    let flags = parse_flags(args, |name| match name {
        "-p" | "--print" | "--no-session-persistence" | "--strict-mcp-config" => Some(Arity::None),
        "--model" | "--settings" | "--output-format" => Some(Arity::One),
        "--tools" | "--allowedTools" | "--disallowedTools" => Some(Arity::List),
        _ => None,
    })?;
    if find(&flags, &["-p"]).is_some() && find(&flags, &["--print"]).is_some() {
        return Err("flag \"--print\" is given twice (as -p and --print)".into());
    }
    let only_read_tools = |flag: &str, required: bool| -> Result<(), String> {
        let Some(f) = find(&flags, &[flag]) else {
            return if required {
                Err(format!(
                    "flag {flag:?} is missing (it must name only Read, Grep, Glob)"
                ))
            } else {
                Ok(())
            };
        };
        match tools(f).into_iter().find(|t| !READ_TOOLS.contains(t)) {
            Some(t) => Err(format!(
                "flag {flag:?} names tool {t:?} (only Read, Grep, Glob)"
            )),
            None => Ok(()),
        }
    };
    only_read_tools("--tools", true)?;
    only_read_tools("--allowedTools", false)?;
    let denied = find(&flags, &["--disallowedTools"])
        .map(tools)
        .unwrap_or_default();
    if let Some(t) = MUST_DENY.iter().find(|t| !denied.contains(t)) {
        return Err(format!(
            "flag \"--disallowedTools\" must name Write, Edit, NotebookEdit and Bash; {t:?} is missing"
        ));
    }
    if find(&flags, &["--strict-mcp-config"]).is_none() {
        return Err(
            "flag \"--strict-mcp-config\" is missing (user MCP servers could add write tools)"
                .into(),
        );
    }
    Ok(())
}

fn check_codex(args: &[String]) -> Result<(), String> {
    let Some(("exec", rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) else {
        return Err("argv must start with \"codex exec\"".into());
    };
    let flags = parse_flags(rest, |name| match name {
        "--skip-git-repo-check" | "--ignore-user-config" | "--ephemeral" => Some(Arity::None),
        "-m" | "--model" | "--sandbox" | "-s" | "-c" => Some(Arity::One),
        _ => None,
    })?;
    for pair in [["-m", "--model"], ["-s", "--sandbox"]] {
        if find(&flags, &[pair[0]]).is_some() && find(&flags, &[pair[1]]).is_some() {
            return Err(format!(
                "flag {:?} is given twice (as {} and {})",
                pair[1], pair[0], pair[1]
            ));
        }
    }
    match find(&flags, &["-s", "--sandbox"]) {
        Some(f) if f.values == ["read-only"] => {}
        Some(f) => {
            return Err(format!(
                "flag {:?} must be \"read-only\", not {:?}",
                f.name, f.values
            ));
        }
        None => return Err("flag \"--sandbox read-only\" is missing".into()),
    }
    if let Some(f) = find(&flags, &["-c"]).filter(|f| f.values != ["notify=[]"]) {
        return Err(format!(
            "flag \"-c\" may only be \"notify=[]\", not {:?}",
            f.values
        ));
    }
    if find(&flags, &["--ignore-user-config"]).is_none() {
        return Err(
            "flag \"--ignore-user-config\" is missing (user MCP servers run outside the sandbox)"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(argv: &[&str]) -> Runner {
        Runner {
            name: "r".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            max_concurrent: None,
        }
    }

    fn check(argv: &[&str]) -> Result<(), String> {
        check_investigate_table(&[runner(argv)])
    }

    const CLAUDE: &[&str] = &[
        "claude",
        "-p",
        "--model",
        "haiku",
        "--settings",
        "{\"disableAllHooks\": true}",
        "--no-session-persistence",
        "--tools",
        "Read",
        "Grep",
        "Glob",
        "--allowedTools",
        "Read",
        "Grep",
        "Glob",
        "--disallowedTools",
        "Write",
        "Edit",
        "NotebookEdit",
        "Bash",
        "--strict-mcp-config",
        "--",
        "{prompt}",
    ];
    const CODEX: &[&str] = &[
        "codex",
        "exec",
        "--skip-git-repo-check",
        "--sandbox",
        "read-only",
        "-c",
        "notify=[]",
        "--ignore-user-config",
        "--ephemeral",
        "--",
        "{prompt}",
    ];

    fn replaced(base: &[&str], from: &str, to: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        let mut done = false;
        for item in base {
            if *item == from && !done {
                out.extend(to.iter().map(|s| s.to_string()));
                done = true;
            } else {
                out.push(item.to_string());
            }
        }
        assert!(done, "{from} not in argv");
        out
    }

    fn check_owned(argv: Vec<String>) -> Result<(), String> {
        check(&argv.iter().map(String::as_str).collect::<Vec<_>>())
    }

    #[test]
    fn shipped_investigate_argv_pass() {
        check(CLAUDE).unwrap();
        check(CODEX).unwrap();
    }

    #[test]
    fn equals_forms_and_commas_count_the_same() {
        check(&[
            "/usr/bin/claude",
            "--print",
            "--tools=Read,Grep",
            "--disallowedTools=Write,Edit,NotebookEdit,Bash",
            "--strict-mcp-config",
            "--",
            "{prompt}",
        ])
        .unwrap();
        check(&[
            "codex",
            "exec",
            "-s",
            "read-only",
            "--ignore-user-config",
            "-m",
            "o4",
            "--",
            "{prompt}",
        ])
        .unwrap();
        check(&[
            "codex",
            "exec",
            "--sandbox=read-only",
            "--ignore-user-config",
            "--",
            "{prompt}",
        ])
        .unwrap();
    }

    #[test]
    fn unsafe_claude_tables_are_refused_naming_the_flag() {
        let cases: Vec<(Vec<String>, &str)> = vec![
            (replaced(CLAUDE, "Glob", &["Glob", "Write"]), "\"Write\""),
            (replaced(CLAUDE, "Glob", &["Glob,Bash"]), "\"Bash\""),
            (replaced(CLAUDE, "Bash", &[]), "\"Bash\" is missing"),
            (
                replaced(CLAUDE, "--strict-mcp-config", &[]),
                "--strict-mcp-config",
            ),
            (
                replaced(CLAUDE, "-p", &["-p", "--dangerously-skip-permissions"]),
                "--dangerously-skip-permissions",
            ),
            (
                replaced(CLAUDE, "-p", &["-p", "--permission-mode", "acceptEdits"]),
                "--permission-mode",
            ),
            (replaced(CLAUDE, "-p", &["-p", "--print"]), "twice"),
            (
                replaced(CLAUDE, "--model", &["--model", "x", "--model"]),
                "twice",
            ),
            (replaced(CLAUDE, "--", &[]), "must end with"),
            (replaced(CLAUDE, "haiku", &["{prompt}"]), "before the final"),
            (
                replaced(CLAUDE, "{prompt}", &["{prompt}", "extra"]),
                "must end with",
            ),
        ];
        for (argv, words) in cases {
            let e = check_owned(argv.clone()).unwrap_err();
            assert!(e.contains(words), "{argv:?}: {e}");
            assert!(e.contains("investigate runner \"r\""), "{e}");
        }
        // With --tools gone, the list words that followed are stray words: still refused.
        let no_tools: Vec<String> = CLAUDE
            .iter()
            .enumerate()
            .filter(|(i, _)| !(7..=10).contains(i))
            .map(|(_, s)| s.to_string())
            .collect();
        assert!(
            check_owned(no_tools)
                .unwrap_err()
                .contains("\"--tools\" is missing")
        );
    }

    #[test]
    fn unsafe_codex_tables_are_refused_naming_the_flag() {
        let cases: Vec<(Vec<String>, &str)> = vec![
            (
                replaced(CODEX, "read-only", &["workspace-write"]),
                "read-only",
            ),
            (
                CODEX
                    .iter()
                    .filter(|a| !["--sandbox", "read-only"].contains(a))
                    .map(|s| s.to_string())
                    .collect(),
                "--sandbox read-only\" is missing",
            ),
            (
                replaced(CODEX, "--ignore-user-config", &[]),
                "--ignore-user-config",
            ),
            (replaced(CODEX, "notify=[]", &["mcp_servers={}"]), "-c"),
            (
                replaced(
                    CODEX,
                    "--ephemeral",
                    &["--ephemeral", "--dangerously-bypass-approvals-and-sandbox"],
                ),
                "--dangerously",
            ),
            (
                replaced(CODEX, "--ephemeral", &["--ephemeral", "--full-auto"]),
                "--full-auto",
            ),
            (replaced(CODEX, "exec", &["review"]), "codex exec"),
            (
                replaced(CODEX, "--ephemeral", &["--ephemeral", "-s", "read-only"]),
                "twice",
            ),
        ];
        for (argv, words) in cases {
            let e = check_owned(argv.clone()).unwrap_err();
            assert!(e.contains(words), "{argv:?}: {e}");
        }
    }

    #[test]
    fn other_programs_are_refused() {
        for program in [
            "cursor-agent",
            "sh",
            "/bin/bash",
            "python3",
            "claude-wrapper",
        ] {
            let e = check(&[program, "--", "{prompt}"]).unwrap_err();
            assert!(e.contains("is not allowed"), "{program}: {e}");
        }
    }
}
