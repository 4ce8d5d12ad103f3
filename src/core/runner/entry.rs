//! A runner table entry as a config file writes it: a CLI runner (`argv`) or an API
//! runner (`api`, `model`, ...), and which keys go with which kind. `Runner` is read
//! through it (`core::runner::table`). Pure.

use serde::{Deserialize, Serialize};

use crate::core::api::spec::{ApiEntry, ApiError, ApiSpec, Protocol};
use crate::core::runner::env::RunnerEnv;

/// Every key a runner entry may hold; which ones apply depends on `argv` or `api`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerEntry {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prestart: Option<u32>,
    #[serde(default, skip_serializing_if = "RunnerEnv::is_empty")]
    pub env: RunnerEnv,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<Protocol>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_input_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_output_tokens: Option<f64>,
}

impl RunnerEntry {
    /// The API keys this entry sets, by name (to refuse them on a CLI runner).
    fn api_keys_set(&self) -> Vec<&'static str> {
        [
            ("model", self.model.is_some()),
            ("base_url", self.base_url.is_some()),
            ("api_key_env", self.api_key_env.is_some()),
            ("max_tokens", self.max_tokens.is_some()),
            ("temperature", self.temperature.is_some()),
            ("system_prompt", self.system_prompt.is_some()),
            (
                "usd_per_million_input_tokens",
                self.usd_per_million_input_tokens.is_some(),
            ),
            (
                "usd_per_million_output_tokens",
                self.usd_per_million_output_tokens.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
    }
}

/// What is wrong with a runner entry's keys; each names the runner.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EntryError {
    #[error(
        "runner {0:?} has both \"argv\" and \"api\"; a runner is a CLI (argv) or a model \
         API (api), remove one"
    )]
    BothKinds(String),
    #[error(
        "runner {0:?} has neither \"argv\" (a CLI) nor \"api\" (\"anthropic\" or \
         \"openai-chat\"); give one"
    )]
    NeitherKind(String),
    #[error(
        "runner {name:?}: \"{key}\" is for API runners (with \"api\"); a CLI runner takes \
         its model and flags in \"argv\""
    )]
    ApiKeyOnCli { name: String, key: &'static str },
    #[error(
        "runner {0:?}: \"env\" and \"prestart\" are for CLI runners; an API runner starts \
         no process, remove them"
    )]
    ProcessKeysOnApi(String),
    #[error("runner {name:?}: {problem}")]
    Api { name: String, problem: ApiError },
}

impl RunnerEntry {
    /// Which kind of runner this entry is: `None` for a CLI runner, the checked API
    /// settings for an API runner. A CLI runner needs `argv` and takes no API key; an
    /// API runner takes no `argv`, `env` or `prestart` (it starts no process). The
    /// message names the runner.
    pub fn api_spec(&self) -> Result<Option<ApiSpec>, EntryError> {
        let name = || self.name.clone();
        let api = match (self.api, &self.argv) {
            (Some(_), Some(_)) => return Err(EntryError::BothKinds(name())),
            (None, None) => return Err(EntryError::NeitherKind(name())),
            (None, Some(_)) => {
                if let Some(key) = self.api_keys_set().first() {
                    return Err(EntryError::ApiKeyOnCli { name: name(), key });
                }
                return Ok(None);
            }
            (Some(protocol), None) => self.checked_api(protocol)?,
        };
        if !self.env.is_empty() || self.prestart.is_some() {
            return Err(EntryError::ProcessKeysOnApi(name()));
        }
        Ok(Some(api))
    }

    fn checked_api(&self, protocol: Protocol) -> Result<ApiSpec, EntryError> {
        let api = ApiEntry {
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            system_prompt: self.system_prompt.clone(),
            usd_per_million_input_tokens: self.usd_per_million_input_tokens,
            usd_per_million_output_tokens: self.usd_per_million_output_tokens,
        };
        ApiSpec::from_entry(protocol, api).map_err(|problem| EntryError::Api {
            name: self.name.clone(),
            problem,
        })
    }

    /// The entry an API runner writes back: its settings with the defaults filled in.
    pub fn set_api(&mut self, spec: &ApiSpec) {
        let api = spec.to_entry();
        self.argv = None;
        self.api = Some(spec.protocol);
        self.model = api.model;
        self.base_url = api.base_url;
        self.api_key_env = api.api_key_env;
        self.max_tokens = api.max_tokens;
        self.temperature = api.temperature;
        self.system_prompt = api.system_prompt;
        self.usd_per_million_input_tokens = api.usd_per_million_input_tokens;
        self.usd_per_million_output_tokens = api.usd_per_million_output_tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::runner::table::Runner;

    fn parse(text: &str) -> Result<Runner, String> {
        toml::from_str::<Runner>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_issue_examples_parse() {
        let r = parse(
            "name = \"haiku-api\"\napi = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\n\
             api_key_env = \"ANTHROPIC_API_KEY\"\n",
        )
        .unwrap();
        let api = r.api.unwrap();
        assert_eq!(api.protocol, Protocol::Anthropic);
        assert_eq!(api.model, "claude-haiku-4-5");
        assert!(r.argv.is_empty());
        let r = parse(
            "name = \"local\"\napi = \"openai-chat\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n\
             model = \"qwen2.5:0.5b\"\nusd_per_million_input_tokens = 0.0\n",
        )
        .unwrap();
        assert_eq!(r.api.unwrap().base_url, "http://127.0.0.1:11434/v1");
    }

    #[test]
    fn a_cli_runner_reads_as_before() {
        let r = parse("name = \"c\"\nargv = [\"claude\", \"-p\"]\nprestart = 1\n").unwrap();
        assert_eq!(r.argv, ["claude", "-p"]);
        assert_eq!((r.prestart, r.api), (Some(1), None));
    }

    #[test]
    fn mixed_or_missing_kinds_are_refused_by_name() {
        for (text, words) in [
            ("name = \"x\"\n", "neither \"argv\""),
            (
                "name = \"x\"\nargv = [\"a\"]\napi = \"anthropic\"\nmodel = \"m\"\n",
                "both",
            ),
            (
                "name = \"x\"\nargv = [\"a\"]\nmodel = \"m\"\n",
                "\"model\" is for API runners",
            ),
            (
                "name = \"x\"\napi = \"anthropic\"\nmodel = \"m\"\nprestart = 1\n",
                "starts no process",
            ),
            (
                "name = \"x\"\napi = \"gemini\"\nmodel = \"m\"\n",
                "unknown variant",
            ),
            (
                "name = \"x\"\napi = \"anthropic\"\n",
                "\"model\" is missing",
            ),
            (
                "name = \"x\"\napi = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://10.1.1.1/v1\"\n",
                "plain http",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(words), "{text}: {e}");
        }
    }

    #[test]
    fn an_api_runner_writes_back_to_the_same_runner() {
        let r = parse("name = \"a\"\napi = \"openai-chat\"\nmodel = \"m\"\nmax_concurrent = 2\n")
            .unwrap();
        let text = toml::to_string(&r).unwrap();
        assert_eq!(parse(&text).unwrap(), r);
    }
}
