//! Unit tests of `core::eval::cases`.

use super::*;

/// The shipped example rules and their labelled case files read as eval cases:
/// every rule has cases of both outcomes, and each case is its rule's job.
#[test]
fn the_shipped_example_rules_have_cases_eval_reads() {
    let rules =
        crate::core::hooks::rules::parse_rules(include_str!("../../../rules/examples.toml"))
            .expect("rules/examples.toml");
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/cases");
    let timeouts = TimeoutRules {
        default_seconds: 60.0,
        max_seconds: 600.0,
    };
    for rule in &rules {
        assert!(!rule.enabled, "{}: shipped examples start off", rule.name);
        let path = base.join(format!("{}.jsonl", rule.name));
        let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut reader = CaseReader::new(timeouts).with_rules(rules.clone(), base.clone());
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            reader.line(i + 1, line);
        }
        let cases = reader
            .finish()
            .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
        let expects: Vec<Expect> = cases.iter().map(|c| c.expect).collect();
        assert!(
            expects.contains(&Expect::Hit) && expects.contains(&Expect::Clean),
            "{}",
            rule.name
        );
        for case in &cases {
            assert_eq!(case.job.rule_id.as_deref(), Some(rule.name.as_str()));
            assert_eq!(case.job.mode, rule.mode);
            if let Some(Value::String(cwd)) = &case.job.cwd {
                assert!(Path::new(cwd).is_dir(), "{}: {cwd}", case.job.id);
            }
        }
    }
    // A rule case names a rule of the file and carries its reply.
    let mut reader = CaseReader::new(timeouts).with_rules(rules, base);
    reader.line(1, br#"{"rule": "nope", "reply": "r", "expect": "hit"}"#);
    reader.line(2, br#"{"rule": "gives-up-early", "expect": "hit"}"#);
    reader.line(
        3,
        br#"{"rule": "gives-up-early", "reply": "r", "expect": "hit", "repyl": 1}"#,
    );
    let errors: Vec<String> = reader
        .finish()
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert!(errors[0].contains("no rule named \"nope\""), "{errors:?}");
    assert!(errors[1].contains("no \"reply\""), "{errors:?}");
    assert!(errors[2].contains("repyl"), "{errors:?}");
}
use crate::core::job::Mode;

const RULES: TimeoutRules = TimeoutRules {
    default_seconds: 60.0,
    max_seconds: 600.0,
};

fn parse(text: &str) -> Result<Vec<Case>, Vec<CaseError>> {
    parse_cases(text.as_bytes(), RULES)
}

fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(cases) => panic!("expected errors, got {} cases", cases.len()),
        Err(e) => e.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn cases_parse_as_jobs_with_expect_and_line_ids() {
    let text = "\n{\"prompt\": \"a?\", \"expect\": \"hit\", \"hit_if_all_true\": [\"a\"]}\n  \r\n{\"prompt\": \"b?\", \"id\": \"bee\", \"expect\": \"clean\", \"mode\": \"investigate\", \"timeout_seconds\": 9000, \"hit_if_any_true\": {\"b\": \"B\"}}\n";
    let cases = parse(text).unwrap();
    assert_eq!(cases.len(), 2);
    assert_eq!(
        (cases[0].job.id.as_str(), cases[0].expect),
        ("line-2", Expect::Hit)
    );
    assert_eq!(
        cases[0].job.rule,
        crate::core::job::HitRule::AllTrue(vec!["a".into()])
    );
    assert_eq!(
        (cases[1].job.id.as_str(), cases[1].expect),
        ("bee", Expect::Clean)
    );
    assert_eq!(cases[1].job.mode, Mode::Investigate);
    assert_eq!(
        cases[1].job.timeout_seconds, 600.0,
        "the job's timeout rules"
    );
}

#[test]
fn every_bad_line_is_named_with_its_fix() {
    let text = [
        r#"{"prompt": "ok", "expect": "hit", "hit_if_all_true": ["k"]}"#,
        r#"{"prompt": "x", "expect": "hit""#,
        r#"["prompt"]"#,
        r#"{"prompt": "no expect"}"#,
        r#"{"prompt": "p", "expect": "yes"}"#,
        r#"{"prompt": "p", "expect": true}"#,
        r#"{"expect": "clean"}"#,
        r#"{"prompt": "p", "expect": "clean", "hit_if_all_true": "k"}"#,
        r#"{"prompt": "p", "expect": "clean", "id": "line-1", "hit_if_all_true": ["k"]}"#,
        r#"{"prompt": "p", "expect": "clean", "id": "a/b"}"#,
    ]
    .join("\n");
    let e = errors(&text);
    assert_eq!(e.len(), 9, "{e:#?}");
    assert!(e[0].starts_with("line 2: not valid JSON ("), "{}", e[0]);
    assert!(e[0].contains("at column"), "{}", e[0]);
    assert!(!e[0].contains("at line"), "{}", e[0]);
    assert!(e[0].contains("one JSON object on one line"), "{}", e[0]);
    assert!(
        e[1].starts_with("line 3: a JSON list, not an object"),
        "{}",
        e[1]
    );
    assert!(
        e[2].starts_with("line 4: no \"expect\"; add \"expect\": \"hit\""),
        "{}",
        e[2]
    );
    assert!(
        e[3].starts_with("line 5: \"expect\" is \"yes\"; give \"hit\" or \"clean\""),
        "{}",
        e[3]
    );
    assert!(e[4].starts_with("line 6: \"expect\" is true;"), "{}", e[4]);
    assert!(
        e[5].starts_with("line 7: missing \"prompt\"; fix it as in a job file"),
        "{}",
        e[5]
    );
    assert!(
        e[6].starts_with("line 8: \"hit_if_all_true\" is a string"),
        "{}",
        e[6]
    );
    assert!(
        e[7].starts_with("line 9: id \"line-1\" is line 1's too; give each case its own"),
        "{}",
        e[7]
    );
    assert!(e[8].starts_with("line 10: bad \"id\" \"a/b\""), "{}", e[8]);
}

#[test]
fn a_file_of_blank_lines_has_no_cases() {
    assert_eq!(errors("\n  \n"), [CaseError::NoCases.to_string()]);
    assert!(errors("").len() == 1);
}

#[test]
fn a_case_holds_only_job_keys_and_expect_with_a_known_mode_and_a_rule() {
    let text = [
        r#"{"prompt": "p", "expect": "hit", "hit_if_all_ture": ["k"]}"#,
        r#"{"prompt": "p", "expect": "hit", "hit_if_all_true": ["k"], "harness": "x", "expcet": "hit"}"#,
        r#"{"prompt": "p", "expect": "hit", "hit_if_all_true": ["k"], "mode": "investgate"}"#,
        r#"{"prompt": "p", "expect": "hit"}"#,
        r#"{"prompt": "p", "expect": "hit", "hit_if_all_true": []}"#,
        r#"{"prompt": "p", "expect": "clean", "hit_if_any_true": {}}"#,
        r#"{"prompt": "p", "expect": "hit", "hit_if_all_true": ["k"], "mode": null}"#,
    ]
    .join("\n");
    let e = errors(&text);
    assert_eq!(e.len(), 6, "{e:#?}");
    assert!(
        e[0].starts_with(
            "line 1: \"hit_if_all_ture\" is not a case key (did you mean \"hit_if_all_true\"?); a case holds only the keys of a job file and \"expect\" (prompt, id,"
        ),
        "{}",
        e[0]
    );
    assert!(
        e[1].starts_with(
            "line 2: \"expcet\" is not a case key (did you mean \"expect\"?), \"harness\" is not a case key;"
        ),
        "{}",
        e[1]
    );
    assert_eq!(
        e[2],
        "line 3: \"mode\" is \"investgate\"; give \"investigate\" or leave \"mode\" out"
    );
    for (i, line) in [(3, 4), (4, 5), (5, 6)] {
        assert!(
            e[i].starts_with(&format!(
                "line {line}: no rule names a key of the answer, so the answer cannot change the outcome; add \"hit_if_all_true\""
            )),
            "{}",
            e[i]
        );
    }
}

#[test]
fn a_long_line_and_many_bad_lines_are_reported_in_bounded_space() {
    let mut reader = CaseReader::new(RULES);
    reader.too_long(1, 10);
    for line in 2..100 {
        reader.line(line, b"not json");
    }
    let Err(e) = reader.finish() else {
        panic!("expected errors")
    };
    assert_eq!(e.len(), ERRORS_KEPT + 1);
    assert_eq!(
        e[0].to_string(),
        "line 1: longer than max_job_bytes (10 bytes), the most a job file may hold; shorten the case or raise max_job_bytes"
    );
    assert_eq!(e[ERRORS_KEPT].to_string(), "and 79 more bad lines");
}
