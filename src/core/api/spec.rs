//! A runner without a CLI: one HTTP request to a model API (Anthropic Messages or
//! OpenAI Chat Completions) per attempt. What its table entry says, the defaults, and
//! the checks made when a table loads. Pure: the request itself is
//! `process::api_call`, its body and reply `core::api::protocol`.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use url::{Host, Url};

/// The one-line system prompt an API runner sends unless its entry gives its own: the
/// same the shipped claude gets with `--system-prompt`.
pub const JUDGE_SYSTEM_PROMPT: &str = "You answer one question about a coding session. \
     Reply with exactly one line of JSON and nothing else.";
/// `max_tokens` when the entry gives none: room for a JSON object of a few keys and
/// short reasons, and a bound on what one answer can cost.
pub const DEFAULT_MAX_TOKENS: u32 = 256;
/// The largest `max_tokens` an entry may give (a judge's answer is one short object).
pub const MAX_MAX_TOKENS: u32 = 8192;

/// The protocol an API runner speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Protocol {
    /// Anthropic Messages (`POST {base_url}/messages`).
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI Chat Completions (`POST {base_url}/chat/completions`): the official API
    /// and the OpenAI-compatible local servers (Ollama, llama.cpp, vLLM).
    #[serde(rename = "openai-chat")]
    OpenAiChat,
}

impl Protocol {
    /// The name a table gives it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Anthropic => "anthropic",
            Protocol::OpenAiChat => "openai-chat",
        }
    }

    /// The base URL when the entry gives none: the provider's own API.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Protocol::Anthropic => "https://api.anthropic.com/v1",
            Protocol::OpenAiChat => "https://api.openai.com/v1",
        }
    }

    /// The key variable when the entry names none and its server is not on loopback.
    pub fn default_key_var(self) -> &'static str {
        match self {
            Protocol::Anthropic => "ANTHROPIC_API_KEY",
            Protocol::OpenAiChat => "OPENAI_API_KEY",
        }
    }

    /// The path the request goes to, after the base URL.
    pub fn endpoint(self) -> &'static str {
        match self {
            Protocol::Anthropic => "messages",
            Protocol::OpenAiChat => "chat/completions",
        }
    }
}

/// An API runner's settings, defaults filled in (`from_entry`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiSpec {
    /// Which protocol the server speaks.
    pub protocol: Protocol,
    /// The model the request names.
    pub model: String,
    /// The API's base URL, without a trailing `/`.
    pub base_url: String,
    /// The environment variable holding the key (read at each call, never stored);
    /// `None`: the request carries no key (a local server).
    pub api_key_env: Option<String>,
    /// The answer's token cap.
    pub max_tokens: u32,
    /// The sampling temperature the request asks for.
    pub temperature: f64,
    /// The system prompt the request carries.
    pub system_prompt: String,
    /// US dollars per million input tokens, for the attempt's cost.
    pub usd_per_million_input_tokens: Option<f64>,
    /// US dollars per million output tokens, for the attempt's cost.
    pub usd_per_million_output_tokens: Option<f64>,
}

/// What an API runner's table entry gives, before defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiEntry {
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub system_prompt: Option<String>,
    pub usd_per_million_input_tokens: Option<f64>,
    pub usd_per_million_output_tokens: Option<f64>,
}

/// What makes an API runner's entry unusable; each names the key and how to fix it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ApiError {
    /// No model.
    #[error(
        "\"model\" is missing or empty; name the model the API serves (e.g. \"claude-haiku-4-5\")"
    )]
    NoModel,
    /// A base URL that is not a URL.
    #[error("\"base_url\" {url:?} is not a URL ({why}); give e.g. \"https://api.example.com/v1\"")]
    BadUrl { url: String, why: String },
    /// A scheme other than https, or plain http to another machine.
    #[error(
        "\"base_url\" {url:?}: plain http is allowed only to this machine (127.0.0.1, ::1, \
         localhost), where the key and the transcript never cross a network; use https"
    )]
    PlainHttpOffLoopback { url: String },
    /// A scheme the judge does not speak.
    #[error("\"base_url\" {url:?}: the scheme must be https (or http to this machine)")]
    BadScheme { url: String },
    /// Credentials, a query or a fragment in the base URL (a key belongs in `api_key_env`).
    #[error(
        "\"base_url\" {url:?} holds a user name, password, query or fragment; give the key \
         in the variable named by \"api_key_env\" and the plain URL here"
    )]
    UrlExtras { url: String },
    /// A key variable name no environment can hold.
    #[error("\"api_key_env\" {name:?} is not a variable name (it holds '=' or a NUL byte)")]
    BadKeyVar { name: String },
    /// `max_tokens` out of range.
    #[error("\"max_tokens\" is {value}; give 1 to {MAX_MAX_TOKENS}")]
    BadMaxTokens { value: u32 },
    /// A temperature out of range.
    #[error("\"temperature\" is {value}; give 0 to 2")]
    BadTemperature { value: f64 },
    /// A price that is negative or not a number.
    #[error("\"{key}\" is {value}; give 0 or more US dollars per million tokens, or leave it out")]
    BadPrice { key: &'static str, value: f64 },
    /// A system prompt of more than one line, or empty.
    #[error("\"system_prompt\" must be one non-empty line")]
    BadSystemPrompt,
}

