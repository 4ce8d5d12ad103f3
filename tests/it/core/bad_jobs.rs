//! Jobs that are not good ones: judge-error verdicts in the right folder, oversized
//! jobs, and files that are not jobs at all.

use crate::support::*;

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::time::Duration;

use serde_json::{Value, json};

#[test]
fn every_bad_job_gets_an_unchecked_judge_error_verdict_in_the_right_folder() {
    let w = World::new();
    let marker = w.root.join("runner-ran");
    let runners = table(&[w.runner("r", &format!("touch '{}'\necho '{{}}'\n", s(&marker)))]);
    let obj = |v: Value| serde_json::to_vec(&v).unwrap();
    // (stem, file bytes, transcript of the verdict folder, start of the reason)
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        ("empty", b"".to_vec(), "", "judge error: job file is empty"),
        (
            "blank",
            b" \n\t\n".to_vec(),
            "",
            "judge error: job file is empty",
        ),
        (
            "invalid",
            b"{\"prompt\": \"p\",".to_vec(),
            "",
            "judge error: job file is not valid JSON",
        ),
        (
            "nan",
            b"{\"prompt\": \"p\", \"transcript\": \"T\", \"timeout_seconds\": NaN}".to_vec(),
            "",
            "judge error: job file is not valid JSON",
        ),
        (
            "list",
            b"[\"prompt\"]".to_vec(),
            "",
            "judge error: job file holds a JSON list, not an object",
        ),
        (
            "string",
            b"\"prompt\"".to_vec(),
            "",
            "judge error: job file holds a JSON string, not an object",
        ),
        (
            "noprompt",
            obj(json!({"transcript": "T1", "hook": "h"})),
            "T1",
            "judge error: missing \"prompt\"",
        ),
        (
            "numprompt",
            obj(json!({"prompt": 42, "transcript": "T1"})),
            "T1",
            "judge error: \"prompt\" is a number, not a string",
        ),
        (
            "slashid",
            obj(json!({"prompt": "p", "id": "a/b", "transcript": "T2"})),
            "T2",
            "judge error: bad \"id\" \"a/b\": it contains '/'",
        ),
        (
            "dotid",
            obj(json!({"prompt": "p", "id": ".x", "transcript": "T2"})),
            "T2",
            "judge error: bad \"id\" \".x\": it starts with '.'",
        ),
        (
            "numid",
            obj(json!({"prompt": "p", "id": 5, "transcript": "T2"})),
            "T2",
            "judge error: bad \"id\": a number, not a string",
        ),
        (
            "allstr",
            obj(json!({"prompt": "p", "transcript": "T3", "hit_if_all_true": "a"})),
            "T3",
            "judge error: \"hit_if_all_true\" is a string, not a list of strings",
        ),
        (
            "allnum",
            obj(json!({"prompt": "p", "transcript": "T3", "hit_if_all_true": ["a", 1]})),
            "T3",
            "judge error: \"hit_if_all_true\" holds a number, not only strings",
        ),
        (
            "anylist",
            obj(json!({"prompt": "p", "transcript": "T3", "hit_if_any_true": ["a"]})),
            "T3",
            "judge error: \"hit_if_any_true\" is a list, not an object",
        ),
        (
            "anynum",
            obj(json!({"prompt": "p", "transcript": "T3", "hit_if_any_true": {"a": 1}})),
            "T3",
            "judge error: \"hit_if_any_true\" key \"a\" has a number, not a notice string",
        ),
        (
            "numtranscript",
            obj(json!({"prompt": "p", "transcript": 7})),
            "",
            "judge error: \"transcript\" is a number, not a string",
        ),
    ];
    for (stem, bytes, transcript, reason) in &cases {
        let path = w.job_bytes(stem, bytes);
        let done = w.run_file(&path, Some(&runners));
        assert_eq!(done.code, Some(0), "{stem}: {done:?}");
        assert!(!path.exists(), "{stem}: job file not removed");
        let v = w.verdict_of(transcript, stem);
        assert_bad_job_verdict(&v, stem, reason);
        let line = format!(
            " WARN bad job id={stem} file={} reason=\"judge error",
            s(&path)
        );
        assert_eq!(
            w.log_lines(&line).len(),
            1,
            "{stem}: no {line:?} in\n{}",
            w.log()
        );
    }
    assert_eq!(w.verdict_of("T1", "noprompt")["hook"], "h");
    assert_eq!(w.verdict_of("T1", "noprompt")["transcript"], "T1");
    assert_eq!(
        w.all_verdicts().len(),
        cases.len(),
        "{:?}",
        w.all_verdicts()
    );
    assert!(!marker.exists(), "a runner was started for a bad job");
    assert!(w.log_lines("runner start").is_empty());
}

