//! Property tests of the pure core against bad input (proptest, stable Rust): job file
//! bytes, runner stdout, attempt reasons, and the investigate safety allowlist. Case
//! counts are moderate (the whole file runs in seconds on 2 cores); raise them with
//! `PROPTEST_CASES=5000 cargo test --test it props::`.

mod job_files;
mod safety;
mod stdout_and_reasons;

use llm_judge::api::TimeoutRules;
use proptest::test_runner::Config;

const RULES: TimeoutRules = TimeoutRules {
    default_seconds: 60.0,
    max_seconds: 600.0,
};

fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}
