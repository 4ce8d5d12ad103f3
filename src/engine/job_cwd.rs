//! Where a job's runners work (the job's `cwd` key): its folder when that is an
//! existing absolute folder that is safe to give, else a fresh empty folder per runner
//! with the reason. Claude's read confinement is relative to its working folder, so
//! `/`, `$HOME`, a folder above `$HOME`, and the judge's own folders are never given
//! (`core::safety::read_scope::cwd_refusal`). Checked once when the job is read, and logged
//! then, so a job answered from the cache or by an identical running job leaves the
//! same trace as one that starts runners.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::core::config::Settings;
use crate::core::job::Job;
use crate::core::safety::read_scope::cwd_refusal;
use crate::store::state_dir::StateDir;

/// Where the runners of a job work.
#[derive(Debug, Clone, PartialEq)]
pub enum CwdChoice {
    /// The job's own folder (canonical: symlinks resolved).
    Given(PathBuf),
    /// A fresh empty temp folder per runner; `refused` says why the job's was not used.
    Temp { refused: Option<String> },
}

impl CwdChoice {
    /// Why the job's own folder was refused, if it was.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            CwdChoice::Temp { refused } => refused.as_deref(),
            CwdChoice::Given(_) => None,
        }
    }
}

/// The folders a job's cwd must not be, nor hold: `$HOME` (and `/`), and the judge's
/// own folders (the state folder, the private runner folder in `$XDG_RUNTIME_DIR`).
#[derive(Debug, Clone, Default)]
pub struct Fences {
    home: Option<PathBuf>,
    judge: Vec<PathBuf>,
}

impl Fences {
    /// The fences of `settings` and this process's `$HOME`.
    pub fn of(settings: &Settings) -> Self {
        let state = StateDir::new(&settings.state_dir);
        let mut judge = vec![settings.state_dir.clone()];
        if let Some(runtime) = settings.runtime_dir.as_deref() {
            judge.push(state.runner_tmp(Some(runtime)));
        }
        Fences {
            home: std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_absolute()),
            judge,
        }
    }
}

/// How long the cwd check may take. It runs on a blocking thread: a job's folder on a
/// hung file system (a FUSE mount whose `stat` never returns) must not stall the slot
/// thread other jobs run on; past this the cwd is refused and the job goes on.
const CWD_CHECK_LIMIT: Duration = Duration::from_secs(5);

/// The cwd of `job`'s runners, checked once; a refusal is logged here, when the job is
/// read, whatever answers it later (runners, the cache, an identical running job).
pub async fn job_cwd(settings: &Settings, job: &Job) -> CwdChoice {
    let cwd = match &job.cwd {
        // Only a path is checked against the fences: most jobs give none, and their
        // fences (paths hashed from the settings) would be made for nothing.
        Some(Value::String(_)) => choose_cwd_bounded(job.cwd.as_ref(), Fences::of(settings)).await,
        other => choose_cwd(other.as_ref(), &Fences::default()),
    };
    if let Some(why) = cwd.refusal() {
        tracing::warn!("cwd refused, using a fresh temp folder: {why}");
    }
    cwd
}

/// `choose_cwd` off the async threads, bounded by `CWD_CHECK_LIMIT`.
pub async fn choose_cwd_bounded(value: Option<&Value>, fences: Fences) -> CwdChoice {
    let Some(Value::String(s)) = value else {
        return choose_cwd(value, &fences);
    };
    let owned = Value::String(s.clone());
    let check = tokio::task::spawn_blocking(move || choose_cwd(Some(&owned), &fences));
    match tokio::time::timeout(CWD_CHECK_LIMIT, check).await {
        Ok(Ok(choice)) => choice,
        Ok(Err(e)) => CwdChoice::Temp {
            refused: Some(format!("cwd {s:?} could not be checked: {e}")),
        },
        Err(_) => CwdChoice::Temp {
            refused: Some(format!(
                "cwd {s:?} did not answer within {}s (a hung file system?)",
                CWD_CHECK_LIMIT.as_secs()
            )),
        },
    }
}

