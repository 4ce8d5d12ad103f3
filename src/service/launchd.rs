//! The launchd agent: the shipped `launchd/com.catstack.llm-judge.plist`, a valid plist
//! with defaults a person edits in one place (their home folder), and the pure
//! transformation that gives it this machine's values.
//!
//! The transformation replaces the value element that follows five keys, each of which
//! must appear exactly once with a value of the expected type: `ProgramArguments`
//! (array), `PATH` (inside `EnvironmentVariables`), `ExitTimeOut` (integer),
//! `StandardOutPath` and `StandardErrorPath` (strings). Comments and every other byte
//! stay as shipped.

use super::spec::{RenderError, ServiceSpec, check_plain, text};

/// The shipped plist, compiled in: what a person copies and what install starts from.
pub(crate) const PLIST_TEMPLATE: &str = include_str!("../../launchd/com.catstack.llm-judge.plist");
/// The launchd agent's label (also its plist's file stem).
pub(crate) const LABEL: &str = "com.catstack.llm-judge";
/// The file (in the state folder) that gets what the daemon prints under launchd.
pub(crate) const LAUNCHD_LOG: &str = "launchd.log";
/// launchd.log is moved to launchd.log.1 at install when it is larger than this.
pub(crate) const LAUNCHD_LOG_MAX_BYTES: u64 = 1 << 20;

/// The keys whose values install sets, with the element each value is.
pub(crate) const INSTALL_KEYS: [(&str, &str); 5] = [
    ("ProgramArguments", "array"),
    ("PATH", "string"),
    ("ExitTimeOut", "integer"),
    ("StandardOutPath", "string"),
    ("StandardErrorPath", "string"),
];

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Where the value element of `<key>{key}</key>` sits in `plist` (start and end byte),
/// and the indentation of the key's line; fails unless the key appears exactly once
/// and its value is a `<{element}>` with no nested element of the same name.
fn value_span(
    plist: &str,
    key: &'static str,
    element: &'static str,
) -> Result<(usize, usize, String), RenderError> {
    let needle = format!("<key>{key}</key>");
    let hits: Vec<usize> = plist.match_indices(&needle).map(|(i, _)| i).collect();
    let [at] = hits[..] else {
        return Err(RenderError::PlistKeys {
            label: LABEL,
            key,
            count: hits.len(),
        });
    };
    let line_start = plist[..at].rfind('\n').map_or(0, |i| i + 1);
    let indent: String = plist[line_start..at]
        .chars()
        .take_while(|c| c.is_whitespace())
        .collect();
    // The value is the next element: skip white space and comments.
    let mut start = at + needle.len();
    loop {
        let rest = &plist[start..];
        let trimmed = rest.trim_start();
        start += rest.len() - trimmed.len();
        if trimmed.starts_with("<!--") {
            match trimmed.find("-->") {
                Some(end) => start += end + "-->".len(),
                None => break,
            }
        } else {
            break;
        }
    }
    let open = format!("<{element}>");
    let close = format!("</{element}>");
    let bad = || RenderError::PlistValue {
        label: LABEL,
        key,
        element,
    };
    if !plist[start..].starts_with(&open) {
        return Err(bad());
    }
    let end = plist[start..].find(&close).ok_or_else(bad)? + start + close.len();
    if plist[start + open.len()..end].contains(&open) {
        return Err(bad());
    }
    Ok((start, end, indent))
}

/// `template` with the values of the install keys set from `spec`.
pub(crate) fn render(template: &str, spec: &ServiceSpec) -> Result<String, RenderError> {
    check_plain(&spec.path, "PATH")?;
    let argv = spec.argv()?;
    let log = xml_escape(&text(
        &spec.state_dir.join(LAUNCHD_LOG),
        "the launchd log file",
    )?);
    // Find every span first, so a bad template fails before anything is replaced.
    let mut edits = Vec::new();
    for (key, element) in INSTALL_KEYS {
        let (start, end, indent) = value_span(template, key, element)?;
        let value = match key {
            "ProgramArguments" => {
                let mut v = String::from("<array>\n");
                for arg in &argv {
                    v.push_str(&format!("{indent}\t<string>{}</string>\n", xml_escape(arg)));
                }
                v.push_str(&format!("{indent}</array>"));
                v
            }
            "PATH" => format!("<string>{}</string>", xml_escape(&spec.path)),
            "ExitTimeOut" => format!("<integer>{}</integer>", spec.stop_timeout_seconds),
            _ => format!("<string>{log}</string>"),
        };
        edits.push((start, end, value));
    }
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(template.len() + 256);
    let mut at = 0;
    for (start, end, value) in edits {
        out.push_str(&template[at..start]);
        out.push_str(&value);
        at = end;
    }
    out.push_str(&template[at..]);
    Ok(out)
}

