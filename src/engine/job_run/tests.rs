//! In-process job-run tests: `JobRun::judge_file` on a temp state folder with a
//! scripted spawner in place of runner processes (`engine::scripted`), so
//! interruptions, shutdown during the grace, single-flight and the cache are tested
//! in milliseconds.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;

use crate::core::verdict::Outcome;
use crate::engine::attempts::Services;
use crate::engine::events::Control;
use crate::engine::flight::Flights;
use crate::engine::job_run::JobEnd;
use crate::engine::scripted::{Act, Bench, Scripted, Steer, bounded, outcome, question};
use crate::store::cache::Cache;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_published_and_the_job_removed() {
    let b = Bench::new(vec![Act::Answer("{\"ok\": true}")]);
    let path = b.job("a", &question("p"));
    let handled = b.judge(&path).await;
    assert_eq!(outcome(&handled), Some(Outcome::Hit), "{handled:?}");
    assert!(!path.exists(), "job removed");
    assert_eq!(
        b.verdict("T", "a").map(|v| v["runner"].clone()),
        Some(json!("scripted"))
    );
    assert_eq!(b.spawner.starts(), 1);
}

/// A job whose earlier holders were interrupted twice is tried once more; at three
/// it gets an `unchecked` judge error without starting a runner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interruptions_are_counted_and_the_third_ends_the_job() {
    let b = Bench::new(vec![Act::Answer("{\"ok\": true}")]);
    let path = b.job("i", &question("p"));
    b.interrupted_holder(&path, 2);
    let handled = b.judge(&path).await;
    assert_eq!(outcome(&handled), Some(Outcome::Unchecked), "{handled:?}");
    let reason = b
        .verdict("T", "i")
        .map(|v| v["reason"].to_string())
        .unwrap_or_default();
    assert!(reason.contains("interrupted 3 times"), "{reason}");
    assert_eq!(
        b.spawner.starts(),
        0,
        "no runner after the third interruption"
    );

    let b = Bench::new(vec![Act::Answer("{\"ok\": true}")]);
    let path = b.job("i", &question("p"));
    b.interrupted_holder(&path, 1);
    let handled = b.judge(&path).await;
    assert_eq!(
        outcome(&handled),
        Some(Outcome::Hit),
        "two interruptions: tried again"
    );
    assert_eq!(b.spawner.starts(), 1);
}

/// Shutdown past the grace while a runner runs: the runner hears the stop, no
/// verdict is written, the job stays queued and the claim says `queued`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_the_run_leaves_the_job_queued_without_a_verdict() {
    let b = Bench::new(vec![Act::Hang]);
    let path = b.job("s", &question("p"));
    let (stop, cancel) = watch::channel(Control::Run);
    let link = Steer {
        stop: Some(cancel),
        ..Steer::default()
    };
    let services = b.services();
    let running = b.handle(&path, &services, link);
    let stopper = async {
        b.spawner.started.notified().await;
        let _ = stop.send(Control::Stop);
    };
    let (handled, ()) = bounded("handle", async { tokio::join!(running, stopper) }).await;
    assert_eq!(handled, JobEnd::Stopped);
    assert!(path.exists(), "job stays queued");
    assert!(b.verdict("T", "s").is_none(), "no verdict");
    let record = std::fs::read_to_string(b.state.claims().join("s.json")).unwrap_or_default();
    assert!(record.contains("\"queued\""), "claim record: {record}");
    // The next holder counts no interruption and judges it.
    let b2 = b.respawned(Scripted::new(vec![Act::Answer("{\"ok\": true}")]));
    let handled = b2.judge(&path).await;
    assert_eq!(outcome(&handled), Some(Outcome::Hit), "{handled:?}");
}

