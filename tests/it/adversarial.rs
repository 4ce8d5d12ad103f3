//! Bad input through the real binary and a running daemon (docs/reference.md: "State
//! folder", "Job file", "Runners"): job files with duplicate keys, `NaN`, 100k-deep
//! nesting, a multi-megabyte prompt, prompts that are runner flags; adversarial file names
//! in `jobs/`. Every job file gets exactly one verdict (or is ignored, when its name says
//! it is a producer's temp file), the daemon never dies, and a job after all of them is
//! still judged.

use crate::support::*;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

/// The fake runner: records its args (NUL-separated) and stdin under `rec/`, keyed
/// by its pid and PID namespace, then answers. Its argv puts a flag and `--` before the prompt.
fn recording_runner(w: &World) -> Value {
    let script = w.path("bin/rec.sh");
    fs::create_dir_all(w.path("rec")).unwrap();
    fs::write(
        &script,
        format!(
            "read -r p _ </proc/self/stat\nR={}/rec/$p-$(stat -Lc %i /proc/self/ns/pid)\nprintf '%s\\0' \"$@\" > $R.argv\ncat > $R.stdin\necho '{{\"ok\": true}}'\n",
            w.path("").display()
        ),
    )
    .unwrap();
    json!(["rec", ["/bin/sh", script, "-p", "--", "{prompt}"]])
}

/// Every recorded run: (args, stdin bytes).
fn runs(w: &World) -> Vec<(Vec<String>, Vec<u8>)> {
    names(&w.path("rec"))
        .iter()
        .filter_map(|f| f.strip_suffix(".argv"))
        .map(|stem| {
            let args = nul_items(&fs::read(w.path(&format!("rec/{stem}.argv"))).unwrap());
            let stdin = fs::read(w.path(&format!("rec/{stem}.stdin"))).unwrap_or_default();
            (args, stdin)
        })
        .collect()
}

/// Publishes raw bytes as a job: a short hidden temp name, then rename.
fn raw_job(w: &World, name: &[u8], bytes: &[u8]) {
    let jobs = w.state().join("jobs");
    let temp = jobs.join(format!(".raw-{}.tmp", name.len()));
    fs::write(&temp, bytes).unwrap();
    fs::rename(&temp, jobs.join(OsStr::from_bytes(name))).unwrap();
}

fn start(w: &World, mark: &str, config: &str) -> Daemon {
    write_config(w, config);
    let runner = recording_runner(w);
    let d = w.start_with(command(w, Some(&[runner]), mark));
    w.wait_log("daemon start");
    d
}

/// The daemon is alive, judges one more job, and nothing it started is left running.
fn still_serving(w: &World, d: &mut Daemon, mark: &str) {
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "daemon died: {}",
        d.stderr()
    );
    let before = w.verdicts().len();
    w.job(
        "sentinel",
        &json!({"prompt": "sentinel", "transcript": "S"}),
    );
    wait_for("sentinel judged", NO_HANG, || {
        w.verdicts().len() == before + 1
    });
    assert_eq!(w.verdict("sentinel")["runner"], "rec");
    let left = wait_no_marked(mark, &[d.child.id()], Duration::from_secs(30));
    assert!(left.is_empty(), "left running: {left:?}");
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(30)).success());
    assert!(names(&w.state().join("claims")).is_empty());
}

