//! The codex model choice (docs/reference.md, "Runners"), the pure part: read a `codex
//! debug models` catalog and pick the model a codex runner uses. No I/O; the process part
//! lives in `codex_catalog`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::core::codex::slim::CATALOG_ITEM;
use crate::core::config::Settings;
use crate::core::runner::table::Runner;

/// The models a login may use, in the catalog's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// Every model slug, in the catalog's order (hidden ones too: they still run).
    pub models: Vec<String>,
    /// The first model not marked `"visibility": "hide"`: the substitute.
    pub first: Option<String>,
}

/// One runner whose `-m` model was replaced because the catalog lacks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Substitution {
    /// The runner's name.
    pub runner: String,
    /// The table's model.
    pub from: String,
    /// The catalog's first model, used instead.
    pub to: String,
}

/// A `codex debug models` output that names no usable model.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CatalogError {
    /// Empty output.
    #[error("`codex debug models` printed nothing")]
    Empty,
    /// Only hidden models, or none.
    #[error("`codex debug models` listed no model")]
    NoModel,
    /// A JSON object without a `models`/`data` array.
    #[error("`codex debug models` JSON has no `models` array")]
    NoModelsArray,
    /// JSON that is a string, number or the like.
    #[error("`codex debug models` JSON is neither an array nor an object")]
    NotACatalog,
}

/// Parses `codex debug models` output: JSON (an array, or an object with `models`/`data`,
/// items being strings or objects with `slug`/`id`/`model`/`name`) or one slug per line.
pub fn parse_catalog(text: &str) -> Result<Catalog, CatalogError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(CatalogError::Empty);
    }
    let entries: Vec<(String, bool)> = match serde_json::from_str::<Value>(trimmed) {
        Ok(value) => models_from_json(&value)?,
        // Not JSON: one model per line, first word of each non-empty line.
        Err(_) => trimmed
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .map(|s| (s.to_string(), false))
            .collect(),
    };
    let first = entries
        .iter()
        .find(|(_, hidden)| !hidden)
        .map(|(m, _)| m.clone());
    if first.is_none() {
        return Err(CatalogError::NoModel);
    }
    let models = entries.into_iter().map(|(m, _)| m).collect();
    Ok(Catalog { models, first })
}

/// (slug, hidden) pairs of a JSON catalog.
fn models_from_json(value: &Value) -> Result<Vec<(String, bool)>, CatalogError> {
    let items = match value {
        Value::Array(items) => items,
        Value::Object(map) => match ["models", "data"].iter().find_map(|k| map.get(*k)) {
            Some(Value::Array(items)) => items,
            _ => return Err(CatalogError::NoModelsArray),
        },
        _ => return Err(CatalogError::NotACatalog),
    };
    Ok(items
        .iter()
        .filter_map(|item| match item {
            Value::String(s) => Some((s.clone(), false)),
            Value::Object(map) => ["slug", "id", "model", "name"]
                .iter()
                .find_map(|k| map.get(*k).and_then(Value::as_str))
                .map(|s| {
                    let hidden = map.get("visibility").and_then(Value::as_str) == Some("hide");
                    (s.to_string(), hidden)
                }),
            _ => None,
        })
        .filter(|(s, _)| !s.is_empty())
        .collect())
}

/// True when the runner's program (basename of argv[0]) is codex.
fn is_codex(argv: &[String]) -> bool {
    argv.first()
        .and_then(|p| std::path::Path::new(p).file_name())
        .is_some_and(|n| n == "codex")
}

/// Index of the `-m`/`--model` value before `--` in a codex argv, if any.
fn model_index(argv: &[String]) -> Option<usize> {
    let end = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
    argv[..end]
        .iter()
        .position(|a| a == "-m" || a == "--model")
        .map(|i| i + 1)
        .filter(|&i| i < end)
}

