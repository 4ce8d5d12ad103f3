//! Hook mode (docs/hooks.md): what `llm-judge hook claude|codex|cursor` reads from a
//! harness and writes back, the user's rules, the prompt a rule's job asks, and the
//! hook entries `llm-judge hooks install` merges into each harness's settings. Pure:
//! the command (`commands::hook`) does the reading, writing and waiting.

pub mod codex_trust;
pub mod input;
pub mod install;
pub mod jobs;
pub mod output;
pub mod prompt;
pub mod rules;
