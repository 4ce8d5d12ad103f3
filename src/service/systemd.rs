//! The systemd user unit: the shipped `systemd/llm-judge.service`, a unit that works as
//! it is, and the pure transformation that gives it this machine's values.
//!
//! The transformation replaces the value of exactly three lines and nothing else:
//! `ExecStart=` (this binary and its arguments), `Environment="PATH=..."` and
//! `TimeoutStopSec=`. Each must appear exactly once in the shipped file.

use super::spec::{RenderError, ServiceSpec, SpecError, check_plain};

/// The shipped unit, compiled in: what a person copies and what install starts from.
pub(crate) const UNIT_TEMPLATE: &str = include_str!("../../systemd/llm-judge.service");
/// The systemd unit's name.
pub(crate) const UNIT_NAME: &str = "llm-judge.service";

/// A line of the unit whose value install sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnitLine {
    ExecStart,
    PathEnv,
    TimeoutStopSec,
}

impl UnitLine {
    /// Every line install sets.
    pub(crate) const ALL: [UnitLine; 3] = [
        UnitLine::ExecStart,
        UnitLine::PathEnv,
        UnitLine::TimeoutStopSec,
    ];

    /// What such a line starts with; everything after it is the value.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            UnitLine::ExecStart => "ExecStart=",
            UnitLine::PathEnv => "Environment=\"PATH=",
            UnitLine::TimeoutStopSec => "TimeoutStopSec=",
        }
    }

    /// Which of these lines `line` is, if any.
    pub(crate) fn of(line: &str) -> Option<UnitLine> {
        UnitLine::ALL
            .into_iter()
            .find(|l| line.starts_with(l.prefix()))
    }
}

