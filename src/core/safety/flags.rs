//! How an investigate argv is read, for both programs: the required final
//! `-- {prompt}`, and the flags before it parsed by a program's `Grammar` (which flags
//! it knows, what values each takes). Refusals are `Unsafe`.

use super::Unsafe;
use crate::core::runner::PROMPT_SLOT;

/// Splits off the required trailing `-- {prompt}` and refuses any other prompt slot.
pub(super) fn args_before_prompt(args: &[String]) -> Result<&[String], Unsafe> {
    let n = args.len();
    if n < 2 || args[n - 2] != "--" || args[n - 1] != PROMPT_SLOT {
        return Err(Unsafe::NoFinalPrompt);
    }
    let head = &args[..n - 2];
    if head.iter().any(|a| a == PROMPT_SLOT || a == "--") {
        return Err(Unsafe::EarlyPrompt);
    }
    Ok(head)
}

/// One parsed flag: its name and its values.
pub(super) struct Flag<'a> {
    pub(super) name: &'a str,
    pub(super) values: Vec<&'a str>,
}

impl Flag<'_> {
    pub(super) fn owned_values(&self) -> Vec<String> {
        self.values.iter().map(|v| v.to_string()).collect()
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Arity {
    None,
    One,
    List,
}

/// How a program's flags take values: the arity of each allowed flag, the flags where
/// an empty value means "none" (the only place an empty value is safe), and the flags
/// that may be given more than once (each value is then checked on its own).
pub(super) struct Grammar {
    pub(super) arity: fn(&str) -> Option<Arity>,
    pub(super) empty_ok: &'static [&'static str],
    pub(super) repeatable: &'static [&'static str],
}

/// Parses flags with `--flag=value` forms. Every flag that takes values gets at least
/// one, and none may begin with `-`: claude's parser takes the next item as a value
/// whatever it looks like, so `--tools --disallowedTools ...` would hand claude the
/// deny list as its tools. A list runs until the next item that begins with `-`.
pub(super) fn parse_flags<'a>(
    args: &'a [String],
    grammar: &Grammar,
) -> Result<Vec<Flag<'a>>, Unsafe> {
    let mut flags: Vec<Flag<'a>> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let item = args[i].as_str();
        let (name, inline) = match item.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (item, None),
        };
        let kind = (grammar.arity)(name).ok_or_else(|| Unsafe::FlagNotAllowed {
            item: item.to_string(),
        })?;
        if !grammar.repeatable.contains(&name) && flags.iter().any(|f| f.name == name) {
            return Err(Unsafe::FlagTwice { flag: name.into() });
        }
        i += 1;
        let mut values: Vec<&str> = inline.into_iter().collect();
        match kind {
            Arity::None if inline.is_some() => {
                return Err(Unsafe::TakesNoValue { flag: name.into() });
            }
            Arity::None => {}
            Arity::One if inline.is_none() => {
                if let Some(v) = args.get(i) {
                    values.push(v);
                    i += 1;
                }
            }
            Arity::List if inline.is_none() => {
                if let Some(v) = args.get(i) {
                    values.push(v);
                    i += 1;
                }
                while let Some(v) = args.get(i).filter(|v| !v.starts_with('-')) {
                    values.push(v);
                    i += 1;
                }
            }
            Arity::One | Arity::List => {}
        }
        if kind != Arity::None {
            check_values(name, &values, grammar.empty_ok.contains(&name))?;
        }
        flags.push(Flag { name, values });
    }
    Ok(flags)
}

fn check_values(name: &str, values: &[&str], empty_ok: bool) -> Result<(), Unsafe> {
    let flag = name.to_string();
    if values.is_empty() {
        return Err(Unsafe::NeedsValue { flag });
    }
    if let Some(v) = values.iter().find(|v| v.starts_with('-')) {
        let value = v.to_string();
        return Err(Unsafe::DashValue { flag, value });
    }
    if !empty_ok && values.iter().any(|v| v.is_empty()) {
        return Err(Unsafe::EmptyValue { flag });
    }
    Ok(())
}

/// Tool names of a list flag, space- or comma-separated.
pub(super) fn tools<'a>(flag: &Flag<'a>) -> Vec<&'a str> {
    flag.values
        .iter()
        .flat_map(|v| v.split([',', ' ']))
        .filter(|t| !t.is_empty())
        .collect()
}

pub(super) fn find<'f, 'a>(flags: &'f [Flag<'a>], names: &[&str]) -> Option<&'f Flag<'a>> {
    flags.iter().find(|f| names.contains(&f.name))
}

/// Refuses a short and a long form of the same flag together (`pair`: short, long).
pub(super) fn refuse_both_forms(flags: &[Flag<'_>], pair: [&str; 2]) -> Result<(), Unsafe> {
    if find(flags, &[pair[0]]).is_some() && find(flags, &[pair[1]]).is_some() {
        return Err(Unsafe::FlagTwiceAs {
            flag: pair[1].into(),
            short: pair[0].into(),
        });
    }
    Ok(())
}
