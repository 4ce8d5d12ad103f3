//! An API runner's attempt at the HTTP edge: one POST to its model API, with the key
//! read from its variable at the moment of the call, the job's timeout over the whole
//! exchange, the body read up to the output cap, and no redirect followed. One client
//! per process, built on the first call: the daemon's connections stay pooled and
//! kept alive across jobs (`engine::spawner::RealSpawner` holds it for the daemon's
//! life, across reloads).

use std::error::Error as _;
use std::sync::OnceLock;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::core::api::key_mask::{mask_body, mask_text};
use crate::core::api::protocol::{CallEnd, Transport, headers, request_body};
use crate::core::api::spec::ApiSpec;
use crate::process::spawn::{StopSignal, stopped};

/// How long an idle pooled connection is kept (the provider closes it after about a
/// minute or more; a new TLS connection costs a few milliseconds).
const IDLE_KEEP: Duration = Duration::from_secs(90);

/// One request to make.
pub struct ApiRequest<'a> {
    /// The runner's API settings.
    pub spec: &'a ApiSpec,
    /// The job's prompt: the user message.
    pub prompt: &'a str,
    /// The job's per-runner timeout, over connect, send and the whole response.
    pub timeout: Duration,
    /// The most response body bytes read (`output_cap_bytes`).
    pub cap: usize,
    /// Shutdown: abandon the request now.
    pub stop: Option<&'a StopSignal>,
}

/// The HTTP client of this process, built on first use (a process that never calls an
/// API never reads the system's CA certificates).
#[derive(Default)]
pub struct ApiClient {
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl ApiClient {
    /// Sends `request` and reads its response; every failure is a `CallEnd`, and the
    /// key never appears in what it returns.
    pub async fn call(&self, request: &ApiRequest<'_>) -> CallEnd {
        let key = match read_key(request.spec) {
            Ok(key) => key,
            Err(end) => return end,
        };
        let client = match self.client() {
            Ok(client) => client,
            Err(why) => {
                return CallEnd::Transport {
                    kind: Transport::NoClient,
                    detail: why.clone(),
                };
            }
        };
        let exchange = exchange(client, request, key.as_deref());
        let end = tokio::select! {
            biased;
            () = stopped(request.stop) => CallEnd::Stopped,
            done = tokio::time::timeout(request.timeout, exchange) => match done {
                Ok(end) => end,
                Err(_) => CallEnd::TimedOut { seconds: request.timeout.as_secs_f64() },
            },
        };
        masked(end, key.as_deref())
    }

    /// Builds the client now (the daemon at its start, when a table has an API runner),
    /// so the first verdict does not pay for reading the system's certificates.
    pub fn warm(&self) {
        if let Err(why) = self.client() {
            tracing::warn!("cannot build the HTTP client of API runners: {why}");
        }
    }

    fn client(&self) -> Result<&reqwest::Client, &String> {
        self.client.get_or_init(build_client).as_ref()
    }
}

/// The client: no redirects (a 3xx is the attempt's reason), no proxy from the
/// environment (plain http stays on loopback, and the key goes only where the table
/// says), TLS verified with rustls against the system's and Mozilla's roots. The
/// process that builds it will hold keys in memory, so it writes no core dump.
fn build_client() -> Result<reqwest::Client, String> {
    forbid_core_dumps();
    reqwest::Client::builder()
        .use_rustls_tls()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .tcp_nodelay(true)
        .pool_idle_timeout(IDLE_KEEP)
        .user_agent(concat!("llm-judge/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| error_chain(&e))
}

/// Sets this process's core file size limit to 0, soft and hard, so a crash leaves no
/// core file (nor a systemd-coredump or apport entry, which honour the limit) holding
/// a key. Processes started afterwards inherit it. Best effort: a refusal is logged.
fn forbid_core_dumps() {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let none = Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    if let Err(e) = setrlimit(Resource::Core, none) {
        tracing::warn!("cannot turn off core dumps (RLIMIT_CORE) before API calls: {e}");
    }
}

/// The key from the runner's variable, read now (never stored); `Ok(None)` for a
/// runner that sends none.
fn read_key(spec: &ApiSpec) -> Result<Option<String>, CallEnd> {
    let Some(var) = &spec.api_key_env else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(key) if !key.trim().is_empty() => Ok(Some(key.trim().to_string())),
        _ => Err(CallEnd::NoKey { var: var.clone() }),
    }
}

/// Connect, send, and read the response up to the cap.
async fn exchange(
    client: &reqwest::Client,
    request: &ApiRequest<'_>,
    key: Option<&str>,
) -> CallEnd {
    let spec = request.spec;
    let header_map = match header_map(spec, key) {
        Ok(map) => map,
        Err(end) => return end,
    };
    let sent = client
        .post(spec.endpoint_url())
        .headers(header_map)
        .body(request_body(spec, request.prompt))
        .send()
        .await;
    let mut response = match sent {
        Ok(response) => response,
        Err(e) => return transport_end(&e, spec),
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) if body.len() + chunk.len() > request.cap => {
                return CallEnd::TooLarge {
                    status,
                    cap: request.cap,
                };
            }
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(e) => {
                return CallEnd::Transport {
                    kind: after_connect(&e),
                    detail: error_chain(&e),
                };
            }
        }
    }
    CallEnd::Response {
        status,
        retry_after,
        body,
    }
}

