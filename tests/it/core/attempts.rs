//! How attempts end: fallback, every reason text, signal deaths, clipping, a runner
//! that will not die, and how the prompt and output travel.

use super::*;
use crate::support::*;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;

#[test]
fn a_failing_runner_falls_back_to_the_next_that_answers() {
    let w = World::new();
    let runners = table(&[
        w.runner("fail", "echo boom >&2\nexit 2\n"),
        w.runner(
            "ok",
            "echo 'thinking...'\necho '{\"bad\": true, \"other\": false}'\necho done\n",
        ),
    ]);
    let job = w.job(
        "fb",
        &json!({
            "prompt": "p", "transcript": "/t/fb.jsonl", "hook": "PreToolUse", "rule_id": "r7",
            "on_hit": "ignored", "extra": 1,
            "hit_if_any_true": {"other": "Other!", "bad": "Bad!"},
        }),
    );
    let done = w.run_file(&job, Some(&runners));
    assert_eq!(done.code, Some(0), "{done:?}");
    let v = w.verdict_of("/t/fb.jsonl", "fb");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "id",
            "hook",
            "transcript",
            "outcome",
            "on_hit",
            "reason",
            "runner",
            "answer",
            "attempts",
            "finished_at",
            "rule_id"
        ]
    );
    assert_eq!(
        attempts(&v),
        expected(&[("fail", false, "exit 2: boom"), ("ok", true, "answered")])
    );
    for a in v["attempts"].as_array().unwrap() {
        assert!(a["elapsed_ms"].is_u64(), "{a}");
    }
    assert_eq!(v["id"], "fb");
    assert_eq!(v["hook"], "PreToolUse");
    assert_eq!(v["transcript"], "/t/fb.jsonl");
    assert_eq!(v["outcome"], "hit");
    assert_eq!(v["on_hit"], "Bad!");
    assert_eq!(v["reason"], "any true: bad");
    assert_eq!(v["runner"], "ok");
    assert_eq!(v["answer"], json!({"bad": true, "other": false}));
    assert_eq!(v["rule_id"], "r7");
    assert!(v["finished_at"].as_f64().is_some_and(|t| t > 1.7e9), "{v}");
    assert!(!job.exists());
    // Folders the judge creates are 0700; no temp file or claim is left behind.
    let folder = w.verdict_folder("/t/fb.jsonl");
    for dir in [
        w.state().join("verdicts"),
        folder.clone(),
        w.state().join("claims"),
    ] {
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    let names: Vec<_> = fs::read_dir(&folder)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["fb.json"]);
    assert_eq!(fs::read_dir(w.state().join("claims")).unwrap().count(), 0);
    // judge.log lines start with a UTC timestamp.
    for line in w.log().lines() {
        let stamp = line.split(' ').next().unwrap_or_default();
        assert!(
            stamp.len() > 20 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
            "{line}"
        );
    }
    let end = " INFO runner end id=fb runner=fail ok=false reason=\"exit 2: boom\" elapsed_ms=";
    assert_eq!(w.log_lines(end).len(), 1, "{}", w.log());
    assert_eq!(
        w.log_lines(" INFO job finished id=fb outcome=hit runner=ok duration_ms=")
            .len(),
        1
    );
}

/// Each reason text of docs/reference.md, "Runners", in one job, in the order of the table.
#[test]
fn every_attempt_reason_of_the_spec_is_pinned() {
    let w = World::new();
    let no_interpreter = w.bin.join("no-interpreter");
    fs::write(&no_interpreter, "#!/no/such/interpreter\necho never\n").unwrap();
    fs::set_permissions(&no_interpreter, fs::Permissions::from_mode(0o755)).unwrap();
    settle(&no_interpreter);
    let runners = table(&[
        json!(["gone", ["/no/such/runner", "{prompt}"]]),
        json!(["spawn", [s(&no_interpreter), "{prompt}"]]),
        w.runner("slow", "echo 'still thinking' >&2\nexec sleep 300\n"),
        w.runner("out", "echo 'only stdout'\nexit 3\n"),
        w.runner("sig", "echo 'about to die' >&2\nkill -9 $$\n"),
        w.runner("prose", "echo 'I think it is fine.'\n"),
        w.runner("ok", "echo '{\"fine\": true}'\n"),
        w.runner("never", "echo '{\"fine\": false}'\n"),
    ]);
    let config = w.config_file("grace.toml", "kill_grace_seconds = 1\n");
    let job = w.job(
        "reasons",
        &json!({"prompt": "p", "timeout_seconds": SLOW_TIMEOUT, "hit_if_all_true": ["fine"]}),
    );
    let done = w.run_file_configured(&job, &runners, &config);
    assert_eq!(done.code, Some(0), "{done:?}");
    let v = w.verdict_of("", "reasons");
    assert_eq!(
        attempts(&v),
        expected(&[
            ("gone", false, "not installed"),
            (
                "spawn",
                false,
                "NotFound: No such file or directory (os error 2)"
            ),
            (
                "slow",
                false,
                &format!("timed out after {SLOW_TIMEOUT}s: still thinking"),
            ),
            ("out", false, "exit 3: only stdout"),
            ("sig", false, "exit -9: about to die"),
            (
                "prose",
                false,
                "no JSON object line in stdout: I think it is fine."
            ),
            ("ok", true, "answered"),
        ])
    );
    assert_eq!(v["outcome"], "hit");
    assert_eq!(v["reason"], "all true: fine");
    assert_eq!(v["runner"], "ok");
    assert!(
        w.log_lines("runner=never").is_empty(),
        "a runner after the answer ran"
    );
    // judge.log escapes inner newlines; these reasons have none.
    let end =
        " INFO runner end id=reasons runner=gone ok=false reason=\"not installed\" elapsed_ms=";
    assert_eq!(w.log_lines(end).len(), 1, "{}", w.log());
}

