//! Pre-started runners behind the seam: `JobRun::judge_file` with a `Prestarting`
//! spawner around the scripted one, whose copies wait, die while waiting, or print
//! before their prompt. No process is started.

use std::sync::Arc;

use serde_json::json;

use crate::core::runner::table::Runner;
use crate::core::verdict::Outcome;
use crate::engine::attempts::Services;

use crate::engine::prestart::Prestarting;
use crate::engine::scripted::{Act, Bench, CopyAct, Scripted, Steer, bounded, outcome, question};

/// A bench whose default table is one scripted runner with `prestart = 1`, and a
/// `Prestarting` around its spawner with that copy started and waiting (or given up).
async fn prestarting(acts: Vec<Act>, copies: Vec<CopyAct>) -> (Bench, Prestarting<Arc<Scripted>>) {
    let mut b = Bench::with_spawner(Scripted::with_copies(acts, copies));
    b.settings.runner_override = None;
    b.settings.config.runners.default = vec![Runner {
        prestart: Some(1),
        ..Runner::for_tests("scripted", &["scripted"])
    }];
    let pre = Prestarting::new(
        b.spawner.clone(),
        tokio::runtime::Handle::current(),
        Arc::default(),
    );
    pre.configure(&Arc::new(b.settings.clone()), 1, None);
    bounded("the first copy's start", pre.idle()).await;
    (b, pre)
}

/// Handles the job `stem` with `pre` as the spawner.
async fn judge_with(b: &Bench, pre: &Prestarting<Arc<Scripted>>, stem: &str) -> serde_json::Value {
    let path = b.job(stem, &question(&format!("{stem}?")));
    let services = Services {
        spawner: Arc::new(pre.clone()),
        ..Services::default()
    };
    let handled = bounded("handle", b.handle(&path, &services, Steer::default())).await;
    assert_eq!(outcome(&handled), Some(Outcome::Hit), "{handled:?}");
    b.verdict("T", stem).unwrap_or_default()
}

/// Runner folders in the state folder's private `tmp/` (a copy's, while it lives), in
/// the homes there.
fn runner_folders(b: &Bench) -> usize {
    let entries = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir).map_or(Vec::new(), |e| e.flatten().map(|e| e.path()).collect())
    };
    entries(&b.state.runner_tmp(None))
        .iter()
        .map(|home| entries(home).len())
        .sum()
}

/// A job takes the waiting copy: the copy gets the prompt and answers, no runner is
/// spawned, the copy's folder goes with it, and a fresh copy replaces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_takes_the_waiting_copy_and_a_fresh_one_replaces_it() {
    let copies = vec![
        CopyAct::Waits("{\"ok\": true, \"copy\": 1}"),
        CopyAct::Waits("{\"ok\": true, \"copy\": 2}"),
    ];
    let (b, pre) = prestarting(Vec::new(), copies).await;
    assert_eq!(pre.waiting(), 1);
    assert_eq!(
        runner_folders(&b),
        1,
        "the copy waits in a folder of its own"
    );
    let v = judge_with(&b, &pre, "a").await;
    assert_eq!(v["answer"]["copy"], 1, "the waiting copy answered: {v}");
    assert_eq!(v["attempts"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(b.spawner.copy_prompts(), ["a?"]);
    assert_eq!(b.spawner.starts(), 0, "no runner spawned for the job");
    bounded("the replacement's start", pre.idle()).await;
    assert_eq!(pre.waiting(), 1, "a fresh copy waits again");
    assert_eq!(b.spawner.copies_started(), 2);
    assert_eq!(runner_folders(&b), 1, "the used copy's folder is gone");
    let v = judge_with(&b, &pre, "b").await;
    assert_eq!(v["answer"]["copy"], 2, "each job its own copy: {v}");
}

/// A copy that ended while it waited is discarded; the job spawns its own runner,
/// and that is no failed attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_that_died_while_waiting_is_discarded_and_the_job_spawns_its_own() {
    let acts = vec![Act::Answer("{\"ok\": true, \"spawned\": true}")];
    let copies = vec![CopyAct::Dies, CopyAct::Waits("{\"ok\": true}")];
    let (b, pre) = prestarting(acts, copies).await;
    let v = judge_with(&b, &pre, "a").await;
    assert_eq!(v["answer"]["spawned"], true, "{v}");
    assert_eq!(
        v["attempts"],
        json!([{"runner": "scripted", "ok": true, "reason": "answered", "elapsed_ms": 0}]),
        "one attempt, not a failed one: {v}"
    );
    assert_eq!(b.spawner.starts(), 1);
    assert!(
        b.spawner.copy_prompts().is_empty(),
        "the dead copy got no prompt"
    );
    bounded("the discard and the replacement", pre.idle()).await;
    assert_eq!(b.spawner.copies_discarded(), 1);
    assert_eq!(
        pre.waiting(),
        1,
        "the job asked for the runner: a copy waits again"
    );
}

/// A copy that printed before its prompt is discarded, the job spawns its own runner
/// (its early output never answers the job), and the runner is not pre-started again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_output_discards_the_copy_and_the_job_spawns_its_own() {
    let acts = vec![Act::Answer("{\"ok\": true, \"spawned\": true}")];
    let copies = vec![
        CopyAct::PrintsEarly("{\"ok\": true, \"early\": true}\n"),
        CopyAct::Waits("{\"ok\": true}"),
    ];
    let (b, pre) = prestarting(acts, copies).await;
    let v = judge_with(&b, &pre, "a").await;
    assert_eq!(v["answer"]["spawned"], true, "the early answer won: {v}");
    assert_eq!(v["attempts"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(
        b.spawner.copy_prompts().is_empty(),
        "the early copy got no prompt"
    );
    bounded("the discard", pre.idle()).await;
    assert_eq!(b.spawner.copies_discarded(), 1);
    assert_eq!(pre.waiting(), 0);
    assert_eq!(b.spawner.copies_started(), 1, "not pre-started again");
}

/// Issue 42 item 5: the copy a job took is replaced only once the job's verdict is
/// published, so the replacement's start never competes with the job. The copy given
/// the job waits, before it answers, until no copy is starting: a replacement started
/// when the copy was taken would start (and see no verdict) first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replacement_starts_after_the_verdict_is_published() {
    let copies = vec![
        CopyAct::Waits("{\"ok\": true, \"copy\": 1}"),
        CopyAct::Waits("{\"ok\": true, \"copy\": 2}"),
    ];
    let (b, pre) = prestarting(Vec::new(), copies).await;
    let idle = pre.clone();
    b.spawner.before_answer(Arc::new(move || {
        let idle = idle.clone();
        Box::pin(async move { idle.idle().await })
    }));
    let v = judge_with(&b, &pre, "a").await;
    assert_eq!(v["answer"]["copy"], 1, "{v}");
    bounded("the replacement's start", pre.idle()).await;
    assert_eq!(
        b.spawner.verdicts_at_copy_starts(),
        [0, 1],
        "the first copy before any verdict, its replacement after the job's"
    );
    assert_eq!(pre.waiting(), 1, "a fresh copy waits again");
}