/// An identical job waits for the leader; when the leader is stopped without a
/// result, the follower asks the runners itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_leader_stops_asks_the_runners_itself() {
    let b = Bench::new(vec![Act::Hang, Act::Answer("{\"ok\": true}")]);
    let lead = b.job("lead", &question("same"));
    let follow = b.job("follow", &question("same"));
    let services = Services {
        flights: Some(Arc::new(Flights::default())),
        ..b.services()
    };
    let (stop, cancel) = watch::channel(Control::Run);
    let leader = b.handle(
        &lead,
        &services,
        Steer {
            stop: Some(cancel),
            ..Steer::default()
        },
    );
    let rest = async {
        b.spawner.started.notified().await;
        // The leader's runner runs: the follower joins its flight, then the leader stops.
        let follower = b.handle(&follow, &services, Steer::default());
        let stopper = async {
            tokio::task::yield_now().await;
            let _ = stop.send(Control::Stop);
        };
        tokio::join!(follower, stopper).0
    };
    let (led, followed) =
        bounded("leader and follower", async { tokio::join!(leader, rest) }).await;
    assert_eq!(led, JobEnd::Stopped);
    assert_eq!(outcome(&followed), Some(Outcome::Hit), "{followed:?}");
    assert_eq!(b.spawner.starts(), 2, "the follower started its own runner");
    assert!(lead.exists() && !follow.exists());
}

/// An identical default job within the TTL reuses the answer: one runner start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_hit_reuses_the_answer_without_a_runner() {
    let mut b = Bench::new(vec![Act::Answer("{\"ok\": true}")]);
    b.settings.config.cache.ttl_seconds = 600.0;
    let services = Services {
        cache: Cache::open(&b.state, &b.settings.config.cache, false),
        ..b.services()
    };
    for stem in ["first", "second"] {
        let path = b.job(stem, &question("cached"));
        let handled = bounded("handle", b.handle(&path, &services, Steer::default())).await;
        assert_eq!(outcome(&handled), Some(Outcome::Hit), "{stem}: {handled:?}");
    }
    assert_eq!(b.spawner.starts(), 1);
    let second = b.verdict("T", "second").unwrap_or_default();
    assert_eq!(second["attempts"][0]["runner"], "cache", "{second}");
    assert_eq!(second["runner"], "scripted", "{second}");
}

/// The daemon's link: settle time on, as `job_settle_seconds = 30`: a file written
/// just before counts as fresh however long a loaded machine delays the look.
fn settling() -> Steer {
    Steer {
        settle: Some(Duration::from_secs(30)),
        ..Steer::default()
    }
}

/// A job file seen half-written by a producer writing it in place (cut short, just
/// modified) is not judged while the daemon's settle time runs: no runner, no
/// verdict, the file and no claim left. Whole, it is judged at once; cut short but
/// untouched for longer than the settle time, it gets its judge error; `run` (no
/// settle time) judges whatever it finds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_written_job_is_left_for_later_only_while_it_is_fresh() {
    let b = Bench::new(vec![Act::Answer("{\"ok\": true}")]);
    let path = b.state.jobs().join("w.json");
    let whole = question("p").to_string();
    std::fs::write(&path, &whole[..whole.len() / 2]).expect("write half");
    let handled = bounded("handle", b.handle(&path, &b.services(), settling())).await;
    assert_eq!(handled, JobEnd::Unsettled);
    assert!(path.exists() && b.verdict("T", "w").is_none() && b.verdict("", "w").is_none());
    assert!(!b.state.claims().join("w.json").exists(), "claim released");
    assert_eq!(b.spawner.starts(), 0);
    std::fs::write(&path, "").expect("empty, as just created");
    let handled = bounded("handle", b.handle(&path, &b.services(), settling())).await;
    assert_eq!(handled, JobEnd::Unsettled, "an empty file is cut short too");

    std::fs::write(&path, &whole).expect("write whole");
    let handled = bounded("handle", b.handle(&path, &b.services(), settling())).await;
    assert_eq!(outcome(&handled), Some(Outcome::Hit), "{handled:?}");
    assert!(!path.exists());

    // Complete but malformed JSON is no writer's half-way state: judged at once.
    std::fs::write(&path, "{nope}").expect("write bad");
    let handled = bounded("handle", b.handle(&path, &b.services(), settling())).await;
    assert_eq!(outcome(&handled), Some(Outcome::Unchecked), "{handled:?}");

    // Cut short and resting longer than the settle time: the writer gave up.
    std::fs::write(&path, &whole[..10]).expect("write half");
    let old = std::time::SystemTime::now() - Duration::from_secs(120);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_modified(old))
        .expect("age the file");
    let handled = bounded("handle", b.handle(&path, &b.services(), settling())).await;
    assert_eq!(outcome(&handled), Some(Outcome::Unchecked), "{handled:?}");

    // `run`: no settle time.
    std::fs::write(&path, &whole[..10]).expect("write half");
    let handled = b.judge(&path).await;
    assert_eq!(outcome(&handled), Some(Outcome::Unchecked), "{handled:?}");
    assert_eq!(b.spawner.starts(), 1, "only the whole job ran a runner");
}