fn assert_bad_job_verdict(v: &Value, stem: &str, reason: &str) {
    assert_eq!(v["id"], stem, "{v}");
    assert_eq!(v["outcome"], "unchecked", "{v}");
    let got = v["reason"].as_str().unwrap_or_default();
    assert!(
        got.starts_with(reason),
        "{stem}: reason {got:?} does not start with {reason:?}"
    );
    assert_eq!(v["attempts"], json!([]), "{v}");
    assert_eq!(v["runner"], Value::Null, "{v}");
    assert_eq!(v["answer"], Value::Null, "{v}");
}

/// A job over `max_job_bytes` is never read whole; its judge-error verdict goes to the
/// folder of the transcript its first 64 KiB name (where `drain` finds it), else to
/// the empty transcript's folder, saying so.
#[test]
fn a_job_larger_than_max_job_bytes_is_a_judge_error_in_its_transcripts_folder() {
    let w = World::new();
    let config = w.config_file("small.toml", "max_job_bytes = 64\n");
    let job = json!({"prompt": "x".repeat(100), "transcript": "T-big"});
    let path = w.job("large", &job);
    let far = json!({"prompt": "x".repeat(70 * 1024), "transcript": "T-big"});
    let far_path = w.job("far", &far);
    let fits = w.job("fits", &json!({"prompt": "p", "transcript": "T-big"}));
    let runners = table(&[w.runner("r", "echo '{}'\n")]);
    for p in [&path, &far_path, &fits] {
        assert_eq!(w.run_file_configured(p, &runners, &config).code, Some(0));
        assert!(!p.exists());
    }
    let v = w.verdict_of("T-big", "large");
    assert_bad_job_verdict(
        &v,
        "large",
        "judge error: job file is larger than max_job_bytes (64 bytes)",
    );
    assert_eq!(v["transcript"], "T-big");
    let line = format!(
        " WARN bad job id=large file={} reason=\"judge error",
        s(&path)
    );
    assert_eq!(w.log_lines(&line).len(), 1, "{}", w.log());
    // Past the first 64 KiB: the empty transcript's folder, and the reason says why.
    let v = w.verdict_in(NO_TRANSCRIPT, "far");
    assert_bad_job_verdict(
        &v,
        "far",
        "judge error: job file is larger than max_job_bytes (64 bytes); no \"transcript\" in \
         its first 64 KiB, so its verdict is in the folder of the empty transcript",
    );
    assert_eq!(w.verdict_of("T-big", "fits")["outcome"], "hit");
    // drain --transcript T-big returns the oversized job's verdict.
    let mut cmd = w.cli();
    cmd.args(["drain", "--transcript", "T-big"]);
    let out = w.run(cmd);
    let ids: Vec<String> = out
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert!(ids.contains(&"large".to_string()), "{ids:?}");
}

#[test]
fn symlinks_folders_and_fifos_are_rejected_without_a_verdict() {
    for kind in ["symlink", "folder", "FIFO"] {
        let w = World::new();
        let path = w.jobs().join("x.json");
        let outside = w.root.join("outside.json");
        fs::write(&outside, r#"{"prompt": "p"}"#).unwrap();
        match kind {
            "symlink" => std::os::unix::fs::symlink(&outside, &path).unwrap(),
            "folder" => {
                fs::create_dir(&path).unwrap();
                fs::write(path.join("inside"), "x").unwrap();
            }
            _ => {
                let c = std::ffi::CString::new(s(&path)).unwrap();
                // SAFETY: mkfifo with a valid C string.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
        }
        let runners = table(&[w.runner("r", "echo '{}'\n")]);
        let mut cmd = w.cli();
        cmd.env(RUNNERS_VAR, &runners).arg("run").arg(&path);
        // A FIFO must not block the judge: a short bound.
        let done = w.spawn(cmd).finish(Duration::from_secs(30));
        // Not a job: exit 2, and moved to rejected/ since it lies in jobs/.
        assert_eq!(done.code, Some(2), "{kind}: {done:?}");
        assert!(
            fs::symlink_metadata(&path).is_err(),
            "{kind}: still in jobs/"
        );
        let moved = w.state().join("rejected/x.json");
        let meta = fs::symlink_metadata(&moved).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let t = meta.file_type();
        assert!(
            match kind {
                "symlink" => t.is_symlink(),
                "folder" => t.is_dir(),
                _ => t.is_fifo(),
            },
            "{kind}: moved file has type {t:?}"
        );
        assert_eq!(w.all_verdicts(), Vec::<std::path::PathBuf>::new(), "{kind}");
        assert_eq!(fs::read_to_string(&outside).unwrap(), r#"{"prompt": "p"}"#);
        if kind == "folder" {
            assert!(moved.join("inside").exists());
        }
        let line = format!(
            " WARN not a regular file: not a job, moved to rejected/ file={} kind=\"{kind}\" moved_to={}",
            s(&path),
            s(&moved)
        );
        assert_eq!(
            w.log_lines(&line).len(),
            1,
            "{kind}: no {line:?} in\n{}",
            w.log()
        );
        assert!(w.log_lines("runner start").is_empty());
    }
}
