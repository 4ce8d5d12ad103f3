//! Single-flight (docs/reference.md, "Beyond catstack"): a job identical to one already
//! running (same mode, table, cwd and prompt) waits for that one's result instead of
//! starting runners again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::core::digest::sha1_hex_full;
use crate::core::job::Job;
use crate::core::runner::table::{Runner, table_identity};
use crate::core::verdict::Attempt;

/// What a leader found: the answer (runner and object), if any, and its attempts.
#[derive(Debug, Clone)]
pub struct FlightResult {
    pub answer: Option<(String, Map<String, Value>)>,
    pub attempts: Vec<Attempt>,
}

type Slot = watch::Receiver<Option<FlightResult>>;

/// The questions being asked right now.
#[derive(Default)]
pub struct Flights {
    running: Mutex<HashMap<String, Slot>>,
}

/// Either ask the runners (and tell the others), or wait for who does.
pub enum Flight {
    Leader(Leader),
    Follower(Slot),
}

/// The job asking the runners; dropping it without `finish` lets followers ask themselves.
pub struct Leader {
    key: String,
    tx: watch::Sender<Option<FlightResult>>,
    flights: Arc<Flights>,
}

/// The single-flight key of a job under a table (a JSON array keeps the fields apart).
pub fn key(job: &Job, table: &[Runner]) -> String {
    let table = table_identity(table);
    let text = json!([job.mode.name(), table, job.cwd, job.prompt]).to_string();
    sha1_hex_full(text.as_bytes())
}

impl Flights {
    /// Joins the flight for `key`: the first job leads, later ones follow.
    pub fn join(self: &Arc<Self>, key: String) -> Flight {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = running.get(&key) {
            return Flight::Follower(slot.clone());
        }
        let (tx, rx) = watch::channel(None);
        running.insert(key.clone(), rx);
        Flight::Leader(Leader {
            key,
            tx,
            flights: self.clone(),
        })
    }
}

impl Leader {
    /// Hands the result to every follower.
    pub fn finish(self, result: FlightResult) {
        let _ = self.tx.send(Some(result));
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        let mut running = self
            .flights
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        running.remove(&self.key);
    }
}

/// Waits for the leader; `None` when it went away without a result.
pub async fn follow(mut slot: Slot) -> Option<FlightResult> {
    slot.wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|r| r.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::job::{TimeoutRules, parse_job};

    fn job(text: &str) -> Job {
        let rules = TimeoutRules {
            default_seconds: 60.0,
            max_seconds: 600.0,
        };
        parse_job(text.as_bytes(), "stem", rules).unwrap()
    }

    fn runner(name: &str, argv: &[&str]) -> Runner {
        Runner::for_tests(name, argv)
    }

    #[test]
    fn keys_match_only_for_the_same_mode_table_cwd_and_prompt() {
        let table = [runner("a", &["x", "y"]), runner("b", &["z"])];
        let base = key(&job(r#"{"prompt": "p", "cwd": "/w"}"#), &table);
        assert_eq!(base, key(&job(r#"{"prompt": "p", "cwd": "/w"}"#), &table));
        for other in [
            key(&job(r#"{"prompt": "q", "cwd": "/w"}"#), &table),
            key(&job(r#"{"prompt": "p", "cwd": "/v"}"#), &table),
            key(&job(r#"{"prompt": "p"}"#), &table),
            key(
                &job(r#"{"prompt": "p", "cwd": "/w", "mode": "investigate"}"#),
                &table,
            ),
            key(&job(r#"{"prompt": "p", "cwd": "/w"}"#), &table[..1]),
            // The same strings split between runners another way.
            key(
                &job(r#"{"prompt": "p", "cwd": "/w"}"#),
                &[runner("a", &["x"]), runner("y", &["b", "z"])],
            ),
        ] {
            assert_ne!(base, other);
        }
        // An empty argv item where another table has a runner boundary.
        let one = [runner("a", &["/x", "", "b", "/z"])];
        let two = [runner("a", &["/x"]), runner("b", &["/z"])];
        let p = job(r#"{"prompt": "p"}"#);
        assert_ne!(key(&p, &one), key(&p, &two));
    }

    #[tokio::test]
    async fn followers_get_the_leaders_result_and_a_dropped_leader_frees_them() {
        let flights = Arc::new(Flights::default());
        let Flight::Leader(leader) = flights.join("k".into()) else {
            panic!("first leads")
        };
        let Flight::Follower(slot) = flights.join("k".into()) else {
            panic!("second follows")
        };
        leader.finish(FlightResult {
            answer: None,
            attempts: vec![],
        });
        assert!(follow(slot).await.is_some());
        let Flight::Leader(leader) = flights.join("k".into()) else {
            panic!("a finished flight is gone")
        };
        let Flight::Follower(slot) = flights.join("k".into()) else {
            panic!()
        };
        drop(leader);
        assert!(follow(slot).await.is_none());
    }
}
