//! A stand-in model API over TLS on 127.0.0.1, for the tests that TLS is verified: it
//! presents `tls/localhost.pem` (for `localhost` and 127.0.0.1), signed by
//! `tls/test-ca.pem`, a test CA no system trusts (both made once with openssl, valid to
//! 2126; the CA's key was not kept). Each connection is served on its own thread: the
//! handshake, then one request answered with `body` and closed. Reads are bounded, so
//! no thread outlives its test by more than a moment.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

/// The folder of the test certificates.
fn tls_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/api_runner/tls")
}

/// The test CA's certificate: give it as `SSL_CERT_FILE` to trust the stand-in.
pub fn test_ca() -> PathBuf {
    tls_dir().join("test-ca.pem")
}

/// A running TLS stand-in.
pub struct TlsStandIn {
    pub port: u16,
    closing: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
    accept: Option<JoinHandle<()>>,
}

impl TlsStandIn {
    /// Serves `body` with status 200 to every request that completes a handshake.
    pub fn start(body: Vec<u8>) -> TlsStandIn {
        let dir = tls_dir();
        let certs = CertificateDer::pem_file_iter(dir.join("localhost.pem"))
            .expect("tests/it/api_runner/tls/localhost.pem")
            .collect::<Result<Vec<_>, _>>()
            .expect("a certificate");
        let key = PrivateKeyDer::from_pem_file(dir.join("localhost.key"))
            .expect("tests/it/api_runner/tls/localhost.key");
        // The provider reqwest's client uses too (ring); deprecated only for lacking
        // post-quantum key exchange, which a loopback test does not need.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("the stand-in's certificate and key");
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local address").port();
        let closing = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let (stop, served) = (closing.clone(), requests.clone());
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (config, body, served) = (config.clone(), body.clone(), served.clone());
                std::thread::spawn(move || serve(stream, config, &body, &served));
            }
        });
        TlsStandIn {
            port,
            closing,
            requests,
            accept: Some(accept),
        }
    }

    /// `https://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}/v1", self.port)
    }

    /// Requests read after a completed handshake.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for TlsStandIn {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees `closing`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// The handshake, one request, its answer. A client that refuses the certificate ends
/// the handshake with an alert: the read fails and the thread ends.
fn serve(stream: TcpStream, config: Arc<ServerConfig>, body: &[u8], served: &AtomicUsize) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(connection) = ServerConnection::new(config) else {
        return;
    };
    let mut reader = BufReader::new(StreamOwned::new(connection, stream));
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut request = vec![0u8; length];
    if reader.read_exact(&mut request).is_err() {
        return;
    }
    served.fetch_add(1, Ordering::SeqCst);
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let stream = reader.get_mut();
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
    stream.conn.send_close_notify();
    let _ = stream.flush();
}