/// The launchd agent plist for `spec`: the shipped plist with this machine's values.
pub(crate) fn render_plist(spec: &ServiceSpec) -> Result<String, RenderError> {
    render(PLIST_TEMPLATE, spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn spec() -> ServiceSpec {
        ServiceSpec {
            bin: PathBuf::from("/opt/llm judge/bin/llm-judge"),
            state_dir: PathBuf::from("/home/u/.cache/catstack-llm-judge"),
            config: Some(PathBuf::from("/home/u/.config/llm-judge/x.toml")),
            path: "/home/u/.local/bin:/usr/bin:/bin".to_string(),
            stop_timeout_seconds: 45,
        }
    }

    #[test]
    fn plist_sets_every_value_and_escapes_xml() {
        let mut s = spec();
        s.state_dir = PathBuf::from("/home/u/state <&>");
        let plist = render_plist(&s).unwrap();
        assert!(plist.contains(
            "\t<array>\n\t\t<string>/opt/llm judge/bin/llm-judge</string>\n\t\t<string>daemon</string>"
        ));
        assert!(plist.contains("<string>/home/u/state &lt;&amp;&gt;</string>"));
        assert!(plist.contains("<string>/home/u/state &lt;&amp;&gt;/launchd.log</string>"));
        assert!(plist.contains("<string>/home/u/.local/bin:/usr/bin:/bin</string>"));
        assert!(plist.contains("<key>ExitTimeOut</key>\n\t<integer>45</integer>"));
        assert!(!plist.contains(">/Users/you"), "{plist}");
        // XML comments may not hold "--".
        for text in [PLIST_TEMPLATE, plist.as_str()] {
            for comment in text.split("<!--").skip(1) {
                assert!(
                    !comment.split("-->").next().unwrap().contains("--"),
                    "{comment}"
                );
            }
        }
    }

    #[test]
    fn the_rendered_plist_is_the_shipped_one_with_only_the_install_values_changed() {
        let plist = render_plist(&spec()).unwrap();
        // Cut each install value out of both: what is left is the same text.
        let cut = |text: &str| {
            let mut spans: Vec<(usize, usize)> = INSTALL_KEYS
                .iter()
                .map(|(k, e)| {
                    let (s, e, _) = value_span(text, k, e).unwrap();
                    (s, e)
                })
                .collect();
            spans.sort();
            let mut out = String::new();
            let mut at = 0;
            for (s, e) in spans {
                out.push_str(&text[at..s]);
                out.push_str("<VALUE/>");
                at = e;
            }
            out.push_str(&text[at..]);
            out
        };
        assert_eq!(cut(&plist), cut(PLIST_TEMPLATE));
        assert_ne!(plist, PLIST_TEMPLATE);
    }

    #[test]
    fn the_shipped_plist_has_integers_and_no_placeholders() {
        assert!(!PLIST_TEMPLATE.contains('@'), "a placeholder is left");
        let (s, e, _) = value_span(PLIST_TEMPLATE, "ExitTimeOut", "integer").unwrap();
        let config = crate::core::config::parse_config(None).unwrap();
        assert_eq!(
            &PLIST_TEMPLATE[s..e],
            format!(
                "<integer>{}</integer>",
                super::super::spec::stop_timeout_seconds(&config)
            )
        );
        for (key, element) in INSTALL_KEYS {
            value_span(PLIST_TEMPLATE, key, element).unwrap();
        }
    }

    #[test]
    fn control_characters_are_refused() {
        let s = ServiceSpec {
            state_dir: PathBuf::from("/tmp/a\nb"),
            ..spec()
        };
        assert!(render_plist(&s).is_err());
    }

    #[test]
    fn a_template_with_a_missing_or_mistyped_value_is_refused() {
        let e = render("<plist><dict></dict></plist>", &spec())
            .unwrap_err()
            .to_string();
        assert!(e.contains("0 <key>ProgramArguments</key>"), "{e}");
        let mistyped = PLIST_TEMPLATE.replace("<integer>45</integer>", "<string>45</string>");
        let e = render(&mistyped, &spec()).unwrap_err().to_string();
        assert!(e.contains("ExitTimeOut is not one <integer>"), "{e}");
    }
}
