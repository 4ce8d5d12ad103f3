//! `llm-judge eval CASES.jsonl...` with the real binary and fake runners: the table and
//! the JSON per runner, `--min-accuracy`, bad lines, `--runner`, the pool bound, the
//! cache only when asked, tokens and cost read from a Claude-style envelope, several
//! case files, and unchecked cases kept apart from wrong ones.

use crate::support::*;

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};

/// Answers `{"bug": true}` whatever it is asked, and counts its runs.
const YES: &str = "echo run >> \"$0.runs\"\necho '{\"bug\": true}'\n";
/// Answers `{"bug": true}` only when the prompt says BUG.
const READER: &str =
    "case \"$1\" in *BUG*) echo '{\"bug\": true}';; *) echo '{\"bug\": false}';; esac\n";

/// Five cases: three expect a hit, two clean; the last one says BUG but expects clean.
fn five_cases(w: &World) -> PathBuf {
    let case = |id: &str, prompt: &str, expect: &str| {
        json!({"id": id, "prompt": prompt, "hit_if_all_true": ["bug"], "expect": expect})
            .to_string()
    };
    let text = [
        case(
            "c1",
            "Reply shows a BUG. Reply {\"bug\": true|false}",
            "hit",
        ),
        case("c2", "Another BUG.", "hit"),
        String::new(),
        case("c3", "A BUG again.", "hit"),
        case("c4", "All fine.", "clean"),
        case("c5", "BUG-free, as it says.", "clean"),
    ]
    .join("\n");
    write(w, "cases.jsonl", &text)
}

fn write(w: &World, name: &str, text: &str) -> PathBuf {
    let path = w.root.join(name);
    fs::write(&path, text).unwrap();
    path
}

/// `llm-judge eval` with `runners` as the override table, bounded by NO_HANG.
fn eval(w: &World, runners: &[Value], args: &[&str]) -> Finished {
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, Value::Array(runners.to_vec()).to_string())
        .arg("eval")
        .args(args);
    w.run(cmd)
}

/// The text table's row of `runner`, split on white space.
fn row<'a>(out: &'a Finished, runner: &str) -> Vec<&'a str> {
    out.stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&runner))
        .unwrap_or_else(|| panic!("no row for {runner}: {}", out.stdout))
}

fn runner_json<'a>(report: &'a Value, runner: &str) -> &'a Value {
    report["runners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["runner"] == runner)
        .unwrap_or_else(|| panic!("no {runner} in {report}"))
}