impl ApiSpec {
    /// The spec an entry gives, defaults filled in and every value checked.
    pub fn from_entry(protocol: Protocol, entry: ApiEntry) -> Result<ApiSpec, ApiError> {
        let model = entry
            .model
            .filter(|m| !m.trim().is_empty())
            .ok_or(ApiError::NoModel)?;
        let base_url = entry
            .base_url
            .unwrap_or_else(|| protocol.default_base_url().to_string());
        let loopback = check_base_url(&base_url)?;
        let api_key_env = match entry.api_key_env {
            Some(name) if name.is_empty() => None,
            Some(name) if name.contains(['=', '\0']) => return Err(ApiError::BadKeyVar { name }),
            Some(name) => Some(name),
            None if loopback => None,
            None => Some(protocol.default_key_var().to_string()),
        };
        let max_tokens = entry.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        if !(1..=MAX_MAX_TOKENS).contains(&max_tokens) {
            return Err(ApiError::BadMaxTokens { value: max_tokens });
        }
        let temperature = entry.temperature.unwrap_or(0.0);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ApiError::BadTemperature { value: temperature });
        }
        let system_prompt = entry
            .system_prompt
            .unwrap_or_else(|| JUDGE_SYSTEM_PROMPT.to_string());
        if system_prompt.trim().is_empty() || system_prompt.contains(['\n', '\r']) {
            return Err(ApiError::BadSystemPrompt);
        }
        for (key, price) in [
            (
                "usd_per_million_input_tokens",
                entry.usd_per_million_input_tokens,
            ),
            (
                "usd_per_million_output_tokens",
                entry.usd_per_million_output_tokens,
            ),
        ] {
            if let Some(value) = price.filter(|p| !(p.is_finite() && *p >= 0.0)) {
                return Err(ApiError::BadPrice { key, value });
            }
        }
        Ok(ApiSpec {
            protocol,
            model,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key_env,
            max_tokens,
            temperature,
            system_prompt,
            usd_per_million_input_tokens: entry.usd_per_million_input_tokens,
            usd_per_million_output_tokens: entry.usd_per_million_output_tokens,
        })
    }

    /// The entry this spec was made from, as a table writes it back (defaults kept).
    pub fn to_entry(&self) -> ApiEntry {
        ApiEntry {
            model: Some(self.model.clone()),
            base_url: Some(self.base_url.clone()),
            api_key_env: Some(self.api_key_env.clone().unwrap_or_default()),
            max_tokens: Some(self.max_tokens),
            temperature: Some(self.temperature),
            system_prompt: Some(self.system_prompt.clone()),
            usd_per_million_input_tokens: self.usd_per_million_input_tokens,
            usd_per_million_output_tokens: self.usd_per_million_output_tokens,
        }
    }

    /// True when the runner can send its key: it needs none, or its variable (read
    /// through `lookup`, the environment outside tests) is set and not empty.
    pub fn key_is_set(&self, lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
        self.api_key_env
            .as_deref()
            .is_none_or(|var| lookup(var).is_some_and(|v| !v.to_string_lossy().trim().is_empty()))
    }

    /// The URL the request goes to. An `anthropic` base without `/v1` is taken as the
    /// Anthropic SDKs and Claude Code's `ANTHROPIC_BASE_URL` take it (they add `/v1`).
    pub fn endpoint_url(&self) -> String {
        let version = match self.protocol {
            Protocol::Anthropic if !self.base_url.ends_with("/v1") => "/v1",
            _ => "",
        };
        format!("{}{version}/{}", self.base_url, self.protocol.endpoint())
    }

    /// What identifies this runner besides its name (health, cache and single-flight
    /// keys): everything that shapes the request, never the key itself.
    pub fn identity(&self) -> Vec<String> {
        vec![
            format!("api={}", self.protocol.name()),
            format!("model={}", self.model),
            format!("base_url={}", self.base_url),
            format!("max_tokens={}", self.max_tokens),
            format!("temperature={}", self.temperature),
            format!("system_prompt={}", self.system_prompt),
        ]
    }
}

/// Checks a base URL: https anywhere, plain http only to loopback, no credentials,
/// query or fragment. Returns whether it points at this machine.
pub fn check_base_url(text: &str) -> Result<bool, ApiError> {
    let url = Url::parse(text).map_err(|e| ApiError::BadUrl {
        url: text.to_string(),
        why: e.to_string(),
    })?;
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(ApiError::UrlExtras {
            url: text.to_string(),
        });
    }
    let loopback = is_loopback(&url);
    match url.scheme() {
        "https" => Ok(loopback),
        "http" if loopback => Ok(true),
        "http" => Err(ApiError::PlainHttpOffLoopback {
            url: text.to_string(),
        }),
        _ => Err(ApiError::BadScheme {
            url: text.to_string(),
        }),
    }
}

