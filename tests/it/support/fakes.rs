//! Fake runners and programs. A fake runner is a `/bin/sh` script run as
//! `/bin/sh <script> {prompt}` (never exec'd itself, so never "Text file busy"); a
//! fake program is an executable named like a real CLI, written and then probed until
//! it can be exec'd. Both see the world's folder as `$W` and get the pid functions.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::{NO_HANG, PID_FUNCTIONS, World, nul_items, s, wait_child};

/// Set in a fake program's environment to make it exit 0 at once (the probe of
/// [`install_exe`]).
pub const PROBE_VAR: &str = "FAKE_PROBE";

/// Shell that prints one answer line.
pub fn answer(json_line: &str) -> String {
    format!("echo '{json_line}'")
}

/// Shell for a fake runner the test holds: runs `first`, waits until the test calls
/// [`World::collect_output`], then answers `json_line`.
pub fn held(first: &str, json_line: &str) -> String {
    format!(
        "{first}\nwhile [ ! -e $W/go ]; do sleep 0.02; done\n{}",
        answer(json_line)
    )
}

impl World {
    /// Writes `scripts/<name>` (a `/bin/sh` script, not executable).
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.scripts.join(name);
        self.write_script(&path, body);
        path
    }

    /// A fake runner `bin/<name>.sh` running `body`; returns its override entry.
    pub fn runner(&self, name: &str, body: &str) -> Value {
        let script = self.bin.join(format!("{name}.sh"));
        self.write_script(&script, body);
        json!([name, ["/bin/sh", s(&script), "{prompt}"]])
    }

    fn write_script(&self, path: &Path, body: &str) {
        let text = format!("#!/bin/sh\nW={}\n{PID_FUNCTIONS}{body}\n", s(&self.root));
        fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    /// Lets every runner written with [`held`] answer.
    pub fn collect_output(&self) {
        fs::write(self.path("go"), "").expect("write go");
    }

    /// An executable fake program `bin/<name>` running `body` (see [`install_exe`]).
    pub fn fake_program(&self, name: &str, body: &str) -> PathBuf {
        let path = self.bin.join(name);
        install_exe(&path, body);
        path
    }

    /// Shell lines recording how the script was started, into
    /// `rec/<basename of $0>/`: `arg0`, `argv` (the arguments after `$0`, each
    /// ending in NUL), `pwd`, `ls` (`ls -A` of the working folder), `mode`, `env`
    /// (NUL separated) and `stdin` (what fd 0 points at).
    pub fn recorder(&self) -> String {
        format!(
            r#"rec='{}'/$(basename "$0")
mkdir -p "$rec"
printf '%s' "$0" > "$rec/arg0"
printf '%s\0' "$@" > "$rec/argv"
pwd > "$rec/pwd"
ls -A > "$rec/ls"
stat -c %a . > "$rec/mode"
read -r hp _ < /proc/self/stat; cat /proc/$hp/environ > "$rec/env"
readlink /proc/self/fd/0 > "$rec/stdin"
"#,
            s(&self.rec)
        )
    }

    /// A file a fake recorded, as text (panics when missing).
    pub fn recorded(&self, program: &str, what: &str) -> String {
        let path = self.rec.join(program).join(what);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The arguments after `$0` a fake recorded.
    pub fn recorded_argv(&self, program: &str) -> Vec<String> {
        nul_items(self.recorded(program, "argv").as_bytes())
    }

    /// The environment a fake recorded.
    pub fn recorded_env(&self, program: &str) -> Vec<String> {
        nul_items(self.recorded(program, "env").as_bytes())
    }
}

/// Writes an executable `/bin/sh` program at `path` that exits 0 at once when
/// [`PROBE_VAR`] is set and otherwise runs `body`, then probes it until exec no
/// longer fails with "Text file busy" (ETXTBSY): another test thread may have forked
/// while the file was open for writing, and its child holds the write handle until it
/// execs. Once one exec gets past that check no process holds such a handle any more.
pub fn install_exe(path: &Path, body: &str) {
    let folder = path.parent().expect("a file in a folder");
    fs::create_dir_all(folder).expect("create the fake's folder");
    let temp = path.with_extension("tmp-install");
    fs::write(
        &temp,
        format!("#!/bin/sh\n[ -n \"${PROBE_VAR}\" ] && exit 0\n{body}\n"),
    )
    .expect("write fake program");
    fs::set_permissions(&temp, fs::Permissions::from_mode(0o755)).expect("chmod fake");
    fs::rename(&temp, path).expect("install fake program");
    settle(path);
}

/// Runs the probe of [`install_exe`] until exec no longer fails with ETXTBSY.
pub fn settle(path: &Path) {
    for _ in 0..500 {
        let spawned = Command::new(path)
            .env(PROBE_VAR, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            // Another failure is the test's to see when the judge runs it.
            Err(_) => return,
            Ok(mut probe) => {
                assert!(
                    wait_child(&mut probe, NO_HANG).is_some(),
                    "the probe of {} hung",
                    path.display()
                );
                return;
            }
        }
    }
    panic!("{} stayed busy (ETXTBSY) for 500 tries", path.display());
}
