//! A stand-in model API on 127.0.0.1 (std threads only): records every request and
//! answers claude's Messages API and codex's Responses API from a per-test script.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How the stand-in answers a model request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A plain text answer (claude or codex).
    Text(String),
    /// claude: tool_use blocks, each (tool name, input).
    ClaudeTools(Vec<(String, Value)>),
    /// codex: a custom `exec` tool call with this JavaScript source (code mode).
    CodexExec(String),
    /// codex: function calls, each (function name, arguments), e.g. `exec_command`
    /// (the shell tool when code mode is off).
    CodexCalls(Vec<(String, Value)>),
    /// Send headers and the first event, then never finish.
    Hang,
}

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Request {
    /// When it arrived (headers and body read).
    pub at: Instant,
    /// HTTP method.
    pub method: String,
    /// Request target (path and query).
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body size in bytes.
    pub body_bytes: usize,
    /// Body text (lossy UTF-8).
    pub body_text: String,
    /// Body as JSON (`Null` when not JSON).
    pub body: Value,
}

impl Request {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    /// True for a model request (claude messages or codex responses POST).
    pub fn is_model(&self) -> bool {
        self.method == "POST"
            && ((self.path.starts_with("/v1/messages") && !self.path.contains("count_tokens"))
                || self.path.starts_with("/v1/responses"))
    }
    /// True when the request already carries tool results.
    pub fn has_tool_results(&self) -> bool {
        let claude = self.body["messages"].as_array().is_some_and(|ms| {
            ms.iter().any(|m| {
                m["content"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
            })
        });
        let codex = self.body["input"].as_array().is_some_and(|items| {
            items
                .iter()
                .any(|i| i["type"].as_str().is_some_and(|t| t.ends_with("_output")))
        });
        claude || codex
    }
    /// The whole request as text (headers and body), for marker searches.
    pub fn all_text(&self) -> String {
        let mut s = format!("{} {}\n", self.method, self.path);
        for (k, v) in &self.headers {
            s.push_str(&format!("{k}: {v}\n"));
        }
        s.push_str(&self.body_text);
        s
    }
    /// Token estimate: bytes / 4.
    pub fn token_estimate(&self) -> usize {
        self.body_bytes / 4
    }
}

struct Shared {
    requests: Mutex<Vec<Request>>,
    first: Reply,
    after_tools: String,
    /// (needle, text): a model request whose body holds a needle gets its text (the
    /// first that matches), before `first`.
    by_content: Vec<(String, String)>,
    stop: AtomicBool,
}

/// The running stand-in; its threads end when it is dropped.
pub struct StandIn {
    /// The port on 127.0.0.1.
    pub port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl StandIn {
    /// Answers every model request with `text`.
    pub fn text(text: &str) -> StandIn {
        StandIn::start(Reply::Text(text.to_string()), text)
    }

    /// Answers a model request whose body holds one of the needles with that needle's
    /// text (the first that matches), any other with `default`.
    pub fn by_content(rules: &[(&str, &str)], default: &str) -> StandIn {
        let rules = rules
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        StandIn::serve_with(Reply::Text(default.to_string()), default, rules)
    }

    /// Answers model requests without tool results with `first`, those with tool
    /// results with the text `after_tools`.
    pub fn start(first: Reply, after_tools: &str) -> StandIn {
        StandIn::serve_with(first, after_tools, Vec::new())
    }

    fn serve_with(first: Reply, after_tools: &str, by_content: Vec<(String, String)>) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("stand-in: bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("stand-in: nonblocking");
        let port = listener.local_addr().expect("stand-in: local addr").port();
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            first,
            after_tools: after_tools.to_string(),
            by_content,
            stop: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !s.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let s2 = Arc::clone(&s);
                        conns.push(std::thread::spawn(move || serve(stream, &s2)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        StandIn {
            port,
            shared,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().expect("stand-in lock").clone()
    }

    /// The model requests so far.
    pub fn model_requests(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(Request::is_model)
            .collect()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>, stop: &AtomicBool) -> Option<Request> {
    let mut head = Vec::new();
    // Kept across read timeouts: a line that arrives in pieces is not lost.
    let mut line = String::new();
    loop {
        match reader.read_line(&mut line) {
            Ok(0) => return None,
            Ok(_) if !line.ends_with('\n') => {}
            Ok(_) => {
                let text = std::mem::take(&mut line);
                if text == "\r\n" || text == "\n" {
                    if head.is_empty() {
                        continue;
                    }
                    break;
                }
                head.push(text.trim_end().to_string());
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                if stop.load(Ordering::SeqCst) {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
    let first = head.first()?.clone();
    let mut parts = first.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let headers: Vec<(String, String)> = head[1..]
        .iter()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    // The head is in: the body follows at the client's pace, however loaded the machine
    // (the short timeout above only lets the head's wait see `stop`).
    let _ = reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(60)));
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?.trim(), 16).ok()?;
            if n == 0 {
                let mut end = String::new();
                let _ = reader.read_line(&mut end);
                break;
            }
            let mut chunk = vec![0; n];
            reader.read_exact(&mut chunk).ok()?;
            body.extend_from_slice(&chunk);
            let mut crlf = String::new();
            reader.read_line(&mut crlf).ok()?;
        }
    } else if let Some(n) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body = vec![0; n];
        reader.read_exact(&mut body).ok()?;
    }
    let body_text = String::from_utf8_lossy(&body).into_owned();
    Some(Request {
        at: Instant::now(),
        method,
        path,
        body_bytes: body.len(),
        body: serde_json::from_str(&body_text).unwrap_or(Value::Null),
        body_text,
        headers,
    })
}

fn respond(stream: &mut TcpStream, status: &str, ctype: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn serve(stream: TcpStream, s: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let Some(req) = read_request(&mut reader, &s.stop) else {
        return;
    };
    let model = req.is_model();
    let tool_results = req.has_tool_results();
    let upgrade = req.header("upgrade").is_some();
    let path = req.path.clone();
    let streaming = req.body["stream"] == true;
    let model_name = req.body["model"].clone();
    let matched = s
        .by_content
        .iter()
        .find(|(needle, _)| req.body_text.contains(needle.as_str()))
        .map(|(_, text)| Reply::Text(text.clone()));
    s.requests.lock().expect("stand-in lock").push(req);
    if upgrade {
        // codex tries a WebSocket first; 426 makes it switch to HTTP POST at once.
        respond(&mut out, "426 Upgrade Required", "text/plain", b"");
        return;
    }
    if !model {
        respond(&mut out, "200 OK", "application/json", b"{}");
        return;
    }
    let reply = match (matched, tool_results) {
        (Some(reply), _) => reply,
        (None, true) => Reply::Text(s.after_tools.clone()),
        (None, false) => s.first.clone(),
    };
    let events = if path.starts_with("/v1/messages") {
        if !streaming {
            let content = claude_content(&reply);
            let stop = if matches!(reply, Reply::ClaudeTools(_)) {
                "tool_use"
            } else {
                "end_turn"
            };
            let msg = json!({"id": "msg_lane", "type": "message", "role": "assistant",
                "model": model_name, "content": content, "stop_reason": stop,
                "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5}});
            respond(
                &mut out,
                "200 OK",
                "application/json",
                msg.to_string().as_bytes(),
            );
            return;
        }
        claude_events(&reply, &model_name)
    } else {
        codex_events(&reply)
    };
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    if out.write_all(head.as_bytes()).is_err() {
        return;
    }
    for e in &events {
        if out.write_all(e.as_bytes()).is_err() {
            return;
        }
        let _ = out.flush();
    }
    if matches!(reply, Reply::Hang) {
        // Keep the socket open, never finish, until the test drops the stand-in.
        while !s.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn claude_content(reply: &Reply) -> Value {
    match reply {
        Reply::ClaudeTools(tools) => Value::Array(
            tools
                .iter()
                .enumerate()
                .map(|(i, (name, input))| {
                    json!({"type": "tool_use", "id": format!("toolu_lane{i}"), "name": name, "input": input})
                })
                .collect(),
        ),
        Reply::Text(t) => json!([{"type": "text", "text": t}]),
        _ => json!([]),
    }
}

fn claude_events(reply: &Reply, model: &Value) -> Vec<String> {
    let mut ev = vec![sse(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_lane", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    )];
    let stop = match reply {
        Reply::Hang => return ev,
        Reply::Text(text) => {
            ev.push(sse(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ));
            ev.push(sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}),
            ));
            ev.push(sse(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 0}),
            ));
            "end_turn"
        }
        Reply::ClaudeTools(tools) => {
            for (i, (name, input)) in tools.iter().enumerate() {
                ev.push(sse("content_block_start", &json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "tool_use", "id": format!("toolu_lane{i}"), "name": name, "input": {}}})));
                ev.push(sse(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
                ));
                ev.push(sse(
                    "content_block_stop",
                    &json!({"type": "content_block_stop", "index": i}),
                ));
            }
            "tool_use"
        }
        Reply::CodexExec(_) | Reply::CodexCalls(_) => "end_turn",
    };
    ev.push(sse(
        "message_delta",
        &json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}}),
    ));
    ev.push(sse("message_stop", &json!({"type": "message_stop"})));
    ev
}

