//! The judge's own files for a slim codex, the pure part: the instructions each table
//! gives codex (`-c model_instructions_file=…`), the trimmed model catalog (`-c
//! model_catalog_json=…`), and the argv items that name them. No I/O; the files are
//! written by `store::codex_files`.
//!
//! A table names them with two placeholder items, each the value of a `-c`:
//! `model_instructions_file={instructions}` and `model_catalog_json={codex_catalog}`.
//! The judge fills them with its own files' paths when it starts the runner, so a table
//! (an investigate one included) can never point codex at a file of someone else's.

use std::borrow::Cow;

use serde_json::Value;

use crate::core::job::Mode;

/// The argv item the judge replaces with its instructions file for the job's table.
pub const INSTRUCTIONS_ITEM: &str = "model_instructions_file={instructions}";
/// The argv item the judge replaces with its trimmed catalog, or drops (with the `-c`
/// before it) when it has none for that codex.
pub const CATALOG_ITEM: &str = "model_catalog_json={codex_catalog}";

/// What a default-table codex is told (it replaces codex's own agent instructions).
pub const DEFAULT_INSTRUCTIONS: &str = "You answer one question about a coding session. \
Reply with exactly one line of JSON and nothing else.\n";

/// What an investigate-table codex is told: how to look, and how to answer.
pub const INVESTIGATE_INSTRUCTIONS: &str = "You answer one question about the code in \
your current working directory. To find out, run read-only shell commands inside that \
folder (ls, cat, head, sed -n, grep -rn, find, wc). The sandbox is read-only: never try \
to write, edit, move, delete or install anything, and never ask for more permissions or \
for the user's help; git is not available. Read only what the question needs. Then \
reply with exactly one line of JSON and nothing else.\n";

/// The instructions text for a job's table.
pub fn instructions_for(mode: Mode) -> &'static str {
    match mode {
        Mode::Default => DEFAULT_INSTRUCTIONS,
        Mode::Investigate => INVESTIGATE_INSTRUCTIONS,
    }
}

/// Model catalog fields that add tools no flag removes: code mode (`tool_mode`),
/// its extra tools, the multi-agent tools, and the patch tool. Each is set to `null`
/// (`experimental_supported_tools` to `[]`: codex 0.171 refuses `null` there).
const TRIMMED_FIELDS: [&str; 3] = ["tool_mode", "multi_agent_version", "apply_patch_tool_type"];
const TRIMMED_LIST: &str = "experimental_supported_tools";

/// The trimmed copy of a `codex debug models` output: every model object with the
/// tool-adding fields emptied, everything else as read. `None` when the output is not
/// a JSON object with a `models` array (a plain list of names makes no catalog).
pub fn trimmed_catalog(text: &str) -> Option<String> {
    let mut value: Value = serde_json::from_str(text.trim()).ok()?;
    let models = value.get_mut("models")?.as_array_mut()?;
    for model in models.iter_mut().filter_map(Value::as_object_mut) {
        for field in TRIMMED_FIELDS {
            model.insert(field.to_string(), Value::Null);
        }
        model.insert(TRIMMED_LIST.to_string(), Value::Array(Vec::new()));
    }
    serde_json::to_string(&value).ok()
}

/// True when an argv names a file of the judge's (then it must be filled before a start).
pub fn has_placeholders(argv: &[String]) -> bool {
    argv.iter()
        .any(|a| a == INSTRUCTIONS_ITEM || a == CATALOG_ITEM)
}

/// The judge's files a codex start is given: paths, already written.
#[derive(Debug, Clone, Copy, Default)]
pub struct Files<'a> {
    /// The instructions file for the job's table.
    pub instructions: Option<&'a str>,
    /// The trimmed catalog for this codex, when the judge has one.
    pub catalog: Option<&'a str>,
}

