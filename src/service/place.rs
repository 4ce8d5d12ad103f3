//! Whether this binary's path may be written into files that outlive the command
//! (`hooks install`, `service install`): `core::install_place` judges the path written
//! and the file it really is (a symlink may lead into a cache); this reads the
//! temporary folder from the environment and says a warning.

use std::path::{Path, PathBuf};

use crate::core::install_place::{Advice, advice, classify, worse};

/// `Err` with the refusal when `bin` lives in a package runner's cache (uvx, pipx run,
/// npx); a warning on stderr when it lives under a temporary folder. `what` names what
/// would run it ("the hooks", "the service").
pub(crate) fn check(bin: &Path, what: &str) -> Result<(), String> {
    match judge(bin, what) {
        Advice::Refuse(why) => Err(why),
        Advice::Warn(why) => {
            say_warn!("llm-judge: warning: {why}");
            Ok(())
        }
        Advice::Fine => Ok(()),
    }
}

/// The advice for `bin` and for the file it resolves to.
pub(crate) fn judge(bin: &Path, what: &str) -> Advice {
    let temp = temp_folders();
    let of = |path: &Path| advice(&classify(path, &temp), path, what);
    let real = std::fs::canonicalize(bin).ok();
    worse(of(bin), real.as_deref().map_or(Advice::Fine, of))
}

/// `$TMPDIR` (as given and resolved, since macOS's is under a symlink).
fn temp_folders() -> Vec<PathBuf> {
    let dir = std::env::temp_dir();
    let real = std::fs::canonicalize(&dir).ok();
    std::iter::once(dir).chain(real).collect()
}
