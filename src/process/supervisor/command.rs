//! The runner's command as C strings: what a supervisor needs to `posix_spawn` it,
//! built in the judge before any fork.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use crate::process::error::ProcessError;

/// A runner to start: the resolved program, its argv (argv[0] as given), the whole
/// environment (`KEY=value`), the working folder, and whether stdin is a pipe (else
/// /dev/null).
pub(crate) struct Launch<'a> {
    pub program: &'a Path,
    pub argv: &'a [String],
    pub env: Env,
    pub cwd: &'a Path,
    pub stdin_piped: bool,
}

/// A runner's environment as `KEY=value` strings: the part every runner of this
/// process shares, and the attempt's own.
#[derive(Debug, Clone)]
pub(crate) struct Env {
    /// The daemon's inherited variables, read once per process.
    pub shared: Arc<[CString]>,
    /// The attempt's variables; after `codec::decode`, the whole environment.
    pub own: Vec<CString>,
    /// The first this many of `own` (a runner table's `env`) replace shared variables
    /// of the same name; the rest never clash (they are kept out of `shared`).
    pub replacing: usize,
    /// Names of shared variables this runner does not inherit (API keys of the tables).
    pub withheld: Vec<Vec<u8>>,
}

impl Env {
    /// Every variable, shared ones first; a shared one that an own one replaces, or
    /// that is withheld, is left out (one name, one value: which of two a program reads
    /// is its own choice).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &CString> {
        let replacing = &self.own[..self.replacing.min(self.own.len())];
        self.shared
            .iter()
            .filter(move |v| {
                let name = name_of(v);
                !replacing.iter().any(|r| name_of(r) == name)
                    && !self.withheld.iter().any(|w| w.as_slice() == name)
            })
            .chain(&self.own)
    }
}

/// The `KEY` of a `KEY=value` string.
fn name_of(var: &CString) -> &[u8] {
    let bytes = var.as_bytes();
    bytes.split(|b| *b == b'=').next().unwrap_or(bytes)
}

/// The runner's command as C strings, ready for a fork (here or in the zygote).
pub(crate) struct Command {
    pub program: CString,
    pub argv: Vec<CString>,
    pub env: Env,
    pub cwd: CString,
}

impl Command {
    /// The command `launch` describes; an error names a part holding a NUL byte. A
    /// relative `cwd` is made absolute here, against this process's folder, as the
    /// spawn used to resolve it (the supervisor changes its own folder around each
    /// spawn: `posix_spawn.rs`).
    pub(crate) fn of(launch: Launch<'_>) -> Result<Self, ProcessError> {
        let argv = launch
            .argv
            .iter()
            .map(|a| c_string(OsStr::new(a)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Command {
            program: c_string(launch.program.as_os_str())?,
            argv,
            env: launch.env,
            cwd: c_string(
                std::path::absolute(launch.cwd)
                    .unwrap_or_else(|_| launch.cwd.to_path_buf())
                    .as_os_str(),
            )?,
        })
    }
}

fn c_string(s: &OsStr) -> Result<CString, ProcessError> {
    CString::new(s.as_bytes()).map_err(|_| ProcessError::NulByte(s.to_string_lossy().into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_own_variable_replaces_the_shared_one_of_its_name() {
        let c = |s: &str| CString::new(s).unwrap();
        let env = Env {
            shared: Arc::from([c("PATH=/bin"), c("MAX=9"), c("MAXIMUM=1")]),
            own: vec![c("MAX=512"), c("TAG=t")],
            replacing: 1,
            withheld: Vec::new(),
        };
        let all: Vec<&str> = env.iter().map(|v| v.to_str().unwrap()).collect();
        assert_eq!(all, ["PATH=/bin", "MAXIMUM=1", "MAX=512", "TAG=t"]);
        let withheld = Env {
            withheld: vec![b"MAXIMUM".to_vec(), b"PATH".to_vec()],
            ..env.clone()
        };
        let all: Vec<&str> = withheld.iter().map(|v| v.to_str().unwrap()).collect();
        assert_eq!(all, ["MAX=512", "TAG=t"]);
        let plain = Env {
            replacing: 0,
            ..env
        };
        assert_eq!(plain.iter().count(), 5);
    }
}