/// True for a URL whose host is a loopback address or `localhost`.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(protocol: Protocol, entry: ApiEntry) -> Result<ApiSpec, String> {
        ApiSpec::from_entry(protocol, entry).map_err(|e| e.to_string())
    }

    fn model(name: &str) -> ApiEntry {
        ApiEntry {
            model: Some(name.into()),
            ..ApiEntry::default()
        }
    }

    #[test]
    fn defaults_follow_the_protocol_and_where_the_server_is() {
        let s = spec(Protocol::Anthropic, model("claude-haiku-4-5")).unwrap();
        assert_eq!(s.base_url, "https://api.anthropic.com/v1");
        assert_eq!(s.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert_eq!(s.endpoint_url(), "https://api.anthropic.com/v1/messages");
        assert_eq!((s.max_tokens, s.temperature), (DEFAULT_MAX_TOKENS, 0.0));
        assert_eq!(s.system_prompt, JUDGE_SYSTEM_PROMPT);
        let local = ApiEntry {
            base_url: Some("http://127.0.0.1:11434/v1/".into()),
            ..model("qwen2.5:0.5b")
        };
        let s = spec(Protocol::OpenAiChat, local).unwrap();
        assert_eq!(s.api_key_env, None, "a local server needs no key");
        assert_eq!(
            s.endpoint_url(),
            "http://127.0.0.1:11434/v1/chat/completions"
        );
        // An Anthropic base as its SDKs take it, without /v1, gets it added.
        for base in [
            "https://gw.example.com/anthropic",
            "https://gw.example.com/anthropic/",
        ] {
            let sdk_style = ApiEntry {
                base_url: Some(base.into()),
                ..model("m")
            };
            let s = spec(Protocol::Anthropic, sdk_style).unwrap();
            assert_eq!(
                s.endpoint_url(),
                "https://gw.example.com/anthropic/v1/messages"
            );
        }
        let s = spec(Protocol::OpenAiChat, model("gpt-4o-mini")).unwrap();
        assert_eq!(s.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        let no_key = ApiEntry {
            api_key_env: Some(String::new()),
            ..model("m")
        };
        assert_eq!(spec(Protocol::Anthropic, no_key).unwrap().api_key_env, None);
    }

    #[test]
    fn plain_http_only_to_this_machine() {
        for ok in [
            "http://127.0.0.1:8080/v1",
            "http://127.1.2.3/v1",
            "http://[::1]:9/v1",
            "http://localhost:11434/v1",
            "http://LOCALHOST/v1",
            "https://gateway.example.com/anthropic/v1",
        ] {
            assert!(check_base_url(ok).is_ok(), "{ok}");
        }
        for (bad, words) in [
            ("http://10.0.0.1/v1", "plain http is allowed only"),
            ("http://example.com/v1", "plain http is allowed only"),
            (
                "http://localhost.example.com/v1",
                "plain http is allowed only",
            ),
            ("http://127.0.0.1.nip.io/v1", "plain http is allowed only"),
            ("ftp://127.0.0.1/v1", "scheme must be https"),
            ("file:///tmp/x", "scheme must be https"),
            ("https://user:pw@example.com/v1", "user name, password"),
            ("https://example.com/v1?key=sk-1", "query"),
            ("not a url", "not a URL"),
        ] {
            let e = check_base_url(bad).unwrap_err().to_string();
            assert!(e.contains(words), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            (ApiEntry::default(), "\"model\""),
            (
                ApiEntry {
                    max_tokens: Some(0),
                    ..model("m")
                },
                "\"max_tokens\"",
            ),
            (
                ApiEntry {
                    temperature: Some(3.0),
                    ..model("m")
                },
                "\"temperature\"",
            ),
            (
                ApiEntry {
                    usd_per_million_output_tokens: Some(-1.0),
                    ..model("m")
                },
                "\"usd_per_million_output_tokens\"",
            ),
            (
                ApiEntry {
                    system_prompt: Some("two\nlines".into()),
                    ..model("m")
                },
                "\"system_prompt\"",
            ),
            (
                ApiEntry {
                    api_key_env: Some("A=B".into()),
                    ..model("m")
                },
                "\"api_key_env\"",
            ),
        ];
        for (entry, key) in cases {
            let e = spec(Protocol::Anthropic, entry).unwrap_err();
            assert!(e.contains(key), "{key}: {e}");
        }
    }

    #[test]
    fn identity_changes_with_the_request_and_never_holds_a_key() {
        let a = spec(Protocol::Anthropic, model("m1")).unwrap();
        let b = spec(Protocol::Anthropic, model("m2")).unwrap();
        assert_ne!(a.identity(), b.identity());
        let joined = a.identity().join(" ");
        assert!(!joined.contains("ANTHROPIC_API_KEY"), "{joined}");
        let back = ApiSpec::from_entry(Protocol::Anthropic, a.to_entry()).unwrap();
        assert_eq!(back, a);
    }
}
