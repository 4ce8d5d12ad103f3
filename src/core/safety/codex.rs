//! codex's investigate rules: `codex exec` only, its flag grammar, the read-only
//! sandbox, no user config, and `-c`/`--disable` limited to the narrowing keys
//! (`core::safety::keys`).

use super::Unsafe;
use super::flags::{Arity, Flag, Grammar, find, parse_flags, refuse_both_forms};
use crate::core::safety::keys::{CODEX_CONFIG, CODEX_DISABLE};

const CODEX_GRAMMAR: Grammar = Grammar {
    arity: |name| match name {
        "--skip-git-repo-check" | "--ignore-user-config" | "--ephemeral" | "--json" => {
            Some(Arity::None)
        }
        "-m" | "--model" | "--sandbox" | "-s" | "-c" | "--disable" => Some(Arity::One),
        _ => None,
    },
    empty_ok: &[],
    repeatable: &["-c", "--disable"],
};

pub(super) fn check_codex(args: &[String]) -> Result<(), Unsafe> {
    let Some(("exec", rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) else {
        return Err(Unsafe::NotCodexExec);
    };
    let flags = parse_flags(rest, &CODEX_GRAMMAR)?;
    refuse_both_forms(&flags, ["-m", "--model"])?;
    refuse_both_forms(&flags, ["-s", "--sandbox"])?;
    match find(&flags, &["-s", "--sandbox"]) {
        Some(f) if f.values == ["read-only"] => {}
        Some(f) => {
            return Err(Unsafe::Sandbox {
                flag: f.name.into(),
                values: f.owned_values(),
            });
        }
        None => return Err(Unsafe::SandboxMissing),
    }
    only_listed(&flags, "-c", &CODEX_CONFIG, |values| {
        Unsafe::ConfigOverride { values }
    })?;
    only_listed(&flags, "--disable", &CODEX_DISABLE, |values| {
        Unsafe::Disable { values }
    })?;
    if find(&flags, &["--ignore-user-config"]).is_none() {
        return Err(Unsafe::IgnoreUserConfigMissing);
    }
    Ok(())
}

/// Every value of the repeatable `flag` is one of `listed`, each at most once.
fn only_listed(
    flags: &[Flag<'_>],
    flag: &str,
    listed: &[&str],
    refused: fn(Vec<String>) -> Unsafe,
) -> Result<(), Unsafe> {
    let mut seen: Vec<&str> = Vec::new();
    for f in flags.iter().filter(|f| f.name == flag) {
        if f.values.iter().any(|v| !listed.contains(v)) {
            return Err(refused(f.owned_values()));
        }
        if let Some(v) = f.values.iter().find(|v| seen.contains(v)) {
            return Err(Unsafe::ValueTwice {
                flag: flag.into(),
                value: v.to_string(),
            });
        }
        seen.extend(&f.values);
    }
    Ok(())
}