/// One argument of a systemd command line, double-quoted: `\` and `"` escaped, `%`
/// (specifiers) as `%%` and `$` (variable expansion) as `$$`.
fn systemd_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A systemd `Environment=` assignment, double-quoted (no `$` expansion there).
fn systemd_env(name: &str, value: &str) -> String {
    let mut out = String::from("\"");
    for c in format!("{name}={value}").chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The whole new line for `which`, from `spec`.
fn line_for(which: UnitLine, spec: &ServiceSpec) -> Result<String, SpecError> {
    Ok(match which {
        UnitLine::ExecStart => {
            let argv: Vec<String> = spec.argv()?.iter().map(|a| systemd_quote(a)).collect();
            format!("ExecStart={}", argv.join(" "))
        }
        UnitLine::PathEnv => {
            check_plain(&spec.path, "PATH")?;
            format!("Environment={}", systemd_env("PATH", &spec.path))
        }
        UnitLine::TimeoutStopSec => format!("TimeoutStopSec={}s", spec.stop_timeout_seconds),
    })
}

/// `template` with the values of the install lines set from `spec`; fails unless each
/// appears exactly once.
pub(crate) fn render(template: &str, spec: &ServiceSpec) -> Result<String, RenderError> {
    for which in UnitLine::ALL {
        let n = template
            .lines()
            .filter(|l| UnitLine::of(l) == Some(which))
            .count();
        if n != 1 {
            return Err(RenderError::UnitLines {
                count: n,
                prefix: which.prefix(),
            });
        }
    }
    let mut out = String::with_capacity(template.len() + 256);
    for line in template.split_inclusive('\n') {
        match UnitLine::of(line) {
            Some(which) => {
                out.push_str(&line_for(which, spec)?);
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(line),
        }
    }
    Ok(out)
}

/// The systemd user unit for `spec`: the shipped unit with this machine's values.
pub(crate) fn render_unit(spec: &ServiceSpec) -> Result<String, RenderError> {
    render(UNIT_TEMPLATE, spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn spec() -> ServiceSpec {
        ServiceSpec {
            bin: PathBuf::from("/opt/llm judge/bin/llm-judge"),
            state_dir: PathBuf::from("/home/u/.cache/catstack-llm-judge"),
            config: Some(PathBuf::from(
                "/home/u/.config/llm-judge/100%$HOME\"x\\.toml",
            )),
            path: "/home/u/.local/bin:/usr/bin:/bin".to_string(),
            stop_timeout_seconds: 45,
        }
    }

    fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
    }

    #[test]
    fn unit_sets_every_value_and_quotes_for_systemd() {
        let unit = render_unit(&spec()).unwrap();
        assert_eq!(
            line(&unit, "ExecStart="),
            r#"ExecStart="/opt/llm judge/bin/llm-judge" "daemon" "--state-dir" "/home/u/.cache/catstack-llm-judge" "--config" "/home/u/.config/llm-judge/100%%$$HOME\"x\\.toml""#
        );
        assert_eq!(
            line(&unit, "Environment="),
            r#"Environment="PATH=/home/u/.local/bin:/usr/bin:/bin""#
        );
        assert_eq!(line(&unit, "TimeoutStopSec="), "TimeoutStopSec=45s");
    }

    #[test]
    fn the_rendered_unit_is_the_shipped_one_with_only_the_install_lines_changed() {
        // A stop timeout other than the shipped one, so every install line changes.
        let unit = render_unit(&ServiceSpec {
            stop_timeout_seconds: 70,
            ..spec()
        })
        .unwrap();
        let shipped: Vec<&str> = UNIT_TEMPLATE.lines().collect();
        let rendered: Vec<&str> = unit.lines().collect();
        assert_eq!(shipped.len(), rendered.len());
        let mut changed = Vec::new();
        for (s, r) in shipped.iter().zip(&rendered) {
            if s != r {
                let which = UnitLine::of(s).unwrap_or_else(|| panic!("{s:?} changed to {r:?}"));
                assert_eq!(UnitLine::of(r), Some(which));
                changed.push(which);
            }
        }
        assert_eq!(changed, UnitLine::ALL);
        assert_eq!(unit.ends_with('\n'), UNIT_TEMPLATE.ends_with('\n'));
    }

    #[test]
    fn the_shipped_unit_works_as_it_is() {
        // Specifiers, not placeholders: %h is the user's home.
        assert_eq!(
            line(UNIT_TEMPLATE, "ExecStart="),
            "ExecStart=%h/.cargo/bin/llm-judge daemon"
        );
        assert_eq!(
            line(UNIT_TEMPLATE, "Environment="),
            r#"Environment="PATH=%h/.local/bin:/usr/local/bin:/usr/bin:/bin""#
        );
        // The default graces' stop timeout.
        let config = crate::core::config::parse_config(None).unwrap();
        assert_eq!(
            line(UNIT_TEMPLATE, "TimeoutStopSec="),
            format!(
                "TimeoutStopSec={}s",
                super::super::spec::stop_timeout_seconds(&config)
            )
        );
        assert!(!UNIT_TEMPLATE.contains('@'), "a placeholder is left");
    }

    #[test]
    fn unit_has_the_service_contract() {
        let unit = render_unit(&ServiceSpec {
            config: None,
            ..spec()
        })
        .unwrap();
        for text in [UNIT_TEMPLATE, unit.as_str()] {
            for want in [
                "Type=notify",
                "NotifyAccess=main",
                "KillMode=mixed",
                "Restart=on-failure",
                "RestartSec=5s",
                "WatchdogSec=30s",
                "StandardError=journal",
                "WantedBy=default.target",
                "OOMPolicy=continue",
            ] {
                assert!(text.lines().any(|l| l == want), "{want} missing");
            }
            // Hardening that would break the runners (docs/reference.md, "Service") stays out.
            for banned in [
                "ProtectHome=",
                "PrivateTmp=",
                "RestrictNamespaces=",
                "ProtectSystem=",
                "PrivateUsers=",
                "NoNewPrivileges=",
                "MemoryDenyWriteExecute=",
                "SystemCallFilter=",
            ] {
                assert!(
                    !text.lines().any(|l| l.starts_with(banned)),
                    "{banned} must not be set"
                );
            }
        }
        assert!(!line(&unit, "ExecStart=").contains("--config"));
    }

    #[test]
    fn control_characters_are_refused() {
        let s = ServiceSpec {
            state_dir: PathBuf::from("/tmp/a\nExecStartPre=/bin/evil"),
            ..spec()
        };
        let e = render_unit(&s).unwrap_err().to_string();
        assert!(
            e.contains("state folder") && e.contains("control character"),
            "{e}"
        );
        let s = ServiceSpec {
            path: "/bin\n".into(),
            ..spec()
        };
        assert!(render_unit(&s).unwrap_err().to_string().contains("PATH"));
    }

    #[test]
    fn a_template_without_exactly_one_install_line_is_refused() {
        let e = render("[Service]\nExecStart=/bin/true\n", &spec())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("0 lines starting with Environment=\"PATH="),
            "{e}"
        );
        let twice = "ExecStart=a\nExecStart=b\nEnvironment=\"PATH=/bin\"\nTimeoutStopSec=1s\n";
        assert!(
            render(twice, &spec())
                .unwrap_err()
                .to_string()
                .contains("2 lines")
        );
    }
}