fn codex_events(reply: &Reply) -> Vec<String> {
    let e = |d: Value| sse(d["type"].as_str().unwrap_or("message"), &d);
    let mut ev = vec![e(
        json!({"type": "response.created", "response": {"id": "resp_lane"}}),
    )];
    match reply {
        Reply::Hang => return ev,
        Reply::CodexExec(js) => {
            let item = json!({"type": "custom_tool_call", "id": "ctc_lane", "call_id": "call_lane",
                "name": "exec", "input": js, "status": "completed"});
            ev.push(e(
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            ));
            ev.push(e(
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            ));
        }
        Reply::Text(text) => {
            ev.push(e(json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "role": "assistant", "id": "msg_lane", "content": [], "status": "in_progress"}})));
            ev.push(e(
                json!({"type": "response.output_text.delta", "output_index": 0,
                "content_index": 0, "item_id": "msg_lane", "delta": text}),
            ));
            ev.push(e(json!({"type": "response.output_item.done", "output_index": 0,
                "item": {"type": "message", "role": "assistant", "id": "msg_lane", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}})));
        }
        Reply::CodexCalls(calls) => {
            for (i, (name, args)) in calls.iter().enumerate() {
                let item = json!({"type": "function_call", "id": format!("fc_lane{i}"),
                    "call_id": format!("call_lane{i}"), "name": name,
                    "arguments": args.to_string(), "status": "completed"});
                ev.push(e(
                    json!({"type": "response.output_item.added", "output_index": i, "item": item}),
                ));
                ev.push(e(
                    json!({"type": "response.output_item.done", "output_index": i, "item": item}),
                ));
            }
        }
        Reply::ClaudeTools(_) => {}
    }
    ev.push(e(
        json!({"type": "response.completed", "response": {"id": "resp_lane",
        "usage": {"input_tokens": 10, "input_tokens_details": null, "output_tokens": 5,
            "output_tokens_details": null, "total_tokens": 15}}}),
    ));
    ev
}
