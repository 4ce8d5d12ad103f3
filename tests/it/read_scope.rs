//! What a job's runners may read (issue 39 item 3): a job `cwd` that is `/`, `$HOME`,
//! a folder above `$HOME` (also through a symlink), or the state folder or inside it,
//! is never given to a runner: it works in a fresh folder, judge.log says why, and
//! each attempt carries the reason as `cwd_refused`. The refusal is logged when the
//! job is read, so a job answered from the cache leaves the same trace (issue 38
//! item 6). The real claude's reads are in `tests/real_runners/main.rs`.

use crate::support::*;

use std::fs;

use serde_json::{Value, json};

/// A runner that records its working folder under `rec/<prompt>.pwd` and answers.
fn pwd_recorder(w: &World) -> String {
    let rec = s(&w.rec).to_string();
    table(&[w.runner(
        "r",
        &format!("pwd > '{rec}'/\"$1\".pwd\necho '{{\"ok\": true}}'\n"),
    )])
}

/// judge.log's `cwd refused` lines of job `id`.
fn refusals(w: &World, id: &str) -> Vec<String> {
    let field = format!(" id={id}");
    w.log_lines("cwd refused")
        .into_iter()
        .filter(|l| l.ends_with(&field) || l.contains(&format!("{field} ")))
        .collect()
}

#[test]
fn home_root_above_home_and_the_state_folder_are_refused_as_a_jobs_cwd() {
    let w = World::new();
    fs::create_dir_all(&w.home).unwrap();
    std::os::unix::fs::symlink(&w.home, w.root.join("to-home")).unwrap();
    let runners = pwd_recorder(&w);
    let cases: [(&str, String, Option<&str>); 7] = [
        (
            "home",
            s(&w.home).into(),
            Some("is the home folder ($HOME)"),
        ),
        (
            "linked",
            s(&w.root.join("to-home")).into(),
            Some("is the home folder ($HOME)"),
        ),
        ("root", "/".into(), Some("is the root folder")),
        (
            "above",
            s(&w.root).into(),
            Some("is a folder above the home folder ($HOME)"),
        ),
        (
            "state",
            s(&w.state()).into(),
            Some("is the judge's state folder or inside it"),
        ),
        (
            "jobs",
            s(&w.jobs()).into(),
            Some("is the judge's state folder or inside it"),
        ),
        ("work", s(&w.work).into(), None),
    ];
    for (stem, cwd, refused) in &cases {
        let job = w.job(
            stem,
            &json!({"prompt": stem, "mode": "investigate", "cwd": cwd, "hit_if_all_true": ["ok"]}),
        );
        let done = w.run_file(&job, Some(&runners));
        assert_eq!(done.code, Some(0), "{stem}: {done:?}");
        let v = w.verdict_of("", stem);
        assert_eq!(v["outcome"], "hit", "{stem}: {v}");
        let attempt = &v["attempts"][0];
        assert_eq!(
            attempt["reason"], "answered",
            "the reason keeps its grammar: {v}"
        );
        let pwd = fs::read_to_string(w.rec.join(format!("{stem}.pwd"))).unwrap();
        match refused {
            Some(what) => {
                assert!(
                    pwd.trim_end().starts_with(s(&w.runner_tmp())),
                    "{stem}: the runner worked in {pwd}"
                );
                let note = attempt["cwd_refused"].as_str().unwrap_or_default();
                assert!(note.contains(what), "{stem}: {v}");
                let refusal = refusals(&w, stem);
                assert_eq!(refusal.len(), 1, "{stem}: one line: {}", w.log());
                assert!(refusal[0].contains(what), "{}", refusal[0]);
            }
            None => {
                assert_eq!(pwd.trim_end(), s(&w.work), "{stem}");
                assert!(attempt.get("cwd_refused").is_none(), "{v}");
            }
        }
    }
}

/// `ask --cwd $HOME` is refused the same way; the attempts it prints say why.
#[test]
fn ask_with_the_home_folder_as_cwd_is_refused_and_says_why() {
    let w = World::new();
    fs::create_dir_all(&w.home).unwrap();
    let mut cmd = w.cli();
    cmd.env(RUNNERS_VAR, pwd_recorder(&w))
        .args(["ask", "--mode", "investigate", "--cwd"])
        .arg(&w.home)
        .arg("asked");
    let done = w.run(cmd);
    assert_eq!(done.code, Some(0), "{done:?}");
    let out: Value = serde_json::from_str(done.stdout.trim()).unwrap();
    let note = out["attempts"][0]["cwd_refused"]
        .as_str()
        .unwrap_or_default();
    assert!(note.contains("is the home folder"), "{out}");
    let pwd = fs::read_to_string(w.rec.join("asked.pwd")).unwrap();
    assert!(pwd.trim_end() != s(&w.home), "ask ran in HOME");
}

/// Issue 38 item 6: a refused cwd is logged when the job is read, once, also when the
/// answer comes from the cache and no runner starts.
#[test]
fn a_refused_cwd_is_logged_once_when_the_job_is_read_also_on_a_cache_hit() {
    let w = World::new();
    fs::create_dir_all(&w.home).unwrap();
    let config = w.config_file("cache.toml", "[cache]\nttl_seconds = 3600\n");
    let runners = pwd_recorder(&w);
    let first = w.job(
        "first",
        &json!({"prompt": "same", "hit_if_all_true": ["ok"]}),
    );
    assert_eq!(
        w.run_file_configured(&first, &runners, &config).code,
        Some(0)
    );
    let cached = w.job(
        "cached",
        &json!({"prompt": "same", "cwd": s(&w.home), "hit_if_all_true": ["ok"]}),
    );
    assert_eq!(
        w.run_file_configured(&cached, &runners, &config).code,
        Some(0)
    );
    let v = w.verdict_of("", "cached");
    assert_eq!(v["attempts"][0]["runner"], "cache", "a cache hit: {v}");
    let lines = refusals(&w, "cached");
    assert_eq!(lines.len(), 1, "{}", w.log());
    assert!(lines[0].contains("is the home folder"), "{}", lines[0]);
}