#[test]
fn a_signal_death_without_output_is_exit_minus_the_signal() {
    let w = World::new();
    let runners = table(&[w.runner("sig", "kill -9 $$\n")]);
    let job = w.job("sig", &json!({"prompt": "p"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    let v = w.verdict_of("", "sig");
    assert_eq!(attempts(&v), expected(&[("sig", false, "exit -9")]));
    assert_eq!(v["reason"], "no runner answered: sig: exit -9");
}

#[test]
fn reasons_are_clipped_to_300_code_points_keeping_the_end() {
    let w = World::new();
    let alphabet: Vec<char> = "abcdéжxyz日Q".chars().collect();
    let mut stderr: String = (0..997)
        .map(|i| alphabet[(i * 7) % alphabet.len()])
        .collect();
    stderr.push_str("END");
    assert_eq!(stderr.chars().count(), 1000);
    let runners = table(&[w.runner("long", &format!("printf '%s' '{stderr}' >&2\nexit 1\n"))]);
    let job = w.job("clip", &json!({"prompt": "p"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    let v = w.verdict_of("", "clip");
    let reason = v["attempts"][0]["reason"].as_str().unwrap();
    let tail: String = stderr.chars().skip(1000 - 292).collect();
    assert_eq!(reason, format!("exit 1: {tail}"));
    assert_eq!(reason.chars().count(), 300);
    let overall = v["reason"].as_str().unwrap();
    assert_eq!(overall.chars().count(), 300, "{overall}");
    assert!(overall.starts_with("no runner answered: "), "{overall}");
    let last: String = stderr.chars().skip(1000 - 40).collect();
    assert!(overall.ends_with(&last), "{overall}");
}

// ---------------------------------------------------------------- process tree

#[test]
fn a_runner_that_ignores_sigterm_and_leaves_a_setsid_grandchild_does_not_hang_the_judge() {
    let w = World::new();
    let runner_pid = w.root.join("runner.pid");
    let grandchild_pid = w.root.join("grandchild.pid");
    let mut cleanup = KillPidsOnDrop::new(&[&runner_pid, &grandchild_pid]);
    let stubborn = format!(
        "trap '' TERM\n\
         hostpid > '{}'\n\
         setsid sh -c 'read -r p _ </proc/self/stat; echo $p@$(stat -Lc %i /proc/self/ns/pid) > \"{}\"; exec sleep 300' &\n\
         while :; do sleep 1; done\n",
        s(&runner_pid),
        s(&grandchild_pid)
    );
    let runners = table(&[
        w.runner("stubborn", &stubborn),
        w.runner("ok", "echo '{\"a\": true}'\n"),
    ]);
    let config = w.config_file("grace.toml", "kill_grace_seconds = 1\n");
    let job = w.job(
        "tree",
        &json!({"prompt": "p", "timeout_seconds": SLOW_TIMEOUT, "hit_if_all_true": ["a"]}),
    );
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, &runners)
        .arg("--config")
        .arg(&config)
        .arg("run")
        .arg(&job);
    let done = w.spawn(cmd).finish(NO_HANG);
    assert_eq!(done.code, Some(0), "{done:?}");
    let v = w.verdict_of("", "tree");
    assert_eq!(
        attempts(&v),
        expected(&[
            (
                "stubborn",
                false,
                &format!("timed out after {SLOW_TIMEOUT}s")
            ),
            ("ok", true, "answered")
        ])
    );
    assert_eq!(v["outcome"], "hit");
    let pids = [read_pid(&runner_pid), read_pid(&grandchild_pid)];
    let all_gone = wait_until(within(NO_HANG), || pids.iter().all(|&p| !is_running(p)));
    let alive: Vec<u32> = pids.into_iter().filter(|&p| is_running(p)).collect();
    assert!(all_gone, "runner processes still alive: {alive:?}");
    cleanup.armed = false;
}

// ---------------------------------------------------------------- prompt and output transport

#[test]
fn a_prompt_that_looks_like_a_flag_reaches_the_runner_literally_after_double_dash() {
    let w = World::new();
    let script = w.script("lit", &format!("{}echo '{{\"ok\": true}}'\n", w.recorder()));
    let runners = table(&[json!(["lit", ["/bin/sh", s(&script), "--", "{prompt}"]])]);
    let job = w.job("flag", &json!({"prompt": "--version"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    assert_eq!(w.recorded_argv("lit"), ["--", "--version"]);
    assert_eq!(w.recorded("lit", "stdin").trim_end(), "/dev/null");
    assert_eq!(w.verdict_of("", "flag")["runner"], "lit");
}

#[test]
fn a_300_kib_prompt_goes_intact_on_stdin_without_the_slot_and_its_double_dash() {
    let w = World::new();
    let mut prompt = String::new();
    let mut i = 0;
    while prompt.len() < 300 * 1024 {
        prompt.push_str(&format!(
            "-{i} ascii, é ü, 日本語, 🦀, --flag 'q' \"dq\" $HOME \\n\n"
        ));
        i += 1;
    }
    assert!(prompt.len() > 131_071);
    let script = w.script(
        "big",
        &format!(
            "cat > '{rec}/stdin.bin'\nprintf '%s\\0' \"$@\" > '{rec}/argv.bin'\necho '{{\"ok\": true}}'\n",
            rec = s(&w.rec)
        ),
    );
    let runners = table(&[json!([
        "big",
        ["/bin/sh", s(&script), "-p", "--", "{prompt}"]
    ])]);
    let job = w.job("bigp", &json!({"prompt": prompt}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    let got = fs::read(w.rec.join("stdin.bin")).unwrap();
    assert_eq!(got.len(), prompt.len());
    assert!(got == prompt.as_bytes(), "stdin differs from the prompt");
    assert_eq!(
        nul_items(&fs::read(w.rec.join("argv.bin")).unwrap()),
        ["-p"]
    );
    assert_eq!(w.verdict_of("", "bigp")["outcome"], "hit");

    // A prompt holding NUL cannot be an argument either.
    let job = w.job("nul", &json!({"prompt": "a\u{0}b -- c"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    assert_eq!(fs::read(w.rec.join("stdin.bin")).unwrap(), b"a\0b -- c");
    assert_eq!(
        nul_items(&fs::read(w.rec.join("argv.bin")).unwrap()),
        ["-p"]
    );

    // 131,071 bytes still fit in one argument: the slot is filled, stdin is /dev/null.
    let fits = format!("-{}", "x".repeat(131_070));
    let job = w.job("fits", &json!({"prompt": fits}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    assert_eq!(fs::read(w.rec.join("stdin.bin")).unwrap(), b"");
    let argv = nul_items(&fs::read(w.rec.join("argv.bin")).unwrap());
    assert!(
        argv == ["-p", "--", fits.as_str()],
        "argv of the 131,071-byte prompt"
    );
}

#[test]
fn a_runner_without_a_prompt_slot_gets_the_prompt_on_stdin() {
    let w = World::new();
    let script = w.script(
        "stdin",
        &format!("cat > '{}/stdin.txt'\necho '{{\"ok\": true}}'\n", s(&w.rec)),
    );
    let runners = table(&[json!(["stdin", ["/bin/sh", s(&script)]])]);
    let job = w.job("slotless", &json!({"prompt": "short prompt\nline 2"}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    assert_eq!(
        fs::read_to_string(w.rec.join("stdin.txt")).unwrap(),
        "short prompt\nline 2"
    );
}

#[test]
fn non_utf8_output_still_answers() {
    let w = World::new();
    let runners = table(&[w.runner(
        "bytes",
        "printf '\\377\\376 noise\\n{\"ok\": true}\\n'\nprintf '\\377' >&2\n",
    )]);
    let job = w.job("bytes", &json!({"prompt": "p", "hit_if_all_true": ["ok"]}));
    assert_eq!(w.run_file(&job, Some(&runners)).code, Some(0));
    let v = w.verdict_of("", "bytes");
    assert_eq!(attempts(&v), expected(&[("bytes", true, "answered")]));
    assert_eq!(v["answer"], json!({"ok": true}));
    assert_eq!(v["outcome"], "hit");
}

#[test]
fn fifty_megabytes_of_output_are_read_with_bounded_memory() {
    let w = World::new();
    let runners = table(&[w.runner(
        "chatty",
        "yes 'a line of model output that goes on and on' | head -c 52428800\n\
         printf '\\n{\"big\": true}\\n'\n",
    )]);
    let job = w.job("big", &json!({"prompt": "p", "hit_if_all_true": ["big"]}));
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, &runners).arg("run").arg(&job);
    // The peak RSS of this one judge and the descendants it waited for, through GNU
    // time (support/rss.rs: not this shared test process's own high-water mark).
    let report = w.path("big.rss");
    let done = w
        .spawn(under_gnu_time(&cmd, &report))
        .finish(Duration::from_secs(120));
    assert_eq!(done.code, Some(0), "{done:?}");
    let v = w.verdict_of("", "big");
    assert_eq!(attempts(&v), expected(&[("chatty", true, "answered")]));
    assert_eq!(v["outcome"], "hit");
    let max_rss_kib = peak_rss_kib(&report);
    assert!(max_rss_kib > 0);
    assert!(
        max_rss_kib < 25 * 1024,
        "llm-judge max RSS {max_rss_kib} KiB for 50 MB of output"
    );
}