/// An API runner's attempt goes through the same seam as a process: a scripted 429
/// whose wait would pass the retry budget falls back to the next API runner, whose
/// JSON-mode reply spread over lines answers; the failure feeds runner health as a
/// CLI's would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_attempts_go_through_the_seam_and_fall_back_like_any_runner() {
    use crate::core::api::protocol::CallEnd;
    use crate::store::health_store::HealthStore;

    let busy = CallEnd::Response {
        status: 429,
        retry_after: Some("30".into()),
        body: br#"{"error": {"message": "slow down"}}"#.to_vec(),
    };
    let reply = json!({
        "choices": [{"message": {"content": "{\n  \"ok\": true\n}"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 66, "completion_tokens": 9},
    });
    let answers = CallEnd::Response {
        status: 200,
        retry_after: None,
        body: reply.to_string().into_bytes(),
    };
    let mut b = Bench::new(vec![Act::Api(busy), Act::Api(answers)]);
    b.settings.runner_override = Some(vec![
        api_runner("haiku-api", "anthropic"),
        api_runner("local", "openai-chat"),
    ]);
    b.settings.config.health.enabled = true;
    let services = Services {
        health: HealthStore::open(&b.state, &b.settings.config.health, false),
        ..b.services()
    };
    let path = b.job("a", &question("p"));
    let handled = bounded("handle", b.handle(&path, &services, Steer::default())).await;
    assert_eq!(outcome(&handled), Some(Outcome::Hit), "{handled:?}");
    let verdict = b.verdict("T", "a").expect("a verdict");
    let attempts = &verdict["attempts"];
    assert_eq!(
        attempts[0]["reason"], "http 429: slow down (retry after 30 s)",
        "{verdict}"
    );
    assert_eq!(
        (&attempts[1]["runner"], &attempts[1]["reason"]),
        (&json!("local"), &json!("answered"))
    );
    assert_eq!(attempts[1]["usage"]["input_tokens"], 66);
    assert!(attempts[1].get("cwd_refused").is_none(), "{verdict}");
    assert_eq!(
        b.spawner.starts(),
        2,
        "both attempts went through the spawner"
    );
    let health = std::fs::read_to_string(b.state.health()).expect("health.json");
    assert!(health.contains("http 429: slow down"), "{health}");
}

/// An API runner whose request failed in a way that may pass (503, a refused
/// connection) is tried again, each try an attempt of the verdict; its health hears
/// once, of the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_api_failure_is_tried_again_and_health_hears_once() {
    use crate::core::api::protocol::CallEnd;
    use crate::store::health_store::HealthStore;

    let reply = json!({
        "choices": [{"message": {"content": "{\"ok\": true}"}, "finish_reason": "stop"}],
    });
    let acts = vec![
        Act::Api(CallEnd::Response {
            status: 503,
            retry_after: None,
            body: b"busy".to_vec(),
        }),
        Act::Api(CallEnd::Refused {
            address: "http://127.0.0.1:9/v1".into(),
        }),
        Act::Api(CallEnd::Response {
            status: 200,
            retry_after: None,
            body: reply.to_string().into_bytes(),
        }),
    ];
    let mut b = Bench::new(acts);
    b.settings.runner_override = Some(vec![api_runner("local", "openai-chat")]);
    b.settings.config.health.enabled = true;
    let services = Services {
        health: HealthStore::open(&b.state, &b.settings.config.health, false),
        ..b.services()
    };
    let path = b.job("a", &question("p"));
    let handled = bounded("handle", b.handle(&path, &services, Steer::default())).await;
    assert_eq!(outcome(&handled), Some(Outcome::Hit), "{handled:?}");
    let verdict = b.verdict("T", "a").expect("a verdict");
    let tried: Vec<(&str, &str)> = verdict["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| {
            let text = |key: &str| a[key].as_str().unwrap_or_default();
            (text("runner"), text("reason"))
        })
        .collect();
    assert_eq!(
        tried,
        [
            ("local", "http 503: busy"),
            ("local", "connection refused: http://127.0.0.1:9/v1"),
            ("local", "answered"),
        ]
    );
    let health = std::fs::read_to_string(b.state.health()).unwrap_or_default();
    assert!(
        !health.contains("http 503"),
        "an answer clears it: {health}"
    );
}