/// Applies the `cwd` rule: an absolute path to an existing folder, compared with its
/// symlinks resolved (a link to `$HOME` is `$HOME`).
pub fn choose_cwd(value: Option<&Value>, fences: &Fences) -> CwdChoice {
    let refuse = |why: String| CwdChoice::Temp { refused: Some(why) };
    match value {
        None | Some(Value::Null) => CwdChoice::Temp { refused: None },
        Some(Value::String(s)) => {
            let path = Path::new(s);
            crate::support::failpoint::hang_on(path);
            if !path.is_absolute() {
                return refuse(format!("cwd {s:?} is not an absolute path"));
            }
            let real = match std::fs::canonicalize(path) {
                Ok(real) if real.is_dir() => real,
                Ok(_) => return refuse(format!("cwd {s:?} is not a folder")),
                Err(_) if path.exists() => {
                    return refuse(format!("cwd {s:?} cannot be resolved"));
                }
                Err(_) => return refuse(format!("cwd {s:?} does not exist")),
            };
            match fenced(&real, fences) {
                Some(what) => {
                    let resolved = match real.as_os_str() == path.as_os_str() {
                        true => String::new(),
                        false => format!(" (it resolves to {:?})", real.display().to_string()),
                    };
                    refuse(format!(
                        "cwd {s:?}{resolved} is {what}: read confinement is relative to \
                         the cwd, so it would confine nothing"
                    ))
                }
                None => CwdChoice::Given(real),
            }
        }
        Some(other) => refuse(format!(
            "cwd is a {}, not a string",
            crate::core::job::json_type(other)
        )),
    }
}

/// What `real` (canonical) is among the fences, if it is one of them or holds one.
fn fenced(real: &Path, fences: &Fences) -> Option<&'static str> {
    let resolve = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
    let home = fences.home.as_ref().map(resolve);
    let judge: Vec<PathBuf> = fences.judge.iter().map(resolve).collect();
    let judge: Vec<&Path> = judge.iter().map(PathBuf::as_path).collect();
    cwd_refusal(real, home.as_deref(), &judge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_rules() {
        let s = |v: &str| Some(Value::String(v.into()));
        let none = Fences::default();
        assert_eq!(choose_cwd(None, &none), CwdChoice::Temp { refused: None });
        assert_eq!(
            choose_cwd(Some(&Value::Null), &none),
            CwdChoice::Temp { refused: None }
        );
        let refused = |v: Option<Value>, fences: &Fences| match choose_cwd(v.as_ref(), fences) {
            CwdChoice::Temp { refused: Some(why) } => why,
            other => panic!("{other:?}"),
        };
        assert!(refused(s("relative"), &none).contains("not an absolute path"));
        assert!(refused(s("/no/such/dir/x"), &none).contains("does not exist"));
        assert!(refused(s("/etc/hostname"), &none).contains("not a folder"));
        assert!(refused(Some(Value::Bool(true)), &none).contains("a boolean, not a string"));
        assert!(refused(s("/"), &none).contains("is the root folder"));
    }

    #[test]
    fn home_above_home_and_the_state_folder_are_refused_also_through_symlinks() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let home = root.join("home/u");
        let state = home.join(".cache/judge");
        let project = home.join("project");
        for d in [&state, &project] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::os::unix::fs::symlink(&home, root.join("to-home")).unwrap();
        let fences = Fences {
            home: Some(home.clone()),
            judge: vec![state.clone()],
        };
        let why = |p: &Path| {
            let v = Value::String(p.display().to_string());
            choose_cwd(Some(&v), &fences).refusal().map(str::to_string)
        };
        assert!(why(&home).unwrap().contains("is the home folder ($HOME)"));
        let linked = why(&root.join("to-home")).unwrap();
        assert!(
            linked.contains("is the home folder") && linked.contains("resolves to"),
            "{linked}"
        );
        assert!(
            why(&root.join("home"))
                .unwrap()
                .contains("above the home folder")
        );
        assert!(why(&root).unwrap().contains("above the home folder"));
        assert!(why(&state).unwrap().contains("state folder"));
        assert!(
            why(&state.join("..").join("judge"))
                .unwrap()
                .contains("state folder")
        );
        let v = Value::String(project.display().to_string());
        assert_eq!(choose_cwd(Some(&v), &fences), CwdChoice::Given(project));
        let via_link = Value::String(root.join("to-home/project").display().to_string());
        assert_eq!(
            choose_cwd(Some(&via_link), &fences),
            CwdChoice::Given(home.join("project")),
            "a folder given through a symlink is given resolved"
        );
    }
}