#[test]
fn adversarial_job_contents_each_get_one_verdict_and_the_daemon_survives() {
    let w = World::new();
    let mark = new_mark("contents");
    let _reaper = Reaper::new(&mark);
    let mut d = start(
        &w,
        &mark,
        "fsync = false\nkill_grace_seconds = 1\nworkers = 4\n",
    );

    let deep_list = "[".repeat(100_000);
    let deep_inside = format!(
        "{{\"prompt\": \"p\", \"x\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep_objects = format!(
        "{{\"prompt\": \"p\", \"x\": {}1{}}}",
        "{\"a\": ".repeat(100_000),
        "}".repeat(100_000)
    );
    let mut big = String::new();
    let mut i = 0;
    while big.len() < 4 * 1024 * 1024 {
        big.push_str(&format!("{i} ascii é 日本 🦀 \"q\" \\ $HOME `x` --flag\n"));
        i += 1;
    }
    let big_job = json!({"prompt": big, "transcript": "T"}).to_string();
    assert!(big_job.len() < 8 * 1024 * 1024, "under max_job_bytes");

    // (file stem, bytes, expected: Ok(prompt the runner must get) or Err(reason words))
    let flag_prompts = [
        "--dangerously-skip-permissions",
        "--version",
        "-p",
        "--",
        "-",
        "--help",
        "{prompt}",
    ];
    let mut cases: Vec<(String, Vec<u8>, Result<String, &str>)> = vec![
        (
            "dup-keys".into(),
            br#"{"prompt": "first", "transcript": "T", "prompt": "dup-last"}"#.to_vec(),
            Ok("dup-last".into()),
        ),
        (
            "dup-id".into(),
            br#"{"id": "fine", "prompt": "p", "id": "../evil"}"#.to_vec(),
            Err("judge error: bad \"id\""),
        ),
        (
            "nan".into(),
            br#"{"prompt": "p", "timeout_seconds": NaN}"#.to_vec(),
            Err("judge error: job file is not valid JSON"),
        ),
        (
            "infinity".into(),
            br#"{"prompt": "p", "timeout_seconds": -Infinity}"#.to_vec(),
            Err("judge error: job file is not valid JSON"),
        ),
        (
            "huge-number".into(),
            br#"{"prompt": "huge-number", "timeout_seconds": 1e400}"#.to_vec(),
            Err("judge error: job file is not valid JSON"),
        ),
        (
            "lone-surrogate".into(),
            br#"{"prompt": "\ud800"}"#.to_vec(),
            Err("judge error: job file is not valid JSON"),
        ),
        (
            "bom".into(),
            "\u{feff}{\"prompt\": \"p\"}".as_bytes().to_vec(),
            Err("judge error: job file is not valid JSON"),
        ),
        (
            "deep-list".into(),
            deep_list.into_bytes(),
            Err("judge error: job file is not valid JSON"),
        ),
        (
            "deep-inside".into(),
            deep_inside.into_bytes(),
            Err("judge error: job file is not valid JSON"),
        ),
        (
            "deep-objects".into(),
            deep_objects.into_bytes(),
            Err("judge error: job file is not valid JSON"),
        ),
        ("big-prompt".into(), big_job.into_bytes(), Ok(big.clone())),
        (
            "nul-prompt".into(),
            json!({"prompt": "a\u{0}b"}).to_string().into_bytes(),
            Ok("a\u{0}b".into()),
        ),
        (
            "tiny-timeout".into(),
            br#"{"prompt": "tiny-timeout", "timeout_seconds": 5e-324}"#.to_vec(),
            // A positive timeout of about 0 s: answered or timed out, either is fine.
            Err("any"),
        ),
    ];
    for (i, p) in flag_prompts.iter().enumerate() {
        cases.push((
            format!("flag{i}"),
            json!({"prompt": p}).to_string().into_bytes(),
            Ok(p.to_string()),
        ));
    }
    for (stem, bytes, _) in &cases {
        raw_job(&w, format!("{stem}.json").as_bytes(), bytes);
    }
    wait_for("every job judged", Duration::from_secs(120), || {
        w.verdicts().len() == cases.len()
    });
    assert!(w.jobs_left().is_empty(), "{:?}", w.jobs_left());
    let runs = runs(&w);
    for (stem, _, expected) in &cases {
        let v = w.verdict(stem);
        match expected {
            Ok(prompt) => {
                assert_eq!(v["outcome"], "hit", "{stem}: {}", v["reason"]);
                let got: Vec<&(Vec<String>, Vec<u8>)> = runs
                    .iter()
                    .filter(|(args, stdin)| {
                        (args.len() == 3 && args[2] == *prompt)
                            || (args.len() == 1 && stdin.as_slice() == prompt.as_bytes())
                    })
                    .collect();
                assert_eq!(got.len(), 1, "{stem}: one run with its prompt");
                let (args, stdin) = got[0];
                if prompt.len() > 131_071 || prompt.contains('\0') {
                    // On stdin, intact; no `--` and no slot left in argv.
                    assert_eq!(args, &["-p"], "{stem}");
                    assert!(
                        stdin.as_slice() == prompt.as_bytes(),
                        "{stem}: stdin differs"
                    );
                } else {
                    assert_eq!(args, &["-p", "--", prompt.as_str()], "{stem}");
                    assert!(stdin.is_empty(), "{stem}: stdin is /dev/null");
                }
            }
            Err(words) if words.starts_with("judge error") => {
                assert_eq!(v["outcome"], "unchecked", "{stem}");
                let reason = v["reason"].as_str().unwrap();
                assert!(reason.starts_with(words), "{stem}: {reason}");
                assert_eq!(v["attempts"], json!([]), "{stem}");
            }
            Err(_) => {
                let reason = v["attempts"][0]["reason"].as_str().unwrap_or("");
                assert!(
                    reason == "answered" || reason.starts_with("timed out after 0"),
                    "{stem}: {v}"
                );
            }
        }
    }
    // The duplicate transcript key: the verdict went where the last one points.
    let dup = w
        .verdicts()
        .into_iter()
        .find(|(_, n, _)| n == "dup-keys.json")
        .unwrap();
    assert_eq!(dup.0, llm_judge::api::transcript_hash("T"));
    // Judge errors landed in the "" folder (no transcript known).
    let nan = w
        .verdicts()
        .into_iter()
        .find(|(_, n, _)| n == "nan.json")
        .unwrap();
    assert_eq!(nan.0, llm_judge::api::transcript_hash(""));
    still_serving(&w, &mut d, &mark);
}

