//! Randomized kill soak (SPEC section 6, "exactly one verdict ... whatever crash,
//! kill -9, restart or shutdown happens in between"; "a verdict that was published
//! and then drained before a crash is not published again").
//!
//! Jobs arrive in random batches, some while the daemon is down, some while it runs;
//! the daemon is started and SIGKILLed at random moments; fake runners take 0-200 ms;
//! a `llm-judge drain` loop runs the whole time. Then: every job file has exactly
//! one verdict, counted as drained + remaining verdict files (a verdict drained twice,
//! or drained and published again, is a duplicate; none is a loss), no job file, no
//! claim, no hidden temp or drain-claim file is left after a final clean start and
//! stop, and no runner process is alive. Runner runs are counted from the runners'
//! own invocation log (a job may be run again after a crash before its verdict was
//! published: allowed, and counted as a re-run).
//!
//! The CI version is `soak_ci` (200 jobs, 15 kills). A longer one:
//! `cargo test --release --test it soak:: -- --ignored --nocapture`
//! (SOAK_JOBS, SOAK_KILLS, SOAK_SEED override its size and seed).

use crate::support::*;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Transcripts the drain loop drains; every tenth job has none (its verdict lands in
/// the undeliverable folder and stays).
const TRANSCRIPTS: [&str; 4] = ["T0", "T1", "T2", "T3"];

struct Plan {
    jobs: usize,
    kills: usize,
    seed: u64,
    /// How long a daemon lives before its SIGKILL, in ms (uniform).
    life_ms: (u64, u64),
}

#[derive(Debug, Default)]
struct Figures {
    jobs: usize,
    kills: usize,
    starts: usize,
    runner_runs: usize,
    reruns: usize,
    drained: usize,
    remaining: usize,
    interrupted_3: usize,
    losses: usize,
    duplicates: usize,
    seconds: f64,
}

/// A drained or remaining verdict: (job id, outcome, reason).
type Seen = (String, String, String);

fn drain_loop(
    w: &World,
    mark: &str,
    stop: &AtomicBool,
    out: &Mutex<Vec<Seen>>,
    errors: &Mutex<Vec<String>>,
) {
    let pass = || {
        for t in TRANSCRIPTS {
            let mut p = spawn(
                w,
                command(w, Some(&[]), mark),
                &["drain", "--transcript", t],
            );
            let (status, _) = p.finish(Duration::from_secs(60));
            if !status.success() {
                errors
                    .lock()
                    .unwrap()
                    .push(format!("drain {t}: {status:?}: {}", p.stderr()));
            }
            for line in p.stdout().lines() {
                let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
                out.lock().unwrap().push((
                    v["id"].as_str().unwrap_or("?").to_string(),
                    v["outcome"].as_str().unwrap_or("?").to_string(),
                    v["reason"].as_str().unwrap_or("").to_string(),
                ));
            }
            // Each pass's files would pile up: one proc-N.out per drain.
            let _ = fs::remove_file(&p.out);
            let _ = fs::remove_file(&p.err);
        }
    };
    while !stop.load(Ordering::SeqCst) {
        pass();
        // Pacing, not synchronisation: leave the 2 cores to the daemon now and then.
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn soak(plan: Plan) -> Figures {
    let started = Instant::now();
    eprintln!(
        "soak: seed {} ({} jobs, {} kills); rerun with SOAK_SEED={}",
        plan.seed, plan.jobs, plan.kills, plan.seed
    );
    let mut rng = Rng::new(plan.seed);
    let w = World::new();
    let mark = new_mark("soak");
    let _reaper = Reaper::new(&mark);
    write_config(
        &w,
        "fsync = true\nkill_grace_seconds = 1\nworkers = 4\nrescan_seconds = 2\n",
    );
    let runner = w.runner(
        "fake",
        "set -- $1\necho \"$1 $$\" >> $W/invocations.log\nsleep $2\necho '{\"ok\": true}'",
    );
    let runners = [runner];

    // The jobs, in random batches: batch k is published before (or right after)
    // daemon start k; the last batch before the final start.
    let ids: Vec<String> = (0..plan.jobs).map(|i| format!("j{i:05}")).collect();
    let mut batches: Vec<Vec<usize>> = vec![Vec::new(); plan.kills + 1];
    for i in 0..plan.jobs {
        // Front-loaded: most jobs early, so kills land on a busy daemon.
        let k = (rng.range(0, (plan.kills + 1) as u64) * rng.range(0, 2)) as usize;
        batches[k].push(i);
    }
    let publish = |rng: &mut Rng, batch: &[usize]| {
        for &i in batch {
            let sleep = rng.range(0, 201) as f64 / 1000.0;
            let mut job = json!({"prompt": format!("{} {sleep}", ids[i])});
            if i % 10 != 9 {
                job["transcript"] = json!(TRANSCRIPTS[i % TRANSCRIPTS.len()]);
            }
            w.job(&ids[i], &job);
        }
    };

    let stop = AtomicBool::new(false);
    let drained: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
    let drain_errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut figures = Figures {
        jobs: plan.jobs,
        ..Figures::default()
    };
    std::thread::scope(|scope| {
        let drainer = scope.spawn(|| drain_loop(&w, &mark, &stop, &drained, &drain_errors));
        let stop_on_panic = StopOnDrop(&stop);
        for batch in batches.iter().take(plan.kills) {
            let before = rng.range(0, 2) == 0;
            if before {
                publish(&mut rng, batch);
            }
            let mut d = w.start_with(command(&w, Some(&runners), &mark));
            figures.starts += 1;
            if !before {
                publish(&mut rng, batch);
            }
            // Fault injection at a random moment (this sleep is the fault's timing).
            let life = rng.range(plan.life_ms.0, plan.life_ms.1);
            std::thread::sleep(Duration::from_millis(life));
            d.kill9();
            figures.kills += 1;
        }
        publish(&mut rng, &batches[plan.kills]);
        // The final daemon finishes everything.
        let mut d = w.start_with(command(&w, Some(&runners), &mark));
        figures.starts += 1;
        let jobs_dir = w.state().join("jobs");
        let claims = w.state().join("claims");
        wait_for("every job done", Duration::from_secs(600), || {
            names(&jobs_dir).is_empty() && names(&claims).is_empty()
        });
        d.signal("TERM");
        let status = d.wait_exit(Duration::from_secs(60));
        assert!(status.success(), "final daemon: {status:?}: {}", d.stderr());
        drop(d);
        // A clean start and stop: its recovery sweep must find nothing to fix.
        let starts = w.log().matches("daemon start").count();
        let mut d = w.start_with(command(&w, Some(&runners), &mark));
        figures.starts += 1;
        wait_for("clean start", Duration::from_secs(60), || {
            w.log().matches("daemon start").count() > starts
        });
        d.signal("TERM");
        let status = d.wait_exit(Duration::from_secs(60));
        assert!(status.success(), "clean daemon: {status:?}: {}", d.stderr());
        drop(stop_on_panic);
        drainer.join().expect("drain loop");
    });

    // ---- invariants
    let errors = drain_errors.into_inner().unwrap();
    assert!(errors.is_empty(), "drain failures: {errors:?}");
    let state = w.state();
    assert!(
        names(&state.join("jobs")).is_empty(),
        "{:?}",
        names(&state.join("jobs"))
    );
    assert!(
        names(&state.join("claims")).is_empty(),
        "{:?}",
        names(&state.join("claims"))
    );
    let files = verdict_entries(&state);
    let hidden: Vec<&(String, String)> = files.iter().filter(|(_, n)| n.starts_with('.')).collect();
    assert!(
        hidden.is_empty(),
        "hidden files left in verdicts/: {hidden:?}"
    );
    let mut seen: BTreeMap<String, Vec<(&str, String, String)>> = BTreeMap::new();
    let drained = drained.into_inner().unwrap();
    figures.drained = drained.len();
    for (id, outcome, reason) in &drained {
        seen.entry(id.clone())
            .or_default()
            .push(("drained", outcome.clone(), reason.clone()));
    }
    for (folder, name) in &files {
        let text = fs::read_to_string(state.join("verdicts").join(folder).join(name)).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let stem = name.strip_suffix(".json").unwrap_or(name).to_string();
        assert_eq!(v["id"], stem.as_str(), "{folder}/{name}");
        figures.remaining += 1;
        seen.entry(stem).or_default().push((
            "remaining",
            v["outcome"].as_str().unwrap_or("?").to_string(),
            v["reason"].as_str().unwrap_or("").to_string(),
        ));
    }
    let job_ids: BTreeSet<&String> = ids.iter().collect();
    let strays: Vec<&String> = seen.keys().filter(|k| !job_ids.contains(k)).collect();
    assert!(strays.is_empty(), "verdicts for no job: {strays:?}");
    let mut problems = Vec::new();
    for id in &ids {
        match seen.get(id).map(Vec::len).unwrap_or(0) {
            0 => {
                figures.losses += 1;
                problems.push(format!("{id}: no verdict"));
            }
            1 => {}
            n => {
                figures.duplicates += n - 1;
                problems.push(format!("{id}: {n} verdicts: {:?}", seen[id]));
            }
        }
        for (_, outcome, reason) in seen.get(id).into_iter().flatten() {
            match outcome.as_str() {
                "hit" => {}
                "unchecked" if reason.contains("interrupted 3 times") => figures.interrupted_3 += 1,
                _ => problems.push(format!("{id}: unexpected {outcome}: {reason}")),
            }
        }
    }
    // Runner runs, from the runners' own log.
    let log = fs::read_to_string(w.path("invocations.log")).unwrap_or_default();
    let mut runs: BTreeMap<&str, usize> = BTreeMap::new();
    for line in log.lines() {
        let id = line.split_whitespace().next().unwrap_or("");
        *runs.entry(id).or_default() += 1;
    }
    figures.runner_runs = runs.values().sum();
    figures.reruns = runs.values().map(|n| n - 1).sum();
    for id in &ids {
        let hit = seen
            .get(id)
            .is_some_and(|v| v.iter().any(|(_, o, _)| o == "hit"));
        if hit && !runs.contains_key(id.as_str()) {
            problems.push(format!("{id}: a hit verdict but its runner never ran"));
        }
    }
    let left = wait_no_marked(&mark, &[], Duration::from_secs(30));
    assert!(left.is_empty(), "runner processes still alive: {left:?}");
    figures.seconds = started.elapsed().as_secs_f64();
    eprintln!("soak figures (seed {}): {figures:?}", plan.seed);
    assert!(
        problems.is_empty(),
        "{} problems: {problems:#?}",
        problems.len()
    );
    assert_eq!(figures.drained + figures.remaining, plan.jobs);
    figures
}

/// Stops the drain loop when the scope ends, also on a panic (so the scope can join).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn env_usize(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The CI soak: 200 jobs, 15 SIGKILLs at random moments, a drain loop throughout.
#[test]
fn soak_ci() {
    let f = soak(Plan {
        jobs: 200,
        kills: 15,
        seed: seed_from_env("SOAK_SEED"),
        life_ms: (30, 900),
    });
    assert_eq!((f.losses, f.duplicates), (0, 0));
    assert_eq!((f.jobs, f.kills), (200, 15));
}

/// The long soak, for a person (not CI): 2000 jobs and 200 kills by default.
/// `cargo test --release --test it soak:: -- --ignored --nocapture`
#[test]
#[ignore = "long soak: run by hand (see docs/reliability.md)"]
fn soak_long() {
    let f = soak(Plan {
        jobs: env_usize("SOAK_JOBS", 2000),
        kills: env_usize("SOAK_KILLS", 200),
        seed: seed_from_env("SOAK_SEED"),
        life_ms: (10, 1500),
    });
    assert_eq!((f.losses, f.duplicates), (0, 0));
    assert_eq!(f.drained + f.remaining, f.jobs);
}