/// Rewrites every codex runner whose `-m` model is not in the catalog to the catalog's
/// first model. Runners without `-m`, and every runner when `catalog` is `None`, are
/// left alone.
pub fn apply(runners: &[Runner], catalog: Option<&Catalog>) -> (Vec<Runner>, Vec<Substitution>) {
    let mut out = runners.to_vec();
    let mut subs = Vec::new();
    let Some(catalog) = catalog else {
        return (out, subs);
    };
    let Some(first) = catalog.first.as_ref() else {
        return (out, subs);
    };
    for runner in &mut out {
        if !is_codex(&runner.argv) {
            continue;
        }
        let Some(i) = model_index(&runner.argv) else {
            continue;
        };
        if catalog.models.iter().any(|m| *m == runner.argv[i]) {
            continue;
        }
        subs.push(Substitution {
            runner: runner.name.clone(),
            from: runner.argv[i].clone(),
            to: first.clone(),
        });
        runner.argv[i] = first.clone();
    }
    (out, subs)
}

/// The model one codex runner of one table runs with, for `status` and `doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInUse {
    /// `default`, `investigate`, or `override` (`CATSTACK_LLM_JUDGE_RUNNERS`).
    pub table: String,
    /// The runner's name.
    pub runner: String,
    /// The model it is started with.
    pub model: String,
    /// The table's model, when the catalog replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
}

/// The tables a job can use, named: the override alone when it is set.
fn tables_mut(settings: &mut Settings) -> Vec<(&'static str, &mut Vec<Runner>)> {
    match settings.runner_override.as_mut() {
        Some(table) => vec![("override", table)],
        None => vec![
            ("default", &mut settings.config.runners.default),
            ("investigate", &mut settings.config.runners.investigate),
        ],
    }
}

/// `settings` with every table's codex runners rewritten per the catalog.
pub fn apply_to_settings(settings: &Settings, catalog: &Catalog) -> (Settings, Vec<Substitution>) {
    let mut out = settings.clone();
    let mut subs = Vec::new();
    for (_, table) in tables_mut(&mut out) {
        let (new, s) = apply(table, Some(catalog));
        *table = new;
        subs.extend(s);
    }
    (out, subs)
}

/// The codex runners with an `-m` model in `applied`, beside their model in `base`.
pub fn models_in_use(base: &Settings, applied: &Settings) -> Vec<ModelInUse> {
    let mut base = base.clone();
    let mut applied = applied.clone();
    let mut out = Vec::new();
    for ((table, before), (_, after)) in tables_mut(&mut base)
        .into_iter()
        .zip(tables_mut(&mut applied))
    {
        for (b, a) in before.iter().zip(after.iter()) {
            let (Some(bi), Some(ai)) = (codex_model_index(b), codex_model_index(a)) else {
                continue;
            };
            let model = a.argv[ai].clone();
            out.push(ModelInUse {
                table: table.to_string(),
                runner: a.name.clone(),
                replaced: (b.argv[bi] != model).then(|| b.argv[bi].clone()),
                model,
            });
        }
    }
    out
}

/// The first codex runner that needs the catalog: one with an `-m` model, or one
/// naming the judge's trimmed catalog; `None` when none does.
pub fn codex_runner(settings: &Settings) -> Option<&Runner> {
    let tables = &settings.config.runners;
    let (first, second): (&[Runner], &[Runner]) = match &settings.runner_override {
        Some(table) => (table, &[]),
        None => (&tables.default, &tables.investigate),
    };
    first
        .iter()
        .chain(second)
        .find(|r| codex_model_index(r).is_some() || names_the_catalog(r))
}

/// The program (argv[0]) of `codex_runner`.
pub fn codex_program(settings: &Settings) -> Option<String> {
    codex_runner(settings).map(|r| r.argv[0].clone())
}

/// A codex runner whose argv names the judge's trimmed catalog.
fn names_the_catalog(runner: &Runner) -> bool {
    is_codex(&runner.argv) && runner.argv.iter().any(|a| a == CATALOG_ITEM)
}

