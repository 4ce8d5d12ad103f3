//! The program an installed service runs, read back from its unit (`ExecStart=`) or
//! plist (`ProgramArguments`' first string), for `doctor`: the file install wrote, or
//! one edited by hand.

use std::path::PathBuf;

use super::host::Host;
use super::spec::Manager;

/// The service file and the program it starts; `None` when no service is installed
/// (or `HOME` is unset). The program is `None` when the file names none it can read.
pub(crate) fn service_program() -> Option<(PathBuf, Option<String>)> {
    let host = Host::from_env().ok()?;
    let file = host.target();
    let text = std::fs::read_to_string(&file).ok()?;
    let program = match host.manager {
        Manager::Systemd => unit_program(&text, &host.home.to_string_lossy()),
        Manager::Launchd => plist_program(&text),
    };
    Some((file, program))
}

/// The program of a unit's (last) `ExecStart=`: a double-quoted first word as
/// `systemd::systemd_quote` writes it, or a plain one (`%h` is `home`); its prefixes
/// (`-`, `@`, `:`, `+`, `!`) skipped.
pub(crate) fn unit_program(unit: &str, home: &str) -> Option<String> {
    let value = unit
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("ExecStart="))
        .next_back()?
        .trim_start()
        .trim_start_matches(['-', '@', ':', '+', '!']);
    let mut out = String::new();
    let mut chars = value.chars().peekable();
    let quoted = chars.next_if_eq(&'"').is_some();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted => return Some(out),
            c if c.is_whitespace() && !quoted => break,
            '\\' if quoted => out.push(chars.next()?),
            '%' => match chars.next()? {
                'h' => out.push_str(home),
                '%' => out.push('%'),
                _ => return None,
            },
            '$' => {
                chars.next_if_eq(&'$')?;
                out.push('$');
            }
            c => out.push(c),
        }
    }
    (!quoted && !out.is_empty()).then_some(out)
}

/// The first `<string>` of a plist's `ProgramArguments` array, XML entities decoded.
pub(crate) fn plist_program(plist: &str) -> Option<String> {
    let after_key = plist.split_once("<key>ProgramArguments</key>")?.1;
    let array = after_key.trim_start().strip_prefix("<array>")?;
    let (before_end, _) = array.split_once("</array>")?;
    let first = before_end
        .split_once("<string>")?
        .1
        .split_once("</string>")?
        .0;
    let mut out = first.to_string();
    for (entity, c) in [
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&quot;", "\""),
        ("&apos;", "'"),
        ("&amp;", "&"),
    ] {
        out = out.replace(entity, c);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::spec::ServiceSpec;
    use std::path::Path;

    fn spec(bin: &str) -> ServiceSpec {
        ServiceSpec {
            bin: PathBuf::from(bin),
            state_dir: PathBuf::from("/home/u/state"),
            config: None,
            path: "/usr/bin:/bin".into(),
            stop_timeout_seconds: 45,
        }
    }

    #[test]
    fn the_program_install_wrote_is_read_back() {
        for bin in [
            "/home/u/.local/bin/llm-judge",
            "/opt/llm judge/100%$HOME\"x\\/llm-judge",
            "/a/b&<c>'/llm-judge",
        ] {
            let unit = crate::service::systemd::render_unit(&spec(bin)).unwrap();
            assert_eq!(
                unit_program(&unit, "/home/u").as_deref(),
                Some(bin),
                "{unit}"
            );
            let plist = crate::service::launchd::render_plist(&spec(bin)).unwrap();
            assert_eq!(plist_program(&plist).as_deref(), Some(bin), "{plist}");
        }
    }

    #[test]
    fn a_hand_written_unit_is_read_too() {
        let shipped = crate::service::systemd::UNIT_TEMPLATE;
        assert_eq!(
            unit_program(shipped, "/home/u").as_deref(),
            Some("/home/u/.cargo/bin/llm-judge")
        );
        let unit = |line: &str| unit_program(line, "/h");
        assert_eq!(
            unit("ExecStart=-/x/llm-judge daemon").as_deref(),
            Some("/x/llm-judge")
        );
        assert_eq!(unit("ExecStart=/x/a%%b").as_deref(), Some("/x/a%b"));
        assert_eq!(unit("ExecStart=\"/x/unclosed"), None);
        assert_eq!(unit("ExecStart="), None);
        assert_eq!(unit("Description=x"), None);
        assert_eq!(plist_program("<plist></plist>"), None);
        assert!(Path::new(&unit("ExecStart=%h/bin/llm-judge").unwrap()).is_absolute());
    }
}