#[test]
fn every_case_runs_on_every_runner_and_each_gets_a_row() {
    let w = World::new();
    let runners = [w.runner("yes", YES), w.runner("reader", READER)];
    let cases = five_cases(&w);
    let out = eval(&w, &runners, &[s(&cases)]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.starts_with("runner "), "{}", out.stdout);
    // yes: c1-c3 right, c4 and c5 wrong; reader: only c5 wrong.
    assert_eq!(
        row(&out, "yes")[1..7],
        ["5", "3", "60.0%", "3/0/0", "2/0/0", "0"]
    );
    assert_eq!(
        row(&out, "reader")[1..7],
        ["5", "4", "80.0%", "3/0/0", "1/1/0", "0"]
    );
    assert!(
        out.stdout.contains("\nwrong, yes: c4, c5\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("\nwrong, reader: c5\n"),
        "{}",
        out.stdout
    );
    // Five runs of yes, each on its own (no fallback to reader, none skipped).
    let runs = fs::read_to_string(w.bin.join("yes.sh.runs")).unwrap();
    assert_eq!(runs.lines().count(), 5);
    // Cases are never jobs and get no verdict files.
    assert_eq!(fs::read_dir(w.jobs()).unwrap().count(), 0);
    let verdicts = fs::read_dir(w.state().join("verdicts"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(verdicts, 0);
}

#[test]
fn json_report_and_min_accuracy_exit_codes() {
    let w = World::new();
    let runners = [w.runner("yes", YES), w.runner("reader", READER)];
    let cases = five_cases(&w);
    let out = eval(&w, &runners, &[s(&cases), "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let report = out.json();
    assert_eq!(
        (&report["min_accuracy"], &report["passed"]),
        (&Value::Null, &json!(true))
    );
    let yes = runner_json(&report, "yes");
    assert_eq!(
        (
            &yes["cases"],
            &yes["correct"],
            &yes["accuracy"],
            &yes["unchecked"]
        ),
        (&json!(5), &json!(3), &json!(0.6), &json!(0))
    );
    assert_eq!(
        yes["confusion"],
        json!({"hit": {"hit": 3, "clean": 0, "unchecked": 0}, "clean": {"hit": 2, "clean": 0, "unchecked": 0}})
    );
    assert_eq!(yes["wrong"], json!(["c4", "c5"]));
    assert!(yes["latency_ms"]["p50"].is_u64(), "{yes}");
    assert!(yes["latency_ms"]["p95"].as_u64() >= yes["latency_ms"]["p50"].as_u64());
    assert_eq!(
        yes["tokens"],
        json!({"input": 0, "cached_input": 0, "output": 0})
    );
    assert_eq!(yes["cost_usd"], Value::Null, "plain text reports no cost");
    let reader = runner_json(&report, "reader");
    assert_eq!(
        (&reader["correct"], &reader["accuracy"]),
        (&json!(4), &json!(0.8))
    );
    assert_eq!(reader["wrong"], json!(["c5"]));

    let strict = eval(&w, &runners, &[s(&cases), "--min-accuracy", "0.9"]);
    assert_eq!(strict.code, Some(1), "{strict:?}");
    assert!(
        strict
            .stdout
            .ends_with("min accuracy 90.0%: failed (yes 60.0%, reader 80.0%)\n"),
        "{}",
        strict.stdout
    );
    let lenient = eval(
        &w,
        &runners,
        &[s(&cases), "--min-accuracy", "0.5", "--json"],
    );
    assert_eq!(lenient.code, Some(0), "{lenient:?}");
    assert_eq!(
        (&lenient.json()["min_accuracy"], &lenient.json()["passed"]),
        (&json!(0.5), &json!(true))
    );
    // Only yes is under 0.7; --runner reader leaves it out.
    assert_eq!(
        eval(&w, &runners, &[s(&cases), "--min-accuracy", "0.7"]).code,
        Some(1)
    );
    let one = eval(
        &w,
        &runners,
        &[s(&cases), "--min-accuracy", "0.7", "--runner", "reader"],
    );
    assert_eq!(one.code, Some(0), "{one:?}");
    assert!(!one.stdout.contains("\nyes "), "{}", one.stdout);
}

#[test]
fn tokens_and_cost_come_from_the_envelope_and_failures_are_unchecked() {
    let w = World::new();
    let envelope = r#"echo '{"type":"result","is_error":false,"result":"{\"bug\": true}","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":5}}'"#;
    // Asking for the envelope (`--output-format json`) is what makes it read as one.
    let mut claude_like = w.runner("claude-like", envelope);
    if let Some(argv) = claude_like[1].as_array_mut() {
        argv.insert(2, json!("--output-format"));
        argv.insert(3, json!("json"));
    }
    let runners = [
        claude_like,
        w.runner("broken", "echo 'model overloaded' >&2\nexit 3\n"),
    ];
    let cases = write(
        &w,
        "cases.jsonl",
        "{\"prompt\": \"a\", \"hit_if_all_true\": [\"bug\"], \"expect\": \"hit\"}\n\
         {\"prompt\": \"b\", \"hit_if_all_true\": [\"bug\"], \"expect\": \"clean\"}\n",
    );
    let out = eval(&w, &runners, &[s(&cases), "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let report = out.json();
    let claude = runner_json(&report, "claude-like");
    assert_eq!(
        claude["tokens"],
        json!({"input": 20, "cached_input": 0, "output": 10})
    );
    assert_eq!(claude["cost_usd"], json!(0.002));
    assert_eq!(
        (&claude["correct"], &claude["wrong"]),
        (&json!(1), &json!(["line-2"]))
    );
    let broken = runner_json(&report, "broken");
    // No answer: no accuracy (not 0 %), nothing wrong, each case unchecked with why.
    assert_eq!(
        (
            &broken["unchecked"],
            &broken["answered"],
            &broken["accuracy"],
            &broken["cost_usd"],
            &broken["wrong"]
        ),
        (&json!(2), &json!(0), &Value::Null, &Value::Null, &json!([]))
    );
    assert_eq!(
        broken["confusion"],
        json!({"hit": {"hit": 0, "clean": 0, "unchecked": 1}, "clean": {"hit": 0, "clean": 0, "unchecked": 1}})
    );
    let reason = "no runner answered: broken: exit 3: model overloaded";
    assert_eq!(
        broken["unchecked_cases"],
        json!([{"id": "line-1", "reason": reason}, {"id": "line-2", "reason": reason}])
    );
    let text = eval(&w, &runners, &[s(&cases)]);
    let cells = row(&text, "claude-like");
    assert_eq!(cells[cells.len() - 4..], ["20", "0", "10", "0.002000"]);
    assert_eq!(row(&text, "broken").last(), Some(&"-"));
    assert_eq!(row(&text, "broken")[3], "-", "no accuracy: {}", text.stdout);
    assert!(
        text.stdout
            .contains("\nbroken answered none of its 2 cases, so it has no accuracy\n"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains(&format!("\nunchecked, broken: line-1, line-2: {reason}\n")),
        "{}",
        text.stdout
    );
    assert!(!text.stdout.contains("wrong, broken"), "{}", text.stdout);
    let strict = eval(&w, &runners, &[s(&cases), "--min-accuracy", "0.1"]);
    assert_eq!(strict.code, Some(1), "{strict:?}");
    assert!(
        strict
            .stdout
            .ends_with("min accuracy 10.0%: failed (broken answered none)\n"),
        "{}",
        strict.stdout
    );
}

/// Accuracy counts the answered cases: a runner that fails on one case and is right
/// on the others is 100 % over what it answered, with the failure listed apart.
#[test]
fn accuracy_counts_the_answered_cases_only() {
    let w = World::new();
    let flaky = w.runner(
        "flaky",
        "case \"$1\" in *DOWN*) echo 'busy' >&2; exit 2;; *) echo '{\"bug\": true}';; esac\n",
    );
    let cases = write(
        &w,
        "cases.jsonl",
        "{\"id\": \"a\", \"prompt\": \"a\", \"hit_if_all_true\": [\"bug\"], \"expect\": \"hit\"}\n\
         {\"id\": \"b\", \"prompt\": \"DOWN\", \"hit_if_all_true\": [\"bug\"], \"expect\": \"hit\"}\n",
    );
    let out = eval(&w, &[flaky], &[s(&cases), "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let report = out.json();
    let flaky = runner_json(&report, "flaky");
    assert_eq!(
        (
            &flaky["cases"],
            &flaky["answered"],
            &flaky["correct"],
            &flaky["accuracy"],
            &flaky["wrong"]
        ),
        (&json!(2), &json!(1), &json!(1), &json!(1.0), &json!([]))
    );
    assert_eq!(
        flaky["unchecked_cases"],
        json!([{"id": "b", "reason": "no runner answered: flaky: exit 2: busy"}])
    );
}

/// Several case files (a shell glob): every case of each runs, a wrong or unchecked
/// case is named after its file (ids may repeat across files), a bad line names its
/// file, and a file given twice is refused.
#[test]
fn several_case_files_run_together_and_name_each_cases_file() {
    let w = World::new();
    let runners = [w.runner("reader", READER)];
    let case = |id: &str, prompt: &str, expect: &str| {
        json!({"id": id, "prompt": prompt, "hit_if_all_true": ["bug"], "expect": expect})
            .to_string()
    };
    fs::create_dir_all(w.root.join("cases")).unwrap();
    let a = write(
        &w,
        "cases/a.jsonl",
        &[case("c1", "a BUG", "hit"), case("c2", "fine", "clean")].join("\n"),
    );
    let b = write(
        &w,
        "cases/b.jsonl",
        &[case("c1", "a BUG", "clean"), case("c2", "a BUG", "hit")].join("\n"),
    );
    let out = eval(&w, &runners, &[s(&a), s(&b), "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let report = out.json();
    let reader = runner_json(&report, "reader");
    assert_eq!(
        (&reader["cases"], &reader["correct"]),
        (&json!(4), &json!(3))
    );
    assert_eq!(reader["wrong"], json!([format!("{}:c1", s(&b))]));
    let text = eval(&w, &runners, &[s(&a), s(&b)]);
    assert!(
        text.stdout
            .contains(&format!("\nwrong, reader: {}:c1\n", s(&b))),
        "{}",
        text.stdout
    );

    let bad = write(&w, "cases/bad.jsonl", "{\"prompt\": \"x\"}\n");
    let out = eval(&w, &runners, &[s(&a), s(&bad)]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains(&format!("{}: line 1: no \"expect\"", s(&bad))),
        "{}",
        out.stderr
    );
    let out = eval(&w, &runners, &[s(&a), s(&a)]);
    out.assert_exit(2, "is given twice; give each cases file once");
    let out = eval(&w, &runners, &[]);
    assert_eq!(out.code, Some(2), "no file at all: {out:?}");
}

#[test]
fn a_bad_line_is_exit_2_naming_file_and_line_and_nothing_runs() {
    let w = World::new();
    let runners = [w.runner("yes", YES)];
    let cases = write(
        &w,
        "bad.jsonl",
        "{\"prompt\": \"a\", \"expect\": \"hit\"}\n\n{\"prompt\": \"b\", \"expect\": \"maybe\"}\n{\"prompt\": \"c\"}\n",
    );
    let out = eval(&w, &runners, &[s(&cases)]);
    assert_eq!(out.code, Some(2), "{out:?}");
    let file = s(&cases);
    assert!(
        out.stderr.contains(&format!(
            "{file}: line 3: \"expect\" is \"maybe\"; give \"hit\" or \"clean\""
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains(&format!("{file}: line 4: no \"expect\"; add")),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(!w.bin.join("yes.sh.runs").exists(), "nothing ran");
    let not_json = write(
        &w,
        "worse.jsonl",
        "{\"prompt\": \"a\", \"expect\": \"hit\",}\n",
    );
    let out = eval(&w, &runners, &[s(&not_json)]);
    out.assert_exit(2, "line 1: not valid JSON (");
}

#[test]
fn usage_errors_name_the_flag_the_runner_or_the_file() {
    let w = World::new();
    let runners = [w.runner("yes", YES), w.runner("reader", READER)];
    let cases = five_cases(&w);
    let out = eval(&w, &runners, &[s(&cases), "--runner", "gpt"]);
    out.assert_exit(
        2,
        "--runner gpt: no such runner in the table the cases use; available: yes, reader",
    );
    let out = eval(&w, &runners, &[s(&cases), "--min-accuracy", "1.5"]);
    out.assert_exit(2, "--min-accuracy");
    let missing = w.root.join("missing.jsonl");
    let out = eval(&w, &runners, &[s(&missing)]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains(&format!("cannot read {}", s(&missing))),
        "{}",
        out.stderr
    );
    assert!(!w.bin.join("yes.sh.runs").exists(), "nothing ran");
}

#[test]
fn at_most_workers_runs_at_once() {
    let w = World::new();
    let spans = w.root.join("spans");
    let body = format!(
        "echo \"start $(date +%s%N)\" >> {0}\nsleep 0.2\necho \"end $(date +%s%N)\" >> {0}\necho '{{\"bug\": true}}'\n",
        s(&spans)
    );
    let runners = [w.runner("a", &body), w.runner("b", &body)];
    let cases = five_cases(&w);
    let out = eval(&w, &runners, &[s(&cases), "--workers", "2", "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let (lines, peak) = peak_overlap(&fs::read_to_string(&spans).unwrap());
    assert_eq!(lines, 20, "ten runs, each a start and an end");
    assert!(peak <= 2, "{peak} runs at once with --workers 2");
}

#[test]
fn the_answer_cache_is_used_only_with_cache() {
    let w = World::new();
    let runners = [w.runner("yes", YES)];
    let cases = five_cases(&w);
    let runs = || {
        fs::read_to_string(w.bin.join("yes.sh.runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let with_cache = |extra: &[&str]| {
        let mut args = vec![s(&cases), "--set", "cache.ttl_seconds=3600", "--json"];
        args.extend_from_slice(extra);
        let out = eval(&w, &runners, &args);
        assert_eq!(out.code, Some(0), "{out:?}");
        out.json()
    };
    with_cache(&[]);
    assert_eq!(runs(), 5, "no cache without --cache");
    with_cache(&["--cache"]);
    assert_eq!(runs(), 10, "the first --cache run fills it");
    let cached = with_cache(&["--cache"]);
    assert_eq!(runs(), 10, "the second takes every answer from it");
    let yes = runner_json(&cached, "yes");
    assert_eq!(yes["correct"], json!(3), "outcomes from the cached answers");
    assert_eq!(
        yes["latency_ms"]["p50"],
        Value::Null,
        "a cached answer has no runner time"
    );
    with_cache(&[]);
    assert_eq!(runs(), 15, "and without --cache it is not read");
}