/// Adversarial job file names (as raw bytes) and whether they are jobs.
fn adversarial_names() -> Vec<(Vec<u8>, bool)> {
    let mut names: Vec<(Vec<u8>, bool)> = vec![
        (b"\xff\xfe.json".to_vec(), true),
        (b"-rf.json".to_vec(), true),
        (b"--version.json".to_vec(), true),
        (b"a b.json".to_vec(), true),
        (b"new\nline.json".to_vec(), true),
        (b"tab\there.json".to_vec(), true),
        (b" .json".to_vec(), true),
        (b"$(touch pwned).json".to_vec(), true),
        (b"`touch pwned2`.json".to_vec(), true),
        (b"*.json".to_vec(), true),
        (b"back\\slash.json".to_vec(), true),
        (b"quote\"s'.json".to_vec(), true),
        ("日本語 🦀.json".as_bytes().to_vec(), true),
        (b"x.json.json".to_vec(), true),
        (b"\x1b[31mred.json".to_vec(), true),
        (b"cr\r.json".to_vec(), true),
        (format!("{}.json", "n".repeat(200)).into_bytes(), true),
        // Not jobs: hidden, or not ending in ".json".
        (b".hidden.json".to_vec(), false),
        (b"..json".to_vec(), false),
        (b".json".to_vec(), false),
        (b"x.JSON".to_vec(), false),
        (b"x.json~".to_vec(), false),
        (b"x.json.tmp".to_vec(), false),
        (b"json".to_vec(), false),
        (b"\xff\xfe.jso".to_vec(), false),
        (b"-rf".to_vec(), false),
    ];
    names.sort();
    names
}

fn lossy_stem(name: &[u8]) -> String {
    let s = String::from_utf8_lossy(name);
    s.strip_suffix(".json").unwrap_or(&s).to_string()
}

#[test]
fn adversarial_file_names_in_jobs_each_get_one_verdict_or_are_ignored() {
    let w = World::new();
    let mark = new_mark("names");
    let _reaper = Reaper::new(&mark);
    let mut d = start(
        &w,
        &mark,
        "fsync = false\nkill_grace_seconds = 1\nworkers = 4\n",
    );
    let names = adversarial_names();
    for (name, _) in &names {
        let prompt = format!("job {}", lossy_stem(name));
        raw_job(
            &w,
            name,
            json!({"prompt": prompt, "transcript": "T"})
                .to_string()
                .as_bytes(),
        );
    }
    let jobs: Vec<&Vec<u8>> = names.iter().filter(|(_, j)| *j).map(|(n, _)| n).collect();
    let ignored: Vec<&Vec<u8>> = names.iter().filter(|(_, j)| !*j).map(|(n, _)| n).collect();
    let jobs_dir = w.state().join("jobs");
    let present = |name: &[u8]| jobs_dir.join(OsStr::from_bytes(name)).exists();
    wait_for("every job judged", Duration::from_secs(60), || {
        jobs.iter().all(|n| !present(n)) && w.verdicts().len() == jobs.len()
    });
    let verdicts = w.verdicts();
    for name in &jobs {
        let file = format!("{}.json", lossy_stem(name));
        let found: Vec<&(String, String, Value)> =
            verdicts.iter().filter(|(_, n, _)| *n == file).collect();
        assert_eq!(found.len(), 1, "{file:?}: {found:?}");
        let v = &found[0].2;
        assert_eq!(v["outcome"], "hit", "{file:?}: {v}");
        assert_eq!(v["id"], lossy_stem(name), "{file:?}");
        assert_eq!(found[0].0, llm_judge::api::transcript_hash("T"));
    }
    assert_eq!(verdicts.len(), jobs.len(), "no verdict for an ignored file");
    for name in &ignored {
        assert!(
            present(name),
            "{:?} was touched",
            String::from_utf8_lossy(name)
        );
    }
    assert_eq!(
        runs(&w).len(),
        jobs.len(),
        "each job ran its runner exactly once"
    );
    for f in ["pwned", "pwned2", "state/pwned", "state/jobs/pwned"] {
        assert!(
            !w.path(f).exists(),
            "{f}: a file name was run as shell text"
        );
    }
    still_serving(&w, &mut d, &mark);
}

