//! The property test of the claude rules: whatever argv the allowlist accepts, a
//! model of claude's own option parser (commander) reads as read-only and confined.

use super::claude::{CLAUDE_GRAMMAR, MUST_DENY, READ_TOOLS};
use super::flags::Arity;
use super::tests::{CLAUDE, CONFINED, check_owned, claude};

/// How claude's option parser (commander) reads an argv: a value-taking option
/// takes the next item whatever it is; a variadic one then takes items until one
/// begins with `-`; `--name=value` takes no more; `--` ends the options.
#[derive(Default, Debug)]
struct Commander {
    options: std::collections::HashMap<String, Vec<String>>,
    operands: Vec<String>,
    unknown: bool,
}

fn commander(args: &[String]) -> Commander {
    let mut parsed = Commander::default();
    let mut variadic: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            parsed.operands.extend(args[i..].iter().cloned());
            break;
        }
        let option_like = arg.len() > 1 && arg.starts_with('-');
        if let Some(name) = &variadic
            && !option_like
        {
            parsed
                .options
                .entry(name.clone())
                .or_default()
                .push(arg.clone());
            continue;
        }
        variadic = None;
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        if !option_like {
            parsed.operands.push(arg.clone());
            continue;
        }
        let Some(kind) = (CLAUDE_GRAMMAR.arity)(&name) else {
            parsed.unknown = true;
            continue;
        };
        let entry = parsed.options.entry(name.clone()).or_default();
        match (kind, inline) {
            (Arity::None, _) => {}
            (_, Some(v)) => entry.push(v),
            (_, None) => {
                if let Some(v) = args.get(i) {
                    entry.push(v.clone());
                    i += 1;
                }
                if kind == Arity::List {
                    variadic = Some(name);
                }
            }
        }
    }
    parsed
}

fn tool_names(values: Option<&Vec<String>>) -> Option<Vec<String>> {
    values.map(|vs| {
        vs.iter()
            .flat_map(|v| v.split([',', ' ']))
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    })
}

use proptest::prelude::*;

fn vocabulary() -> impl Strategy<Value = String> {
    let mut words: Vec<String> = [
        "-p",
        "--print",
        "--model",
        "haiku",
        "--settings",
        "{\"disableAllHooks\": true}",
        "--setting-sources",
        "",
        "--system-prompt",
        "Be brief.",
        "--no-session-persistence",
        "--tools",
        "--allowedTools",
        "--disallowedTools",
        "Read",
        "Grep",
        "Glob",
        "Write",
        "Edit",
        "NotebookEdit",
        "Bash",
        "Read,Grep",
        "Write,Edit,NotebookEdit,Bash",
        "--strict-mcp-config",
        "--disable-slash-commands",
        "--output-format",
        "text",
        "--",
        "-",
        "--tools=Read",
        "--tools=",
        "--disallowedTools=Write,Edit,NotebookEdit,Bash",
        "--setting-sources=",
        "{prompt}",
        "--dangerously-skip-permissions",
        "-x",
        "project",
    ]
    .map(str::to_string)
    .to_vec();
    // The shipped confinement, and the same with the root folder opened to reads.
    words.push(CONFINED.clone());
    words.push(CONFINED.replace("\"deny\"", "\"additionalDirectories\": [\"/\"], \"deny\""));
    prop::sample::select(words)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]
    #[test]
    fn whatever_the_check_accepts_claude_parses_as_read_only(
        middle in prop::collection::vec(vocabulary(), 0..24),
        seed_safe in any::<bool>(),
    ) {
        // Half the cases start from the safe argv with hostile items spliced in,
        // so accepted cases are common enough to test.
        let mut args: Vec<String> = if seed_safe {
            let mut base: Vec<String> = claude()[1..CLAUDE.len() - 2].iter().map(|s| s.to_string()).collect();
            let at = middle.len() % (base.len() + 1);
            base.splice(at..at, middle.iter().take(3).cloned());
            base
        } else {
            middle.clone()
        };
        args.push("--".into());
        args.push("{prompt}".into());
        let mut argv = vec!["claude".to_string()];
        argv.extend(args.iter().cloned());
        if check_owned(argv).is_ok() {
            let parsed = commander(&args);
            prop_assert!(!parsed.unknown, "{args:?}");
            prop_assert_eq!(&parsed.operands, &vec!["{prompt}".to_string()], "{:?}", args);
            let tools = tool_names(parsed.options.get("--tools"));
            prop_assert!(tools.as_ref().is_some_and(|t| t.iter().all(|t| READ_TOOLS.contains(&t.as_str()))), "{:?}", args);
            let allowed = tool_names(parsed.options.get("--allowedTools")).unwrap_or_default();
            prop_assert!(allowed.iter().all(|t| READ_TOOLS.contains(&t.as_str())), "{:?}", args);
            let denied = tool_names(parsed.options.get("--disallowedTools")).unwrap_or_default();
            prop_assert!(MUST_DENY.iter().all(|t| denied.iter().any(|d| d == t)), "{:?}", args);
            prop_assert_eq!(parsed.options.get("--setting-sources"), Some(&vec![String::new()]), "{:?}", args);
            prop_assert!(parsed.options.contains_key("--strict-mcp-config"), "{:?}", args);
            if tools.is_some_and(|t| !t.is_empty()) {
                let settings = parsed.options.get("--settings").and_then(|v| v.first());
                let settings: serde_json::Value = settings
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or_default();
                let permissions = &settings["permissions"];
                prop_assert_eq!(&permissions["blockReadsOutsideWorkingDirectories"], true, "{:?}", args);
                let denied = permissions["deny"].as_array().cloned().unwrap_or_default();
                let shipped = crate::core::safety::read_scope::SHIPPED_DENY;
                prop_assert!(shipped.iter().all(|r| denied.contains(&(*r).into())), "{:?}", args);
                let extra = permissions["additionalDirectories"].as_array().cloned().unwrap_or_default();
                prop_assert!(!extra.contains(&"/".into()), "{:?}", args);
            }
        }
    }
}