/// Where a codex runner's `-m` value sits, if it is a codex runner with one.
fn codex_model_index(runner: &Runner) -> Option<usize> {
    is_codex(&runner.argv)
        .then(|| model_index(&runner.argv))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(name: &str, argv: &[&str]) -> Runner {
        Runner::for_tests(name, argv)
    }

    fn catalog(models: &[&str]) -> Catalog {
        Catalog {
            models: models.iter().map(|s| s.to_string()).collect(),
            first: models.first().map(|s| s.to_string()),
        }
    }

    fn shipped_codex() -> Runner {
        runner(
            "codex",
            &[
                "codex",
                "exec",
                "--skip-git-repo-check",
                "-m",
                "gpt-5.3-codex-spark",
                "--sandbox",
                "read-only",
                "--",
                "{prompt}",
            ],
        )
    }

    #[test]
    fn parses_json_and_lines() {
        let c = parse_catalog(r#"{"models":[{"slug":"gpt-5.5"},{"slug":"gpt-5.4-mini"}]}"#);
        assert_eq!(
            c.map(|c| c.models),
            Ok(vec!["gpt-5.5".into(), "gpt-5.4-mini".into()])
        );
        let c = parse_catalog(r#"["a","b"]"#);
        assert_eq!(c.map(|c| c.models), Ok(vec!["a".into(), "b".into()]));
        let c = parse_catalog("gpt-5.5  default\n\ngpt-5.4\n");
        assert_eq!(
            c.map(|c| c.models),
            Ok(vec!["gpt-5.5".into(), "gpt-5.4".into()])
        );
        assert!(parse_catalog("  ").is_err());
        assert!(parse_catalog(r#"{"models":[]}"#).is_err());
        assert!(parse_catalog("42").is_err());
    }

    #[test]
    fn missing_model_becomes_the_first_listed() {
        let cat = catalog(&["gpt-5.5", "gpt-5.4"]);
        let (out, subs) = apply(&[shipped_codex()], Some(&cat));
        assert_eq!(out[0].argv[4], "gpt-5.5");
        assert_eq!(
            subs,
            vec![Substitution {
                runner: "codex".into(),
                from: "gpt-5.3-codex-spark".into(),
                to: "gpt-5.5".into()
            }]
        );
    }

    #[test]
    fn listed_model_unknown_catalog_no_m_and_others_untouched() {
        let cat = catalog(&["x", "gpt-5.3-codex-spark"]);
        let (out, subs) = apply(&[shipped_codex()], Some(&cat));
        assert_eq!((out, subs.len()), (vec![shipped_codex()], 0));
        let (out, subs) = apply(&[shipped_codex()], None);
        assert_eq!((out, subs.len()), (vec![shipped_codex()], 0));
        let cat = catalog(&["x"]);
        let no_m = runner("codex", &["codex", "exec", "--", "-m", "{prompt}"]);
        let claude = runner("claude", &["claude", "-p", "-m", "haiku", "--", "{prompt}"]);
        let (out, subs) = apply(&[no_m.clone(), claude.clone()], Some(&cat));
        assert_eq!((out, subs.len()), (vec![no_m, claude], 0));
    }

    fn settings_with(default: Vec<Runner>) -> Settings {
        let mut settings = Settings {
            config: crate::core::config::parse_config(None).expect("embedded config"),
            config_path: None,
            state_dir: "/s".into(),
            runner_override: None,
            runner_error: None,
            runtime_dir: None,
        };
        settings.config.runners.default = default;
        settings
    }

    #[test]
    fn models_in_use_show_the_replacement_and_the_override_alone() {
        let base = settings_with(vec![shipped_codex()]);
        let (applied, subs) = apply_to_settings(&base, &catalog(&["gpt-6"]));
        assert_eq!(subs.len(), 1);
        let used = models_in_use(&base, &applied);
        assert_eq!(
            used,
            vec![ModelInUse {
                table: "default".into(),
                runner: "codex".into(),
                model: "gpt-6".into(),
                replaced: Some("gpt-5.3-codex-spark".into()),
            }]
        );
        assert_eq!(codex_program(&base).as_deref(), Some("codex"));
        let mut over = base.clone();
        over.runner_override = Some(vec![runner("claude", &["claude", "-p"])]);
        assert_eq!(codex_program(&over), None);
        // A codex without -m that names the trimmed catalog needs the read too.
        over.runner_override = Some(vec![runner(
            "codex",
            &["/opt/codex", "exec", "-c", CATALOG_ITEM, "--", "{prompt}"],
        )]);
        assert_eq!(codex_program(&over).as_deref(), Some("/opt/codex"));
        assert_eq!(models_in_use(&over, &over), vec![]);
    }
}