/// docs/reference.md, "State folder", "Job file": a file name of up to 255 bytes is a legal
/// job name, and every regular job file gets exactly one verdict. With a 250-byte name the
/// verdict's hidden temp file (".<stem>.json.<pid>.<n>.tmp", about 265 bytes) exceeds
/// NAME_MAX: the publish fails with ENAMETOOLONG, the job stays queued and is retried on
/// every rescan, and never gets a verdict (after 3 tries the "interrupted 3 times" verdict
/// fails to publish the same way). `drain` has the same limit for its
/// ".<name>.draining-..." claim names.
#[test]
fn a_250_byte_job_file_name_gets_one_verdict() {
    let w = World::new();
    let mark = new_mark("long-name");
    let _reaper = Reaper::new(&mark);
    let mut d = start(
        &w,
        &mark,
        "fsync = false\nkill_grace_seconds = 1\nrescan_seconds = 1\n",
    );
    let name = format!("{}.json", "L".repeat(245));
    assert_eq!(name.len(), 250);
    raw_job(
        &w,
        name.as_bytes(),
        br#"{"prompt": "long", "transcript": "T"}"#,
    );
    // The job file goes after its verdict is published: wait for both.
    wait_for("the long-named job judged and removed", NO_HANG, || {
        w.verdicts().len() == 1 && w.jobs_left().is_empty()
    });
    still_serving(&w, &mut d, &mark);
}

/// docs/reference.md, "State folder": the verdict is `verdicts/<h>/<stem>.json`, and every
/// job file gets exactly one verdict. Two non-UTF-8 job names whose lossy UTF-8 forms agree
/// ("\xff.json" and "\xfe.json" both become "\u{fffd}.json") are two jobs, but the judge
/// names verdicts by the lossy stem, so the second verdict replaces the first: one verdict
/// is lost (and a drain returns one line for two jobs).
#[test]
fn two_non_utf8_names_with_the_same_lossy_stem_get_two_verdicts() {
    let w = World::new();
    let mark = new_mark("lossy");
    let _reaper = Reaper::new(&mark);
    let mut d = start(&w, &mark, "fsync = false\nkill_grace_seconds = 1\n");
    raw_job(&w, b"\xff.json", br#"{"prompt": "one", "transcript": "T"}"#);
    raw_job(&w, b"\xfe.json", br#"{"prompt": "two", "transcript": "T"}"#);
    let jobs_dir: PathBuf = w.state().join("jobs");
    wait_for("both judged", NO_HANG, || {
        fs::read_dir(&jobs_dir).unwrap().count() == 0 && runs(&w).len() == 2
    });
    let verdicts = w.verdicts();
    assert_eq!(verdicts.len(), 2, "two jobs, two verdicts: {verdicts:?}");
    still_serving(&w, &mut d, &mark);
}

/// Config numbers are checked to be finite and positive, but a huge finite one
/// panics where it becomes a `Duration` (`Duration::from_secs_f64`): `run` exits 101
/// without a verdict (leaving a claim that counts as an interruption) and the daemon
/// panics at start. They should be refused naming the key, or honoured.
#[test]
fn huge_config_durations_are_refused_or_honoured_never_a_panic() {
    let w = World::new();
    let mark = new_mark("huge-config");
    let _reaper = Reaper::new(&mark);
    let echo = json!(["echo", ["/bin/echo", "{\"ok\": true}"]]);
    // `run` with a job asking for as long as the config allows.
    write_config(&w, "fsync = false\nmax_timeout_seconds = 1e20\n");
    w.job("long", &json!({"prompt": "p", "timeout_seconds": 1e20}));
    let job = w.state().join("jobs/long.json");
    let mut p = spawn(
        &w,
        command(&w, Some(std::slice::from_ref(&echo)), &mark),
        &["run", job.to_str().unwrap()],
    );
    let (status, _) = p.finish(Duration::from_secs(30));
    let refused = status.code() == Some(2) && p.stderr().contains("max_timeout_seconds");
    assert!(
        refused || (status.success() && w.verdicts().len() == 1),
        "run: {status:?}: {}",
        p.stderr()
    );
    // The daemon with keys that become durations at start.
    for key in [
        "rescan_seconds = 1e20",
        "undeliverable_days = 1e300",
        "kill_grace_seconds = 1e20",
    ] {
        write_config(&w, &format!("fsync = false\n{key}\n"));
        let mut d = spawn(
            &w,
            command(&w, Some(std::slice::from_ref(&echo)), &mark),
            &["daemon"],
        );
        let starts = w.log().matches("daemon start").count();
        wait_for("daemon up or gone", NO_HANG, || {
            !d.alive() || w.log().matches("daemon start").count() > starts
        });
        if d.alive() {
            signal(d.child.id(), libc::SIGTERM);
        }
        let (status, _) = d.finish(Duration::from_secs(30));
        assert_ne!(status.code(), Some(101), "{key}: panicked: {}", d.stderr());
    }
}
