//! A stand-in model API on 127.0.0.1: a plain HTTP/1.1 server on its own threads that
//! answers each request the way its script of `Behaviour`s says (the Nth request the
//! Nth, the last one for every request after), records each request (headers, body,
//! when it came), and counts the connections it accepted. Dropped at the end of a test:
//! its listener closes and every connection thread ends (they wait on bounded reads).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the stand-in does with each request.
#[derive(Clone)]
pub enum Behaviour {
    /// `status`, extra headers, body.
    Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Reads the request and never answers (until the stand-in is dropped).
    Silent,
    /// Reads the request and closes the connection without a byte.
    Drop,
    /// Reads the request and resets the connection (a TCP RST: `SO_LINGER` 0).
    Reset,
    /// A 200 with a body that is `len` bytes long.
    Huge { len: usize },
}

/// One request the stand-in read.
#[derive(Debug, Clone)]
pub struct Request {
    pub line: String,
    /// Header lines as sent, lowercase names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When its head was read.
    pub at: Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

struct Shared {
    script: Vec<Behaviour>,
    requests: Mutex<Vec<Request>>,
    connections: AtomicUsize,
    closing: AtomicBool,
}

/// A running stand-in.
pub struct StandIn {
    pub port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl StandIn {
    pub fn start(behaviour: Behaviour) -> StandIn {
        StandIn::script(vec![behaviour])
    }

    /// A stand-in that answers the Nth request as `script[N]`, and every request past
    /// the script's end as its last entry.
    pub fn script(script: Vec<Behaviour>) -> StandIn {
        assert!(!script.is_empty(), "a script of at least one behaviour");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local address").port();
        let shared = Arc::new(Shared {
            script,
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
        });
        let for_thread = shared.clone();
        let accept = std::thread::spawn(move || accept_loop(listener, for_thread));
        StandIn {
            port,
            shared,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees `closing`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.closing.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let shared = shared.clone();
        std::thread::spawn(move || serve(stream, &shared));
    }
}

/// Serves requests on one connection (kept alive) until the peer closes it, the
/// behaviour ends it, or the stand-in closes.
fn serve(stream: TcpStream, shared: &Shared) {
    // Bounded reads: a connection thread never outlives its test by more than this.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let request = match read_request(&mut reader, shared) {
            Some(request) => request,
            None => return,
        };
        let behaviour = {
            let mut requests = shared.requests.lock().unwrap();
            let at = requests.len().min(shared.script.len() - 1);
            requests.push(request);
            shared.script[at].clone()
        };
        match behaviour {
            Behaviour::Reply {
                status,
                headers,
                body,
            } => {
                let mut head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
                    body.len()
                );
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                if writer.write_all(head.as_bytes()).is_err() || writer.write_all(&body).is_err() {
                    return;
                }
            }
            Behaviour::Huge { len } => {
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n");
                if writer.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let chunk = vec![b'x'; 64 * 1024];
                let mut left = len;
                while left > 0 && !shared.closing.load(Ordering::SeqCst) {
                    let n = left.min(chunk.len());
                    if writer.write_all(&chunk[..n]).is_err() {
                        return;
                    }
                    left -= n;
                }
            }
            Behaviour::Silent => {
                let mut sink = [0u8; 1];
                while !shared.closing.load(Ordering::SeqCst) {
                    match reader.get_mut().read(&mut sink) {
                        Ok(0) => return,
                        _ => continue,
                    }
                }
                return;
            }
            Behaviour::Drop => {
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
            Behaviour::Reset => {
                reset(&writer);
                return;
            }
        }
    }
}

/// One request: the request line, headers, and a `content-length` body. `None` when
/// the connection closed, or the stand-in is closing.
fn read_request(reader: &mut BufReader<TcpStream>, shared: &Shared) -> Option<Request> {
    let mut line = String::new();
    loop {
        match reader.read_line(&mut line) {
            Ok(0) => return None,
            Ok(_) => break,
            Err(_) if shared.closing.load(Ordering::SeqCst) => return None,
            Err(_) if line.is_empty() => continue,
            Err(_) => return None,
        }
    }
    let at = Instant::now();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        line: line.trim_end().to_string(),
        headers,
        body,
        at,
    })
}

/// Makes the close of `stream` (all its handles) a reset: `SO_LINGER` on, 0 seconds.
fn reset(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the descriptor is open (borrowed from `stream`), and the option value is
    // a `linger` whose size is passed with it.
    let _ = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::from_ref(&linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

/// A Messages response with `text` and token counts.
pub fn anthropic_reply(text: &str) -> Vec<u8> {
    serde_json::json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 60, "output_tokens": 8},
    })
    .to_string()
    .into_bytes()
}

/// A Chat Completions response with `text` and token counts.
pub fn openai_reply(text: &str) -> Vec<u8> {
    serde_json::json!({
        "id": "c1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 66, "completion_tokens": 9, "total_tokens": 75},
    })
    .to_string()
    .into_bytes()
}

pub fn ok(body: Vec<u8>) -> Behaviour {
    status(200, &[], body)
}

pub fn status(code: u16, headers: &[(&str, &str)], body: Vec<u8>) -> Behaviour {
    Behaviour::Reply {
        status: code,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body,
    }
}