/// The protocol's headers, the key's marked sensitive. A key no header can carry (a
/// control character) is a configuration problem, named by its variable only.
fn header_map(spec: &ApiSpec, key: Option<&str>) -> Result<HeaderMap, CallEnd> {
    let mut map = HeaderMap::new();
    map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (name, value, sensitive) in headers(spec.protocol, key) {
        let Ok(mut value) = HeaderValue::from_str(&value) else {
            let var = spec.api_key_env.clone().unwrap_or_default();
            return Err(CallEnd::Transport {
                kind: Transport::NotConfigured,
                detail: format!("{var} holds a character no HTTP header may carry"),
            });
        };
        value.set_sensitive(sensitive);
        map.insert(HeaderName::from_static(name), value);
    }
    Ok(map)
}

/// A failed send as a `CallEnd`: refused, reset, cannot connect, or dropped after
/// connecting.
fn transport_end(error: &reqwest::Error, spec: &ApiSpec) -> CallEnd {
    let refused = chain_has_kind(error, std::io::ErrorKind::ConnectionRefused);
    if refused {
        return CallEnd::Refused {
            address: spec.base_url.clone(),
        };
    }
    let kind = match after_connect(error) {
        Transport::Dropped if error.is_connect() => Transport::CannotConnect,
        kind => kind,
    };
    CallEnd::Transport {
        kind,
        detail: error_chain(error),
    }
}

/// A connection that failed once open: reset (or aborted) by the server, else dropped.
fn after_connect(error: &reqwest::Error) -> Transport {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset};
    match chain_has_kind(error, ConnectionReset) || chain_has_kind(error, ConnectionAborted) {
        true => Transport::Reset,
        false => Transport::Dropped,
    }
}

/// True when an `io::Error` of `kind` is somewhere in the error's sources.
fn chain_has_kind(error: &reqwest::Error, kind: std::io::ErrorKind) -> bool {
    let mut source = error.source();
    while let Some(e) = source {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == kind)
        {
            return true;
        }
        source = e.source();
    }
    false
}

/// The error and its sources as one line, without the URL (which the reason's runner
/// already names) and with repeats dropped.
fn error_chain(error: &reqwest::Error) -> String {
    let top = error.to_string();
    let mut parts: Vec<String> = Vec::new();
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    match parts.is_empty() {
        true => top,
        false => parts.join(": "),
    }
}

/// `end` with the key masked out of every text a response or an error carried.
fn masked(end: CallEnd, key: Option<&str>) -> CallEnd {
    let Some(key) = key else {
        return end;
    };
    let text = |s: String| mask_text(&s, Some(key));
    match end {
        CallEnd::Response {
            status,
            retry_after,
            body,
        } => CallEnd::Response {
            status,
            retry_after: retry_after.map(text),
            body: mask_body(&body, Some(key)),
        },
        CallEnd::Transport { kind, detail } => CallEnd::Transport {
            kind,
            detail: text(detail),
        },
        other => other,
    }
}