/// A stop during the wait before a retry ends the job `Stopped` (it stays queued),
/// without waiting the server's `retry-after` out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_the_wait_before_a_retry_leaves_the_job_queued() {
    use crate::core::api::protocol::CallEnd;

    let busy = CallEnd::Response {
        status: 429,
        retry_after: Some("9".into()),
        body: Vec::new(),
    };
    let mut b = Bench::new(vec![Act::Api(busy)]);
    b.settings.runner_override = Some(vec![api_runner("local", "openai-chat")]);
    let path = b.job("w", &question("p"));
    let (stop, cancel) = watch::channel(Control::Run);
    let steer = Steer {
        stop: Some(cancel),
        ..Steer::default()
    };
    let services = b.services();
    let running = b.handle(&path, &services, steer);
    let stopper = async {
        b.spawner.started.notified().await;
        let _ = stop.send(Control::Stop);
    };
    let begun = std::time::Instant::now();
    let (handled, ()) = bounded("handle", async { tokio::join!(running, stopper) }).await;
    assert_eq!(handled, JobEnd::Stopped);
    assert!(
        begun.elapsed() < Duration::from_secs(9),
        "the wait was cut short"
    );
    assert!(path.exists(), "job stays queued");
    assert_eq!(b.spawner.starts(), 1);
}

/// A retry is a run like the first try: at the run cap it is not sent, and the
/// failure stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_cap_stops_a_retry() {
    use crate::core::api::protocol::CallEnd;
    use crate::store::spend_ledger::SpendLedger;

    let busy = CallEnd::Response {
        status: 503,
        retry_after: Some("0".into()),
        body: b"busy".to_vec(),
    };
    let mut b = Bench::new(vec![Act::Api(busy)]);
    b.settings.runner_override = Some(vec![api_runner("local", "openai-chat")]);
    b.settings.config.max_runs_per_hour = Some(1);
    let services = Services {
        spend: Some(Arc::new(SpendLedger::open(&b.state, false))),
        ..b.services()
    };
    let path = b.job("c", &question("p"));
    let handled = bounded("handle", b.handle(&path, &services, Steer::default())).await;
    assert_eq!(outcome(&handled), Some(Outcome::Unchecked), "{handled:?}");
    let verdict = b.verdict("T", "c").expect("a verdict");
    assert_eq!(
        verdict["attempts"].as_array().map(Vec::len),
        Some(1),
        "{verdict}"
    );
    assert_eq!(b.spawner.starts(), 1, "the retry was not sent");
}

/// An API runner entry of the tests' tables (nothing listens at its address).
fn api_runner(name: &str, api: &str) -> crate::core::runner::table::Runner {
    let entry = format!(
        "name = \"{name}\"\napi = \"{api}\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n"
    );
    toml::from_str(&entry).expect("an API runner entry")
}
