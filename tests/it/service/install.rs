//! `service install / uninstall` against the fake managers: the unit and plist
//! written, enabled and loaded, and reversed.

use super::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::support::NO_HANG;

#[test]
fn dry_run_prints_the_unit_and_the_calls_and_changes_nothing() {
    let w = Machine::new();
    let mut cmd = w.service("systemd", &["install", "--dry-run"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg).env("FAKE_LINGER", "no");
    let stdout = ok(&run(cmd, NO_HANG));
    assert!(
        stdout.contains(&format!("# would write {}:\n", w.unit_path().display())),
        "{stdout}"
    );
    assert_eq!(
        line(&stdout, "ExecStart="),
        format!(
            "ExecStart={} \"daemon\" \"--state-dir\" {}",
            quoted(&bin()),
            quoted(w.state.to_str().unwrap())
        )
    );
    assert!(
        line(&stdout, "Environment=").starts_with(&format!("Environment=\"PATH={}:", w.path()))
    );
    for call in [
        "systemctl --user daemon-reload",
        "systemctl --user enable llm-judge.service",
        "systemctl --user restart llm-judge.service",
    ] {
        assert!(
            stdout.lines().any(|l| l == call),
            "{call} missing:\n{stdout}"
        );
    }
    assert!(stdout.contains("lingering is off for tester"), "{stdout}");
    assert!(stdout.contains("loginctl enable-linger tester"), "{stdout}");
    // Nothing written, created or started.
    assert!(!w.unit_path().exists());
    assert!(!w.state.exists());
    assert!(w.calls_of("systemctl").is_empty(), "{:?}", w.calls());

    // The plist too, and it parses.
    let stdout = ok(&run(
        w.service("launchd", &["install", "--dry-run"]),
        NO_HANG,
    ));
    let start = stdout.find("<?xml").unwrap();
    let end = stdout.find("</plist>\n").unwrap() + "</plist>\n".len();
    let printed = w.root.join("printed.plist");
    fs::write(&printed, &stdout[start..end]).unwrap();
    if let Some(plist) = parse_plist(&printed) {
        assert_eq!(plist["Label"], LABEL);
    }
    assert!(
        stdout.contains(&format!(
            "launchctl bootstrap gui/{} {}",
            uid(),
            w.plist_path().display()
        )),
        "{stdout}"
    );
    assert!(!w.plist_path().exists());
    assert!(w.calls_of("launchctl").is_empty(), "{:?}", w.calls());
}

#[test]
fn systemd_install_writes_the_unit_and_enables_it_then_uninstall_reverses_it() {
    let w = Machine::new();
    let config = w.root.join("my config.toml");
    fs::write(&config, "fsync = false\nshutdown_grace_seconds = 40\n").unwrap();

    let mut cmd = w.service("systemd", &["install"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_LINGER", "no")
        .arg("--config")
        .arg(&config);
    let stdout = ok(&run(cmd, NO_HANG));
    assert_eq!(
        w.calls_of("systemctl"),
        [
            "systemctl --user daemon-reload",
            "systemctl --user enable llm-judge.service",
            "systemctl --user restart llm-judge.service",
        ]
    );
    assert!(stdout.contains("lingering is off for tester"), "{stdout}");
    let unit_path = w.unit_path();
    let unit = fs::read_to_string(&unit_path).unwrap();
    assert_eq!(
        fs::metadata(&unit_path).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert_eq!(
        line(&unit, "ExecStart="),
        format!(
            "ExecStart={} \"daemon\" \"--state-dir\" {} \"--config\" {}",
            quoted(&bin()),
            quoted(w.state.to_str().unwrap()),
            quoted(config.to_str().unwrap())
        )
    );
    let path = line(&unit, "Environment=\"PATH=");
    assert!(
        path.starts_with(&format!("Environment=\"PATH={}:", w.path())),
        "{path}"
    );
    assert!(
        path.contains(&format!(":{}/.local/bin", w.home.display())),
        "{path}"
    );
    // Above the configured drain grace of 40 s.
    assert_eq!(line(&unit, "TimeoutStopSec="), "TimeoutStopSec=70s");
    for want in [
        "Type=notify",
        "KillMode=mixed",
        "Restart=on-failure",
        "WatchdogSec=30s",
    ] {
        assert!(unit.lines().any(|l| l == want), "{want} missing");
    }
    // The state folder exists and is private, so the service can start.
    assert_eq!(
        fs::metadata(&w.state).unwrap().permissions().mode() & 0o777,
        0o700
    );
    systemd_verify(&w, &unit_path);

    // A reinstall with lingering on replaces the unit and restarts the service.
    w.clear_calls();
    let mut cmd = w.service("systemd", &["install"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg).env("FAKE_LINGER", "yes");
    let stdout = ok(&run(cmd, NO_HANG));
    assert!(
        stdout.contains(&format!("replaced {}", unit_path.display())),
        "{stdout}"
    );
    assert!(!stdout.contains("lingering"), "{stdout}");
    assert!(!line(&fs::read_to_string(&unit_path).unwrap(), "ExecStart=").contains("--config"));
    assert_eq!(w.calls_of("systemctl").len(), 3);

    // status passes on what systemctl says.
    w.clear_calls();
    let mut cmd = w.service("systemd", &["status"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_LINGER", "yes")
        .env("UNIT_STATE", "active (running)");
    let stdout = ok(&run(cmd, NO_HANG));
    assert!(stdout.contains("fake: active (running)"), "{stdout}");
    assert_eq!(
        w.calls_of("systemctl"),
        ["systemctl --user status llm-judge.service --no-pager --lines=10"]
    );
    let mut cmd = w.service("systemd", &["status"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_LINGER", "yes")
        .env("FAKE_STATUS_RC", "3");
    let out = run(cmd, NO_HANG);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).0.contains("is not running"));

    // uninstall --dry-run changes nothing; uninstall stops, disables and removes.
    w.clear_calls();
    let mut cmd = w.service("systemd", &["uninstall", "--dry-run"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg);
    let stdout = ok(&run(cmd, NO_HANG));
    assert!(
        stdout.contains("systemctl --user disable --now llm-judge.service"),
        "{stdout}"
    );
    assert!(unit_path.exists());
    assert!(w.calls().is_empty(), "{:?}", w.calls());
    let mut cmd = w.service("systemd", &["uninstall"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg);
    ok(&run(cmd, NO_HANG));
    assert!(!unit_path.exists());
    assert_eq!(
        w.calls_of("systemctl"),
        [
            "systemctl --user disable --now llm-judge.service",
            "systemctl --user daemon-reload",
            "systemctl --user reset-failed llm-judge.service",
        ]
    );
    assert!(w.state.exists(), "uninstall keeps the state folder");
    // Again: nothing to do, still fine.
    let mut cmd = w.service("systemd", &["uninstall"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg);
    assert!(ok(&run(cmd, NO_HANG)).contains("not installed"));
}

#[test]
fn systemd_unit_goes_under_home_without_xdg_config_home() {
    let w = Machine::new();
    let out = run(w.service("systemd", &["install"]), NO_HANG);
    let stdout = ok(&out);
    let unit = w.home.join(".config/systemd/user").join(UNIT);
    assert!(unit.is_file(), "{stdout}");
    assert!(!w.unit_path().exists());
    // loginctl failed: say that lingering is unknown, and how to turn it on.
    assert!(
        stdout.contains("cannot tell whether lingering is on for tester"),
        "{stdout}"
    );
}

#[test]
fn a_failing_systemctl_fails_the_install_and_says_where_to_look() {
    let w = Machine::new();
    let mut cmd = w.service("systemd", &["install"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_SYSTEMCTL_RC", "1");
    let out = run(cmd, NO_HANG);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("`systemctl --user daemon-reload` failed (exit 1)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("journalctl --user -u llm-judge"),
        "{stderr}"
    );
}

#[test]
fn launchd_install_writes_a_plist_a_plist_parser_accepts_then_uninstall_reverses_it() {
    let w = Machine::new();
    let out = run(w.service("launchd", &["install"]), NO_HANG);
    ok(&out);
    let plist_path = w.plist_path();
    let domain = format!("gui/{}", uid());
    let service = format!("{domain}/{LABEL}");
    assert_eq!(
        w.calls(),
        [
            format!("launchctl print {service}"),
            format!("launchctl enable {service}"),
            format!("launchctl bootstrap {domain} {}", plist_path.display()),
        ]
    );
    assert_eq!(
        fs::metadata(&plist_path).unwrap().permissions().mode() & 0o777,
        0o644
    );
    if let Some(plist) = parse_plist(&plist_path) {
        let state = w.state.to_str().unwrap();
        assert_eq!(plist["Label"], LABEL);
        assert_eq!(
            plist["ProgramArguments"],
            json!([bin(), "daemon", "--state-dir", state])
        );
        assert_eq!(plist["RunAtLoad"], true);
        // Restart after a crash or failed exit, not after a clean exit.
        assert_eq!(plist["KeepAlive"], json!({"SuccessfulExit": false}));
        assert!(plist["ThrottleInterval"].as_u64().unwrap() >= 5);
        // Above the default drain grace (15 s) and kill grace (5 s).
        assert!(plist["ExitTimeOut"].as_u64().unwrap() > 20, "{plist}");
        assert!(
            ["Standard", "Background", "Adaptive", "Interactive"]
                .contains(&plist["ProcessType"].as_str().unwrap())
        );
        let path = plist["EnvironmentVariables"]["PATH"].as_str().unwrap();
        assert!(
            path.starts_with(&format!("{}:/usr/bin:/bin:", w.fakes.display())),
            "{path}"
        );
        // The usual install folders of claude and codex, missing from launchd's default.
        for dir in [
            format!("{}/.local/bin", w.home.display()),
            "/opt/homebrew/bin".into(),
            "/usr/local/bin".into(),
        ] {
            assert!(path.split(':').any(|d| d == dir), "{dir} not in {path}");
        }
        // Log lines stay in judge.log (rotated), not in launchd's unrotated file.
        assert_eq!(plist["EnvironmentVariables"]["LLM_JUDGE_STDERR_LOG"], "off");
        let log = format!("{state}/launchd.log");
        assert_eq!(plist["StandardOutPath"], log.as_str());
        assert_eq!(plist["StandardErrorPath"], log.as_str());
    }

    // A reinstall unloads the loaded agent first, then loads the new one.
    w.clear_calls();
    ok(&run(w.service("launchd", &["install"]), NO_HANG));
    assert_eq!(
        w.calls(),
        [
            format!("launchctl print {service}"),
            format!("launchctl bootout {service}"),
            format!("launchctl print {service}"),
            format!("launchctl enable {service}"),
            format!("launchctl bootstrap {domain} {}", plist_path.display()),
        ]
    );

    w.clear_calls();
    let stdout = ok(&run(w.service("launchd", &["status"]), NO_HANG));
    assert!(stdout.contains("state = running"), "{stdout}");

    w.clear_calls();
    ok(&run(w.service("launchd", &["uninstall"]), NO_HANG));
    assert!(!plist_path.exists());
    assert_eq!(
        w.calls(),
        [
            format!("launchctl print {service}"),
            format!("launchctl bootout {service}"),
            format!("launchctl print {service}"),
        ]
    );
    let out = run(w.service("launchd", &["status"]), NO_HANG);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).0.contains("not installed"));
}

/// Where no systemd user manager listens (a container, WSL without systemd, a plain
/// SSH login), install says so and what runs the daemon instead, before it reads,
/// writes or runs anything (no systemctl, no loginctl), with or without --dry-run.
#[test]
fn without_a_systemd_user_session_install_refuses_before_doing_anything() {
    let w = Machine::new();
    let empty = w.root.join("empty runtime");
    let plain_file = w.root.join("file runtime");
    fs::create_dir_all(&empty).unwrap();
    fs::create_dir_all(plain_file.join("systemd")).unwrap();
    fs::write(plain_file.join("systemd/private"), "").unwrap();
    for runtime in [&empty, &plain_file] {
        for args in [&["install", "--dry-run"][..], &["install"][..]] {
            let mut cmd = w.service("systemd", args);
            cmd.env("XDG_CONFIG_HOME", &w.xdg)
                .env("XDG_RUNTIME_DIR", runtime)
                .env("FAKE_LINGER", "yes");
            let out = run(cmd, NO_HANG);
            let (stdout, stderr) = text(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stdout}\n{stderr}");
            let socket = runtime.join("systemd/private");
            assert!(
                stderr.contains(&format!(
                    "llm-judge service install: no systemd user session here: there is no {} \
                     for `systemctl --user` to reach",
                    socket.display()
                )),
                "{stderr}"
            );
            let daemon = format!(
                "{} daemon --state-dir {}",
                shell_word(&bin()),
                shell_word(w.state.to_str().unwrap())
            );
            assert!(
                stderr.contains(&format!("  nohup {daemon} >/dev/null 2>&1 &\n")),
                "{stderr}"
            );
            assert!(
                stderr.contains(&format!("  tmux new-session -d -s llm-judge {daemon}\n")),
                "{stderr}"
            );
            assert!(stderr.contains("login script"), "{stderr}");
            assert!(stderr.contains("nothing was written"), "{stderr}");
            assert!(stdout.is_empty(), "{stdout}");
            assert!(!w.unit_path().exists(), "no unit file");
            assert!(!w.state.exists(), "no state folder");
            assert!(w.calls().is_empty(), "{:?}", w.calls());
        }
    }
    // launchd has no such session to look for.
    let mut cmd = w.service("launchd", &["install", "--dry-run"]);
    cmd.env("XDG_RUNTIME_DIR", &empty);
    ok(&run(cmd, NO_HANG));
}

/// A word as a POSIX shell reads it (single quotes unless plain), as install prints it.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', "'\\''")),
    }
}

#[test]
fn an_unknown_manager_is_a_usage_error_naming_the_variable() {
    let w = Machine::new();
    let out = run(w.service("runit", &["install", "--dry-run"]), NO_HANG);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("LLM_JUDGE_SERVICE_MANAGER"));
}
