//! Claim 4: cost per verdict: the request one yes/no question costs.

use super::*;

// 4. Cost per verdict: the request one yes/no question costs.

/// claude's default argv before the slimmer one shipped now: the shipped one without
/// `--setting-sources ""`, `--system-prompt ...` and `--disable-slash-commands`.
fn pre_spec4_claude_argv() -> Vec<&'static str> {
    without(
        pinned::DEFAULT_CLAUDE,
        &[
            ("--setting-sources", 1),
            ("--system-prompt", 1),
            ("--disable-slash-commands", 0),
        ],
    )
}

#[test]
fn cost_of_one_default_verdict() {
    let _s = serial();
    let shipped = describe(
        "claude, shipped default argv",
        &one_default_job(Cli::Claude, None, None),
    );
    let old = describe(
        "claude, pre-slim default argv",
        &one_default_job(Cli::Claude, Some(&pre_spec4_claude_argv()), None),
    );
    record(&format!(
        "claude shipped/pre-slim request bytes: {:.2}",
        shipped as f64 / old as f64
    ));
    assert!(
        shipped < old,
        "the shipped claude argv must send less than the old one"
    );
    // codex: `slim::slim_default_codex_…`.
}
