//! The plan: what `--dry-run` prints is what install does, and the shipped unit and
//! plist are what install writes, with only this machine's values.

use super::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::support::{BIN, NO_HANG};

/// The shipped service files, as a person copies them.
fn shipped(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A plan as `--dry-run` prints it, read back: the files it writes (path, mode,
/// contents), its commands in order (each with whether it only runs on a condition)
/// and its comment lines.
#[derive(Debug, Default)]
struct PrintedPlan {
    files: Vec<(PathBuf, u32, String)>,
    commands: Vec<(String, bool)>,
    comments: Vec<String>,
}

fn read_plan(stdout: &str) -> PrintedPlan {
    let mut plan = PrintedPlan::default();
    let mut lines = stdout.split_inclusive('\n');
    while let Some(raw) = lines.next() {
        let l = raw.trim_end_matches('\n');
        if let Some(path) = l
            .strip_prefix("# would write ")
            .and_then(|p| p.strip_suffix(':'))
        {
            let end = format!("# end of {path} (mode ");
            let mut contents = String::new();
            let mode = loop {
                let raw = lines
                    .next()
                    .unwrap_or_else(|| panic!("no {end:?} line in:\n{stdout}"));
                if let Some(mode) = raw.strip_prefix(&end) {
                    break u32::from_str_radix(mode.trim_end().trim_end_matches(')'), 8).unwrap();
                }
                contents.push_str(raw);
            };
            plan.files.push((PathBuf::from(path), mode, contents));
        } else if let Some(comment) = l.strip_prefix("# ") {
            plan.comments.push(comment.to_string());
        } else if !l.is_empty() {
            let (command, why) = l.split_once("  # ").unwrap_or((l, ""));
            plan.commands
                .push((command.to_string(), why.starts_with("only if")));
        }
    }
    plan
}

/// Recorded calls that change something (the read-only queries left out).
fn changing_calls(w: &Machine) -> Vec<String> {
    w.calls()
        .into_iter()
        .filter(|c| !c.starts_with("loginctl ") && !c.starts_with("launchctl print "))
        .collect()
}

/// Checks that `install` did what `plan` says: the same files with the same contents
/// and modes, the same commands in the same order (conditional ones when `loaded`), the
/// same notes and closing words.
fn assert_carried_out(w: &Machine, plan: &PrintedPlan, loaded: bool, stdout: &str) {
    assert!(!plan.files.is_empty(), "{plan:?}");
    for (path, mode, contents) in &plan.files {
        assert_eq!(
            &fs::read_to_string(path).unwrap(),
            contents,
            "{}",
            path.display()
        );
        assert_eq!(
            fs::metadata(path).unwrap().permissions().mode() & 0o777,
            *mode
        );
    }
    let want: Vec<String> = plan
        .commands
        .iter()
        .filter(|(_, conditional)| loaded || !conditional)
        .map(|(c, _)| c.clone())
        .collect();
    assert_eq!(changing_calls(w), want);
    for comment in &plan.comments {
        let told = comment
            .strip_prefix("then: ")
            .or_else(|| comment.strip_prefix("note: ").map(|_| comment.as_str()))
            .or_else(|| comment.strip_prefix("warning: ").map(|_| comment.as_str()))
            .or_else(|| {
                comment
                    .starts_with("runners on ")
                    .then_some(comment.as_str())
            });
        if let Some(told) = told {
            assert!(
                stdout.lines().any(|l| l == told),
                "{told:?} not told:\n{stdout}"
            );
        }
    }
}

#[test]
fn systemd_dry_run_prints_the_plan_install_carries_out() {
    let w = Machine::new();
    let config = w.root.join("config.toml");
    fs::write(&config, "shutdown_grace_seconds = 40\n").unwrap();
    let service = |args: &[&str]| {
        let mut cmd = w.service("systemd", args);
        cmd.env("XDG_CONFIG_HOME", &w.xdg)
            .env("FAKE_LINGER", "no")
            .arg("--config")
            .arg(&config);
        cmd
    };
    let plan = read_plan(&ok(&run(service(&["install", "--dry-run"]), NO_HANG)));
    assert_eq!(plan.files.len(), 1);
    assert_eq!(plan.files[0].0, w.unit_path());
    assert!(
        plan.comments
            .iter()
            .any(|c| c.starts_with("warning: lingering is off")),
        "{plan:?}"
    );
    assert!(changing_calls(&w).is_empty());
    let stdout = ok(&run(service(&["install"]), NO_HANG));
    assert_carried_out(&w, &plan, true, &stdout);

    // Uninstall as well.
    w.clear_calls();
    let plan = read_plan(&ok(&run(service(&["uninstall", "--dry-run"]), NO_HANG)));
    assert!(w.unit_path().exists());
    let stdout = ok(&run(service(&["uninstall"]), NO_HANG));
    assert!(!w.unit_path().exists());
    let want: Vec<String> = plan.commands.iter().map(|(c, _)| c.clone()).collect();
    assert_eq!(changing_calls(&w), want);
    assert!(
        plan.comments
            .iter()
            .any(|c| *c == format!("would remove {}", w.unit_path().display())),
        "{plan:?}"
    );
    assert!(stdout.contains("removed "), "{stdout}");
}

#[test]
fn launchd_dry_run_prints_the_plan_install_carries_out() {
    let w = Machine::new();
    // Not loaded yet: the conditional bootout is skipped.
    let plan = read_plan(&ok(&run(
        w.service("launchd", &["install", "--dry-run"]),
        NO_HANG,
    )));
    assert_eq!(plan.files.len(), 1);
    assert_eq!(plan.files[0].0, w.plist_path());
    assert_eq!(plan.commands.iter().filter(|(_, c)| *c).count(), 1);
    let stdout = ok(&run(w.service("launchd", &["install"]), NO_HANG));
    assert_carried_out(&w, &plan, false, &stdout);

    // Loaded now: the same plan, and this time the bootout runs.
    w.clear_calls();
    let again = read_plan(&ok(&run(
        w.service("launchd", &["install", "--dry-run"]),
        NO_HANG,
    )));
    assert_eq!(again.commands, plan.commands);
    let stdout = ok(&run(w.service("launchd", &["install"]), NO_HANG));
    assert_carried_out(&w, &again, true, &stdout);
}

#[test]
fn the_shipped_unit_and_plist_are_valid_as_they_are() {
    let w = Machine::new();
    // The unit names %h/.cargo/bin/llm-judge, where `cargo install` puts the binary.
    let bin_dir = w.home.join(".cargo/bin");
    fs::create_dir_all(&bin_dir).unwrap();
    fs::copy(BIN, bin_dir.join("llm-judge")).unwrap();
    let copy = w.root.join("copied").join(UNIT);
    fs::create_dir_all(copy.parent().unwrap()).unwrap();
    fs::copy(shipped("systemd/llm-judge.service"), &copy).unwrap();
    systemd_verify(&w, &copy);
    let unit = fs::read_to_string(&copy).unwrap();
    for want in [
        "Type=notify",
        "KillMode=mixed",
        "Restart=on-failure",
        "WatchdogSec=30s",
        "ExecStart=%h/.cargo/bin/llm-judge daemon",
        "TimeoutStopSec=45s",
    ] {
        assert!(unit.lines().any(|l| l == want), "{want} missing");
    }
    assert!(line(&unit, "Environment=\"PATH=").contains("/usr/bin:/bin"));

    let plist_path = shipped("launchd/com.catstack.llm-judge.plist");
    if let Some(plist) = parse_plist(&plist_path) {
        assert_eq!(plist["Label"], LABEL);
        assert_eq!(
            plist["ProgramArguments"],
            json!(["/Users/you/.cargo/bin/llm-judge", "daemon"])
        );
        assert_eq!(plist["RunAtLoad"], true);
        assert_eq!(plist["KeepAlive"], json!({"SuccessfulExit": false}));
        // Integers, not strings or placeholders.
        assert_eq!(plist["ThrottleInterval"], json!(10));
        assert_eq!(plist["ExitTimeOut"], json!(45));
        assert_eq!(plist["ProcessType"], "Standard");
        assert!(
            plist["EnvironmentVariables"]["PATH"]
                .as_str()
                .unwrap()
                .ends_with(":/usr/bin:/bin")
        );
        assert_eq!(
            plist["StandardErrorPath"],
            "/Users/you/.cache/catstack-llm-judge/launchd.log"
        );
    }
    if let Some(plutil) = find_program("plutil") {
        let mut cmd = Command::new(plutil);
        cmd.arg("-lint").arg(&plist_path);
        ok(&run(cmd, NO_HANG));
    }
}

/// The lines of `a` and `b` (same count) that differ, as pairs.
fn changed_lines<'a>(a: &'a str, b: &'a str) -> Vec<(&'a str, &'a str)> {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    assert_eq!(a.len(), b.len(), "different line counts");
    a.into_iter().zip(b).filter(|(x, y)| x != y).collect()
}

#[test]
fn install_writes_the_shipped_files_with_only_this_machines_values() {
    let w = Machine::new();
    let config = w.root.join("config.toml");
    fs::write(&config, "shutdown_grace_seconds = 40\n").unwrap();
    let mut cmd = w.service("systemd", &["install"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_LINGER", "yes")
        .arg("--config")
        .arg(&config);
    ok(&run(cmd, NO_HANG));
    let shipped_unit = fs::read_to_string(shipped("systemd/llm-judge.service")).unwrap();
    let unit = fs::read_to_string(w.unit_path()).unwrap();
    let changed = changed_lines(&shipped_unit, &unit);
    let (path, _) = service_path_of(&w, "systemd");
    assert_eq!(
        changed,
        [
            (
                "ExecStart=%h/.cargo/bin/llm-judge daemon",
                format!(
                    "ExecStart={} \"daemon\" \"--state-dir\" {} \"--config\" {}",
                    quoted(&bin()),
                    quoted(w.state.to_str().unwrap()),
                    quoted(config.to_str().unwrap())
                )
                .as_str()
            ),
            (
                line(&shipped_unit, "Environment=\"PATH="),
                format!(
                    "Environment={}",
                    quoted(&format!("PATH={path}")).replace("$$", "$")
                )
                .as_str()
            ),
            ("TimeoutStopSec=45s", "TimeoutStopSec=70s"),
        ]
    );

    ok(&run(w.service("launchd", &["install"]), NO_HANG));
    let shipped_plist =
        fs::read_to_string(shipped("launchd/com.catstack.llm-judge.plist")).unwrap();
    let plist = fs::read_to_string(w.plist_path()).unwrap();
    // The ProgramArguments array may change length: compare around it.
    let split = |text: &str| -> (String, Vec<String>) {
        let start = text.find("<key>ProgramArguments</key>").unwrap();
        let end = start + text[start..].find("</array>").unwrap();
        let args = text[start..end]
            .lines()
            .filter_map(|l| l.trim().strip_prefix("<string>"))
            .filter_map(|l| l.strip_suffix("</string>"))
            .map(String::from)
            .collect();
        (format!("{}{}", &text[..start], &text[end..]), args)
    };
    let (shipped_rest, shipped_args) = split(&shipped_plist);
    let (rest, args) = split(&plist);
    assert_eq!(shipped_args, ["/Users/you/.cargo/bin/llm-judge", "daemon"]);
    assert_eq!(
        args,
        [
            bin().as_str(),
            "daemon",
            "--state-dir",
            w.state.to_str().unwrap()
        ]
    );
    let (path, _) = service_path_of(&w, "launchd");
    let log = format!("{}/launchd.log", w.state.display());
    let tag = |s: &str| format!("<string>{s}</string>");
    let changed: Vec<(String, String)> = changed_lines(&shipped_rest, &rest)
        .into_iter()
        .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
        .collect();
    assert_eq!(
        changed,
        [
            (
                tag("/Users/you/.local/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin"),
                tag(&path)
            ),
            (
                tag("/Users/you/.cache/catstack-llm-judge/launchd.log"),
                tag(&log)
            ),
            (
                tag("/Users/you/.cache/catstack-llm-judge/launchd.log"),
                tag(&log)
            ),
        ],
        "ExitTimeOut stays 45 with the default graces"
    );
}

/// The service `PATH` that install gives with this test's environment, per its dry run.
fn service_path_of(w: &Machine, manager: &str) -> (String, String) {
    let mut cmd = w.service(manager, &["install", "--dry-run"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg).env("FAKE_LINGER", "yes");
    let stdout = ok(&run(cmd, NO_HANG));
    let path = match manager {
        "systemd" => line(&stdout, "Environment=\"PATH=")
            .trim_start_matches("Environment=\"PATH=")
            .trim_end_matches('"')
            .to_string(),
        _ => {
            let at = stdout.find("<key>PATH</key>").unwrap();
            let value = stdout[at..].lines().nth(1).unwrap().trim();
            value
                .trim_start_matches("<string>")
                .trim_end_matches("</string>")
                .to_string()
        }
    };
    (path, stdout)
}