/// `argv` with its placeholder items filled from `files`: a placeholder whose file is
/// missing is dropped with the `-c` right before it (codex then uses its own).
pub fn fill<'a>(argv: &'a [String], files: &Files<'_>) -> Cow<'a, [String]> {
    if !has_placeholders(argv) {
        return Cow::Borrowed(argv);
    }
    let mut out: Vec<String> = Vec::with_capacity(argv.len());
    for item in argv {
        let path = match item.as_str() {
            INSTRUCTIONS_ITEM => files.instructions.map(|p| ("model_instructions_file", p)),
            CATALOG_ITEM => files.catalog.map(|p| ("model_catalog_json", p)),
            _ => {
                out.push(item.clone());
                continue;
            }
        };
        match path {
            Some((key, path)) => out.push(format!("{key}={}", toml_string(path))),
            None if out.last().is_some_and(|prev| prev == "-c") => {
                out.pop();
            }
            None => {}
        }
    }
    Cow::Owned(out)
}

/// A TOML basic string holding `text` (JSON's string escapes are valid TOML ones).
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_catalog_loses_every_tool_adding_field_and_keeps_the_rest() {
        let read = json!({"models": [
            {"slug": "gpt-6.2-sol", "tool_mode": "code_mode_only",
             "experimental_supported_tools": ["clock"], "multi_agent_version": "v2",
             "apply_patch_tool_type": "freeform", "base_instructions": "long"},
            {"slug": "gpt-5.5"},
            "not an object"
        ], "etag": "x"});
        let trimmed: Value =
            serde_json::from_str(&trimmed_catalog(&read.to_string()).unwrap()).unwrap();
        let sol = &trimmed["models"][0];
        assert_eq!(sol["slug"], "gpt-6.2-sol");
        assert_eq!(sol["base_instructions"], "long");
        for field in TRIMMED_FIELDS {
            assert_eq!(sol[field], Value::Null, "{field}");
            assert!(trimmed["models"][1].get(field).is_some(), "{field} added");
        }
        assert_eq!(sol[TRIMMED_LIST], json!([]));
        assert_eq!(trimmed["models"][1][TRIMMED_LIST], json!([]));
        assert_eq!(trimmed["models"][2], "not an object");
        assert_eq!(trimmed["etag"], "x");
    }

    #[test]
    fn output_that_is_no_catalog_object_makes_none() {
        for text in [
            "",
            "gpt-5.5\ngpt-5.4\n",
            "[\"a\"]",
            "{\"models\": 3}",
            "{\"data\": []}",
        ] {
            assert_eq!(trimmed_catalog(text), None, "{text:?}");
        }
        assert!(trimmed_catalog(" {\"models\": []}\n").is_some());
    }

    #[test]
    fn placeholders_are_filled_with_quoted_paths_or_dropped_with_their_dash_c() {
        let argv = v(&[
            "codex",
            "exec",
            "-c",
            INSTRUCTIONS_ITEM,
            "-c",
            CATALOG_ITEM,
            "-c",
            "notify=[]",
            "--",
            "{prompt}",
        ]);
        let files = Files {
            instructions: Some("/s/codex/instructions-default.md"),
            catalog: Some("/s/codex/a \"b\".json"),
        };
        assert_eq!(
            fill(&argv, &files).into_owned(),
            v(&[
                "codex",
                "exec",
                "-c",
                "model_instructions_file=\"/s/codex/instructions-default.md\"",
                "-c",
                "model_catalog_json=\"/s/codex/a \\\"b\\\".json\"",
                "-c",
                "notify=[]",
                "--",
                "{prompt}",
            ])
        );
        let none = Files {
            instructions: Some("/i"),
            catalog: None,
        };
        assert_eq!(
            fill(&argv, &none).into_owned(),
            v(&[
                "codex",
                "exec",
                "-c",
                "model_instructions_file=\"/i\"",
                "-c",
                "notify=[]",
                "--",
                "{prompt}"
            ])
        );
        let plain = v(&["codex", "exec", "--", "{prompt}"]);
        assert!(matches!(fill(&plain, &none), Cow::Borrowed(_)));
    }

    #[test]
    fn each_table_has_its_own_instructions() {
        assert!(instructions_for(Mode::Default).contains("one line of JSON"));
        let investigate = instructions_for(Mode::Investigate);
        assert!(investigate.contains("read-only") && investigate.contains("one line of JSON"));
        // Short: they are sent with every request (the investigate table's budget is 6 KB).
        assert!(investigate.len() < 600, "{}", investigate.len());
    }
}
